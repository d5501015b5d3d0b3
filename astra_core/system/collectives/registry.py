"""One registry of collective phase factories, keyed by the algorithm's name.

Every way a chunk's phase can be built goes through :class:`PhaseRegistry`.
Collective algorithms come through the ``astra_register_collectives`` hook, the
core's own as every plugin's: upstream's ``ring``, ``direct``,
``halvingDoubling`` and ``doubleBinaryTree`` (:func:`register_builtin_collectives`,
which the core's plugin calls) under their upstream names, a plugin's under
``plugin:<name>``. The NCCL model (``nccl``) and system.json's custom collectives
(``custom:<path>``) are models the run's configuration builds, added by the run.
A run builds its registry once (:func:`astra_core.system.context.build_context`);
a rank's :class:`~astra_core.system.collectives.DimTopology` names the entry its
phases come from, and building a phase is one dict lookup and one call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple, cast

from astra_core.system.collectives.direct import direct_plan
from astra_core.system.collectives.double_binary_tree import DoubleBinaryTree
from astra_core.system.collectives.halving_doubling import halving_doubling_plan
from astra_core.system.collectives.logical_topology import DoubleBinaryTreeTopology
from astra_core.system.collectives.plan import Plan, WindowedPhase
from astra_core.system.collectives.ring import ring_plan
from astra_core.system.comm_types import CommType

if TYPE_CHECKING:
    from astra_core.system.collectives import DimTopology
    from astra_core.system.collectives.base import PhaseAlgorithm

#: ``factory(comm_type, rank, dim, data_size)``: rank ``rank``'s phase of one chunk of
#: ``data_size`` bytes on logical dimension ``dim`` (a DimTopology).
PhaseFactory = Callable[[CommType, int, "DimTopology", int], "PhaseAlgorithm"]
#: ``plan_builder(comm_type, rank, ring, data_size[, window=W]) -> Plan``
#: (``astra_register_collectives``).
PlanBuilder = Callable[..., Plan]


class Collective(NamedTuple):
    """A collective algorithm registered through ``astra_register_collectives``:
    exactly one of ``plan_builder`` (a :data:`PlanBuilder`, run by the windowed
    executor on the dimension's ring) and ``phase_builder`` (a :data:`PhaseFactory`,
    a phase with its own state machine); ``plugin`` is who registered it."""

    plan_builder: PlanBuilder | None
    phase_builder: PhaseFactory | None
    description: str = ""
    plugin: str = ""


class PhaseKind(NamedTuple):
    """A registered algorithm: its phase ``factory``, and ``whole_buffer`` True when
    the algorithm chunks the collective's buffer itself, so the system layer gives it
    one stream instead of ``preferred-dataset-splits`` (NCCL, custom collectives:
    upstream's ``Sys::generate_collective`` for custom ones)."""

    factory: PhaseFactory
    whole_buffer: bool = False


class PhaseRegistry:
    """Algorithm name -> :class:`PhaseKind`. Raises ValueError on a second
    registration of one name and KeyError for a name nobody registered (the config's
    validation names unknown algorithms before a run is built)."""

    __slots__ = ("_kinds",)

    def __init__(self, collectives: Mapping[str, Collective] = MappingProxyType({})) -> None:
        self._kinds: dict[str, PhaseKind] = {}
        for name, collective in collectives.items():
            self.add(name, collective)

    def register(self, name: str, factory: PhaseFactory, *, whole_buffer: bool = False) -> None:
        """Add algorithm ``name``; see :class:`PhaseKind`."""
        if name in self._kinds:
            raise ValueError(f"collective algorithm '{name}' is registered twice")
        self._kinds[name] = PhaseKind(factory, whole_buffer)

    def add(self, name: str, collective: Collective) -> None:
        """Add a registered :class:`Collective` under ``name`` (as system.json spells it)."""
        plan_builder = collective.plan_builder
        if plan_builder is None:
            self.register(name, cast(PhaseFactory, collective.phase_builder))
            return

        def factory(comm_type: CommType, rank: int, dim: DimTopology, data_size: int) -> PhaseAlgorithm:
            window = dim.window  # only direct<W> sets one
            if window < 0:
                plan = plan_builder(comm_type, rank, dim.ring, data_size)
            else:
                plan = plan_builder(comm_type, rank, dim.ring, data_size, window=window)
            return WindowedPhase(name, comm_type, rank, data_size, plan)

        self.register(name, factory)

    def __getitem__(self, name: str) -> PhaseKind:
        return self._kinds[name]

    def __contains__(self, name: object) -> bool:
        return name in self._kinds

    def __iter__(self) -> Iterator[str]:
        return iter(self._kinds)

    def build(self, comm_type: CommType, rank: int, dim: DimTopology, data_size: int) -> PhaseAlgorithm:
        """The phase of ``dim.algorithm`` for one chunk (see :data:`PhaseFactory`)."""
        return self._kinds[dim.algorithm].factory(comm_type, rank, dim, data_size)


# A collective's chunks on one rank and dimension share one plan (plans are read-only
# data; a rank's rings live as long as the rank): built once for the chunks of a size.
_ring_plan = lru_cache(maxsize=256)(ring_plan)
_direct_plan = lru_cache(maxsize=256)(direct_plan)
_halving_doubling_plan = lru_cache(maxsize=256)(halving_doubling_plan)


def _double_binary_tree(comm_type: CommType, rank: int, dim: DimTopology, data_size: int) -> PhaseAlgorithm:
    trees = cast(DoubleBinaryTreeTopology, dim.trees)
    return DoubleBinaryTree(comm_type, rank, trees.next_tree(), data_size)


def register_builtin_collectives(register: Callable[..., None]) -> None:
    """Register upstream ASTRA-sim's algorithms with ``register``, an
    ``astra_register_collectives`` hook's: ring, direct (``direct<W>`` passes its
    window), halvingDoubling as plans (each built once per rank, ring and chunk
    size), doubleBinaryTree as a phase of its own."""
    register("ring", _ring_plan, description="ring (upstream Ring)")
    register("direct", _direct_plan, description="direct (upstream AllToAll)")
    register(
        "halvingDoubling",
        _halving_doubling_plan,
        description="recursive halving-doubling (upstream HalvingDoubling)",
    )
    register(
        "doubleBinaryTree",
        phase_builder=_double_binary_tree,
        description="double binary tree all-reduce (upstream DoubleBinaryTreeAllReduce)",
    )


def builtin_collectives() -> dict[str, Collective]:
    """What :func:`register_builtin_collectives` registers, by name (a run built
    without a plugin manager)."""
    collectives: dict[str, Collective] = {}

    def register(name: str, plan_builder: PlanBuilder | None = None, *, phase_builder=None, description=""):
        collectives[name] = Collective(plan_builder, phase_builder, description)

    register_builtin_collectives(register)
    return collectives
