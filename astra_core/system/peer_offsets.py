"""Rank symmetry's relative signatures: a rank's peers and groups as offsets from it.

Rank symmetry (:mod:`.symmetry`) compares ranks by what their traces say with every
peer and communicator group written relative to the rank. This module holds what
does not change between the ways of reading the network's dimensions that rank
symmetry tries (:class:`PeerTable`, built once per run) and turns it into each
rank's class under one reading (:func:`relative_signatures`), with arrays: an
offset is one integer, the peer's coordinates minus the rank's in the reading's
mixed radix (``-1``: no peer), so a rank's thousands of sends and receives are a
few array operations instead of a tuple per node.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from astra_core.workload.et_peers import TemplatePeers
from astra_core.workload.graph import RankGraph

if TYPE_CHECKING:
    from astra_core.system.symmetry import Symmetry

__all__ = ["PeerTable", "relative_signatures", "relative_uneven"]


def relative_uneven(node) -> bool:
    """An uneven all-to-all on a named communicator group: rank symmetry compares its
    bytes to and from each member as a map from the member's offset
    (:func:`relative_signatures`), so that a pattern every rank repeats from where it
    stands (a token-based MoE dispatch) folds. Other uneven all-to-alls keep their
    bytes in the rank's base signature, member by member."""
    attrs = node.attrs
    return bool(attrs) and "send_bytes" in attrs and node.pg_name not in (None, "", "0")


@dataclass(frozen=True)
class _Positions:
    """What the ranks of one node list (or one template) share at the positions that
    name peers or groups: the template's peers (``-1``: none), each position's index
    among the rank's own sends and receives (``-1``: the template's node), and each
    position's group, an index into ``keys`` (``(pg_name, as a set)``); ``uneven``: the
    distinct (group, bytes to and from each member in ascending rank order) of the
    positions that are :func:`relative_uneven` all-to-alls, ``uneven_at`` each such
    position's index into it."""

    src: np.ndarray
    dst: np.ndarray
    slot: np.ndarray
    group: np.ndarray
    keys: tuple[tuple[str | None, bool], ...]
    uneven: tuple[tuple[str, tuple, tuple], ...] = ()
    uneven_at: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


class PeerTable:
    """Every rank's peers and groups at the positions ``relative[r]`` of its nodes.

    ``groups`` maps a group's key (``group_key`` of its name) to its members;
    ``orderless``: comm types whose group counts as a set of members (NCCL orders
    a communicator itself), else as a ring in the listed order. Ranks made from one
    template (:class:`~astra_core.workload.et_peers.TemplatePeers`) share its
    positions and keep only their own sends' and receives' peers.
    """

    def __init__(
        self,
        graphs: Sequence[RankGraph],
        relative: Sequence[tuple[int, ...]],
        groups: dict[str, tuple[int, ...]],
        orderless: frozenset[int],
        group_key: Callable[[str], str],
    ):
        self._graphs = graphs
        self._relative = relative
        self._orderless = orderless
        self._group_key = group_key
        self._members = {name: np.asarray(members, dtype=np.int64) for name, members in groups.items()}
        self._positions: dict[tuple[int, tuple[int, ...], bool], _Positions] = {}

    def peers(self, rank: int) -> tuple[np.ndarray, np.ndarray, _Positions]:
        """(comm_src, comm_dst, shared positions) of ``rank`` at its relative positions."""
        nodes = self._graphs[rank].nodes
        relative = self._relative[rank]
        template = nodes if isinstance(nodes, TemplatePeers) else None
        shared = nodes if template is None else template.template
        key = (id(shared), relative, template is None)  # the template's own rank reads its nodes
        positions = self._positions.get(key)
        if positions is None:
            positions = self._positions[key] = self._shared(shared, relative, template)
        if template is None:
            return positions.src, positions.dst, positions
        slot = positions.slot
        taken = slot >= 0
        if not taken.any():  # none of the rank's own sends or receives is at these positions
            return positions.src, positions.dst, positions
        mine = np.frombuffer(template.own_peers, dtype=np.int64).reshape(-1, 2)
        src = np.where(taken, mine[np.maximum(slot, 0), 0], positions.src)
        dst = np.where(taken, mine[np.maximum(slot, 0), 1], positions.dst)
        return src, dst, positions

    def _shared(self, nodes, relative: tuple[int, ...], template: TemplatePeers | None) -> _Positions:
        slots = template.slots if template is not None else {}
        keys: dict[tuple[str | None, bool], int] = {}
        src, dst, slot, group, uneven_at = [], [], [], [], []
        uneven: dict[tuple[str, tuple, tuple], int] = {}
        for pos in relative:
            node = nodes[pos]
            if relative_uneven(node):
                entry = (node.pg_name, tuple(node.attrs["send_bytes"]), tuple(node.attrs["recv_bytes"]))
                uneven_at.append(uneven.setdefault(entry, len(uneven)))
            src.append(-1 if node.comm_src is None else node.comm_src)
            dst.append(-1 if node.comm_dst is None else node.comm_dst)
            slot.append(slots.get(pos, -1))
            as_set = bool(node.pg_name) and node.comm_type in self._orderless
            group.append(keys.setdefault((node.pg_name, as_set), len(keys)))
        return _Positions(
            np.asarray(src, dtype=np.int64),
            np.asarray(dst, dtype=np.int64),
            np.asarray(slot, dtype=np.int64),
            np.asarray(group, dtype=np.int64),
            tuple(keys),
            tuple(uneven),
            np.asarray(uneven_at, dtype=np.int64),
        )

    def members(self, pg_name: str) -> np.ndarray | None:
        """The members of the group ``pg_name`` names, or None (a name the run has no group for)."""
        return self._members.get(self._group_key(pg_name))


