"""Traces made for given network dimensions say so, and a run on other dimensions stops at once.

Before, `astra gen llm --dims 8x2x4` run on npus_count [8, 4, 2] placed its groups on the wrong
dimensions and ended in an IndexError or a deadlock report kilobytes long.
"""

from __future__ import annotations

from click.testing import CliRunner

from astra_core.cli import main
from astra_core.workload.chakra import read_rank_trace
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm
from astra_core.workload.network_fit import GENERATED_DIMS_ATTR

from .conftest import write_network, write_system


def _run(tmp_path, prefix, dims):
    folder = tmp_path / "net"
    folder.mkdir(exist_ok=True)
    return CliRunner().invoke(
        main,
        [
            "run",
            "--workload",
            str(prefix),
            "--system",
            str(write_system(folder, len(dims))),
            "--network",
            str(write_network(folder, dims)),
        ],
    )


def test_llm_generated_for_other_dims(tmp_path, tiny_dense):
    cfg = LLMConfig(tiny_dense, GPUS["h100"], dp=2, tp=4, pp=2, microbatches=2, dims=[4, 2, 2])
    paths, groups = write_llm(generate_llm(cfg), tmp_path / "llm")
    assert groups is None  # every group is a range of dimensions: placed with involved_dim
    assert read_rank_trace(paths[5]).metadata[GENERATED_DIMS_ATTR] == [4, 2, 2]
    out = _run(tmp_path, tmp_path / "llm", [2, 2, 4])
    assert out.exit_code == 1
    assert out.output.splitlines() == [
        f"error: workload {tmp_path / 'llm'} was generated for dims 4x2x2, network has [2, 2, 4]"
    ]
    assert _run(tmp_path, tmp_path / "llm", [4, 2, 2]).exit_code == 0


def test_llm_without_dims_records_none(tmp_path, tiny_dense):
    # comm groups (pg_name) work on any network with the NPU count: nothing to record
    paths, _ = write_llm(generate_llm(LLMConfig(tiny_dense, GPUS["h100"], dp=2, tp=2)), tmp_path / "l")
    assert GENERATED_DIMS_ATTR not in read_rank_trace(paths[0]).metadata


def test_text_converted_for_other_dims(tmp_path, reference_dir):
    out = CliRunner().invoke(
        main,
        [
            "convert",
            "text",
            str(reference_dir / "text" / "Transformer_HybridParallel.txt"),
            "--npus",
            "8",
            "--dims",
            "4x2",
            "--output",
            str(tmp_path / "t"),
        ],
    )
    assert out.exit_code == 0, out.output
    assert read_rank_trace(tmp_path / "t.0.et").metadata[GENERATED_DIMS_ATTR] == [4, 2]
    out = _run(tmp_path, tmp_path / "t", [2, 4])
    assert out.exit_code == 1
    assert out.output.splitlines() == [
        f"error: workload {tmp_path / 't'} was generated for dims 4x2, network has [2, 4]"
    ]
