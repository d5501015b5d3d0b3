"""Helpers to build small workloads and configs for system-layer tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig, upstream_system
from astra_core.workload import et_def_pb2 as pb  # noqa: F401 - re-exported for tests
from astra_core.workload.writer import write_rank_trace


def network(kinds, npus, bandwidth_gbps, latency_ns) -> NetworkConfig:
    """A NetworkConfig from per-dimension lists."""
    return NetworkConfig.from_dict(
        {
            "topology": list(kinds),
            "npus_count": list(npus),
            "bandwidth": list(bandwidth_gbps),
            "latency": list(latency_ns),
        }
    )


def system(algorithm="ring", dims=1, **overrides) -> SystemConfig:
    """A SystemConfig like the reference ring_1d.json, with overrides (upstream keys)."""
    data = upstream_system(algorithm, dims)
    data.update(overrides)
    return SystemConfig.from_dict(data)


@pytest.fixture
def workload(tmp_path: Path):
    """workload({rank: [pb.Node, ...]}) -> trace prefix written under tmp_path."""

    def write(per_rank: dict[int, list]) -> str:
        prefix = tmp_path / "wl"
        for rank, nodes in per_rank.items():
            write_rank_trace(f"{prefix}.{rank}.et", nodes)
        return str(prefix)

    return write
