"""The third-party backend example (examples/plugin_backend), installed from its own directory.

The Makefile installs it (``pip install -e examples/plugin_backend``) like any
third-party distribution; these tests check that it is found through the
``astra`` entry-point group and that ``astra run --backend ideal`` runs it.

Its model (astra_ideal/network.py): a lone message of S bytes on a dimension of
bandwidth B GB/s (1 GB = 2^30 B) and latency L per hop takes
int(hops * L + S / (B * 2^30 / 1e9)) ns, as the analytical model; messages one
NPU sends on one dimension leave its single port one after another.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

import astra
from astra_core.backend import Topology
from astra_core.config.network import NetworkConfig
from astra_core.errors import ConfigError
from astra_core.plugins import PluginSettings, backend_registry
from tests.conftest import isolate_plugins, write_pair_trace

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_DIR = REPO / "examples" / "plugin_backend"
RESNET = REPO / "examples" / "resnet50_dp"
MIB = 1 << 20
FC4 = {"topology": ["FullyConnected"], "npus_count": [4], "bandwidth": [50.0], "latency": [500.0]}


@pytest.fixture(autouse=True)
def _plugins(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)


def test_installed_from_its_own_directory_with_an_astra_entry_point():
    dist = importlib.metadata.distribution("astra-ideal-backend")
    points = {ep.name: ep.value for ep in dist.entry_points if ep.group == "astra"}
    assert points == {"ideal": "astra_ideal.plugin"}
    # Installed from examples/plugin_backend (pip records where it came from).
    origin = json.loads(dist.read_text("direct_url.json"))
    assert Path(origin["url"].removeprefix("file://")).resolve() == EXAMPLE_DIR.resolve()
    info = backend_registry(settings=PluginSettings()).get("ideal")
    assert info.plugin == "ideal" and info.config_class().__name__ == "IdealConfig"


def test_astra_run_backend_ideal_from_the_console_script(tmp_path):
    # Ring all-reduce with one chunk in flight per dimension: every NPU sends one
    # message at a time, so its port never queues and the step is the analytical
    # one, upstream's 1,082,479,776 ns.
    out = tmp_path / "run.json"
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("astra")),
            "run",
            "--workload",
            str(RESNET / "workload" / "Resnet50_DataParallel"),
            "--system",
            str(RESNET / "system.json"),
            "--network",
            str(RESNET / "network.yml"),
            "--backend",
            "ideal",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["backend"] == "ideal"
    assert [r["finish_ns"] for r in doc["ranks"]] == [1_082_479_776] * 8


def test_one_port_per_npu_serializes_its_sends():
    registry = backend_registry(settings=PluginSettings())
    backend = registry.create("ideal", Topology(NetworkConfig.from_dict(FC4)))
    arrivals = {}
    for dst in (1, 2, 3):
        backend.send(0, dst, MIB, lambda d: arrivals.setdefault(("0", d), backend.now()), dst)
    backend.send(1, 2, MIB, lambda d: arrivals.setdefault(("1", d), backend.now()), 2)
    backend.run()
    # 1 MiB at 50 GB/s = 19531.25 ns; 500 ns latency. NPU 0's three messages leave
    # one after another: in at int(k * 19531.25 + 500) for k = 1, 2, 3. NPU 1's own
    # port is free: int(19531.25 + 500).
    assert arrivals == {("0", 1): 20031, ("0", 2): 39562, ("0", 3): 59093, ("1", 2): 20031}
    assert backend.port_busy_ns == {(0, 0): 3 * 19531.25, (1, 0): 19531.25}


def pair_trace(directory: Path) -> str:
    return write_pair_trace(directory / "pair", nbytes=MIB, tag=9, fwd_us=5, bwd_us=3)


def test_backend_config_sets_one_bandwidth_and_latency(tmp_path):
    # 25 GB/s, no latency: 2^20 * 1e9 / (25 * 2^30) = 39062.5 -> 39062 ns in flight,
    # between rank 0's 5 µs of compute and rank 1's 3 µs.
    report = astra.simulate(
        pair_trace(tmp_path),
        RESNET / "system.json",
        FC4 | {"npus_count": [2]},
        backend="ideal",
        backend_config={"bandwidth_gbps": 25, "latency_ns": 0},
    )
    assert [r.finish_ns for r in report.ranks] == [5000 + 39062, 5000 + 39062 + 3000]
    with pytest.raises(
        ConfigError, match=r"^<python>: bandwidth_gbps: must be in \(0, 1e\+09\] GB/s, got 0$"
    ):
        astra.simulate(
            pair_trace(tmp_path),
            RESNET / "system.json",
            FC4 | {"npus_count": [2]},
            backend="ideal",
            backend_config={"bandwidth_gbps": 0},
        )
    with pytest.raises(ConfigError, match=r"^<python>: unknown key 'speed'$"):
        astra.simulate(
            pair_trace(tmp_path),
            RESNET / "system.json",
            FC4 | {"npus_count": [2]},
            backend="ideal",
            backend_config={"speed": 1},
        )


def test_disabling_the_example_by_its_entry_point_name(monkeypatch):
    monkeypatch.setenv("ASTRA_DISABLE_PLUGINS", "ideal")
    names = backend_registry().names()
    assert "ideal" not in names and "analytical" in names
