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
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from astra_core.workload.chakra_types import NO_GROUP
from astra_core.workload.et_peers import GroupTemplate, RolePeers, TemplatePeers
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
    return bool(attrs) and "send_bytes" in attrs and node.pg_name not in NO_GROUP


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


def _renamed(first: _Positions, names: dict[str, str]) -> _Positions:
    """The positions of a template that times as the one of ``first`` and differs from it
    only in the names of its groups (:class:`~astra_core.workload.et_peers.GroupTemplate`):
    ``first`` with each group renamed by ``names`` (``first``'s name -> the template's)."""
    keys = tuple((names.get(name, name) if name else name, as_set) for name, as_set in first.keys)
    uneven = tuple((names.get(name, name), send, recv) for name, send, recv in first.uneven)
    return replace(first, keys=keys, uneven=uneven)


@dataclass(frozen=True)
class _Shape:
    """What ranks of one :class:`_Positions` and one set of peer roles share: ``digest``
    (256-bit BLAKE2b) of everything but the peers and groups' offsets (each position's
    group as numbered in the positions, each own send's or receive's role and direction,
    which positions name a peer themselves, the uneven all-to-alls' places); the
    positions whose node names a source (``src``) or destination (``dst``) itself; the
    peer roles the rank's own sends and receives use (``roles``)."""

    digest: bytes
    src: np.ndarray
    dst: np.ndarray
    roles: np.ndarray


def _shape(positions: _Positions, own: RolePeers | None) -> _Shape:
    """The :class:`_Shape` of ``positions`` with the rank's own sends and receives
    ``own`` at its slots (None: a rank not made from a template, whose positions hold
    its own peers). At an own send the rank is the source (offset 0) and the role's peer
    the destination; at an own receive the other way round."""
    taken = positions.slot >= 0
    role = np.full(len(positions.slot), -1, dtype=np.int64)
    sends = np.zeros(len(positions.slot), dtype=np.int64)
    roles = np.zeros(0, dtype=np.int64)
    if own is not None and taken.any():
        at = positions.slot[taken]
        role[taken] = np.frombuffer(own.role_of, dtype=np.int64)[at]
        sends[taken] = np.frombuffer(own.sends, dtype=np.bool_)[at]
        roles = np.unique(role[taken])
    else:
        taken[:] = False
    src = np.flatnonzero(~taken & (positions.src >= 0))
    dst = np.flatnonzero(~taken & (positions.dst >= 0))
    digest = hashlib.blake2b(digest_size=32)
    for part in (positions.group, role, sends, src, dst, roles, positions.uneven_at):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part.tobytes())
    return _Shape(digest.digest(), src, dst, roles)


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
        self._positions: dict[tuple[int, int, bool], tuple[_Positions, tuple[int, ...]]] = {}
        self._shapes: dict[tuple, tuple] = {}
        self._by_rank: dict[int, tuple[_Positions, _Shape, np.ndarray]] = {}

    def positions(self, rank: int) -> _Positions:
        """What ``rank`` shares with the ranks of its template (or its node list) at its
        relative positions."""
        nodes = self._graphs[rank].nodes
        relative = self._relative[rank]
        template = nodes if isinstance(nodes, TemplatePeers) else None
        shared = nodes if template is None else template.template
        # the template's own rank reads its nodes; ``relative`` by identity (rank symmetry
        # makes one tuple per distinct value; hashing its thousands of positions for each
        # of a thousand ranks took 6 % of a run), kept alive with the entry
        key = (id(shared), id(relative), template is None)
        found = self._positions.get(key)
        if found is None:
            # a template timing as another, its groups' names differing: the other's, renamed
            if isinstance(shared, GroupTemplate) and shared.timing is not shared and template is not None:
                first = (id(shared.timing), id(relative), False)
                if first not in self._positions:
                    self._positions[first] = (self._shared(shared.timing, relative, template), relative)
                positions = _renamed(self._positions[first][0], shared.names)
            else:
                positions = self._shared(shared, relative, template)
            found = self._positions[key] = (positions, relative)
        return found[0]

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

    def shape(self, rank: int) -> tuple[_Positions, _Shape, np.ndarray]:
        """(shared positions, what the ranks of its template and peer roles share, the
        peers its own sends and receives name by role, ``-1``: none) of ``rank``. A rank
        not made from a template names every peer at its positions itself. Kept per rank:
        every reading of the dimensions asks again."""
        known = self._by_rank.get(rank)
        if known is None:
            known = self._by_rank[rank] = self._shape_of(rank)
        return known

    def _shape_of(self, rank: int) -> tuple[_Positions, _Shape, np.ndarray]:
        positions = self.positions(rank)
        nodes = self._graphs[rank].nodes
        own = nodes.role_peers if isinstance(nodes, TemplatePeers) else None
        # renamed positions share their arrays with the first of their kind, and its shape
        arrays = (positions.group, positions.slot, positions.src, positions.dst, positions.uneven_at)
        key = tuple(map(id, arrays)) + (() if own is None else (id(own.role_of), id(own.sends)))
        found = self._shapes.get(key)
        if found is None:  # the objects the key names are kept alive with it
            found = self._shapes[key] = (_shape(positions, own), positions, own)
        shape = found[0]
        if own is None:
            return positions, shape, np.zeros(0, dtype=np.int64)
        return positions, shape, np.asarray(own.by_role, dtype=np.int64)[shape.roles]

    def members(self, pg_name: str) -> np.ndarray | None:
        """The members of the group ``pg_name`` names, or None (a name the run has no group for)."""
        return self._members.get(self._group_key(pg_name))


