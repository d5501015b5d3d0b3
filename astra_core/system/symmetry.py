"""Rank symmetry: simulate one rank per class of provably identical ranks.

Ranks are points of the logical network's dimensions (coordinate ``c_d`` in
dimension ``d``, dimension 0 fastest). A *translation* moves every rank by the
same offset along the dimensions. If a translation maps every rank's trace onto
the trace of the rank it lands on (same nodes, timings and dependencies; the
communicator groups and point-to-point peers moved by the same offset), the
network's message times depend only on offsets (the congestion-unaware model),
and every collective algorithm in use picks its peers by offset, then the two
ranks' timelines are identical. Such translations form a group; astra looks,
per dimension ``d``, for the smallest step ``k_d`` that works, simulates only
the *representatives* (coordinates ``c_d < k_d``), and lets each stand for its
class. A message a representative sends to rank ``b`` is delivered to ``b``'s
representative as the message from the translated sender (and, for a
communicator group's chunk, the translated group's tag).

* Ring and direct algorithms are translation-equivariant along every dimension
  (rotations of the ring order), and so are communicator-group rings.
* Halving-doubling pairs ranks by XOR: its dimensions are symmetric under XOR
  translations only, used when the whole dimension is one class.
* Double binary trees give ranks different roles: no symmetry along their
  dimensions. A whole-network ring over several dimensions: no symmetry.
* NCCL collectives: a translation is kept only if it keeps every NCCL
  communicator's order, turns it where NCCL runs a ring, or moves only
  collectives that end at NCCL's predicted time whatever part a member
  plays, which the run then *folds* and checks (:mod:`.nccl_symmetry`,
  :mod:`.floor_fold`).
* A Switch or FullyConnected dimension on which no native algorithm runs may
  be read as several, in mixed radix (``a x b x ..`` NPUs, the digits from
  where the communicator groups lie along it): message times there do not
  depend on the offset, so a rotation within one digit is as good as one along
  the whole dimension. Megatron's tensor-, data- and pipeline-parallel ranks in
  one NVLink domain, or its context-, data- and pipeline-parallel ranks on one
  rail dimension, then give one class per pipeline stage.

Everything else that could break it disables the shortcut for the run:
remote memory shared between ranks, METADATA-defined process groups, or a
backend that does not declare itself translation-invariant (``symmetric =
True``: a message's time depends only on the dimensions where its ends
differ and, on Ring dimensions, their offset; the congestion-aware model
shares link state between ranks).
``Simulation(symmetry=False)`` (``--no-symmetry``) turns it off; the tests
compare both on every reference case, on communicator-group workloads and on
random traces (``tests/system/test_symmetry_properties.py``).

Two things the static check cannot see are caught while running. Signatures
are compared as values (interned into class ids), never by ``hash()``, which
collides (``hash(-1) == hash(-2)``). And events of one instant run in the
order they were scheduled, which follows rank numbers, not offsets: a rank
therefore chooses what to issue once per instant, after every event already
queued for it (:meth:`~astra_core.system.engine.RankEngine.complete`), so that
order cannot change its choice. An event of the same instant that comes
after the choice (a message of zero delay) still could; then the symmetric
attempt stops and every rank runs (``engine.TieOrderMatters``).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, cast

import numpy as np

from astra_core.backend import is_symmetric, lone_message_time
from astra_core.config.collective_impl import NCCL
from astra_core.config.memory import MemoryType
from astra_core.system.comm_types import CONFIGURABLE, CommType
from astra_core.system.nccl_symmetry import NcclCollectives
from astra_core.system.peer_offsets import PeerTable, relative_signatures, relative_uneven
from astra_core.system.rank import group_algorithm
from astra_core.workload.chakra_types import NO_GROUP, NodeType
from astra_core.workload.et_peers import TemplatePeers
from astra_core.workload.graph import Children, RankGraph, distinct_timings, peerless, timing_key
from astra_core.workload.streaming import StreamedNodes, timing_item

# Chakra node types, as plain ints (compared per node)
_METADATA, _COMM_SEND, _COMM_RECV, _COMM_COLL = (
    int(t)
    for t in (
        NodeType.METADATA_NODE,
        NodeType.COMM_SEND_NODE,
        NodeType.COMM_RECV_NODE,
        NodeType.COMM_COLL_NODE,
    )
)
_COMM_TYPES = {c.value for c in CONFIGURABLE}
_ROTATION = {"ring", "direct"}
GROUP_TAG_BASE = 1_000_000  # a communicator group's chunks are tagged id * this + k


@dataclass(frozen=True)
class Symmetry:
    """Which ranks stand for which: per dimension a kind and a step.

    ``kinds[d]`` is ``"rotation"`` (offsets add modulo the size) or ``"xor"``;
    ``steps[d]`` is ``k_d``: ranks whose coordinates agree modulo ``k_d`` in
    every dimension are one class (``k_d = sizes[d]``: no symmetry along ``d``).
    ``groups`` maps a communicator group id to its members (for tags).
    ``folded``: the NCCL collectives (comm type, members, bytes) that the
    translations keep only by running them at NCCL's predicted time
    (:mod:`.floor_fold`).
    """

    #: A communicator group's chunk tags are its id times this plus a count (the kernel's
    #: matcher keeps :meth:`shift_tag`'s answer per group).
    tag_base: ClassVar[int] = GROUP_TAG_BASE
    sizes: tuple[int, ...]
    kinds: tuple[str, ...]
    steps: tuple[int, ...]
    groups: dict[int, tuple[int, ...]] = field(default_factory=dict, compare=False)
    folded: frozenset = field(default_factory=frozenset, compare=False)
    if TYPE_CHECKING:  # set by __post_init__; not fields (only type checkers see these lines)
        _strides: tuple[int, ...] = field(init=False)
        _group_of: dict[frozenset[int], int] = field(init=False)
        _shift_cache: dict[tuple[int, tuple[int, ...]], int] = field(init=False)
        _moved: dict[tuple[int, tuple[int, ...]], int] = field(init=False)

    def __post_init__(self) -> None:
        strides, s = [], 1
        for n in self.sizes:
            strides.append(s)
            s *= n
        object.__setattr__(self, "_strides", tuple(strides))
        object.__setattr__(self, "_group_of", {frozenset(m): g for g, m in self.groups.items()})
        object.__setattr__(self, "_shift_cache", {})
        object.__setattr__(self, "_moved", {})

    @property
    def npus(self) -> int:
        n = 1
        for size in self.sizes:
            n *= size
        return n

    @property
    def strides(self) -> tuple[int, ...]:
        """Per dimension, the ranks between neighbours along it (mixed radix, dimension 0 fastest)."""
        return self._strides

    def coords(self, rank: int) -> list[int]:
        return [(rank // s) % n for s, n in zip(self._strides, self.sizes)]

    def rank_of(self, coords: Sequence[int]) -> int:
        return sum(c * s for c, s in zip(coords, self._strides))

    def representative(self, rank: int) -> int:
        """The simulated rank that stands for ``rank``."""
        return self.rank_of([c % k for c, k in zip(self.coords(rank), self.steps)])

    def representatives(self) -> list[int]:
        return sorted({self.representative(r) for r in range(self.npus)})

    def shift(self, rank: int, delta: Sequence[int]) -> int:
        """``rank`` translated by ``delta`` (per-dimension offsets, or XOR masks); kept
        per (rank, delta): the kernel names every mirrored message's sender this way."""
        key = (rank, tuple(delta))
        moved = self._moved.get(key)
        if moved is None:
            out = []
            for c, d, n, kind in zip(self.coords(rank), delta, self.sizes, self.kinds):
                out.append((c + d) % n if kind == "rotation" else c ^ d)
            moved = self._moved[key] = self.rank_of(out)
        return moved

    def translated(self, members: Sequence[int], deltas: np.ndarray) -> np.ndarray:
        """``members`` moved by each translation in ``deltas`` (one per row, as
        :meth:`shift` takes them), each row's ranks ascending: shape
        ``(len(deltas), len(members))``; what :meth:`shift` gives rank by rank."""
        strides, sizes = np.asarray(self._strides), np.asarray(self.sizes)
        coords = (np.asarray(members)[:, None] // strides) % sizes  # (members, dims)
        here, by = coords[None, :, :], deltas[:, None, :]
        rotation = np.asarray([kind == "rotation" for kind in self.kinds])
        moved = np.where(rotation, (here + by) % sizes, here ^ by)
        return np.sort(moved @ strides, axis=1)

    def moved_groups(self, group: int, deltas: np.ndarray) -> list[int]:
        """Communicator group ``group``'s id after each translation in ``deltas``, as
        :meth:`shift_tag` names it (``group`` itself where no group has the moved members)."""
        members = self.groups.get(group)
        if not group or members is None:
            return [group] * len(deltas)
        rows = self.translated(members, deltas).tolist()
        return [self._group_of.get(frozenset(row), group) for row in rows]

    def to_representative(self, rank: int) -> tuple[int, tuple[int, ...]]:
        """(representative of ``rank``, the translation that takes ``rank`` there)."""
        coords = self.coords(rank)
        delta = []
        for c, k, n, kind in zip(coords, self.steps, self.sizes, self.kinds):
            target = c % k
            delta.append((target - c) % n if kind == "rotation" else c ^ target)
        return self.representative(rank), tuple(delta)

    def from_representative(self, rank: int) -> tuple[int, tuple[int, ...]]:
        """(representative of ``rank``, the translation that takes it to ``rank``):
        the inverse of :meth:`to_representative`, to name a representative's
        peers, groups and tags as ``rank`` sees them."""
        rep, delta = self.to_representative(rank)
        return rep, tuple(
            (-d) % n if kind == "rotation" else d  # an XOR mask is its own inverse
            for d, n, kind in zip(delta, self.sizes, self.kinds)
        )

    def classes(self) -> dict[int, list[int]]:
        """Representative -> the ranks it stands for (itself included), ascending."""
        out: dict[int, list[int]] = {}
        for rank in range(self.npus):
            out.setdefault(self.representative(rank), []).append(rank)
        return out

    def shift_tag(self, tag: int, delta: tuple[int, ...]) -> int:
        """A collective chunk's tag as seen after translating by ``delta``
        (a communicator group's tags carry its id, which the translation changes)."""
        group = tag // GROUP_TAG_BASE
        if not group or group not in self.groups:
            return tag
        key = (group, delta)
        moved = self._shift_cache.get(key)
        if moved is None:
            members = frozenset(self.shift(m, delta) for m in self.groups[group])
            moved = self._shift_cache[key] = self._group_of.get(members, group)
        return moved * GROUP_TAG_BASE + tag % GROUP_TAG_BASE


def _kinds(
    graphs: Sequence[RankGraph], sizes: Sequence[int], implementations, whole_groups: set[str]
) -> tuple[list[str], set[int]] | None:
    """Per dimension: "rotation", "xor" or "none" from the algorithms in use, and the
    dimensions that run a native algorithm over their own coordinates; None if no symmetry.

    ``whole_groups`` are the names of groups of every NPU, which run the
    configured algorithms; smaller groups run rings over their members.
    """
    used: dict[int, set[str]] = {}
    # XOR keeps message times only between halving-doubling partners (i, i ^ d);
    # a point-to-point message or a group ring moved by XOR may cross another
    # distance, so either rules XOR out.
    xor_ok = True
    seen: set[int] = set()  # nodes shared between ranks' graphs are looked at once
    for graph in distinct_timings(graphs):  # a group's name only says whether it is whole
        for node, key in graph.notable_nodes():
            if node.is_cpu_op or key in seen:
                continue
            if key is not None:
                seen.add(key)
            if node.type in (_COMM_SEND, _COMM_RECV):
                xor_ok = False
                continue
            if node.type != _COMM_COLL:
                continue
            if node.pg_name not in NO_GROUP and _group_key(node.pg_name) not in whole_groups:
                xor_ok = False
                # A ring over the group's members; halving-doubling there pairs
                # by absolute position in the member list: not a rotation. NCCL's
                # communicators are checked translation by translation (nccl_symmetry).
                if node.comm_type in _COMM_TYPES and group_algorithm(
                    implementations[CommType(node.comm_type)]
                ) not in _ROTATION | {NCCL}:
                    return None
                continue
            try:
                comm_type = CommType(node.comm_type)
            except ValueError:
                continue
            if comm_type not in CONFIGURABLE:
                # a broadcast or reduce runs NCCL's chain from position 0 if NCCL is on
                # (ranks differ: no symmetry), else replays its duration
                if any(str(a) == NCCL for algs in implementations.values() for a in algs):
                    return None
                continue
            involved = node.involved_dim
            for d, name in enumerate(implementations[comm_type]):
                if involved is not None and d < len(involved) and not involved[d]:
                    continue
                if str(name) == NCCL:  # any dimension, translation by translation
                    xor_ok = False
                    break
                if name.kind.spans_all_dims:
                    if len(sizes) > 1:
                        return None
                    used.setdefault(0, set()).add(name.kind.base.value)
                    break
                used.setdefault(d, set()).add(name.kind.base.value)
    kinds = []
    for d, size in enumerate(sizes):
        algorithms = used.get(d, set())
        if algorithms <= _ROTATION:
            kinds.append("rotation")
        elif algorithms == {"halvingDoubling"} and not size & (size - 1) and xor_ok:
            kinds.append("xor")
        else:
            kinds.append("none")
    return kinds, set(used)


def _base_signatures(graphs: Sequence[RankGraph]) -> list[tuple[int, tuple[int, ...]]]:
    """Per rank: :func:`_base_signature` (interned among the ranks), computed once per
    graph, and once for the ranks made from templates that time alike (peers and group
    names are not in it: :func:`~astra_core.workload.graph.timing_key`)."""
    interned: dict[tuple, int] = {}
    items: dict[int, tuple] = {}
    structures: dict[tuple, tuple] = {}
    base: dict[int, tuple[int, tuple[int, ...]]] = {}
    out = []
    for graph in graphs:
        entry = base.get(timing_key(graph.nodes))
        if entry is None:
            entry = base[timing_key(graph.nodes)] = _base_signature(graph, interned, items, structures)
        out.append(entry)
    return out


def _base_signature(
    graph: RankGraph, interned: dict[tuple, int], items_of: dict[int, tuple], structures: dict[tuple, tuple]
) -> tuple[int, tuple[int, ...]]:
    """(interned id of everything in ``graph`` that times a rank except its peers
    and groups, positions of the nodes that name peers or groups).

    Node ids enter only by their order: the engine issues ready nodes lowest
    id first, so equal graphs with differently ordered ids may run differently.
    ``items_of`` caches a node's part by node object, ``structures`` a graph's
    id order, children and parent counts by the identity of its lists (ranks of
    one pipeline stage share them, :func:`~astra_core.workload.graph.build_graphs`).
    """
    nodes = graph.nodes
    if isinstance(nodes, StreamedNodes):
        return _streamed_signature(graph, interned, structures)
    # a template's rank: its template's nodes, shared by its ranks; the rank's own peers
    # are at the template's slots (a generated send or receive names both of its peers)
    slots = nodes.slots if isinstance(nodes, TemplatePeers) else ()
    items, relative = [], []
    for pos, node in enumerate(peerless(nodes)):
        item = items_of.get(id(node))
        if item is None:
            item = timing_item(node)
            if relative_uneven(node):  # its bytes per member are compared as offsets
                item = item[:-1]
            if slots or (node.type != _COMM_SEND and node.type != _COMM_RECV):  # else each rank's own
                items_of[id(node)] = item
        items.append(item)
        if _names_peers(node) or pos in slots:
            relative.append(pos)
    parts = (graph.index, graph.children, graph.parent_counts)
    known = structures.get(tuple(map(id, parts)))
    if known is None:
        base = peerless(nodes)  # ids do not depend on peers
        by_id = sorted(range(len(base)), key=lambda p: base[p].id)
        id_order = [0] * len(nodes)
        for order, pos in enumerate(by_id):
            id_order[pos] = order
        value = ("structure", tuple(id_order), tuple(map(tuple, graph.children)), tuple(graph.parent_counts))
        # the lists are kept with their id so that no other list can take the id
        known = structures[tuple(map(id, parts))] = (interned.setdefault(value, len(interned)), parts)
    key = (tuple(items), known[0])
    relative_key = ("relative", tuple(relative))  # one copy for all the ranks of a stage
    return interned.setdefault(key, len(interned)), structures.setdefault(relative_key, relative_key[1])


def _names_peers(node) -> bool:
    return node.pg_name not in NO_GROUP or node.comm_src is not None or node.comm_dst is not None


def _streamed_signature(
    graph: RankGraph, interned: dict[tuple, int], structures: dict[tuple, tuple]
) -> tuple[int, tuple[int, ...]]:
    """:func:`_base_signature` of a streamed trace's graph, with 256-bit BLAKE2b
    digests in place of the tuples (which would hold the whole trace): of every
    node's timing item (made by the scan) and of the structure. Only its notable
    nodes are decoded, for the ones that name peers or groups."""
    # a streamed graph's parts: StreamedNodes, Children and an array of parent counts
    nodes = cast(StreamedNodes, graph.nodes)
    parts = (graph.index, graph.children, graph.parent_counts)
    known = structures.get(tuple(map(id, parts)))
    if known is None:  # as _base_signature's: id order, children and parent counts
        ids = nodes.ids
        id_order = array("q", bytes(8 * len(ids)))
        for order, pos in enumerate(sorted(range(len(ids)), key=ids.__getitem__)):
            id_order[pos] = order
        digest = hashlib.blake2b(digest_size=32)
        children = cast(Children, graph.children)
        for part in (id_order, children.starts, children.values, cast(array, graph.parent_counts)):
            digest.update(part.tobytes())
        known = structures[tuple(map(id, parts))] = (digest.digest(), parts)
    key = ("streamed", nodes.timing_digest, known[0])
    relative = [pos for pos in nodes.notable if _names_peers(nodes[pos])]
    relative_key = ("relative", tuple(relative))
    return interned.setdefault(key, len(interned)), structures.setdefault(relative_key, relative_key[1])


def _group_key(name: str) -> str:
    key = name.strip()
    return str(int(key)) if key.isdigit() else key


def find_symmetry(
    graphs: Sequence[RankGraph],
    sizes: Sequence[int],
    implementations,
    comm_groups: Mapping,
    memory_type: MemoryType,
    backend,
    nccl=None,
    distance_free: Sequence[bool] | None = None,
) -> tuple[Symmetry | None, str]:
    """The rank classes of a run, or (None, why not) when every rank must run.

    ``implementations`` maps each CommType to its per-dimension algorithm names
    (parsed system.json lists); ``comm_groups`` maps group names to members;
    ``nccl`` is the run's NCCL model when an implementation is ``nccl``: a
    translation must then also keep every NCCL collective (:mod:`.nccl_symmetry`).
    ``distance_free[d]``: message times along dimension ``d`` do not depend on
    the offset (Switch, FullyConnected); such a dimension may be read as several
    (:func:`_readings`) when that gives fewer classes.
    """
    if not is_symmetric(backend):
        return None, "the backend's timing is not the same for every rank"
    if memory_type in (MemoryType.PER_NODE_MEMORY_EXPANSION, MemoryType.MEMORY_POOL):
        return None, "ranks share a remote memory"
    for graph in distinct_timings(graphs):
        if any(n.type == _METADATA and n.inputs_values for n, _ in graph.notable_nodes()):
            return None, "the trace defines process groups"
    groups = {_group_key(name): tuple(members) for name, members in comm_groups.items()}
    npus = 1
    for size in sizes:
        npus *= size
    found = _kinds(
        graphs, sizes, implementations, {name for name, members in groups.items() if len(members) == npus}
    )
    if found is None:
        return None, "a whole-network algorithm over several dimensions"
    kinds, native = found
    ids = {int(k): m for k, m in groups.items() if k.isdigit()}
    if len({frozenset(m) for m in ids.values()}) < len(ids):
        return None, "two communicator groups have the same members"
    collectives = None
    if nccl is not None:
        lone = lone_message_time(backend)
        message_ns = None if lone is None else (lambda src, dst, size: lone(src, dst, size, 0))
        collectives = NcclCollectives(graphs, sizes, groups, nccl, message_ns)
        if not collectives.nodes_preserved():
            return None, "NCCL's nodes are not network dimension 0"
    bases = _base_signatures(graphs)
    orderless = frozenset(
        c.value
        for c in CONFIGURABLE
        if collectives is not None and group_algorithm(implementations[c]) == NCCL
    )
    table = PeerTable(graphs, [relative for _, relative in bases], groups, orderless, _group_key)
    best = _steps(table, bases, tuple(sizes), tuple(kinds), ids, collectives)
    splittable = [
        bool(distance_free and distance_free[d]) and d not in native and kinds[d] == "rotation"
        for d in range(len(sizes))
    ]
    for reading in _readings(sizes, splittable, groups):
        sub_sizes = tuple(f for factors in reading for f in factors)
        sub_kinds = tuple(kind for kind, factors in zip(kinds, reading) for _ in factors)
        candidate = _steps(table, bases, sub_sizes, sub_kinds, ids, collectives)
        if len(candidate.representatives()) < len(best.representatives()):
            best = candidate
    if all(step == size for step, size in zip(best.steps, best.sizes)):
        return None, "no translation maps the ranks' traces onto each other"
    return best, ""


def _readings(sizes: Sequence[int], splittable: Sequence[bool], groups: dict[str, tuple[int, ...]]):
    """Ways to read the dimensions as more, finer ones: per dimension its factors, lowest
    first (``(size,)``: read as it is); every reading splits at least one dimension.

    Only a dimension where a message's time does not depend on how far apart its
    ends are (a Switch or FullyConnected dimension of a symmetric backend) and on
    which no native algorithm runs a ring or direct pattern over its own
    coordinates (``splittable``) is split: a rotation within one factor then does
    what one along the whole dimension does. Each communicator group that takes
    every value of one mixed-radix digit along the dimension (members ``t`` apart,
    ``a`` of them, the others' coordinates fixed) marks the digit's bounds ``t`` and
    ``t a``. Readings: each such group's digit alone (``a x b`` for Megatron's
    tensor-parallel groups), then every group's bounds at once per dimension, then
    every dimension so split together (Megatron's tensor-, data- and pipeline-parallel
    digits of one NVLink domain, each folded or kept on its own).
    """
    per_dim: list[list[tuple[int, ...]]] = []
    stride = 1
    for d, size in enumerate(sizes):
        digits = set()
        if splittable[d]:
            for members in groups.values():
                digit = _digit(sorted({m // stride % size for m in members}), size)
                if digit is not None:
                    digits.add(digit)
        options = [_factors(size, {1, t, t * a, size}) for t, a in sorted(digits)]
        options.append(_factors(size, {1, size, *(b for t, a in digits for b in (t, t * a))}))
        per_dim.append([f for f in dict.fromkeys(options) if len(f) > 1])
        stride *= size
    seen = set()
    for d, options in enumerate(per_dim):
        for factors in options:
            reading = tuple(factors if e == d else (n,) for e, n in enumerate(sizes))
            if reading not in seen:
                seen.add(reading)
                yield reading
    together = tuple(options[-1] if options else (n,) for options, n in zip(per_dim, sizes))
    if together not in seen and sum(len(f) for f in together) > len(sizes):
        yield together


def _digit(along: list[int], size: int) -> tuple[int, int] | None:
    """(place t, radix a) when the coordinates ``along`` (ascending) are every value of
    one mixed-radix digit of a dimension of ``size``: ``s, s + t, .., s + (a - 1) t``
    with ``t a`` dividing ``size`` and the digit's own value 0 at ``s``; else None."""
    a = len(along)
    if a < 2 or a == size:
        return None
    t = along[1] - along[0]
    if along != list(range(along[0], along[0] + a * t, t)) or size % (t * a) or (along[0] // t) % a:
        return None
    return t, a


def _factors(size: int, bounds: set[int]) -> tuple[int, ...]:
    """The mixed radix of a dimension of ``size`` whose digit places are ``bounds``,
    taken in ascending order while each divides the next."""
    chain = [1]
    for b in sorted(bounds):
        if b > chain[-1] and b % chain[-1] == 0 and size % b == 0:
            chain.append(b)
    return tuple(chain[i + 1] // chain[i] for i in range(len(chain) - 1))


def _steps(
    table: PeerTable,
    bases: list,
    sizes: tuple[int, ...],
    kinds: tuple[str, ...],
    ids: dict[int, tuple[int, ...]],
    collectives: NcclCollectives | None,
) -> Symmetry:
    """Per dimension the smallest step whose translation maps every rank's trace onto
    its image's (and keeps every NCCL collective)."""
    probe = Symmetry(sizes, tuple(k if k != "none" else "rotation" for k in kinds), sizes, ids)
    signatures = relative_signatures(table, bases, probe)
    uniform = len(set(signatures)) == 1  # every translation maps the traces onto each other
    steps = []
    folded: set = set()
    for d, (size, kind) in enumerate(zip(sizes, kinds)):
        if uniform and kind != "none" and collectives is None:
            steps.append(1)
            continue
        step = size
        if kind == "rotation":
            for k in range(1, size):
                if size % k or not (uniform or _invariant(signatures, probe, d, k)):
                    continue
                moved = (
                    collectives.moved_by(_translation(probe, d, k))
                    if collectives is not None
                    else frozenset()
                )
                if moved is not None:
                    step = k
                    folded |= moved
                    break
        elif kind == "xor":
            bits = [1 << b for b in range(size.bit_length() - 1)]
            if all(_invariant(signatures, probe, d, b) for b in bits):
                step = 1
        steps.append(step)
    return Symmetry(sizes, probe.kinds, tuple(steps), ids, frozenset(folded))


def _translation(sym: Symmetry, dim: int, step: int):
    """rank -> rank translated by ``step`` along ``dim``."""
    delta = [0] * len(sym.sizes)
    delta[dim] = step
    return lambda rank: sym.shift(rank, delta)


def _invariant(signatures: list[int], sym: Symmetry, dim: int, step: int) -> bool:
    """Does translating by ``step`` along ``dim`` map every rank's trace onto its image's?"""
    delta = [0] * len(sym.sizes)
    delta[dim] = step
    return all(signatures[r] == signatures[sym.shift(r, delta)] for r in range(len(signatures)))
