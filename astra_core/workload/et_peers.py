"""Decode a rank's sends and receives once per shape, not once per rank.

A send or receive differs from its counterparts on other ranks only in its peer
ranks (``comm_src``, ``comm_dst``). :func:`peer_key` finds those two values in a
Node message's bytes without decoding it and returns the bytes with them cut out;
nodes of one key decode to one template (checked once), and each rank's node is the
template with its own peers (:func:`with_peers`). On a trace of Megatron's
tensor-parallel overlap (sends and receives are 56 % of its nodes) this reads
files about 2x faster.

Wire format (protobuf encoding, ``et_def.proto``): an attribute is field 10 of
Node, a length-delimited ``AttributeProto`` whose field 1 is its name; a peer
attribute written by Chakra's tools or astra's generators is
``0x52 LEN 0x0a 0x08 "comm_src" TAG VARINT`` with TAG an unsigned-varint case
(int32, int64, uint32, uint64). Anything else (zigzag or fixed encodings,
negative values, a name that merely appears inside another field) gives no key,
and the node is decoded in full.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable, Iterator, Sequence
from operator import attrgetter
from typing import cast

import numpy as np

from astra_core.workload.chakra_types import NodeType
from astra_core.workload.et_decode import ETNode

__all__ = [
    "GroupPlan",
    "GroupTemplate",
    "PeerNode",
    "PeerNodes",
    "PeerPlan",
    "RolePeers",
    "TemplatePeers",
    "peer_key",
    "renames",
    "split_groups",
    "split_peers",
    "with_peers",
]

#: The order of a node's peer values in its bytes (:func:`peer_key`).
SRC_ONLY, DST_ONLY, SRC_FIRST, DST_FIRST = range(4)
_SRC = b"\n\x08comm_src"  # field 1 (name), 8 bytes
_DST = b"\n\x08comm_dst"
# int32_val (7), int64_val (9), uint32_val (11), uint64_val (13): wire type 0 (varint)
_VARINT_TAGS = frozenset(field << 3 for field in (7, 9, 11, 13))


def _varint(data: bytes) -> int:
    """The value of the base-128 varint ``data`` (little-endian groups of 7 bits)."""
    value = 0
    for shift, byte in enumerate(data):
        value |= (byte & 0x7F) << (7 * shift)
    return value


def _value(payload: bytes, at: int) -> tuple[int, int] | None:
    """(value, end of the varint) of the peer attribute whose name starts at ``at``, or
    None when it is not one attribute of a name and a non-negative 32-bit varint value."""
    # the attribute: 0x52 (field 10, length-delimited), its length, the name, the value
    tag = at + 10
    if at < 2 or payload[at - 2] != 0x52 or tag >= len(payload) or payload[tag] not in _VARINT_TAGS:
        return None
    value = 0
    pos = tag + 1
    for shift in (0, 7, 14, 21, 28):  # at most 5 bytes (2**35 > any rank)
        if pos >= len(payload):
            return None
        byte = payload[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            # the attribute's one-byte length covers exactly its name and this value
            return (value, pos) if payload[at - 1] == pos - at and value < 1 << 31 else None
    return None


def peer_key(payload: bytes) -> tuple[bytes, int | None, int | None, int] | None:
    """(the bytes without the peer values, ``comm_src``, ``comm_dst``, the values' order:
    ``SRC_ONLY``, ``DST_ONLY``, ``SRC_FIRST`` or ``DST_FIRST``) of one encoded Node
    message, or None when it names no peer or names one in a form not read here (another
    encoding, a negative value, an attribute name given twice).

    A peer that is absent is None in the result, as :class:`ETNode` has it. Nodes of
    equal keys decode alike but for their peers; the caller checks the template it
    decodes against the values returned here before sharing it."""
    at_src = payload.find(_SRC)
    at_dst = payload.find(_DST)
    src = dst = None
    if at_src >= 0:
        found = _value(payload, at_src)
        if found is None or payload.find(_SRC, at_src + 1) >= 0:
            return None
        src, src_stop = found
    if at_dst >= 0:
        found = _value(payload, at_dst)
        if found is None or payload.find(_DST, at_dst + 1) >= 0:
            return None
        dst, dst_stop = found
    if at_dst < 0:
        if at_src < 0:
            return None
        return payload[: at_src + 11] + payload[src_stop:], src, dst, SRC_ONLY
    if at_src < 0:
        return payload[: at_dst + 11] + payload[dst_stop:], src, dst, DST_ONLY
    if at_src < at_dst:
        return (
            payload[: at_src + 11] + payload[src_stop : at_dst + 11] + payload[dst_stop:],
            src,
            dst,
            SRC_FIRST,
        )
    return payload[: at_dst + 11] + payload[dst_stop : at_src + 11] + payload[src_stop:], src, dst, DST_FIRST


class PeerNode:
    """A send or receive of one rank: a shared, read-only template :class:`ETNode` with its
    own peer ranks (``comm_src``, ``comm_dst``); every other field is the template's. It
    reads like an ETNode and takes 56 bytes where a copied ETNode takes about 180: the
    sends and receives of a generated step with tensor-parallel rings are most of its
    nodes, on every one of thousands of ranks."""

    __slots__ = ("_template", "comm_src", "comm_dst")

    def __init__(self, template: ETNode, src: int | None, dst: int | None):
        self._template = template
        self.comm_src = src
        self.comm_dst = dst

    def __getattr__(self, name: str):
        # what the fields set below do not cover (``type_name``)
        return getattr(self._template, name)

    def copy(self) -> PeerNode:
        return PeerNode(self._template, self.comm_src, self.comm_dst)

    def replaced(self, **changes) -> ETNode:
        """An ETNode of this node's fields with ``changes`` (see :meth:`ETNode.replaced`)."""
        return self._template.replaced(**{"comm_src": self.comm_src, "comm_dst": self.comm_dst, **changes})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (ETNode, PeerNode)):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in ETNode.__slots__)

    __hash__ = None  # type: ignore[assignment]  # compared by value, as ETNode

    def __repr__(self) -> str:
        return repr(self.replaced())