def relative_signatures(
    table: PeerTable, bases: Sequence[tuple[int, tuple[int, ...]]], sym: Symmetry
) -> list[int]:
    """Per rank: a class id of its trace with peers and groups as offsets from the rank
    under ``sym``'s reading of the dimensions (``bases``: each rank's base class and
    relative positions, :func:`~.symmetry._base_signatures`).

    Two ranks get the same id when their base classes are equal and, position by
    position, their peers' offsets and their groups' offsets (in ring order, rotated to
    start at the rank; or as a set) are; the ranks of one template (and one set of peer
    roles, :class:`_Shape`) exactly then. A rank's offsets are compared as a 256-bit
    BLAKE2b digest (as streamed traces' signatures are), never by ``hash()``, which
    collides (``hash(-1) == hash(-2)``): of its template's shape, the offsets of the
    peers its nodes name themselves, of the peer of each role its own sends and receives
    take (the rank itself is their other end, offset 0), of each group its positions
    name, and of its uneven all-to-alls' bytes by member. Thousands of sends and receives
    per rank are then a few offsets, the same for all of them; the ranks of one shape
    are offset together, one array operation for all of them.
    """
    interned: dict[tuple, int] = {}
    rings: dict[object, int] = {}  # a group's offsets (or a name without members) -> an id
    out = [0] * len(bases)
    shapes = {r: table.shape(r) for r, (_, relative) in enumerate(bases) if relative}
    everyone = np.arange(len(bases), dtype=np.int64)[:, None]
    coords = everyone // np.asarray(sym.strides) % np.asarray(sym.sizes)  # a row per rank
    # the offsets of the peers the ranks of one shape name: one array operation for them all
    batches: dict[tuple[int, int, int], list[int]] = {}
    for rank, (positions, shape, _) in shapes.items():
        batches.setdefault((id(shape), id(positions.src), id(positions.dst)), []).append(rank)
    peers: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for ranks in batches.values():
        positions, shape, _ = shapes[ranks[0]]
        me = coords[ranks]
        src = _offsets(positions.src[shape.src], me, sym)
        dst = _offsets(positions.dst[shape.dst], me, sym)
        roles = _offsets(np.stack([shapes[r][2] for r in ranks]), me, sym)
        peers.update((r, (src[i], dst[i], roles[i])) for i, r in enumerate(ranks))
    ring_of = _ring_ids(table, shapes, coords, sym, rings)
    for rank, (class_id, _) in enumerate(bases):
        if rank not in shapes:
            out[rank] = interned.setdefault((class_id,), len(interned))
            continue
        positions, shape, _ = shapes[rank]
        ring_ids = np.asarray([ring_of[(key, rank)] for key in positions.keys], dtype=np.int64)
        uneven = [
            rings.setdefault(_bytes_by_offset(table, e, coords[rank], sym), len(rings))
            for e in positions.uneven
        ]
        digest = hashlib.blake2b(shape.digest, digest_size=32)
        for part in (*peers[rank], ring_ids, np.asarray(uneven, dtype=np.int64)):
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part.tobytes())
        out[rank] = interned.setdefault((class_id, digest.digest()), len(interned))
    return out


