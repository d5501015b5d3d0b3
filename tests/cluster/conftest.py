"""Shared fixtures of the cluster tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from astra_core.topology.generators import leaf_spine
from astra_core.topology.ns3_format import write_ns3_topology
from astra_core.workload.generators.micro import write_micro

SYSTEM = Path(__file__).parents[1] / "data" / "reference" / "system" / "ring_1d.json"


@pytest.fixture(autouse=True)
def alone_cache(tmp_path, monkeypatch):
    """Each test keeps its alone runs in a cache of its own (never the user's)."""
    folder = tmp_path / "alone-cache"
    monkeypatch.setenv("ASTRA_CLUSTER_CACHE", str(folder))
    return folder


@pytest.fixture
def cluster(tmp_path):
    """cluster(jobs, **keys) -> spec path: 16 hosts on 4 leaves (2:1 oversubscribed, 2
    spines), logical dims 4x4 (a leaf's hosts first), jobs of 8-rank all-to-alls."""
    write_ns3_topology(leaf_spine(16, 4, 2, oversubscription=2.0, host_gbps=100.0), tmp_path / "fabric.txt")
    system = json.loads(SYSTEM.read_text())
    for key in [k for k in system if k.endswith("-implementation")]:
        system[key] = system[key] * 2
    (tmp_path / "system.json").write_text(json.dumps(system))
    write_micro("all-to-all", 4 << 20, 8, tmp_path / "a2a")

    def spec(jobs, **keys) -> Path:
        data = {"topology": "fabric.txt", "dims": "4x4", "backend": "flow", "system": "system.json", **keys}
        data["jobs"] = [{"workload": "a2a", **job} for job in jobs]
        path = tmp_path / "cluster.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    return spec
