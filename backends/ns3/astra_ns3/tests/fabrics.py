"""Shared pieces of the ns3 backend tests: small topologies and a backend maker.

These tests must run in CI (``make test`` installs astra-ns3 with the ns3
wheel and cppyy): a missing dependency is a failure under ``CI``, a skip on a
developer machine without it.
"""

from __future__ import annotations

import os

import pytest

from astra_core.backend import Topology
from astra_core.config.network import NetworkConfig
from astra_core.errors import BackendUnavailable
from astra_core.topology.generators import star  # noqa: F401 - the suite's fabric (100 Gbps, 1 us links)
from astra_core.topology.logical import logical_dims
from astra_core.topology.physical import PhysicalTopology

GBPS_100 = 12.5  # bytes/ns
LINK_NS = 1000.0  # 1 us per link, the HPCC artifact's "100Gbps 0.001ms"


def require_ns3() -> None:
    """Skip the test off CI if ns-3 is not installed; under CI, fail it."""
    from astra_ns3.factory import check_available

    try:
        check_available()
    except BackendUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must install astra-ns3 (make test does): {exc}")
        pytest.skip(str(exc))


def make_ns3(physical: PhysicalTopology, config=None):
    """An ns3 backend on ``physical`` (skipped off CI if ns-3 is not installed)."""
    from astra_ns3.factory import create

    require_ns3()
    return create(Topology(logical_dims(physical), physical), config)


def network(kind: str, npus: int, gbs: float, latency: float) -> NetworkConfig:
    return NetworkConfig.from_dict(
        {"topology": [kind], "npus_count": [npus], "bandwidth": [gbs], "latency": [latency]}
    )


def incast(cc: str, senders: int, size: int, monitor_us: float = 100, **config):
    """``senders`` NPUs (1..senders) of a star each send ``size`` bytes to NPU 0; returns
    the backend after the run, with queue and flow monitors every ``monitor_us``,
    ``finish_ns`` (sender -> arrival ns) and ``bottleneck`` (the switch -> NPU 0 link)."""
    physical = star(senders + 1)
    backend = make_ns3(physical, {"cc": cc, "monitor": {"interval_us": monitor_us}, **config})
    finish: dict[int, float] = {}
    for src in range(1, senders + 1):
        backend.send(src, 0, size, lambda s: finish.setdefault(s, backend.now()), src)
    backend.run()
    assert sorted(finish) == list(range(1, senders + 1))
    backend.finish_ns = finish
    backend.bottleneck = physical.link(senders + 1, 0)
    return backend
