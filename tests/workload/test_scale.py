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


#: A mixture-of-experts model as small: 4 experts, 2 per token.
MOE = {**MODEL, "name": "tiny-moe", "experts": 4, "top_k": 2, "expert_ffn_hidden": 512}
#: Two layers of 50M parameters: more gradient bytes than Megatron's default bucket holds.
WIDE = {**MODEL, "name": "wide", "layers": 2, "hidden": 2048, "heads": 16, "ffn_hidden": 8192}


def _gen(tmp_path, name: str, dp: int, *extra: str, model: dict = MODEL) -> str:
    model_path = tmp_path / f"{model['name']}.json"
    model_path.write_text(json.dumps(model))
    prefix = str(tmp_path / name / "x")
    args = ["gen", "llm", "--model", str(model_path), "--dp", str(dp), "--output", prefix, *extra]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    return prefix


def _scale(small: str, dp: int, output: str, *extra: str):
    args = ["scale", "--workload", small, "--dp-to", str(dp), "--output", output, *extra]
    if _groups(small):
        args += ["--comm-groups", f"{small}.comm_groups.json"]
    return CliRunner().invoke(main, args)


def _assert_same_traces(want_prefix: str, got_prefix: str) -> None:
    """Node for node, metadata and comm groups alike."""
    ranks = rank_count(want_prefix)
    assert rank_count(got_prefix) == ranks
    want, got = read_workload(want_prefix, ranks), read_workload(got_prefix, ranks)
    for rank, (a, b) in enumerate(zip(want, got)):
        assert a.metadata == b.metadata, rank
        assert list(a.nodes) == list(b.nodes), rank
    assert _groups(got_prefix) == _groups(want_prefix)


def _step_ns(prefix: str, npus: int) -> float:
    import astra
    from tests.system.conftest import network, system

    groups = _groups(prefix) or None
    return astra.simulate(
        prefix, system(), network(["Switch"], [npus], [50.0], [500]), comm_groups=groups
    ).step_ns


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
    out = _scale(small, 6, scaled, *(["--dims", "4x6"] if "--dims" in plan else []))
    assert out.exit_code == 0, out.output
    _assert_same_traces(large, scaled)


@pytest.mark.parametrize(
    ("small_dp", "large_dp", "plan", "small_dims", "large_dims"),
    [
        (4, 8, ("--tp", "2", "--ep", "2", "--microbatches", "2"), None, None),
        (4, 8, ("--ep", "2", "--pp", "2", "--microbatches", "4"), None, None),
        # expert groups on network dimensions, then on dimensions that no longer hold them
        (4, 8, ("--tp", "2", "--ep", "2", "--microbatches", "2"), "2x2x2", "2x2x4"),
        (4, 8, ("--tp", "2", "--ep", "2", "--microbatches", "2"), "2x2x2", "2x8"),
        (4, 42, ("--ep", "2", "--microbatches", "1"), None, None),
        # unbalanced routing: each expert-parallel index keeps its own bytes and expert work
        (4, 8, ("--ep", "2", "--microbatches", "2", "--moe-routing", "zipf:1.5"), None, None),
        # the all-gather dispatcher's groups span tensor- and expert-parallel ranks
        (
            4,
            8,
            (
                "--tp",
                "2",
                "--ep",
                "2",
                "--microbatches",
                "2",
                "--sequence-parallel",
                "--moe-token-dispatcher",
                "allgather",
            ),
            None,
            None,
        ),
    ],
)
def test_scaling_a_generated_moe_step_gives_the_generated_step(
    tmp_path, small_dp, large_dp, plan, small_dims, large_dims
):
    """Expert all-to-alls stay within their expert-parallel block, expert gradients over the
    replicas holding the same experts, as astra gen llm writes them at the larger size."""
    small = _gen(
        tmp_path, "small", small_dp, *plan, *(["--dims", small_dims] if small_dims else []), model=MOE
    )
    large = _gen(
        tmp_path, "large", large_dp, *plan, *(["--dims", large_dims] if large_dims else []), model=MOE
    )
    scaled = str(tmp_path / "scaled" / "x")
    out = _scale(small, large_dp, scaled, *(["--dims", large_dims] if large_dims else []))
    assert out.exit_code == 0, out.output
    _assert_same_traces(large, scaled)


