"""Double-binary-tree all-reduce (upstream ``DoubleBinaryTreeAllReduce.cc``; Sanders et al. 2009).

Each chunk reduces up one of two complementary binary trees and broadcasts
back down it; consecutive chunks alternate between the trees, so every rank is
a leaf in one and interior in the other. Every message carries the whole chunk.
Upstream runs this state machine for any collective type it is configured for
(the result is then an all-reduce's timing); we do the same and say so in the
docs.
"""

from __future__ import annotations

from astra_core.system.collectives.base import GENERAL, PACKET_RECEIVED, CollectivePhase
from astra_core.system.collectives.logical_topology import BinaryTree

BEGIN, SENDING_TO_PARENT, WAITING_FROM_PARENT, END = 0, 1, 2, 3
WAITING_TWO_CHILDREN, WAITING_ONE_CHILD, SENDING_TO_CHILDREN = 4, 5, 6


class DoubleBinaryTree(CollectivePhase):
    """One tree all-reduce of one chunk on one rank. Sizes in bytes."""

    name = "doubleBinaryTree"
    __slots__ = ("tree", "kind", "parent", "left", "right", "state", "reductions")

    def __init__(self, comm_type, rank: int, tree: BinaryTree, data_size: int):
        super().__init__(comm_type, rank, data_size)
        self.tree = tree
        self.kind = tree.kind(rank)
        self.parent = tree.parent.get(rank, -1)
        self.left = tree.left.get(rank, -1)
        self.right = tree.right.get(rank, -1)
        self.state = BEGIN
        self.reductions = 0

    def _send(self, dst: int) -> None:
        self.send(dst, self.data_size)

    def _recv(self, src: int) -> None:
        self.recv(src, self.data_size)

    def run(self, event: int) -> None:  # noqa: C901 - one upstream state table
        kind, state = self.kind, self.state
        leaf = kind == BinaryTree.LEAF
        inter = kind == BinaryTree.INTERMEDIATE
        root = kind == BinaryTree.ROOT
        size = self.data_size
        if leaf and state == BEGIN:
            self.send_bundle(size, False, False)
            self.state = SENDING_TO_PARENT
        elif leaf and state == SENDING_TO_PARENT:
            self._send(self.parent)
            self._recv(self.parent)
            self.state = WAITING_FROM_PARENT
        elif leaf and state == WAITING_FROM_PARENT:
            self.send_bundle(size, False, False)
            self.state = END
        elif leaf and state == END:
            self.exit()
        elif inter and state == BEGIN:
            self.state = WAITING_TWO_CHILDREN
            self._recv(self.left)
            self._recv(self.right)
        elif inter and state == WAITING_TWO_CHILDREN and event == PACKET_RECEIVED:
            self.send_bundle(size, True, False)
            self.state = WAITING_ONE_CHILD
        elif inter and state == WAITING_ONE_CHILD and event == PACKET_RECEIVED:
            self.send_bundle(size, True, False)
            self.state = SENDING_TO_PARENT
        elif inter and self.reductions < 1 and event == GENERAL:
            self.reductions += 1
        elif inter and state == SENDING_TO_PARENT:
            self.state = WAITING_FROM_PARENT
            self._send(self.parent)
            self._recv(self.parent)
        elif inter and state == WAITING_FROM_PARENT and event == PACKET_RECEIVED:
            self.send_bundle(size, True, False)
            self.state = SENDING_TO_CHILDREN
        elif inter and state == SENDING_TO_CHILDREN:
            self._send(self.left)
            self._send(self.right)
            self.exit()
        elif root and state == BEGIN:
            self.state = WAITING_ONE_CHILD
            self._recv(self.left if self.left >= 0 else self.right)
        elif root and state == WAITING_ONE_CHILD:
            self.send_bundle(size, True, False)
            self.state = SENDING_TO_CHILDREN
        elif root and state == SENDING_TO_CHILDREN:
            self._send(self.left if self.left >= 0 else self.right)
            self.exit()

    def waiting_for(self) -> str:
        return f"doubleBinaryTree ({self.kind}) waiting, state {self.state}"
