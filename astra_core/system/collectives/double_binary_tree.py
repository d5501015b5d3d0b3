"""Double-binary-tree all-reduce (upstream ``DoubleBinaryTreeAllReduce.cc``; Sanders et al. 2009).

Each chunk reduces up one of two complementary binary trees and broadcasts
back down it; consecutive chunks alternate between the trees, so every rank is
a leaf in one and interior in the other. Every message carries the whole chunk.
Upstream runs this state machine for any collective type it is configured for
(the result is then an all-reduce's timing); we do the same and say so in the
docs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from astra_core.events import kernel
from astra_core.system.collectives.logical_topology import BinaryTree

if TYPE_CHECKING:
    from astra_core._astra_kernel import TreePhase as _KernelTreePhase

else:
    _KernelTreePhase = kernel().TreePhase

#: The kernel's numbers for a rank's place in a tree.
_KINDS = {BinaryTree.LEAF: 0, BinaryTree.INTERMEDIATE: 1, BinaryTree.ROOT: 2}
#: Upstream's states, by the kernel's numbers (for reports).
STATES = (
    "begin",
    "sending to parent",
    "waiting from parent",
    "end",
    "waiting for two children",
    "waiting for one child",
    "sending to children",
)


class DoubleBinaryTree(_KernelTreePhase):
    """One tree all-reduce of one chunk on one rank (sizes in bytes): the kernel's
    ``TreePhase`` (``astra_core/cpp/kernel/tree_phase.h``, upstream's state table),
    with the tree kept for reports. ``start()`` (STREAM_INIT), then the kernel
    drives it; ``received()`` and ``general()`` are its PACKET_RECEIVED and GENERAL
    events."""

    name = "doubleBinaryTree"
    __slots__ = ("tree", "kind")

    def __init__(self, comm_type, rank: int, tree: BinaryTree, data_size: int):
        kind = tree.kind(rank)
        super().__init__(
            comm_type,
            rank,
            data_size,
            _KINDS[kind],
            tree.parent.get(rank, -1),
            tree.left.get(rank, -1),
            tree.right.get(rank, -1),
        )
        self.tree = tree
        self.kind = kind

    def waiting_for(self) -> str:
        return f"doubleBinaryTree ({self.kind}) waiting, state {STATES[self.state]}"