def test_moe_scaled_step_takes_the_generated_step_time(tmp_path):
    plan = ("--ep", "2", "--microbatches", "1")
    small = _gen(tmp_path, "small", 4, *plan, model=MOE)
    large = _gen(tmp_path, "large", 8, *plan, model=MOE)
    scaled = str(tmp_path / "scaled" / "x")
    assert _scale(small, 8, scaled).exit_code == 0
    assert _step_ns(scaled, 8) == _step_ns(large, 8)


def test_scaling_past_dp_40_gives_the_generated_step(tmp_path):
    """Megatron's default gradient bucket grows past dp 40 (max(40M, 1M x dp) elements): the
    scaled metadata says so, and a model whose gradients fill no bucket keeps its reductions."""
    small = _gen(tmp_path, "small", 2, "--microbatches", "1")
    large = _gen(tmp_path, "large", 42, "--microbatches", "1")
    scaled = str(tmp_path / "scaled" / "x")
    out = _scale(small, 42, scaled)
    assert out.exit_code == 0, out.output
    _assert_same_traces(large, scaled)
    assert json.loads(read_workload(scaled, 42)[0].metadata["astra_llm"])["bucket_bytes"] == 42_000_000 * 4
    assert _step_ns(scaled, 42) == _step_ns(large, 42)


def test_a_full_default_bucket_past_dp_40_is_refused(tmp_path):
    small = _gen(tmp_path, "small", 2, "--microbatches", "1", model=WIDE)
    out = _scale(small, 48, str(tmp_path / "o" / "x"))
    assert out.exit_code == 1
    assert [line for line in out.output.splitlines() if line] == [
        "error: astra scale: rank 0's node 13 (grads_dense_bucket0) reduces a full gradient bucket of "
        "Megatron's default max(40M, 1M x dp) elements: 160000000 bytes at dp 2, 192000000 at dp 48; "
        "generate the traces at dp 48, or with --bucket-mb"
    ]
    assert rank_count(str(tmp_path / "o" / "x")) == 0


def test_a_given_bucket_scales_past_dp_40(tmp_path):
    small = _gen(tmp_path, "small", 2, "--microbatches", "1", "--bucket-mb", "64", model=WIDE)
    large = _gen(tmp_path, "large", 48, "--microbatches", "1", "--bucket-mb", "64", model=WIDE)
    scaled = str(tmp_path / "scaled" / "x")
    out = _scale(small, 48, scaled)
    assert out.exit_code == 0, out.output
    _assert_same_traces(large, scaled)


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


@pytest.mark.parametrize(
    ("dp", "plan", "message"),
    [
        (
            2,
            ("--ep", "2", "--microbatches", "1"),
            "astra scale: the traces' expert-parallel size ep 2 equals their dp, so they hold no "
            "expert-gradient reduction; generate them at dp 4 instead",
        ),
        (
            1,
            ("--tp", "2", "--microbatches", "1"),
            "astra scale: the traces have one data-parallel replica, so no data-parallel "
            "communication to scale; generate them with dp 2 or more",
        ),
    ],
)
def test_traces_that_lack_what_the_larger_job_does_are_refused(tmp_path, dp, plan, message):
    small = _gen(tmp_path, "small", dp, *plan, model=MOE)
    out = _scale(small, 4, str(tmp_path / "o" / "x"))
    assert out.exit_code == 1
    assert [line for line in out.output.splitlines() if line] == [f"error: {message}"]


