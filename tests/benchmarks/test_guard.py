"""The speed guard (benchmarks/guard.py) flags what it exists to flag.

A case made twice as slow (its simulation run twice in the measured process, the CPU
cost a 2x slower flow solver or general path would have) is flagged against a record
of the same case measured once; the comparison itself is checked on figures built in
the test. The docs page of speed figures is the record's rendering, not typed text.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # scripts, not a package
import guard  # noqa: E402

FIGURES = {"cpu_s": 10.0, "wall_s": 10.0, "peak_mib": 500.0, "step_ns": 84113.212}


def test_twice_the_cpu_time_or_memory_or_another_step_is_a_regression():
    record = {"cases": {"a": FIGURES}}
    assert guard.compare(record, {"a": FIGURES}, 1.35) == []
    assert guard.compare(record, {"a": {**FIGURES, "cpu_s": 13.4}}, 1.35) == []
    slower = guard.compare(record, {"a": {**FIGURES, "cpu_s": 20.0}}, 1.35)
    assert slower == ["a: 20.0 s of CPU, 2.00x the record's 10.0"]
    assert guard.compare(record, {"a": {**FIGURES, "peak_mib": 1000.0}}, 1.35)[0].startswith(
        "a: 1000.0 MiB peak"
    )
    assert "step" in guard.compare(record, {"a": {**FIGURES, "step_ns": 84113.5}}, 1.35)[0]
    assert (
        guard.compare(record, {"b": {**FIGURES, "cpu_s": 99.0}}, 1.35) == []
    )  # no record: nothing to compare


@pytest.mark.parametrize("case", ["flow-a2a-128-chunks", "general-ar-1024"])
def test_a_deliberate_2x_slowdown_of_a_case_is_flagged(case):
    guard.measure_case(case)  # untimed: a fresh checkout's first run compiles Python's bytecode
    # the record: the least of three runs (a shared machine stalls short runs now and then,
    # which would make the record itself slow: 0.92 s once against 0.53 s usually)
    once = min((guard.measure_case(case) for _ in range(3)), key=lambda figures: figures["cpu_s"])
    twice = guard.measure_case(case, repeat=2)
    assert twice["step_ns"] == once["step_ns"]
    problems = guard.compare({"cases": {case: once}}, {case: twice}, 1.35)
    assert any("s of CPU" in p for p in problems), (once, twice)


def test_the_speed_page_is_the_record_rendered():
    record = json.loads(guard.RECORD.read_text())
    assert set(record["cases"]) == set(guard.CASES)
    assert (ROOT / "docs" / "speed.md").read_text() == guard.render(record)


def test_an_unknown_case_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit):
        guard.main(["--only", "no-such-case"])
    assert "--only: no case 'no-such-case'" in capsys.readouterr().err
