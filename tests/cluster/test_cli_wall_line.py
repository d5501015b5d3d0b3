"""``astra cluster``'s last line gives the simulation and the wall time, after the outputs
(it gave the time up to the job table as if it were the whole run)."""

from __future__ import annotations

from click.testing import CliRunner

from astra_core.cli import main
from tests.cli.test_run_wall_line import LINE


def test_the_last_line_follows_the_plots_and_its_parts_fit_in_the_wall_time(tmp_path, cluster):
    spec = cluster([{"name": "a"}])
    result = CliRunner().invoke(
        main, ["cluster", str(spec), "--no-cache", "--processes", "1", "--plots", str(tmp_path / "plots")]
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[-2].endswith(".png")  # the last plot written (its path may wrap)
    assert lines[-1].endswith(" (simulated: together and each job alone)")
    found = LINE.fullmatch(lines[-1].removesuffix(" (simulated: together and each job alone)"))
    assert found, lines[-1]
    parts = [round(float(v) * 100) for v in found.groupdict().values()]
    assert parts[3] >= sum(parts[:3])
