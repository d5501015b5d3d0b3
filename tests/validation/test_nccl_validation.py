"""validation/nccl.py against published measurements (the fast series)."""

from __future__ import annotations

import pytest

from .conftest import validation_script


@pytest.fixture(scope="module")
def nccl_validation():
    with validation_script("nccl") as module:
        yield module


def errors(module, name: str, tmp_path) -> list[float]:
    series = next(s for s in module.SERIES if s.name == name)
    return module.compare(series, tmp_path)[1]


def test_a100_bus_bandwidth_at_4_gib_within_10_percent(nccl_validation, tmp_path):
    # NVIDIA/nccl-tests issue #175: 232.54 GB/s on one 8 x A100 node up to 4 GiB
    (error,) = errors(nccl_validation, "DGX A100, 8 GPUs, NCCL defaults, user report", tmp_path)
    assert abs(error) < 0.10


def test_h100_peak_bus_bandwidths_within_5_percent(nccl_validation, tmp_path):
    for name in (
        "HGX H100, 8 GPUs, NCCL defaults (NVLS), NVIDIA statement",
        "HGX H100, 8 GPUs, Ring, NVIDIA statement",
        "HGX H100, 4 GPUs, NVLS forced, user report",
    ):
        (error,) = errors(nccl_validation, name, tmp_path)
        assert abs(error) < 0.05, name


def test_hopper_small_sizes(nccl_validation, tmp_path):
    # DeepEP issue #303: 8 x H20 (NVLink4, NVSwitch) all_reduce_perf, 8 B .. 4 KiB
    found = errors(
        nccl_validation, "HGX H20 (Hopper, NVLink4 + NVSwitch), 8 GPUs, NCCL defaults, small sizes", tmp_path
    )
    assert nccl_validation.geomean_abs(found) < 0.10 and max(abs(e) for e in found) < 0.25


def test_report_names_every_source(nccl_validation, tmp_path):
    text = nccl_validation.report([s for s in nccl_validation.SERIES if "A100" in s.name], curves=False)
    assert "NVIDIA/nccl-tests issue #175" in text and "| 4 GiB |" in text


def test_sweep_prints_a_heading_naming_preset_gpu_sizes_and_units(nccl_validation, monkeypatch, capsys):
    monkeypatch.setattr(
        nccl_validation, "sweep", lambda preset, gpus, algo: "| size | astra µs | astra busbw |"
    )
    assert nccl_validation.main(["--sweep", "hgx_h100_4nodes", "--nccl-algo", "Ring"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "## NCCL all-reduce on preset hgx_h100_4nodes (examples/validation/hgx_h100_4nodes): "
        "32 x H100, NCCL_ALGO=Ring, backend analytical"
    )
    assert lines[2].startswith("Sizes 8 B .. 8 GiB in powers of two")
    assert "µs" in lines[2] and "GB/s" in lines[2]
    assert lines[-1] == "| size | astra µs | astra busbw |"