# every other field reads the template's through a C-level getter (the engine reads them
# per message: several times faster than falling back to __getattr__)
for _field in ETNode.__slots__:
    if _field not in PeerNode.__slots__:
        setattr(PeerNode, _field, property(attrgetter(f"_template.{_field}")))


def with_peers(template: ETNode | PeerNode, src: int | None, dst: int | None) -> ETNode:
    """``template`` (shared values, read-only) with its own peer ranks (a :class:`PeerNode`,
    which reads as an ETNode)."""
    base = template._template if isinstance(template, PeerNode) else template
    return cast("ETNode", PeerNode(base, src, dst))


# --- whole files ---------------------------------------------------------------------

# A peer attribute's name and value tag (group 1) and its varint value (group 2).
_PEER_VALUE = re.compile(rb"(\n\x08comm_(?:src|dst)[\x38\x48\x58\x68])([\x80-\xff]{0,4}[\x00-\x7f])")


def split_peers(data: bytes) -> tuple[bytes, list[bytes]]:
    """(the bytes of a trace file without its peer values, those values' varint bytes in
    file order). Ranks whose files differ only in their peers get equal first parts."""
    parts = _PEER_VALUE.split(data)
    values = parts[2::3]
    del parts[2::3]
    return b"".join(parts), values


# A group name given as a string: an AttributeProto's name (field 1) "pg_name" and its
# string_val (field 29, tag 0xea 0x01), whose one-byte length (group 1) the name follows.
_GROUP_NAME = re.compile(rb"\n\x07pg_name\xea\x01([\x00-\x7f])")


