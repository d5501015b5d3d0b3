"""The Python API: ``simulate(...)`` runs one simulation and returns its results.

The CLI is a thin layer over this module.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from astra_core.backend import Topology
from astra_core.config.comm_groups import load_comm_groups
from astra_core.config.memory import MemoryConfig, load_memory
from astra_core.config.network import NetworkConfig, load_network
from astra_core.config.system import SystemConfig, load_system
from astra_core.plugins import (BackendRegistry, collective_registry, load_settings, make_plugin_manager,
                                notify_run_finished, notify_run_started)
from astra_core.errors import ConfigError
from astra_core.report.results import RunResult
from astra_core.system.simulation import Simulation
from astra_core.topology.logical import logical_dims
from astra_core.topology.physical import PhysicalTopology
from astra_core.workload.chakra import RankTrace, read_workload
from astra_core.workload.graph import RankGraph, build_graphs

PathLike = str | os.PathLike


def load_graphs(workload: PathLike | Sequence[RankTrace], npus_count: int) -> list[RankGraph]:
    """Per-rank dependency graphs from a trace prefix or from already read traces."""
    traces = read_workload(workload, npus_count) if isinstance(workload, (str, os.PathLike)) \
        else list(workload)
    return build_graphs(traces)


def resolve_network(network: PathLike | NetworkConfig | None,
                    topology: PathLike | PhysicalTopology | None,
                    dims: Sequence[int] | None) -> tuple[NetworkConfig, PhysicalTopology | None]:
    """The logical network (for collectives) and the physical topology (if any).

    With only ``network``: network.yml's dimensions, no physical topology.
    With ``topology`` (an ns-3 format file or a PhysicalTopology): NPU rank r
    is its r-th non-switch node; the logical dimensions come from ``network``
    if given (its NPU count must match) or from ``dims`` (default: one
    dimension of all NPUs). Raises ConfigError.
    """
    if topology is None:
        if network is None:
            raise ConfigError("no network: give network.yml (--network) or a physical topology "
                              "file (--topology)")
        if dims:
            raise ConfigError("--dims goes with --topology; network.yml already has dimensions")
        net = network if isinstance(network, NetworkConfig) else load_network(network)
        return net, None
    if isinstance(topology, PhysicalTopology):
        physical = topology
    else:
        from astra_core.topology.ns3_format import read_ns3_topology

        physical = read_ns3_topology(topology)
    if network is not None:
        if dims:
            raise ConfigError("give either --network or --dims with --topology, not both")
        net = network if isinstance(network, NetworkConfig) else load_network(network)
        if net.npus_count != physical.npus_count:
            raise ConfigError(f"{physical.source}: {physical.npus_count} NPUs, but network.yml "
                              f"{net.source} has {net.npus_count}")
        return net, physical
    return logical_dims(physical, list(dims) if dims else None), physical


def simulate(workload: PathLike | Sequence[RankTrace], system: PathLike | SystemConfig,
             network: PathLike | NetworkConfig | None = None, *,
             topology: PathLike | PhysicalTopology | None = None,
             dims: Sequence[int] | None = None,
             memory: PathLike | MemoryConfig | None = None,
             comm_groups: PathLike | dict[str, Sequence[int]] | None = None,
             backend: str | None = None, backend_config: Any = None,
             plugin_manager=None, symmetry: bool = True) -> RunResult:
    """Simulate one training step.

    ``workload`` is a Chakra trace prefix (rank r reads ``<prefix>.<r>.et``)
    or a list of :class:`RankTrace`; configs are paths or config objects.
    The network is network.yml's dimensions or a physical ``topology`` with
    logical ``dims`` (see :func:`resolve_network`).
    ``backend`` names a registered network backend (default from
    plugins.toml); ``plugin_manager`` replaces the default one (from
    :func:`~astra_core.plugins.make_plugin_manager`), whose observers get
    ``astra_run_started`` / ``astra_run_finished``. Raises
    :class:`~astra_core.errors.AstraError` subclasses for bad input and
    :class:`~astra_core.errors.SimulationDeadlock` when the run cannot finish.
    ``symmetry=False`` simulates every rank even when rank 0 could stand for
    all (see :mod:`astra_core.system.symmetry`).
    """
    net, physical = resolve_network(network, topology, dims)
    sysc = system if isinstance(system, SystemConfig) else load_system(system)
    sysc.check_dims(net.dims_count)
    mem = memory if isinstance(memory, MemoryConfig) or memory is None else load_memory(memory)
    if isinstance(comm_groups, (str, os.PathLike)):
        groups = load_comm_groups(comm_groups, net.npus_count)
    else:
        groups = {str(k): tuple(v) for k, v in (comm_groups or {}).items()}
    graphs = load_graphs(workload, net.npus_count)
    settings = load_settings()
    pm = plugin_manager or make_plugin_manager(settings=settings)
    info = BackendRegistry(pm, settings.default_backend).get(backend)
    net_backend = info.factory(Topology(net, physical), backend_config)
    sim = Simulation(graphs, net, sysc, net_backend, memory=mem, comm_groups=groups,
                     backend_name=info.name, symmetry=symmetry,
                     collective_plugins=collective_registry(pm))
    notify_run_started(pm, sim)  # a failing observer: one line naming the plugin
    result = sim.run()
    notify_run_finished(pm, sim, result)  # an observer's error is a warning; the result is kept
    return result