def test_dp_to_that_the_experts_do_not_divide_is_refused(tmp_path):
    small = _gen(tmp_path, "small8", 8, "--ep", "4", "--microbatches", "1", model={**MOE, "experts": 8})
    out = _scale(small, 10, str(tmp_path / "o" / "x"))
    assert out.exit_code == 1
    assert [line for line in out.output.splitlines() if line] == [
        "error: --dp-to: must be a multiple of the traces' expert-parallel size ep 4, got 10"
    ]


@pytest.mark.parametrize(("option", "value", "key", "was"), [("--tp", "4", "tp", 2), ("--pp", "1", "pp", 2)])
def test_a_layout_option_against_the_metadata_is_one_line(tmp_path, option, value, key, was):
    small = _gen(tmp_path, "small", 2, "--tp", "2", "--pp", "2", "--microbatches", "2")
    out = _scale(small, 4, str(tmp_path / "o" / "x"), option, value)
    assert out.exit_code == 1
    assert [line for line in out.output.splitlines() if line] == [
        f"error: {option}: {small}.0.et's metadata (astra gen llm) says {key} {was}, got {value}"
    ]
    assert _scale(small, 4, str(tmp_path / "o" / "x"), option, str(was)).exit_code == 0


def test_an_earlier_larger_set_under_the_output_prefix_is_removed(tmp_path):
    small = _gen(tmp_path, "small", 2, "--tp", "2", "--microbatches", "1")
    folder = tmp_path / "o"
    scaled = str(folder / "x")
    assert _scale(small, 8, scaled).exit_code == 0
    assert rank_count(scaled) == 16
    others = ["x.notes", "y.12.et", "x.12.et.bak", "x.012.et", "xx.12.et"]
    for name in others:
        (folder / name).write_text("kept")
    out = _scale(small, 4, scaled)
    assert out.exit_code == 0, out.output
    assert "removed 8 files of an earlier set" in out.output
    assert rank_count(scaled) == 8
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f"x.{r}.et" for r in range(8)] + others + ["x.comm_groups.json"]
    )
    large = _gen(tmp_path, "large", 4, "--tp", "2", "--microbatches", "1")
    _assert_same_traces(large, scaled)


def test_the_comm_groups_beside_the_traces_are_read_and_a_stale_file_removed(tmp_path):
    """Without --comm-groups, scale reads PREFIX.comm_groups.json beside the traces (as
    astra run does); a comm-group file of an earlier set under --output is removed when
    the new set needs none, since astra run would read it."""
    small = _gen(tmp_path, "small", 2, "--tp", "2", "--pp", "2", "--microbatches", "2")
    assert _groups(small)
    scaled = str(tmp_path / "o" / "x")
    out = CliRunner().invoke(main, ["scale", "--workload", small, "--dp-to", "4", "--output", scaled])
    assert out.exit_code == 0, out.output
    assert "comm groups: " in out.output and "astra run reads it beside the traces" in out.output
    _assert_same_traces(_gen(tmp_path, "large", 4, "--tp", "2", "--pp", "2", "--microbatches", "2"), scaled)
    flat = _gen(tmp_path, "flat", 2, "--microbatches", "1")
    assert not _groups(flat)
    out = CliRunner().invoke(main, ["scale", "--workload", flat, "--dp-to", "4", "--output", scaled])
    assert out.exit_code == 0, out.output
    assert not (tmp_path / "o" / "x.comm_groups.json").exists()


@pytest.mark.parametrize(
    ("dp_to", "message"), [(10**8, "200,000,000 NPUs, more than astra's limit of 1,048,576")]
)
def test_a_set_past_the_rank_limit_is_refused_before_any_work(tmp_path, dp_to, message):
    small = _gen(tmp_path, "small", 2, "--tp", "2", "--microbatches", "1")
    out = _scale(small, dp_to, str(tmp_path / "o" / "x"))
    assert out.exit_code == 1
    lines = [line for line in out.output.splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith(f"error: --dp-to {dp_to}: {message}"), lines