def split_groups(data: bytes) -> tuple[bytes, list[bytes]]:
    """(the bytes of a trace file without the group names its collectives give as
    strings, those names' bytes in file order). Ranks whose files differ only in the
    names of their groups, of equal lengths, and in their peers get equal first parts of
    :func:`split_peers` and then of this."""
    parts, names, at = [], [], 0
    for match in _GROUP_NAME.finditer(data):
        start = match.end()
        if match.start() < at:  # inside a name cut out: the decoder's check rejects the file
            continue
        parts.append(data[at:start])
        at = start + match.group(1)[0]
        names.append(data[start:at])
    parts.append(data[at:])
    return b"".join(parts), names


class PeerNodes(list):
    """A rank's node list made from a template's (:meth:`PeerPlan.nodes_with`): equal,
    node for node, to ``template`` (a list) but for the peer ranks of some nodes. What
    does not look at peers (graph structure, timings, collectives) can be read from the
    template once for all the ranks made from it."""

    __slots__ = ("template",)

    def __init__(self, nodes: list[ETNode], template: list[ETNode]):
        super().__init__(nodes)
        self.template = template


class GroupTemplate(list):
    """A template's node list (of :class:`PeerNodes` or :class:`TemplatePeers`) that
    differs from ``timing``'s, another such list, only in the groups its collectives
    name (``pg_name``) and in its own ranks' peers: node for node the same timings, ids
    and dependencies, and the same positions of the nodes that name peers or groups.
    Whatever looks at none of those (graph structure, rank symmetry's timing signature)
    reads ``timing`` once for all of them. ``names`` maps each group name of ``timing``'s
    collectives to the one this list's collectives at the same positions name, one to one.
    The maker vouches for both (a generated step's ranks of one pipeline stage:
    :func:`~astra_core.workload.generators.llm_traces.llm_traces`; files whose bytes are
    equal but for those: :class:`GroupPlan`, whose ``timing`` is the first file's list);
    the first of its kind is its own ``timing`` (held as None: a list that held itself
    would be a reference cycle, freed only by the cyclic collector) and renames nothing."""

    __slots__ = ("_timing", "names")

    def __init__(self, nodes, timing: list[ETNode] | None = None, names: dict[str, str] | None = None):
        super().__init__(nodes)
        self._timing = timing
        self.names: dict[str, str] = names or {}

    @property
    def timing(self) -> list[ETNode]:
        return self if self._timing is None else self._timing


class PeerPlan:
    """Where the peer values of one parsed file (the template) go in its node list, so
    that a file equal to it but for those values is its nodes with other peers.

    ``nodes``: the template's nodes; ``slots``: (node index, order) of every node whose
    peers :func:`peer_key` read and the decoder confirmed, in file order; ``values``:
    how many values they hold. The caller makes sure that :func:`split_peers` finds
    exactly these values in the template (no other match of the pattern)."""

    __slots__ = ("nodes", "slots", "values", "_ints", "_roles")

    def __init__(self, nodes: list[ETNode], slots: list[tuple[int, int]]):
        self.nodes = nodes
        self.slots = slots
        self.values = sum(1 if order in (SRC_ONLY, DST_ONLY) else 2 for _, order in slots)
        self._ints: dict[bytes, int] = {}
        self._roles = _Roles.of(self)

    def nodes_with(
        self, values: list[bytes], rank: int, template: list[ETNode] | None = None
    ) -> Sequence[ETNode]:
        """The template's nodes (or ``template``'s, equal to them but for group names)
        with the peer values ``values`` (from :func:`split_peers` of rank ``rank``'s file,
        whose other bytes equal the template's): a :class:`TemplatePeers` when each send
        and receive has the rank at its own end and its peer is the one of its role (the
        template's peer value, :class:`_Roles`), else a :class:`PeerNodes`."""
        base = self.nodes if template is None else template
        kept = self.by_role(values, rank, base)
        if kept is not None:
            return kept
        ints = self._ints  # a rank's varint bytes -> its number, decoded once
        numbers = [ints[raw] if raw in ints else ints.setdefault(raw, _varint(raw)) for raw in values]
        nodes = PeerNodes(base, base)
        at = 0
        for index, order in self.slots:
            node = nodes[index]
            src, dst = node.comm_src, node.comm_dst
            if order == SRC_ONLY:
                src = numbers[at]
            elif order == DST_ONLY:
                dst = numbers[at]
            else:
                first, second = numbers[at], numbers[at + 1]
                src, dst = (first, second) if order == SRC_FIRST else (second, first)
                at += 1
            at += 1
            nodes[index] = with_peers(node, src, dst)
        return nodes

    def by_role(
        self, values: list[bytes], rank: int, template: list[ETNode] | None = None
    ) -> TemplatePeers | None:
        """The template's nodes (or ``template``'s) with the peer values ``values`` of
        rank ``rank``'s file kept by role (:class:`_Roles`), or None where a send or
        receive does not name the rank at its own end or the peer of its role."""
        if self._roles is None:
            return None
        own = self._roles.peers(values, rank)
        if own is None:
            return None
        return TemplatePeers(self.nodes if template is None else template, self._roles.slot_of, own)


