"""``astra calibrate nccl`` on logs it cannot fit: one line naming the file (and its
line), never a traceback, never a profile fitted on nonsense."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from astra_core.cli import main

REPO = Path(__file__).resolve().parents[2]
PRESET = REPO / "examples" / "validation" / "hgx_h100_4nodes"
HEADER = [
    "# nccl-tests version 2.17.9 nccl-headers=23007 nccl-library=23007",
    "# Collective test starting: all_reduce_perf",
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 4(factor) graph: 0",
    *(
        f"#  Rank {r:2d} Group  0 Pid {100 + r} on a device {r} [0x1b] NVIDIA H100 80GB HBM3"
        for r in range(8)
    ),
]
FIRST_ROW = len(HEADER) + 1  # the line number of the first row


def row(size: int, time: str, in_place: str | None = None) -> str:
    """An all_reduce_perf row: out-of-place then in-place time (µs), algbw, busbw."""
    return f"{size:12d} {size // 4:12d} float sum -1 {time} 0.00 0.00 0 {in_place or time} 0.00 0.00 0"


def write_log(tmp_path: Path, lines: list[str], name: str = "ar.txt") -> Path:
    log = tmp_path / name
    log.write_text("".join(line + "\n" for line in lines))
    return log


def calibrate(tmp_path: Path, lines: list[str], *extra: str):
    log = write_log(tmp_path, lines)
    out = tmp_path / "profile.json"
    args = ["calibrate", "nccl", str(log), "-o", str(out), *extra]
    args += ["--system", str(PRESET / "system.json"), "--network", str(PRESET / "network.yml")]
    return log, out, CliRunner().invoke(main, args)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            HEADER + [row(1024, "10.00"), row(4096, "nan")],
            f":{FIRST_ROW + 1}: time: expected a finite number of µs, got nan",
        ),
        (
            HEADER + [row(1024, "inf"), row(4096, "11.00")],
            f":{FIRST_ROW}: time: expected a finite number of µs, got inf",
        ),
        (HEADER + [row(1024, "-nan")], f":{FIRST_ROW}: time: expected a finite number of µs, got -nan"),
        (
            HEADER + [row(1024, "10.00"), row(4096, "11.00", in_place="NaN")],
            f":{FIRST_ROW + 1}: in-place time: expected a finite number of µs, got NaN",
        ),
        (
            HEADER + [row(1024, "-10.00"), row(4096, "11.00")],
            f":{FIRST_ROW}: time: must be > 0 µs, got -10.00",
        ),
        (HEADER + [row(1024, "0.00")], f":{FIRST_ROW}: time: must be > 0 µs, got 0.00"),
        ([], ": no nccl-tests rows (size count type ... time algbw busbw)"),
        (HEADER, ": no nccl-tests rows (size count type ... time algbw busbw)"),
        (
            HEADER + [row(0, "1.00"), row(0, "2.00")],
            ": no nccl-tests rows (size count type ... time algbw busbw) of more than 0 bytes",
        ),
    ],
    ids=[
        "nan",
        "inf",
        "minus-nan",
        "nan-in-place",
        "negative",
        "zero-time",
        "empty",
        "header-only",
        "sizes-of-0",
    ],
)
def test_a_log_that_cannot_be_fitted_is_one_line_naming_it(tmp_path, lines, message):
    # A nan or inf time must not pass the reader, or scipy raises "Residuals are not
    # finite in the initial point" as a traceback.
    log, out, result = calibrate(tmp_path, lines)
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines() == [f"error: {log}{message}"]
    assert not out.exists()


def test_rows_of_one_size_twice_are_two_measurements(tmp_path):
    """nccl-tests -N prints its table once per cycle: a size twice is fitted as two rows."""
    lines = HEADER + [row(1024, "20.00"), row(1024, "22.00"), row(1 << 20, "40.00")]
    log, out, result = calibrate(tmp_path, lines)
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(out.read_text())["fitted-on"]
    assert (entry["log"], entry["points"]) == (str(log), 3)


def nccl_times(log_path: Path) -> list[float]:
    """NCCL's own time (µs) of every row of a log on the preset machine."""
    from astra_core.calibrate.nccl_fit import _Problem
    from astra_core.calibrate.nccl_tests import read_logs
    from astra_core.config.network import load_network
    from astra_core.config.system import load_system

    system, network = load_system(PRESET / "system.json"), load_network(PRESET / "network.yml")
    return [t for t, _ in _Problem(read_logs(log_path), system, network).predict(None)]


@pytest.mark.parametrize("time", ["1e30", "1000000000000000000000000000000", "1e-30"])
def test_a_row_of_an_absurd_time_is_refused_naming_file_and_line(tmp_path, time):
    # Not a 1e30 µs row fitted into parameters on their bounds without a word.
    lines = HEADER + [row(1024, "20.00"), row(4096, time), row(1 << 20, "40.00")]
    seed = write_log(tmp_path, [*HEADER, row(1024, "20.00"), row(4096, "20.00")], "seed.txt")
    nccl_us = nccl_times(seed)[1]  # NCCL's own time of 4096 bytes (Ring/LL)
    log, out, result = calibrate(tmp_path, lines)
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines() == [
        f"error: {log}:{FIRST_ROW + 1}: time: more than 1000x from the {nccl_us:.3g} µs NCCL's model "
        "gives 4096 bytes of all-reduce (RING/LL) on the machine of --system and --network: not a "
        f"measurement of it, got {float(time):g}"
    ]
    assert not out.exists()


def test_a_fit_that_ends_on_a_bound_says_which_parameter(tmp_path):
    """Rows 100x slower than NCCL's model (within what a row may be, past what a profile
    may correct): the profile holds the bounds and stderr says so in one line."""
    sizes = [8 * 4**k for k in range(13)]
    seed = write_log(tmp_path, HEADER + [row(s, "1.00") for s in sizes], "seed.txt")
    slow = [f"{100 * t:.3f}" for t in nccl_times(seed)]
    log, out, result = calibrate(tmp_path, HEADER + [row(s, t) for s, t in zip(sizes, slow, strict=True)])
    assert result.exit_code == 0, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("warning: calibrate nccl: the fit stopped at a bound: ")
    assert "bw-efficiency one-node 0.05 (its lower bound)" in line
    assert (
        "Simple latencies in a node (base-latency-us, hw-latency-us NVLINK and PCI) x20 (its upper bound)"
        in line
    )
    assert json.loads(out.read_text())["bw-efficiency"]["one-node"]["Ring/Simple"] == pytest.approx(0.05)
