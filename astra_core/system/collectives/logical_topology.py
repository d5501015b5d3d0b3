"""Logical topologies the collective algorithms run on: rings and binary trees.

A rank's view of one network dimension (or of a communicator group):

* :class:`RingTopology`: the ranks of my dimension in ring order. In dimension
  ``d`` with stride ``offset`` (the product of the sizes of dimensions below
  ``d``), my ring is ``base + k * offset`` for ``k = 0 .. n-1`` (upstream's
  ``GeneralComplexTopology`` numbering, dimension 0 fastest). A communicator
  group is a ring over its NPU list in the order given.
* :class:`BinaryTree`: the in-order-numbered binary tree of upstream's
  double-binary-tree all-reduce (``BinaryTree.cc``): a full tree of
  ``depth - 1`` levels hangs under a root that takes the smallest id
  (``RootMin``) or the largest (``RootMax``).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum


class Direction(Enum):
    CLOCKWISE = 0
    ANTICLOCKWISE = 1


class RingTopology:
    """The ordered ring of ranks one collective phase runs on.

    ``members`` lists rank ids in ring order: a list, or a ``range`` for a
    dimension's ring, whose positions are found arithmetically (every rank
    holds one ring per collective type and dimension: as lists with an index,
    rings of 1,024 NPUs took 3.3 MB a rank). ``local`` marks a communicator
    group ring (upstream's ``Dimension::Local``), which changes the direct
    algorithm's packet accounting and the NPU<->memory transfer kind.

    Raises ValueError when ``rank`` is not in ``members``.
    """

    __slots__ = ("rank", "members", "_positions", "index_in_ring", "local")

    def __init__(self, rank: int, members: Sequence[int], local: bool = False):
        self.rank = rank
        self.members = members
        self._positions = None if isinstance(members, range) else {m: i for i, m in enumerate(members)}
        if rank not in (members if self._positions is None else self._positions):
            raise ValueError(f"rank {rank} is not a member of ring {list(members)}")
        self.index_in_ring = self.index_of(rank)
        self.local = local

    def index_of(self, node: int) -> int:
        """``node``'s position in the ring (it must be a member)."""
        positions = self._positions
        return self.members.index(node) if positions is None else positions[node]

    @classmethod
    def for_dimension(cls, rank: int, size: int, offset: int) -> RingTopology:
        """Ring of ``size`` ranks with stride ``offset`` that contains ``rank``."""
        index = (rank % (offset * size)) // offset
        base = rank - index * offset
        return cls(rank, range(base, base + size * offset, offset))

    @property
    def nodes(self) -> int:
        return len(self.members)

    def receiver(self, node: int, direction: Direction) -> int:
        """The rank that ``node`` sends to in ``direction``."""
        i = self.index_of(node)
        n = len(self.members)
        return self.members[(i + 1) % n if direction is Direction.CLOCKWISE else (i - 1) % n]

    def sender(self, node: int, direction: Direction) -> int:
        """The rank that ``node`` receives from in ``direction``."""
        i = self.index_of(node)
        n = len(self.members)
        return self.members[(i - 1) % n if direction is Direction.CLOCKWISE else (i + 1) % n]


class BinaryTree:
    """One tree of a double binary tree over ``size`` ranks ``start + k*stride``.

    Node ids are assigned in in-order traversal order. ``root_min`` puts the
    extra root on the smallest id (its only child is the right subtree),
    otherwise on the largest (only a left subtree). Source: upstream
    ``BinaryTree.cc``.
    """

    LEAF, INTERMEDIATE, ROOT = "leaf", "intermediate", "root"

    __slots__ = ("size", "parent", "left", "right")

    def __init__(self, size: int, start: int, stride: int, root_min: bool):
        self.size = size
        self.parent: dict[int, int] = {}
        self.left: dict[int, int] = {}
        self.right: dict[int, int] = {}
        depth = 1
        tmp = size
        while tmp > 1:
            depth += 1
            tmp //= 2

        # Build the shape as nested [left, right] lists, then number in order.
        def shape(d: int):
            return [shape(d - 1), shape(d - 1)] if d > 1 else [None, None]

        root = [None, shape(depth - 1)] if root_min else [shape(depth - 1), None]
        next_id = [start]

        def number(node, parent_id):
            left, right = node
            left_id = number(left, None) if left is not None else None
            my_id = next_id[0]
            next_id[0] += stride
            right_id = number(right, None) if right is not None else None
            for child in (left_id, right_id):
                if child is not None:
                    self.parent[child] = my_id
            if left_id is not None:
                self.left[my_id] = left_id
            if right_id is not None:
                self.right[my_id] = right_id
            return my_id

        number(root, None)

    def kind(self, rank: int) -> str:
        if rank not in self.parent:
            return self.ROOT
        if rank not in self.left and rank not in self.right:
            return self.LEAF
        return self.INTERMEDIATE


class DoubleBinaryTreeTopology:
    """The pair of trees (root-max, root-min) handed out alternately per chunk.

    Upstream keeps one alternation counter per logical topology and flips it
    every time a collective phase asks for the tree
    (``DoubleBinaryTreeTopology::get_topology``).
    """

    __slots__ = ("size", "trees", "counter")

    def __init__(self, size: int, start: int, stride: int):
        self.size = size
        self.trees = (
            BinaryTree(size, start, stride, root_min=False),
            BinaryTree(size, start, stride, root_min=True),
        )
        self.counter = 0

    def next_tree(self) -> BinaryTree:
        tree = self.trees[self.counter % 2]
        self.counter += 1
        return tree


def involved_members(rank: int, sizes: Sequence[int], involved: Sequence[bool]) -> list[int]:
    """The ranks that share ``rank``'s coordinates on every dimension not ``involved``
    (``sizes`` per dimension, dimension 0 fastest; missing entries of ``involved``
    count as involved), ascending: the communicator of a collective whose ET node
    names its dimensions with ``involved_dim``."""
    members = [rank]
    stride = 1
    for d, size in enumerate(sizes):
        if d >= len(involved) or involved[d]:
            base = [m - (m // stride % size) * stride for m in members]
            members = [b + k * stride for b in base for k in range(size)]
        stride *= size
    return sorted(members)