def _numbers(values: list[bytes]) -> np.ndarray:
    """The unsigned varints ``values`` (each ending at its one byte below 0x80, as
    :func:`split_peers` cuts them) as integers."""
    raw = np.frombuffer(b"".join(values), dtype=np.uint8)
    if not len(raw):
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], raw[:-1] < 0x80)))
    within = np.arange(len(raw)) - np.repeat(starts, np.diff(np.append(starts, len(raw))))
    return np.add.reduceat((raw & 0x7F).astype(np.int64) << (7 * within), starts)


class _Roles:
    """A template's sends and receives as :class:`RolePeers` see them: the ``i``-th
    (in file order) is at node position ``slots[i]`` (``slot_of``: the inverse), sends
    when ``sends[i]``, and has role ``role_of[i]``: the number of its peer value in
    the template's file (sends and receives of one peer share a role). In a file's
    values (:func:`split_peers`) its own end is at ``own_at[i]`` and its peer at
    ``peer_at[i]``; ``first_of`` is each role's first send or receive."""

    __slots__ = ("slot_of", "role_of", "sends", "own_at", "peer_at", "first_of", "_role_of")

    def __init__(self, slot_of: dict[int, int], sends: bytes, own_at, peer_at, template_peers: list[int]):
        number: dict[int, int] = {}
        role_of = [number.setdefault(peer, len(number)) for peer in template_peers]
        self.slot_of = slot_of
        self.sends = sends
        self.own_at = np.asarray(own_at, dtype=np.int64)
        self.peer_at = np.asarray(peer_at, dtype=np.int64)
        self.role_of = array("q", role_of)
        self._role_of = np.asarray(role_of, dtype=np.int64)
        firsts: dict[int, int] = {}
        for i, role in enumerate(role_of):
            firsts.setdefault(role, i)
        self.first_of = np.asarray(list(firsts.values()), dtype=np.int64)

    @classmethod
    def of(cls, plan: PeerPlan) -> _Roles | None:
        """The roles of ``plan``'s sends and receives; None when one of them names only
        one end (its other end is then not the rank itself)."""
        slot_of: dict[int, int] = {}
        sends, own_at, peer_at, template_peers = bytearray(), [], [], []
        at = 0
        for i, (index, order) in enumerate(plan.slots):
            if order not in (SRC_FIRST, DST_FIRST):
                return None
            node = plan.nodes[index]
            send = node.type == NodeType.COMM_SEND_NODE
            src_at, dst_at = (at, at + 1) if order == SRC_FIRST else (at + 1, at)
            at += 2
            slot_of[index] = i
            sends.append(send)
            own_at.append(src_at if send else dst_at)
            peer_at.append(dst_at if send else src_at)
            peer = node.comm_dst if send else node.comm_src
            if peer is None:
                return None
            template_peers.append(peer)
        return cls(slot_of, bytes(sends), own_at, peer_at, template_peers)

    def peers(self, values: list[bytes], rank: int) -> RolePeers | None:
        """Rank ``rank``'s :class:`RolePeers` from its file's peer values, or None
        unless each send and receive names the rank at its own end and the peer of
        its role at the other."""
        numbers = _numbers(values)
        if len(numbers) != len(values) or not bool(np.all(numbers[self.own_at] == rank)):
            return None
        peers = numbers[self.peer_at]
        by_role = peers[self.first_of]
        if not np.array_equal(by_role[self._role_of], peers):
            return None
        return RolePeers(rank, self.role_of, self.sends, tuple(by_role.tolist()))


