"""Collective algorithms, one small module each, and each rank's logical dimensions.

Implementation names are upstream's (system.json ``*-implementation`` lists):
``ring``, ``direct``, ``halvingDoubling``, ``doubleBinaryTree``, the
whole-network variants ``oneRing``, ``oneDirect``, ``oneHalvingDoubling`` (one
logical ring over every NPU instead of one per dimension), and ``direct<W>`` /
``oneDirect<W>`` with a window of ``W`` messages in flight.
How a name becomes a chunk's phase: :mod:`astra_core.system.collectives.registry`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from astra_core.config.collective_impl import CollectiveAlgorithm
from astra_core.errors import ConfigError
from astra_core.system.collectives.base import CollectivePhase
from astra_core.system.collectives.logical_topology import (
    Direction,
    DoubleBinaryTreeTopology,
    RingTopology,
)
from astra_core.system.collectives.plan import Plan

ALGORITHMS = ("ring", "direct", "halvingDoubling", "doubleBinaryTree", "nccl")


@dataclass
class DimTopology:
    """One logical dimension of a rank's collective topology.

    ``algorithm`` names its entry in the run's phase registry
    (:mod:`astra_core.system.collectives.registry`): one of :data:`ALGORITHMS`,
    ``custom:<path>`` or ``plugin:<name>``; ``window`` the direct
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
    dim_sizes: Sequence[int],
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
            dims.append(DimTopology(base, window, ring=RingTopology(rank, range(total))))
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


__all__ = [
    "ALGORITHMS",
    "CollectivePhase",
    "DimTopology",
    "Direction",
    "Plan",
    "build_logical_dims",
]
