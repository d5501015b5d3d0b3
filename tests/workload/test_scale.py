"""``astra scale``: traces of a smaller data-parallel job rewritten for a larger one are
exactly what ``astra gen llm`` generates at the larger size."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from astra_core.cli import main
from astra_core.workload.chakra import read_workload
from astra_core.workload.prefix import rank_count

MODEL = {
    "name": "tiny",
    "layers": 4,
    "hidden": 512,
    "heads": 8,
    "ffn_hidden": 2048,
    "vocab": 1024,
    "seq_len": 256,
}


def _gen(tmp_path, name: str, dp: int, *extra: str) -> str:
    (tmp_path / "model.json").write_text(json.dumps(MODEL))
    prefix = str(tmp_path / name / "x")
    args = [
        "gen",
        "llm",
        "--model",
        str(tmp_path / "model.json"),
        "--dp",
        str(dp),
        "--output",
        prefix,
        *extra,
    ]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    return prefix


def _groups(prefix: str) -> dict:
    try:
        with open(f"{prefix}.comm_groups.json") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


@pytest.mark.parametrize(
    "plan",
    [
        ("--tp", "2", "--pp", "2", "--microbatches", "4"),
        ("--tp", "2", "--pp", "2", "--microbatches", "4", "--virtual-stages", "2", "--sequence-parallel"),
        ("--tp", "2", "--cp", "2", "--microbatches", "2"),
        ("--tp", "4", "--microbatches", "2", "--dims", "4x{dp}"),
    ],
)
def test_scaling_a_generated_step_gives_the_generated_step(tmp_path, plan):
    small_plan = [a.replace("{dp}", "2") for a in plan]
    large_plan = [a.replace("{dp}", "6") for a in plan]
    small = _gen(tmp_path, "small", 2, *small_plan)
    large = _gen(tmp_path, "large", 6, *large_plan)
    scaled = str(tmp_path / "scaled" / "x")
    args = ["scale", "--workload", small, "--dp-to", "6", "--output", scaled]
    if _groups(small):
        args += ["--comm-groups", f"{small}.comm_groups.json"]
    if "--dims" in plan:
        args += ["--dims", "4x6"]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    ranks = rank_count(large)
    assert rank_count(scaled) == ranks
    want, got = read_workload(large, ranks), read_workload(scaled, ranks)
    for rank, (a, b) in enumerate(zip(want, got)):
        assert a.metadata == b.metadata, rank
        assert list(a.nodes) == list(b.nodes), rank
    assert _groups(scaled) == _groups(large)


def test_zero_traces_and_partial_replica_groups_are_refused(tmp_path):
    small = _gen(tmp_path, "small", 2, "--tp", "2", "--microbatches", "2", "--zero", "1")
    args = ["scale", "--workload", small, "--dp-to", "4", "--output", str(tmp_path / "o" / "x")]
    args += ["--comm-groups", f"{small}.comm_groups.json"]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 1
    assert "the traces use ZeRO (their optimizer works on a 1/dp shard)" in out.output


def test_a_layout_that_does_not_fit_is_one_line(tmp_path):
    small = _gen(tmp_path, "small", 2, "--tp", "2", "--microbatches", "2")
    out = CliRunner().invoke(
        main, ["scale", "--workload", small, "--dp-to", "1", "--output", str(tmp_path / "o" / "x")]
    )
    assert out.exit_code == 1
    lines = [line for line in out.output.splitlines() if line]
    assert lines == ["error: astra scale: --dp-to 1 is below the traces' data-parallel size 2"]
