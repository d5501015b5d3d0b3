"""examples/observer_plugin: a third-party observer written against the documented
view (RunView, ProgressSample, the frozen result) works without touching astra's
internals, loaded by module name as a user loads it."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from rich.console import Console

import astra
from astra_core.events import PROGRESS_EVERY
from astra_core.plugins import PluginSettings, make_plugin_manager

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "resnet50_dp"
INPUTS = dict(
    workload=str(EXAMPLE / "workload" / "Resnet50_DataParallel"),
    system=EXAMPLE / "system.json",
    network=EXAMPLE / "network.yml",
)


@pytest.fixture
def bar(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "examples" / "observer_plugin"))
    pm = make_plugin_manager(modules=["astra_nodes_bar"], settings=PluginSettings())
    module = sys.modules["astra_nodes_bar"]
    module.BAR.console = Console(file=io.StringIO(), width=120)
    yield pm, module.BAR
    sys.modules.pop("astra_nodes_bar", None)


@pytest.mark.parametrize("backend", ["analytical", "analytical-congestion"])
def test_a_third_party_progress_bar_sees_every_node_and_message(bar, backend):
    pm, nodes_bar = bar
    report = astra.simulate(**INPUTS, backend=backend, plugin_manager=pm)
    samples = nodes_bar.samples
    assert samples, "the bar got no progress report"
    for key in ("now_ns", "events", "nodes_done", "sent", "delivered"):
        values = [getattr(s, key) for s in samples]
        assert values == sorted(values), key  # nothing runs backwards
    last = samples[-1]
    # The last report comes after the last event: every ET node of the simulated ranks
    # done, every message delivered; the simulated ranks stand for the rest, so their
    # messages times the class size are the run's (a conservation law).
    simulated = len(report.traces)
    nodes = sum(len(report.graphs[t.rank]) for t in report.traces)
    assert last.nodes_done == last.nodes_total == nodes > 0
    assert last.delivered == last.sent and last.sent * len(report.ranks) // simulated == report.messages
    assert last.now_ns == report.step_ns
    # An event-queue backend reports every PROGRESS_EVERY events, and once at the end.
    assert len(samples) == last.events // PROGRESS_EVERY + 1
    printed = nodes_bar.console.file.getvalue()
    assert f"step {report.step_ns / 1e6:,.3f} ms: {report.messages:,} messages" in printed
