"""``astra flows run``'s last line gives the simulation and the wall time, after the outputs
(it gave the simulation alone, before the plot was written)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from astra_core.cli import main
from astra_core.flows.flowfile import FlowSpec, format_flows
from astra_core.topology.generators import fat_tree
from astra_core.topology.ns3_format import write_ns3_topology
from tests.cli.test_run_wall_line import LINE

pytestmark = pytest.mark.usefixtures("plugins")


def test_the_last_line_follows_the_plot_and_its_parts_fit_in_the_wall_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # short relative paths: lines that do not wrap
    write_ns3_topology(fat_tree(4, 100.0, 1000.0), tmp_path / "fabric.txt")
    flows = [FlowSpec(0, 5, 1 << 20, 0), FlowSpec(1, 5, 1 << 20, 0)]
    (tmp_path / "flows.txt").write_text(format_flows(flows))
    args = ["flows", "run", "--flows", "flows.txt", "--topology", "fabric.txt", "--backend", "flow"]
    result = CliRunner().invoke(main, [*args, "--plots", "p"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[-2] == "wrote p/fct_slowdown.png"
    found = LINE.fullmatch(lines[-1])
    assert found, lines[-1]
    parts = [round(float(v) * 100) for v in found.groupdict().values()]
    assert parts[3] >= sum(parts[:3])
