"""What every rank of one run shares: built once, read by all, changed by none.

:func:`build_context` checks the inputs that concern the whole run (``plugin:``
algorithms that nobody registered, a workload that does not fit the network)
and builds the models every rank reads: the collective algorithms per
collective type, the registry of phase factories, the NCCL model, custom
collectives and the remote-memory model. Engines and rank systems are given
this :class:`RunContext` and the run's message matcher and clock; none of them
sees the :class:`~astra_core.system.simulation.Simulation` that drives them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, cast

from astra_core.config.collective_impl import NCCL, CollectiveAlgorithm
from astra_core.config.memory import MemoryConfig, MemoryType
from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.errors import ConfigError
from astra_core.system.collectives import DimTopology
from astra_core.system.collectives.custom import custom_phase, custom_sources
from astra_core.system.collectives.logical_topology import RingTopology
from astra_core.system.collectives.nccl.model import NcclModel
from astra_core.system.collectives.registry import Collective, PhaseRegistry, builtin_collectives
from astra_core.system.collectives.uneven import UnevenBook
from astra_core.system.comm_types import CONFIGURABLE, CommType
from astra_core.system.memory import RemoteMemory
from astra_core.workload.graph import RankGraph
from astra_core.workload.network_fit import check_network_fit

if TYPE_CHECKING:
    from astra_core.config.nccl import NcclConfig
    from astra_core.system.collectives.base import PhaseAlgorithm


@dataclass(frozen=True)
class RunContext:
    """The shared, read-only inputs and models of one run.

    ``graphs[r]``: rank r's dependency graph (every rank, also under rank
    symmetry). ``implementations[t]``: system.json's algorithms for collective
    type ``t``, one per dimension. ``phases``: the algorithm name -> phase
    factory registry (:mod:`astra_core.system.collectives.registry`).
    ``custom[t]``: the ``custom:<path>`` algorithm name of a custom collective.
    ``nccl``: the NCCL model when an implementation is ``nccl``, and
    ``nccl_p2p`` the same model when it also times the trace's own sends and
    receives (``nccl.p2p``). ``comm_groups``: communicator id -> member ranks.
    One part is not read-only: ``uneven_book``, the uneven all-to-alls that not every
    member has issued yet, for the check that their members agree on their bytes.
    """

    network: NetworkConfig
    system: SystemConfig
    graphs: tuple[RankGraph, ...]
    implementations: Mapping[CommType, tuple[CollectiveAlgorithm, ...]]
    phases: PhaseRegistry
    custom: Mapping[CommType, str]
    nccl: NcclModel | None
    nccl_p2p: NcclModel | None
    memory: RemoteMemory
    comm_groups: Mapping[str, tuple[int, ...]]

    @property
    def npus_count(self) -> int:
        return self.network.npus_count

    @cached_property
    def uneven_book(self) -> UnevenBook:
        """The uneven all-to-alls not every member has issued yet (checked against each other)."""
        return UnevenBook()

    @cached_property
    def nccl_only(self) -> bool:
        """Every collective type runs on NCCL alone: NCCL runs each collective whole as soon
        as its GPU stream issues it (the engine's slots, one per ``comm_stream``), not
        when a per-dimension queue lets it."""
        return all(tuple(map(str, algorithms)) == (NCCL,) for algorithms in self.implementations.values())

    @cached_property
    def dim_sizes(self) -> tuple[int, ...]:
        """NPUs per network dimension, dimension 0 first (read per collective: kept)."""
        return tuple(d.npus for d in self.network.dims)


def build_context(
    graphs: Sequence[RankGraph],
    network: NetworkConfig,
    system: SystemConfig,
    *,
    memory: MemoryConfig | None = None,
    comm_groups: Mapping[str, Sequence[int]] | None = None,
    algorithms: Mapping[str, Collective] | None = None,
) -> RunContext:
    """The :class:`RunContext` of a run of ``graphs`` (one per NPU) on ``network``.

    ``algorithms``: the collective algorithms registered through the
    ``astra_register_collectives`` hook, by name as system.json spells it
    (:func:`astra_core.plugins.collective_registry`; upstream's alone when None).
    Raises ConfigError for a ``plugin:`` algorithm no plugin registered (naming
    system.json and the list entry) and what :func:`check_network_fit` and the NCCL
    model raise for a workload the network cannot run.
    """
    implementations = _implementations(system)
    algorithms = builtin_collectives() if algorithms is None else algorithms
    _check_plugin_algorithms(system, implementations, algorithms)
    phases = PhaseRegistry(algorithms)
    custom = {t: f"custom:{path}" for t, path in custom_sources(system).items()}
    for name in set(custom.values()):
        phases.register(name, _custom_factory(name[len("custom:") :]), whole_buffer=True)
    nccl = _nccl_model(system, network, implementations)
    if nccl is not None:
        phases.register(NCCL, _nccl_factory(nccl), whole_buffer=True)
    check_network_fit(graphs, network.npus_per_dim, roofline=system.roofline_enabled)
    return RunContext(
        network=network,
        system=system,
        graphs=tuple(graphs),
        implementations=MappingProxyType(implementations),
        phases=phases,
        custom=MappingProxyType(custom),
        nccl=nccl,
        # the trace's own sends and receives at NCCL's cost (nccl.p2p, on by default)
        nccl_p2p=nccl if nccl is not None and nccl.config.p2p else None,
        memory=RemoteMemory(memory or MemoryConfig(MemoryType.NO_MEMORY_EXPANSION)),
        comm_groups=MappingProxyType({k: tuple(v) for k, v in (comm_groups or {}).items()}),
    )


def check_network_models(system: SystemConfig, network: NetworkConfig) -> None:
    """Raise what building the run's network-dependent models raises (the NCCL model's
    ConfigError for a network it cannot place), before the traces are read: a job of
    thousands of ranks takes minutes to load. Its warnings come when the run builds it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _nccl_model(system, network, _implementations(system))


def _implementations(system: SystemConfig) -> dict[CommType, tuple[CollectiveAlgorithm, ...]]:
    return {t: tuple(system.algorithms(t.label)) for t in CONFIGURABLE}


def _nccl_model(
    system: SystemConfig,
    network: NetworkConfig,
    implementations: Mapping[CommType, Sequence[CollectiveAlgorithm]],
) -> NcclModel | None:
    """The NCCL model when an implementation is ``nccl`` (None otherwise)."""
    if not any(str(a) == NCCL for algorithms in implementations.values() for a in algorithms):
        return None
    # the config's validation requires the nccl section when an implementation is "nccl"
    return NcclModel(cast("NcclConfig", system.nccl), network, system.source)


def _check_plugin_algorithms(
    system: SystemConfig,
    implementations: Mapping[CommType, Sequence[CollectiveAlgorithm]],
    registered: Mapping[str, Collective],
) -> None:
    """Every ``plugin:NAME`` in system.json must be registered (ConfigError)."""
    for comm_type, algorithms in implementations.items():
        for index, name in enumerate(algorithms):
            plugin = name.plugin_name
            if plugin is not None and f"plugin:{plugin}" not in registered:
                known = ", ".join(sorted(n[len("plugin:") :] for n in registered if n.startswith("plugin:")))
                known = known or "none"
                raise ConfigError(
                    f"{system.source}: {comm_type.label}-implementation"
                    f"[{index}]: no plugin registered collective algorithm "
                    f"'{plugin}' (registered: {known})"
                )


def _members(dim: DimTopology) -> tuple[int, ...]:
    return tuple(cast(RingTopology, dim.ring).members)


def _custom_factory(source: str) -> Callable[[CommType, int, DimTopology, int], PhaseAlgorithm]:
    def factory(comm_type: CommType, rank: int, dim: DimTopology, data_size: int) -> PhaseAlgorithm:
        return custom_phase(comm_type, rank, _members(dim), data_size, source)

    return factory


def _nccl_factory(nccl: NcclModel) -> Callable[[CommType, int, DimTopology, int], PhaseAlgorithm]:
    def factory(comm_type: CommType, rank: int, dim: DimTopology, data_size: int) -> PhaseAlgorithm:
        return nccl.phase(comm_type, rank, _members(dim), data_size)

    return factory