def renames(pairs: Iterable[tuple[str, str]]) -> dict[str, str] | None:
    """Each group name -> the name that stands in its place, from ``pairs`` (first, other)
    at the same positions of two templates; None unless that is one to one (two of the
    first's groups in one of the other's, or one of the first's named two ways: the
    other then times on its own)."""
    names: dict[str, str] = {}
    for old, new in pairs:
        if names.setdefault(old, new) != new:
            return None
    return names if len(set(names.values())) == len(names) else None


class GroupPlan:
    """Where the group names of one parsed file (the first of its kind) are in its node
    list, so that a file equal to it but for those names and its peer values is its nodes
    with the other groups and peers, timing as the first's (a :class:`GroupTemplate` of it).

    ``peers``: the file's :class:`PeerPlan`; ``positions``: the index of the node of each
    name :func:`split_groups` cut out, in file order; ``names``: those names, as decoded
    (kept as their bytes, to compare with another file's, and as each name's positions).
    Made by :meth:`of`, which checks that the names cut out are exactly the ones the
    decoder read."""

    __slots__ = ("peers", "_raw", "_at", "_renamed")

    def __init__(self, peers: PeerPlan, positions: list[int], names: list[str]):
        self.peers = peers
        self._raw = [name.encode() for name in names]
        self._at: dict[str, list[int]] = {}  # name -> the positions that name it
        for i, name in zip(positions, names):
            self._at.setdefault(name, []).append(i)
        self._renamed: dict[tuple[str, str], list[ETNode]] = {}  # (name, new name) -> copies, shared by ranks

    @classmethod
    def of(cls, peers: PeerPlan, cut: list[bytes]) -> GroupPlan | None:
        """The plan of ``peers.nodes`` whose file's group names :func:`split_groups` cut
        out as ``cut``; None unless each node naming a group is one of them, in order, and
        none of them is a send or receive made from another (a :class:`PeerNode`)."""
        positions, names = [], []
        for i, node in enumerate(peers.nodes):
            if node.pg_name is not None:
                positions.append(i)
                names.append(node.pg_name)
        if len(positions) != len(cut) or any(n.encode() != raw for n, raw in zip(names, cut)):
            return None
        if any(isinstance(peers.nodes[i], PeerNode) for i in positions):
            return None
        return cls(peers, positions, names)

    def nodes_with(self, cut: list[bytes], values: list[bytes], rank: int) -> Sequence[ETNode] | None:
        """The first file's nodes with the group names ``cut`` (from :func:`split_groups`)
        and the peer values ``values`` (from :func:`split_peers`) of a file whose other
        bytes equal the first's; None unless the names replace the first's one to one."""
        pairs = set(zip(self._raw, cut))  # (first's name, this file's), as bytes
        try:
            names = renames((old.decode(), new.decode()) for old, new in pairs)
        except UnicodeDecodeError:
            return None
        if names is None:
            return None
        first = self.peers.nodes
        template = GroupTemplate(first, first, names)
        for old, new in names.items():
            if new == old:
                continue
            nodes = self._renamed.get((old, new))
            if nodes is None:
                nodes = self._renamed[(old, new)] = [first[i].copy() for i in self._at[old]]
                for node in nodes:
                    node.pg_name = new
            for i, node in zip(self._at[old], nodes):
                template[i] = node
        return self.peers.nodes_with(values, rank, template)


