"""``astra run``'s last line tells the simulation from the report and gives the wall time
since the process started, so that it agrees with a stopwatch.

It said ``simulated in 4.59 s`` for a 24.6 s run: the time to the end of the simulation,
from a point after the imports, with the breakdown table and the plots after it unsaid.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from astra_core.cli import stopwatch
from astra_core.cli.stopwatch import Stopwatch
from tests.cli.test_cli import EXAMPLE, RING2, two_rank_trace

REPO = Path(__file__).resolve().parents[2]
LINE = re.compile(
    r"simulated in (?P<simulate>\d+\.\d\d) s; report (?P<report>\d+\.\d\d) s; "
    r"startup (?P<startup>\d+\.\d\d) s; (?P<wall>\d+\.\d\d) s wall"
)


def test_the_last_line_names_the_simulation_and_the_wall_time_and_its_parts_fit_in_it(tmp_path):
    (tmp_path / "network.yml").write_text(RING2)
    args = [
        *("run", "--workload", two_rank_trace(tmp_path), "--system", EXAMPLE / "system.json"),
        *("--network", tmp_path / "network.yml", "--plots", tmp_path / "plots"),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "astra_core.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "400"},  # long paths on one line each
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-2].startswith("wrote ")  # the outputs are written before the line: counted
    found = LINE.fullmatch(lines[-1])
    assert found, lines[-1]
    parts = {k: float(v) for k, v in found.groupdict().items()}
    assert parts["wall"] >= parts["simulate"] + parts["report"] + parts["startup"]
    assert parts["startup"] > 0  # the interpreter and the imports count


def test_rounded_parts_never_add_up_past_the_rounded_wall_time():
    # 6 ms each: rounded to the nearest 0.01 s they would be 0.01 + 0.01 + 0.01 > 0.02
    watch = Stopwatch(started=100.0)
    watch.simulating, watch.simulated = 100.006, 100.012
    assert watch.line(now=100.018) == "simulated in 0.00 s; report 0.00 s; startup 0.00 s; 0.02 s wall"
    watch.simulating, watch.simulated = 101.5, 106.09
    assert watch.line(now=106.6) == "simulated in 4.59 s; report 0.51 s; startup 1.50 s; 6.60 s wall"


def test_the_process_started_before_the_cli_was_imported():
    assert stopwatch.process_started() <= stopwatch._IMPORTED


@given(st.lists(st.floats(min_value=0.0, max_value=1e4, allow_nan=False), min_size=4, max_size=4))
def test_any_readings_print_parts_that_fit_in_the_printed_wall_time(readings):
    started, simulating, simulated, now = sorted(readings)
    watch = Stopwatch(started=started)
    watch.simulating, watch.simulated = simulating, simulated
    found = LINE.fullmatch(watch.line(now=now))
    assert found
    parts = [round(float(v) * 100) for v in found.groupdict().values()]  # hundredths, exact
    assert parts[3] >= sum(parts[:3])
