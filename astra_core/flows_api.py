"""The Python API of flow studies: :func:`run_flows` runs a flow workload on a named
backend and measures each flow (:mod:`astra_core.flows.run` says how). The
``astra flows`` command is a thin layer over it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from astra_core.backend import Topology
from astra_core.errors import ConfigError
from astra_core.flows.flowfile import FlowSpec
from astra_core.flows.run import FlowRun, check_framing, check_link_sharing, flow_results, start_flows
from astra_core.plugins import BackendRegistry, load_settings, make_plugin_manager
from astra_core.topology.logical import logical_dims
from astra_core.topology.physical import PhysicalTopology


def run_flows(
    flows: Sequence[FlowSpec],
    topology: PhysicalTopology,
    backend: str | None = None,
    backend_config: Any = None,
    *,
    payload_bytes: int | None = None,
    header_bytes: int | None = None,
    plugin_manager=None,
) -> FlowRun:
    """Simulate ``flows`` on ``topology`` with the named backend (default from
    plugins.toml) and return each flow's FCT and ideal FCT (the backend's own
    lone-message time unless ``payload_bytes`` or ``header_bytes`` fix a framing;
    see the module docstring).

    Raises ConfigError for a backend that does not model link sharing
    (:func:`check_link_sharing`), a bad framing (:func:`check_framing`), a flow
    naming an NPU the topology lacks or from an NPU to itself, and
    AstraError when flows are left undelivered (naming the first few)."""
    check_framing(payload_bytes, header_bytes)
    npus = topology.npus_count
    for k, f in enumerate(flows):
        if not (0 <= f.src < npus and 0 <= f.dst < npus):
            raise ConfigError(
                f"flow {k}: NPUs {f.src} -> {f.dst}, but {topology.source} has {npus} NPUs (0 .. {npus - 1})"
            )
        if f.src == f.dst:
            raise ConfigError(f"flow {k}: from NPU {f.src} to itself")
    settings = load_settings()
    pm = plugin_manager or make_plugin_manager(settings=settings)
    info = BackendRegistry(pm, settings.default_backend).get(backend)
    net = info.build(Topology(logical_dims(topology), topology), backend_config)
    check_link_sharing(net, info.name, "flows run")
    finish: list[float | None] = [None] * len(flows)

    def done(i: int) -> None:
        finish[i] = net.now()

    started = time.perf_counter()
    start_flows(net, flows, done)
    net.run()
    wall = time.perf_counter() - started
    results = flow_results(flows, finish, topology, info.name, 0, payload_bytes, header_bytes, net)
    return FlowRun(info.name, results, wall, net)