def _ring_ids(table: PeerTable, shapes: dict, coords: np.ndarray, sym: Symmetry, rings: dict) -> dict:
    """(group key, rank) -> the id in ``rings`` of the group as the rank sees it, for each
    group key ``(name, as a set)`` the positions of a rank of ``shapes`` name: its members'
    offsets from the rank (its coordinates: a row of ``coords``) as a set, or in ring
    order rotated to start at the rank; a name without members stands for itself. Each
    group's members are offset from all the ranks that name it at once."""
    naming: dict[tuple, list[int]] = {}
    for rank, (positions, _, _) in shapes.items():
        for key in positions.keys:
            naming.setdefault(key, []).append(rank)
    ids: dict[tuple[tuple, int], int] = {}
    alike: dict[tuple[int, bool], list[tuple[tuple, list[int], np.ndarray]]] = {}
    for key, ranks in naming.items():
        name, as_set = key
        members = table.members(name) if name else None
        if members is None or not len(members):
            ids.update(((key, r), rings.setdefault(("name", name), len(rings))) for r in ranks)
        else:  # groups of one size and kind are offset together: a row per (group, rank)
            alike.setdefault((len(members), as_set), []).append((key, ranks, members))
    for (size, as_set), groups in alike.items():
        everyone = np.concatenate(
            [np.broadcast_to(members, (len(ranks), size)) for _, ranks, members in groups]
        )
        me = coords[np.concatenate([ranks for _, ranks, _ in groups])]
        rows = _as_seen(_offsets(everyone, me, sym), as_set)
        kind = "set" if as_set else "ring"
        pairs = ((key, r) for key, ranks, _ in groups for r in ranks)
        ids.update(
            (pair, rings.setdefault((kind, row.tobytes()), len(rings))) for pair, row in zip(pairs, rows)
        )
    return ids


def _as_seen(offsets: np.ndarray, as_set: bool) -> np.ndarray:
    """Each row of member offsets as a group is compared: sorted (a set), or in ring order
    rotated to start at the rank itself (offset 0; a ring is the same ring from any
    starting member; the row as it is where the rank is no member)."""
    if as_set:
        return np.sort(offsets, axis=1)
    n = offsets.shape[1]
    start = np.argmax(offsets == 0, axis=1)[:, None]
    return np.ascontiguousarray(np.take_along_axis(offsets, (np.arange(n)[None, :] + start) % n, axis=1))


def _bytes_by_offset(
    table: PeerTable, entry: tuple[str, tuple, tuple], me: np.ndarray, sym: Symmetry
) -> tuple:
    """An uneven all-to-all's bytes to and from each member, keyed by the member's offset
    from the rank at coordinates ``me`` (its members in ascending rank order, as the
    bytes are listed)."""
    name, send, recv = entry
    members = table.members(name)
    if members is None or len(members) != len(send):
        return ("uneven", name, send, recv)  # compared as written
    offsets = _offsets(np.sort(members), me[None, :], sym)[0].tolist()
    return ("uneven", frozenset(zip(offsets, send, recv)))


def _offsets(ranks: np.ndarray, me: np.ndarray, sym: Symmetry) -> np.ndarray:
    """Per rank whose coordinates are a row of ``me``: each of ``ranks`` (one list for
    all, or a row each) as its coordinates minus the rank's (modulo the size, or XOR),
    one mixed-radix integer of ``sym``'s dimensions; ``-1`` stays ``-1`` (no peer)."""
    ranks = np.broadcast_to(ranks, (len(me), ranks.shape[-1]))
    out = np.zeros(ranks.shape, dtype=np.int64)
    for d, (stride, size, kind) in enumerate(zip(sym.strides, sym.sizes, sym.kinds)):
        coord = ranks // stride % size
        mine = me[:, d : d + 1]
        out += ((coord ^ mine) if kind == "xor" else (coord - mine) % size) * stride
    out[ranks < 0] = -1
    return out
