"""astra gen / convert refuse trace sets past astra's limits at once, before writing anything."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from astra_core.cli import main
from astra_core.config.limits import npus_limit_message
from astra_core.errors import ConfigError
from astra_core.workload import trace_size
from astra_core.workload.generators import llm
from tests.conftest import one_error_line


def gen(*args) -> str:
    return one_error_line(CliRunner().invoke(main, ["gen", *map(str, args)]))


@pytest.fixture
def no_building(monkeypatch):
    """Fail the test if a stage program is built or a file written: refusals come first."""
    from astra_core import outputs

    monkeypatch.setattr(llm, "_stage_program", lambda *a: pytest.fail("built a stage"))
    monkeypatch.setattr(outputs, "atomic_output", lambda *a, **k: pytest.fail("wrote a file"))


def test_gen_micro_past_the_npu_limit_is_refused_with_runs_message(tmp_path, no_building):
    line = gen(
        "micro",
        "--collective",
        "all-reduce",
        "--size",
        "1MiB",
        "--npus",
        10**8,
        "--output",
        tmp_path / "o" / "t",
    )
    assert line == f"error: --npus: {npus_limit_message(10**8)}"
    assert npus_limit_message(10**8) == (
        "100,000,000 NPUs, more than astra's limit of 1,048,576 (2^20); that run would read "
        "100,000,000 trace files and keep a rank engine for each"
    )
    assert not (tmp_path / "o").exists()


def test_gen_llm_past_the_npu_limit_is_refused_before_building(tmp_path, no_building):
    out = tmp_path / "o" / "t"
    line = gen("llm", "--model", "llama3-405b", "--dp", 100000, "--tp", 8, "--pp", 18, "--output", out)
    assert line == f"error: dp 100000 x tp 8 x pp 18 x cp 1: {npus_limit_message(14_400_000)}"
    assert not (tmp_path / "o").exists()


def test_run_refuses_the_same_count_with_the_same_words(tmp_path):
    net = tmp_path / "net.yml"
    net.write_text("topology: [ Ring ]\nnpus_count: [ 14400000 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    from tests.cli.test_cli import EXAMPLE  # the example's system.json

    line = one_error_line(
        CliRunner().invoke(
            main, ["run", "--workload", "x", "--system", str(EXAMPLE / "system.json"), "--network", str(net)]
        )
    )
    assert line == f"error: {net}: npus_count[0]: {npus_limit_message(14_400_000)}"


def test_a_billion_microbatches_are_refused_before_building(tmp_path, no_building):
    line = gen("llm", "--model", "gpt3-175b", "--microbatches", 10**9, "--output", tmp_path / "t")
    # 96 layers x (attention + MLP) x (forward + backward) = 384 nodes per micro-batch at least
    assert line == (
        "error: gen llm: at least 384,000,000,000 nodes per rank (1,000,000,000 micro-batches x "
        "96 layers x 4 nodes, over pp 1 stages), more than astra's limit of 4,194,304 "
        "(2^22, about 10 GB to simulate one rank)"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_one_byte_gradient_bucket_is_refused_before_building(tmp_path, tiny_dense, no_building):
    model = tmp_path / "tiny.json"
    fields = {
        k: getattr(tiny_dense, k) for k in ("layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len")
    }
    model.write_text(json.dumps(fields))
    line = gen("llm", "--model", model, "--dp", 2, "--bucket-mb", 2**-20, "--output", tmp_path / "o" / "t")
    # each of the 8 layers: 4 h^2 attention + 8 h^2 MLP weights + 2 h norm, FP32 gradients
    grads = 8 * (12 * 1024**2 + 2 * 1024) * 4
    assert f"+ {grads:,} gradient buckets of 1 bytes" in line
    assert line.startswith(f"error: gen llm: at least {grads + 8 * 4:,} nodes per rank")


def test_one_data_parallel_rank_reduces_no_bucket_however_small(tiny_dense):
    """With dp 1 nothing is reduced: the bucket loop must not count 10^8 one-byte buckets."""
    from astra_core.workload.generators.gpus import load_gpu

    wl = llm.generate_llm(llm.LLMConfig(tiny_dense, load_gpu("H100"), bucket_bytes=1))
    default = llm.generate_llm(llm.LLMConfig(tiny_dense, load_gpu("H100")))
    assert [n.name for n in wl.stages[0]] == [n.name for n in default.stages[0]]


def test_ten_million_layers_are_refused_before_building(tmp_path, no_building):
    model = tmp_path / "deep.json"
    model.write_text(json.dumps({"layers": 10**7, "hidden": 256, "heads": 4, "ffn_hidden": 1024, "vocab": 0}))
    line = gen("llm", "--model", model, "--output", tmp_path / "t")
    assert line.startswith(
        "error: gen llm: at least 40,000,000 nodes per rank (1 micro-batches x 10,000,000 layers"
    )


def test_a_stage_past_the_node_limit_stops_while_building(tmp_path, tiny_dense, monkeypatch):
    """Nodes the lower bound does not count (ring steps) are counted as they are made."""
    from astra_core.workload.generators.gpus import load_gpu

    monkeypatch.setattr(llm, "MAX_RANK_NODES", 50)
    with pytest.raises(
        ConfigError, match="^gen llm: the pipeline stages together pass astra's limit of 50 nodes"
    ):
        llm.generate_llm(llm.LLMConfig(tiny_dense, load_gpu("H100"), pp=2, microbatches=4))


def test_a_set_past_the_byte_limit_is_refused_with_its_estimate(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_size, "MAX_TRACE_BYTES", 1000)
    (tmp_path / "user.txt").write_text("mine")
    line = gen(
        "micro", "--collective", "all-reduce", "--size", "1MiB", "--npus", 64, "--output", tmp_path / "t"
    )
    # 64 files of 71 bytes: one node of 62 bytes and the metadata, each framed
    assert line == (
        "error: micro: 64 NPUs x 1 iterations: 64 trace files, 64 nodes, about 4.5 kB, "
        "more than astra's limit of 1.0 kB (2^34 bytes) for one trace set"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["user.txt"]


def test_a_set_larger_than_the_free_space_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(trace_size, "_free_bytes", lambda folder: 100)
    line = gen(
        "micro", "--collective", "all-reduce", "--size", "1MiB", "--npus", 4, "--output", tmp_path / "t"
    )
    assert line == (
        f"error: micro: 4 NPUs x 1 iterations: 4 trace files, 4 nodes, about 284 bytes, "
        f"more than the 100 bytes free in {tmp_path}"
    )
    assert list(tmp_path.iterdir()) == []


def test_llm_estimate_is_the_bytes_written(tmp_path, tiny_dense, monkeypatch):
    """The estimate from one rendered rank per stage is what the files hold."""
    from astra_core.workload.generators.gpus import load_gpu

    seen = []
    real = trace_size.check_trace_set
    monkeypatch.setattr(
        "astra_core.workload.generators.llm_writer.check_trace_set",
        lambda source, size, prefix: (seen.append(size), real(source, size, prefix)),
    )
    wl = llm.generate_llm(llm.LLMConfig(tiny_dense, load_gpu("H100"), dp=2, pp=2))
    paths, _ = llm.write_llm(wl, tmp_path / "t")
    (size,) = seen
    assert size.files == 4 == len(paths)
    assert size.nbytes == sum(p.stat().st_size for p in paths)
    assert size.rank_nodes == max(len(s) for s in wl.stages)


def test_convert_text_with_a_billion_passes_is_refused_at_once(reference_dir, tmp_path):
    line = one_error_line(
        CliRunner().invoke(
            main,
            [
                "convert",
                "text",
                str(reference_dir / "text" / "Resnet50_DataParallel.txt"),
                "--npus",
                "8",
                "--passes",
                str(10**9),
                "--output",
                str(tmp_path / "t"),
            ],
        )
    )
    source = reference_dir / "text" / "Resnet50_DataParallel.txt"
    assert line == (
        f"error: {source}: at least 54,000,000,000 nodes per rank (1,000,000,000 passes x 54 layers), "
        "more than astra's limit of 4,194,304 (2^22, about 10 GB to simulate one rank)"
    )
    assert list(tmp_path.iterdir()) == []


def test_convert_text_past_the_npu_limit_is_refused_before_listing_ranks(
    reference_dir, tmp_path, no_building
):
    text = reference_dir / "text" / "Resnet50_DataParallel.txt"
    args = ["convert", "text", str(text), "--npus", str(10**8), "--output", str(tmp_path / "t")]
    line = one_error_line(CliRunner().invoke(main, args))
    assert line == f"error: --npus: {npus_limit_message(10**8)}"
    assert list(tmp_path.iterdir()) == []
