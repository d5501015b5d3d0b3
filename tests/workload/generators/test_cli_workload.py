"""The astra convert / astra gen commands: files written, one-line errors, exit codes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from astra_core.cli import main


def test_convert_text_and_run(reference_dir, tmp_path):
    runner = CliRunner()
    out = runner.invoke(
        main,
        [
            "convert",
            "text",
            str(reference_dir / "text" / "Transformer_HybridParallel.txt"),
            "--npus",
            "8",
            "--output",
            str(tmp_path / "t"),
        ],
    )
    assert out.exit_code == 0, out.output
    assert "HYBRID_TRANSFORMER: 57 layers -> 8 traces" in out.output
    groups = tmp_path / "t.comm_groups.json"
    assert sorted(json.loads(groups.read_text()).values()) == [
        [0, 1, 2, 3],
        [0, 4],
        [1, 5],
        [2, 6],
        [3, 7],
        [4, 5, 6, 7],
    ]
    run = runner.invoke(
        main,
        [
            "run",
            "--workload",
            str(tmp_path / "t"),
            "--system",
            str(reference_dir / "system" / "text_converter_system.json"),
            "--network",
            str(reference_dir / "network" / "text_converter_network.yml"),
            "--comm-groups",
            str(groups),
            "--json",
            str(tmp_path / "r.json"),
        ],
    )
    assert run.exit_code == 0, run.output
    assert len(json.loads((tmp_path / "r.json").read_text())["ranks"]) == 8


def test_gen_micro_and_llm(tmp_path):
    runner = CliRunner()
    out = runner.invoke(
        main,
        [
            "gen",
            "micro",
            "--collective",
            "all-reduce",
            "--size",
            "64MiB",
            "--npus",
            "4",
            "--output",
            str(tmp_path / "m"),
        ],
    )
    assert out.exit_code == 0, out.output
    assert "all-reduce of 67108864 bytes x 1 -> 4 traces" in out.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"m.{r}.et" for r in range(4)]
    out = runner.invoke(
        main,
        [
            "gen",
            "llm",
            "--model",
            "llama3-8b",
            "--dp",
            "2",
            "--tp",
            "2",
            "--pp",
            "2",
            "--microbatches",
            "4",
            "--sequence-parallel",
            "--zero",
            "1",
            "--gpu",
            "B200",
            "--output",
            str(tmp_path / "l" / "llama"),
        ],
    )
    assert out.exit_code == 0, out.output
    assert "8 NPUs (dp 2 x tp 2 x pp 2 x cp 1, ep 1), 4 micro-batches" in out.output
    assert (tmp_path / "l" / "llama.7.et").is_file() and (tmp_path / "l" / "llama.comm_groups.json").is_file()


def test_errors_are_one_line(tmp_path):
    runner = CliRunner()
    cases = [
        (
            ["convert", "text", str(tmp_path / "none.txt"), "--npus", "8", "--output", str(tmp_path / "x")],
            "none.txt: cannot read",
        ),
        (
            [
                "gen",
                "micro",
                "--collective",
                "all-reduce",
                "--size",
                "lots",
                "--npus",
                "4",
                "--output",
                str(tmp_path / "x"),
            ],
            "size: expected a byte count",
        ),
        (["gen", "llm", "--model", "gpt-5", "--output", str(tmp_path / "x")], "--model: 'gpt-5' is neither"),
        (
            ["gen", "llm", "--model", "llama3-8b", "--gpu", "TPU", "--output", str(tmp_path / "x")],
            "--gpu: 'TPU' is neither",
        ),
        (
            ["convert", "pytorch", "--et", str(tmp_path / "none.json"), "--output", str(tmp_path / "x")],
            "none.json: cannot read",
        ),
        (
            ["gen", "llm", "--model", "llama3-8b", "--pp", "4", "--decoder-first-pipeline-num-layers", "3"]
            + ["--output", str(tmp_path / "x")],
            "--decoder-first-pipeline-num-layers 3: the remaining 29 of the 32 layers",
        ),
        (
            ["gen", "llm", "--model", "llama3-8b", "--recompute", "selective", "--recompute-modules"]
            + ["core_attn,moe_act", "--output", str(tmp_path / "x")],
            "--recompute-modules moe_act: llama3-8b has no experts",
        ),
    ]
    for args, message in cases:
        out = runner.invoke(main, args)
        assert out.exit_code == 1, out.output
        lines = [ln for ln in out.output.splitlines() if ln.startswith("error:")]
        assert len(lines) == 1 and message in lines[0], out.output


def test_model_and_gpu_files(tmp_path):
    model = tmp_path / "model.yaml"
    model.write_text("layers: 4\nhidden: 256\nheads: 4\nffn_hidden: 1024\nvocab: 1000\nseq_len: 128\n")
    gpu = tmp_path / "gpu.json"
    gpu.write_text(
        json.dumps({"name": "mine", "peak_tflops": 100, "memory_gbps": 1000, "gemm_efficiency": 0.5})
    )
    out = CliRunner().invoke(
        main,
        [
            "gen",
            "llm",
            "--model",
            str(model),
            "--gpu",
            str(gpu),
            "--dp",
            "2",
            "--output",
            str(tmp_path / "o"),
        ],
    )
    assert out.exit_code == 0, out.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("layers: 4\nhidden: 256\nheads: 3\nffn_hidden: 1024\nvocab: 10\nwidth: 3\n")
    out = CliRunner().invoke(main, ["gen", "llm", "--model", str(bad), "--output", str(tmp_path / "o")])
    assert out.exit_code == 1 and "unknown key(s) width" in out.output


def test_gen_llm_with_context_parallelism_reports_mfu(tmp_path):
    from .conftest import write_network, write_system

    model = tmp_path / "model.yaml"
    model.write_text("layers: 2\nhidden: 512\nheads: 8\nffn_hidden: 2048\nvocab: 0\nseq_len: 1024\n")
    runner = CliRunner()
    out = runner.invoke(
        main,
        [
            "gen",
            "llm",
            "--model",
            str(model),
            "--tp",
            "2",
            "--cp",
            "2",
            "--recompute",
            "full",
            "--gpu",
            "A100",
            "--output",
            str(tmp_path / "c"),
        ],
    )
    assert out.exit_code == 0, out.output
    assert "4 NPUs (dp 1 x tp 2 x pp 1 x cp 2, ep 1)" in out.output
    run = runner.invoke(
        main,
        [
            "run",
            "--workload",
            str(tmp_path / "c"),
            "--system",
            str(write_system(tmp_path, 1)),
            "--network",
            str(write_network(tmp_path, [4])),
            "--comm-groups",
            str(tmp_path / "c.comm_groups.json"),
            "--json",
            str(tmp_path / "r.json"),
        ],
    )
    assert run.exit_code == 0, run.output
    report = json.loads((tmp_path / "r.json").read_text())
    llm = report["llm"]
    # full recomputation runs the forward again: hardware FLOPs 4/3 of the model's
    assert llm["hardware_flops"] == pytest.approx(4 / 3 * llm["model_flops"], rel=1e-9)
    # MFU: model FLOPs over the step, per GPU, over the A100's 312 TFLOP/s
    assert llm["mfu"] == pytest.approx(llm["model_flops"] / (report["step_ns"] * 1e-9) / 4 / 312e12)
    # the peak memory gen llm printed travels with the traces into the report
    assert len(llm["memory_bytes"]) == 1 and llm["hbm_bytes"] == 80 * 2**30
    printed = next(line for line in out.output.splitlines() if line.startswith("peak memory per GPU"))
    assert f"{llm['memory_bytes'][0] / 2**30:.1f} GiB" in printed
    assert "peak memory per GPU" in run.output
