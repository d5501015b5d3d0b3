"""Bad input found by trying ``astra run`` / ``astra topology``: each is one error line
(exit 1, no traceback) naming the option, file or line at fault, never silently ignored."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from astra_core.cli import main
from astra_core.workload.writer import write_rank_trace
from tests.cli.test_cli import EXAMPLE, RING2, two_rank_trace
from tests.conftest import isolate_plugins
from tests.conftest import one_error_line as error_line_of

FABRIC8 = "9 1 8\n8\n" + "".join(f"{r} 8 100Gbps 1ns 0\n" for r in range(8))


@pytest.fixture(autouse=True)
def _plugins(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)


def one_error_line(*args) -> str:
    return error_line_of(CliRunner().invoke(main, [str(a) for a in args]))


def run_args(d: Path) -> list:
    (d / "network.yml").write_text(RING2)
    return [
        "run",
        "--workload",
        two_rank_trace(d),
        "--system",
        EXAMPLE / "system.json",
        "--network",
        d / "network.yml",
    ]


@pytest.mark.parametrize("option", ["--json", "--timeline", "--csv", "--parquet", "--plots"])
def test_an_empty_output_path_is_not_silently_skipped(tmp_path, option):
    assert one_error_line(*run_args(tmp_path), option, "") == f"error: {option}: cannot write: empty path"


def test_an_empty_topology_output_is_not_silently_skipped():
    assert (
        one_error_line("topology", "torus", "--dims", "2x2", "--output", "")
        == "error: --output: cannot write: empty path"
    )


def test_empty_dims_are_not_silently_one_dimension(tmp_path):
    (tmp_path / "fabric.txt").write_text(FABRIC8)
    line = one_error_line(
        "run",
        "--workload",
        EXAMPLE / "workload" / "Resnet50_DataParallel",
        "--system",
        EXAMPLE / "system.json",
        "--topology",
        tmp_path / "fabric.txt",
        "--dims",
        "",
    )
    assert line == "error: --dims: expected sizes joined by 'x' like 8x16, got ''"


def test_an_empty_workload_prefix(tmp_path):
    (tmp_path / "network.yml").write_text(RING2)
    line = one_error_line(
        "run", "--workload", "", "--system", EXAMPLE / "system.json", "--network", tmp_path / "network.yml"
    )
    assert line == "error: simulate: workload is an empty path (expected a trace prefix)"


@pytest.mark.parametrize(
    "rate, delay, word, what",
    [
        ("1e9999999999999999999Gbps", "1ns", "1e9999999999999999999Gbps", "rate"),
        ("100Gbps", "1e-99999999999999999999ns", "1e-99999999999999999999ns", "delay"),
    ],
)
def test_topology_file_exponent_past_decimal_range(tmp_path, rate, delay, word, what):
    # Not decimal.InvalidOperation with a traceback.
    path = tmp_path / "t.txt"
    path.write_text(f"2 0 1\n0 1 {rate} {delay} 0\n")
    assert (
        one_error_line("topology", "show", path) == f"error: {path}: line 2: {what} '{word}' is out of range"
    )


def test_topology_file_garbage_bytes(tmp_path):
    path = tmp_path / "garbage.txt"
    path.write_bytes(b"\xf5\x00\xff" * 50)
    assert (
        one_error_line("topology", "show", path)
        == f"error: {path}: not UTF-8 text (byte 0); expected an ns-3 topology file"
    )


@pytest.mark.parametrize("fabric", ["1 0 0\n", "2 1 1\n1\n0 1 100Gbps 1ns 0\n"], ids=["alone", "with-switch"])
def test_a_topology_of_one_npu(tmp_path, fabric):
    # Not an IndexError for the lone NPU without links, nor a confusing "npus_count[0]" with a switch.
    path = tmp_path / "one.txt"
    path.write_text(fabric)
    prefix = tmp_path / "w"
    write_rank_trace(f"{prefix}.0.et", [])
    line = one_error_line(
        "run", "--workload", prefix, "--system", EXAMPLE / "system.json", "--topology", path
    )
    assert line == f"error: {path}: 1 NPU; a simulated network needs at least 2"


def test_a_directory_given_as_backend_config_is_one_line(tmp_path):
    # The backend's config reader says it in one line, not click's three-line usage error (exit 2).
    pytest.importorskip("astra_garnetlike")
    config = tmp_path / "garnet.toml"
    config.mkdir()
    line = one_error_line(*run_args(tmp_path), "--backend", "garnetlike", "--backend-config", config)
    assert str(config) in line and "directory" in line


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_device_as_topology_file_is_refused_not_read_forever():
    import signal

    def expire(signum, frame):
        raise TimeoutError("read /dev/zero instead of refusing it")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(10)
    try:
        line = one_error_line("topology", "show", "/dev/zero")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert line == "error: /dev/zero: not a regular file; expected an ns-3 topology file"


def test_a_topology_file_past_the_byte_limit(tmp_path, monkeypatch):
    from astra_core.topology import ns3_format

    monkeypatch.setattr(ns3_format, "MAX_FILE_BYTES", 1 << 20)
    path = tmp_path / "long.txt"
    path.write_text("2 0 1\n0 1 1Gbps 1ns 0\n" + "\n" * (1 << 20))
    assert (
        one_error_line("topology", "show", path)
        == f"error: {path}: longer than 1,048,576 bytes; expected an ns-3 topology file"
    )
