"""One registry of collective phase factories, keyed by the algorithm's name.

Every way a chunk's phase can be built goes through :class:`PhaseRegistry`:
upstream's algorithms (``ring``, ``direct``, ``halvingDoubling``,
``doubleBinaryTree``, registered by :func:`builtin_phases`), the NCCL model
(``nccl``), system.json's custom collectives (``custom:<path>``) and the plan
builders plugins contribute (``plugin:<name>``, through the
``astra_register_collectives`` hook). A run builds its registry once
(:func:`astra_core.system.context.build_context`); a rank's
:class:`~astra_core.system.collectives.DimTopology` names the entry its phases
come from, and building a phase is one dict lookup and one call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple, cast

from astra_core.system.collectives.direct import direct_plan
from astra_core.system.collectives.double_binary_tree import DoubleBinaryTree
from astra_core.system.collectives.halving_doubling import halving_doubling_plan
from astra_core.system.collectives.logical_topology import DoubleBinaryTreeTopology, RingTopology
from astra_core.system.collectives.plan import Plan, WindowedPhase
from astra_core.system.collectives.ring import ring_plan
from astra_core.system.comm_types import CommType

if TYPE_CHECKING:
    from astra_core.system.collectives import DimTopology
    from astra_core.system.collectives.base import PhaseAlgorithm

#: ``factory(comm_type, rank, dim, data_size)``: rank ``rank``'s phase of one chunk of
#: ``data_size`` bytes on logical dimension ``dim`` (a DimTopology).
PhaseFactory = Callable[[CommType, int, "DimTopology", int], "PhaseAlgorithm"]
#: ``plan_builder(comm_type, rank, ring, data_size) -> Plan`` (``astra_register_collectives``).
PlanBuilder = Callable[[CommType, int, RingTopology, int], Plan]


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

    def __init__(self) -> None:
        self._kinds: dict[str, PhaseKind] = {}

    def register(self, name: str, factory: PhaseFactory, *, whole_buffer: bool = False) -> None:
        """Add algorithm ``name``; see :class:`PhaseKind`."""
        if name in self._kinds:
            raise ValueError(f"collective algorithm '{name}' is registered twice")
        self._kinds[name] = PhaseKind(factory, whole_buffer)

    def register_plan(self, name: str, plan_builder: PlanBuilder) -> None:
        """Add ``name`` as a plan builder run by the windowed executor on the
        dimension's ring (what a ``plugin:`` algorithm is)."""

        def factory(comm_type: CommType, rank: int, dim: DimTopology, data_size: int) -> PhaseAlgorithm:
            plan = plan_builder(comm_type, rank, cast(RingTopology, dim.ring), data_size)
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


def _ring(comm_type: CommType, rank: int, dim: DimTopology, data_size: int) -> PhaseAlgorithm:
    plan = _ring_plan(comm_type, rank, cast(RingTopology, dim.ring), data_size)
    return WindowedPhase("ring", comm_type, rank, data_size, plan)


def _direct(comm_type: CommType, rank: int, dim: DimTopology, data_size: int) -> PhaseAlgorithm:
    plan = _direct_plan(comm_type, rank, cast(RingTopology, dim.ring), data_size, window=dim.window)
    return WindowedPhase("direct", comm_type, rank, data_size, plan)


def _halving_doubling(comm_type: CommType, rank: int, dim: DimTopology, data_size: int) -> PhaseAlgorithm:
    plan = _halving_doubling_plan(comm_type, rank, cast(RingTopology, dim.ring), data_size)
    return WindowedPhase("halvingDoubling", comm_type, rank, data_size, plan)


def _double_binary_tree(comm_type: CommType, rank: int, dim: DimTopology, data_size: int) -> PhaseAlgorithm:
    trees = cast(DoubleBinaryTreeTopology, dim.trees)
    return DoubleBinaryTree(comm_type, rank, trees.next_tree(), data_size)


def builtin_phases() -> PhaseRegistry:
    """A registry holding upstream ASTRA-sim's algorithms (ring, direct,
    halvingDoubling, doubleBinaryTree)."""
    registry = PhaseRegistry()
    registry.register("ring", _ring)
    registry.register("direct", _direct)
    registry.register("halvingDoubling", _halving_doubling)
    registry.register("doubleBinaryTree", _double_binary_tree)
    return registry