class RolePeers:
    """A rank's peers per send or receive, kept as the peer of each role: send or
    receive ``i`` has role ``role_of[i]`` and sends when ``sends[i]`` (both shared by
    the ranks of a stage), its peer is ``by_role[role_of[i]]`` (-1: none) and the rank
    itself the other end. A rank keeps a few integers instead of 16 bytes per send or
    receive (Megatron-Bridge's 1,024-GPU Llama 3.1 405B recipe has about 270,000 per
    rank)."""

    __slots__ = ("rank", "role_of", "sends", "by_role")

    def __init__(self, rank: int, role_of: array, sends: bytes, by_role: tuple[int, ...]):
        self.rank = rank
        self.role_of = role_of
        self.sends = sends
        self.by_role = by_role

    def __len__(self) -> int:
        return len(self.role_of)

    def pair(self, i: int) -> tuple[int, int]:
        """(src, dst) of the ``i``-th send or receive (-1: none)."""
        peer = self.by_role[self.role_of[i]]
        return (self.rank, peer) if self.sends[i] else (peer, self.rank)


class TemplatePeers(Sequence):
    """A rank's node list kept as a template's nodes and the rank's own peers: node
    ``pos`` is the template's, or, at a position of ``slots`` (node position -> its
    index among the peer nodes, shared by every rank of the template), a fresh
    :class:`PeerNode` with the peers of :class:`RolePeers` ``peers`` (-1 read as none).
    A rank holds a few integers instead of a list entry per node and a 56-byte object
    per send or receive: Llama 3.1 405B's FP8 recipe on 8,192 GPUs (about 21,000 nodes
    per rank, half of them sends and receives) is generated and simulated in 2.5 GiB
    instead of 10.7 GiB.

    Equal, node for node, to the list it stands for; ``as_list()`` makes that list
    (a :class:`PeerNodes`, for a rank that is simulated). Like :class:`PeerNodes` it
    has the ``template`` whose structure, timings and collectives it shares."""

    __slots__ = ("template", "_slots", "_peers")

    def __init__(self, template: list[ETNode], slots: dict[int, int], peers: RolePeers):
        self.template = template
        self._slots = slots
        self._peers = peers

    def __len__(self) -> int:
        return len(self.template)

    def __getitem__(self, pos):  # type: ignore[override]
        if isinstance(pos, slice):
            return [self[i] for i in range(*pos.indices(len(self)))]
        i = self._slots.get(pos if pos >= 0 else pos + len(self.template))
        node = self.template[pos]
        return node if i is None else with_peers(node, *self._own(i))

    def __iter__(self) -> Iterator[ETNode]:
        for pos in range(len(self.template)):
            yield self[pos]

    @property
    def slots(self) -> dict[int, int]:
        """Node position -> its index among the sends and receives (shared by the template's ranks)."""
        return self._slots

    @property
    def role_peers(self) -> RolePeers:
        """The rank's peers per send or receive, by role (:class:`RolePeers`)."""
        return self._peers

    def peers_at(self, pos: int) -> tuple[int | None, int | None]:
        """(``comm_src``, ``comm_dst``) of node ``pos`` (>= 0), without making the node."""
        i = self._slots.get(pos)
        if i is None:
            node = self.template[pos]
            return node.comm_src, node.comm_dst
        return self._own(i)

    def _own(self, i: int) -> tuple[int | None, int | None]:
        """The peers of the ``i``-th send or receive (-1 read as none)."""
        src, dst = self._peers.pair(i)
        return None if src < 0 else src, None if dst < 0 else dst

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]  # compared by value, as a list

    def as_list(self) -> PeerNodes:
        """The node list itself (a :class:`PeerNodes` of this template)."""
        return PeerNodes(list(self), self.template)
