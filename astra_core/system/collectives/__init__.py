"""Collective algorithms, one small module each, and how a name becomes a phase.

Implementation names are upstream's (system.json ``*-implementation`` lists):
``ring``, ``direct``, ``halvingDoubling``, ``doubleBinaryTree``, the
whole-network variants ``oneRing``, ``oneDirect``, ``oneHalvingDoubling`` (one
logical ring over every NPU instead of one per dimension), and ``direct<W>`` /
``oneDirect<W>`` with a window of ``W`` messages in flight.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from astra_core.config.collective_impl import CollectiveAlgorithm
from astra_core.errors import ConfigError
from astra_core.system.collectives.base import CollectivePhase
from astra_core.system.collectives.custom import custom_phase
from astra_core.system.collectives.direct import direct_plan
from astra_core.system.collectives.double_binary_tree import DoubleBinaryTree
from astra_core.system.collectives.halving_doubling import halving_doubling_plan
from astra_core.system.collectives.logical_topology import (
    Direction,
    RingTopology,
)
from astra_core.system.collectives.logical_topology import (
    DoubleBinaryTree as DoubleBinaryTreeTopology,
)
from astra_core.system.collectives.plan import Plan, WindowedPhase
from astra_core.system.collectives.ring import ring_plan
from astra_core.system.comm_types import CommType

ALGORITHMS = ("ring", "direct", "halvingDoubling", "doubleBinaryTree", "nccl")


@dataclass
class DimTopology:
    """One logical dimension of a rank's collective topology.

    ``algorithm`` is one of :data:`ALGORITHMS`; ``window`` the direct
    algorithm's in-flight limit (-1 = all peers).
    """

    algorithm: str
    window: int = -1
    ring: RingTopology | None = None  # None for a double binary tree
    trees: DoubleBinaryTreeTopology | None = None  # set for a double binary tree

    @property
    def nodes(self) -> int:
        return self.ring.nodes if self.ring is not None else cast(DoubleBinaryTreeTopology, self.trees).size


def build_logical_dims(
    rank: int,
    dim_sizes: list[int],
    algorithms: Sequence[CollectiveAlgorithm],
    source: str = "system.json",
) -> list[DimTopology]:
    """Rank ``rank``'s logical dimensions for one collective type.

    Mirrors upstream ``GeneralComplexTopology``: one ring or double binary
    tree per configured dimension (stride = product of lower dimension sizes);
    a ``one*`` implementation makes a single ring over all NPUs and ends the
    list. ``implementations`` may be shorter than ``dim_sizes`` (the upper
    dimensions are then not used by this collective, as upstream). Raises
    ConfigError (naming ``source``) for a double binary tree on a dimension
    whose size is not a power of two.
    """
    dims: list[DimTopology] = []
    offset = 1
    total = 1
    for size in dim_sizes:
        total *= size
    for d, name in enumerate(algorithms):
        size = dim_sizes[d]
        base = name.kind.base.value if name.plugin_name is None else str(name)
        window = -1 if name.window is None else name.window
        if name.kind.spans_all_dims:
            dims.append(DimTopology(base, window, ring=RingTopology(rank, list(range(total)))))
            return dims
        if base == "doubleBinaryTree":
            if size & (size - 1):
                raise ConfigError(
                    f"{source}: doubleBinaryTree needs a power-of-two "
                    f"dimension, dimension {d} has {size} NPUs"
                )
            start = (rank - rank % (offset * size)) + rank % offset
            dims.append(DimTopology(base, trees=DoubleBinaryTreeTopology(size, start, offset)))
        else:
            dims.append(DimTopology(base, window, ring=RingTopology.for_dimension(rank, size, offset)))
        offset *= size
    return dims


def make_phase(
    comm_type: CommType,
    rank: int,
    dim: DimTopology,
    data_size: int,
    direction: Direction = Direction.CLOCKWISE,
    plugins: dict | None = None,
    nccl=None,
) -> CollectivePhase:
    """The algorithm object for one phase of one chunk (bytes in: ``data_size``).

    ``plugins`` maps registered names to plan builders (``plugin:NAME`` entries);
    ``nccl`` is the run's :class:`~astra_core.system.collectives.nccl.model.NcclModel`
    (``nccl`` entries).
    """
    # every algorithm but doubleBinaryTree runs on dim.ring (not None there)
    algorithm = dim.algorithm
    if algorithm.startswith("custom:"):
        return custom_phase(
            comm_type,
            rank,
            tuple(cast(RingTopology, dim.ring).members),
            data_size,
            algorithm[len("custom:") :],
        )
    if algorithm == "nccl":
        return nccl.phase(comm_type, rank, tuple(cast(RingTopology, dim.ring).members), data_size)
    if algorithm.startswith("plugin:"):
        name = algorithm[len("plugin:") :]
        # plugins: the run's registered plugins, given whenever one is named
        plan = cast(dict, plugins)[name](comm_type, rank, dim.ring, data_size)
        return WindowedPhase(name, comm_type, rank, data_size, plan)
    if algorithm == "doubleBinaryTree":
        return DoubleBinaryTree(
            comm_type, rank, cast(DoubleBinaryTreeTopology, dim.trees).next_tree(), data_size
        )
    if algorithm == "ring":
        plan = ring_plan(comm_type, rank, cast(RingTopology, dim.ring), data_size, direction)
    elif algorithm == "direct":
        plan = direct_plan(comm_type, rank, cast(RingTopology, dim.ring), data_size, direction, dim.window)
    else:
        plan = halving_doubling_plan(comm_type, rank, cast(RingTopology, dim.ring), data_size)
    return WindowedPhase(algorithm, comm_type, rank, data_size, plan)


__all__ = [
    "ALGORITHMS",
    "CollectivePhase",
    "DimTopology",
    "Direction",
    "Plan",
    "build_logical_dims",
    "make_phase",
]
