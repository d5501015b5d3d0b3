"""examples/sweep_bandwidth: the scale-out bandwidth sweep of the ResNet-50 example.

Checked against a direct run of each point, and against the physics of the
sweep: more bandwidth never makes the step slower, and the exposed tail above
its latency-bound floor halves when the bandwidth doubles (serialization time
is bytes / bandwidth).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import astra
from astra_core.config import load_network
from astra_core.sweep import load_spec, run_sweep
from tests.conftest import isolate_plugins

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "sweep_bandwidth"


@pytest.fixture(autouse=True)
def _plugins(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)


def test_bandwidth_sweep_example(tmp_path):
    spec = load_spec(EXAMPLE / "sweep.yaml")
    assert spec.x == "network.bandwidth[1]" and spec.metric == "step_ns"
    outcome = run_sweep(spec, output=tmp_path, workers=1)
    frame = outcome.frame
    bandwidths = frame["network.bandwidth[1]"].tolist()
    assert bandwidths == [0.125, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64]
    assert (frame["status"] == "ok").all()
    steps = frame["step_ns"].tolist()
    assert all(a >= b for a, b in zip(steps, steps[1:]))
    # Above the floor (the 64 GB/s tail), the exposed tail halves per doubling,
    # within the whole-ns truncation of each message.
    exposed = frame["exposed_comm_ns"].tolist()
    floor = exposed[-1]
    for slow, fast in zip(exposed[:4], exposed[1:5]):
        assert (slow - floor) == pytest.approx(2 * (fast - floor), rel=0.02)
    # Each point is exactly a direct run with that bandwidth.
    network = load_network(EXAMPLE / "network.yml").to_dict()
    network["bandwidth"][1] = 1.0
    direct = astra.simulate(
        REPO / "examples" / "resnet50_dp" / "workload" / "Resnet50_DataParallel",
        EXAMPLE / "system.json",
        network,
        memory=REPO / "examples" / "resnet50_dp" / "memory.json",
    )
    assert direct.step_ns == steps[bandwidths.index(1)]
    png = (tmp_path / "step_ns.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and min(struct.unpack(">II", png[16:24])) >= 300
