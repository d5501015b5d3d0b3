"""The Python API: ``simulate(...)`` runs one simulation and returns its results.

The CLI is a thin layer over this module.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Sequence

from astra_core.backend import Topology
from astra_core.config.comm_groups import load_comm_groups
from astra_core.config.memory import MemoryConfig, load_memory
from astra_core.config.network import NetworkConfig, load_network
from astra_core.config.system import SystemConfig, load_system
from astra_core.plugins import BackendRegistry, load_settings, make_plugin_manager
from astra_core.report.results import RunResult
from astra_core.system.simulation import Simulation
from astra_core.workload.chakra import RankTrace, read_workload
from astra_core.workload.graph import RankGraph, build_graphs

PathLike = str | os.PathLike


def load_graphs(workload: PathLike | Sequence[RankTrace], npus_count: int) -> list[RankGraph]:
    """Per-rank dependency graphs from a trace prefix or from already read traces."""
    traces = read_workload(workload, npus_count) if isinstance(workload, (str, os.PathLike)) \
        else list(workload)
    return build_graphs(traces)


def simulate(workload: PathLike | Sequence[RankTrace], system: PathLike | SystemConfig,
             network: PathLike | NetworkConfig, *, memory: PathLike | MemoryConfig | None = None,
             comm_groups: PathLike | dict[str, Sequence[int]] | None = None,
             backend: str | None = None, backend_config: Any = None,
             plugin_manager=None) -> RunResult:
    """Simulate one training step.

    ``workload`` is a Chakra trace prefix (rank r reads ``<prefix>.<r>.et``)
    or a list of :class:`RankTrace`; configs are paths or config objects.
    ``backend`` names a registered network backend (default from
    plugins.toml); ``plugin_manager`` replaces the default one (from
    :func:`~astra_core.plugins.make_plugin_manager`), whose observers get
    ``astra_run_started`` / ``astra_run_finished``. Raises
    :class:`~astra_core.errors.AstraError` subclasses for bad input and
    :class:`~astra_core.errors.SimulationDeadlock` when the run cannot finish.
    """
    net = network if isinstance(network, NetworkConfig) else load_network(network)
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
    net_backend = info.factory(Topology(net), backend_config)
    sim = Simulation(graphs, net, sysc, net_backend, memory=mem, comm_groups=groups,
                     backend_name=info.name)
    pm.hook.astra_run_started(run=sim)
    result = sim.run()
    pm.hook.astra_run_finished(run=sim, report=result)
    return result