def relative_signatures(
    table: PeerTable, bases: Sequence[tuple[int, tuple[int, ...]]], sym: Symmetry
) -> list[int]:
    """Per rank: a class id of its trace with peers and groups as offsets from the rank
    under ``sym``'s reading of the dimensions (``bases``: each rank's base class and
    relative positions, :func:`~.symmetry._base_signatures`).

    Two ranks get the same id exactly when their base classes are equal and, position
    by position, their peers' offsets and their groups' offsets (in ring order,
    rotated to start at the rank; or as a set) are: the positions' offsets are
    compared by their 256-bit BLAKE2b digest (as streamed traces' signatures are: a
    class keeps 32 bytes, not 24 per position that names a peer or group), never by
    ``hash()``, which collides (``hash(-1) == hash(-2)``).
    """
    strides = sym.strides
    interned: dict[tuple, int] = {}
    rings: dict[object, int] = {}  # a group's offsets (or a name without members) -> an id
    out = []
    for rank, (class_id, relative) in enumerate(bases):
        if not relative:
            out.append(interned.setdefault((class_id,), len(interned)))
            continue
        me = sym.coords(rank)
        src, dst, positions = table.peers(rank)
        ring_ids = np.empty(len(positions.keys), dtype=np.int64)
        for i, (name, as_set) in enumerate(positions.keys):
            members = table.members(name) if name else None
            if members is None or not len(members):
                ring: object = ("name", name)
            elif as_set:
                ring = frozenset(_offsets(members, me, sym, strides).tolist())
            else:
                ring = _rotated(_offsets(members, me, sym, strides).tolist())
            ring_ids[i] = rings.setdefault(ring, len(rings))
        distinct = [
            rings.setdefault(_bytes_by_offset(table, e, me, sym), len(rings)) for e in positions.uneven
        ]
        uneven = np.asarray(distinct, dtype=np.int64)[positions.uneven_at]
        digest = hashlib.blake2b(digest_size=32)
        for part in (
            _offsets(src, me, sym, strides),
            _offsets(dst, me, sym, strides),
            ring_ids[positions.group],
            uneven,
        ):
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part.tobytes())
        out.append(interned.setdefault((class_id, digest.digest()), len(interned)))
    return out


def _bytes_by_offset(
    table: PeerTable, entry: tuple[str, tuple, tuple], me: list[int], sym: Symmetry
) -> tuple:
    """An uneven all-to-all's bytes to and from each member, keyed by the member's offset
    from the rank (its members in ascending rank order, as the bytes are listed)."""
    name, send, recv = entry
    members = table.members(name)
    if members is None or len(members) != len(send):
        return ("uneven", name, send, recv)  # compared as written
    offsets = _offsets(np.sort(members), me, sym, sym.strides).tolist()
    return ("uneven", frozenset(zip(offsets, send, recv)))


def _offsets(ranks: np.ndarray, me: list[int], sym: Symmetry, strides: Sequence[int]) -> np.ndarray:
    """Each rank's coordinates minus ``me`` (modulo the size, or XOR), as one mixed-radix
    integer of ``sym``'s dimensions; ``-1`` stays ``-1`` (no peer)."""
    out = np.zeros(len(ranks), dtype=np.int64)
    for stride, size, kind, mine in zip(strides, sym.sizes, sym.kinds, me):
        coord = ranks // stride % size
        out += ((coord ^ mine) if kind == "xor" else (coord - mine) % size) * stride
    out[ranks < 0] = -1
    return out


def _rotated(offsets: list[int]) -> tuple:
    """Member offsets in ring order, rotated to start at the rank itself (offset 0): a
    ring is the same ring from any starting member."""
    zero = next((i for i, o in enumerate(offsets) if o == 0), 0)
    return ("ring", *offsets[zero:], *offsets[:zero])
