"""Which rank translations keep NCCL collectives the same (:mod:`.symmetry` with NCCL).

A translation ``T`` (per-dimension offsets, :class:`~.symmetry.Symmetry`)
can stand for NCCL's collectives only if, for every NCCL communicator ``C``
in the traces, rank ``T(r)`` of ``T(C)`` does what rank ``r`` of ``C`` does
with every peer translated. NCCL orders a communicator's ranks node by node
(:meth:`~.collectives.nccl.model.NcclModel.machine`); with ``M`` that order
for ``C`` and ``M'`` for ``T(C)``:

* ``T(M) == M'``: every rank keeps its position, so its messages (ring,
  tree, NVLS, all-to-all alike) are the translated messages;
* ``T(M)`` is ``M'`` rotated (by whole nodes when ``C`` spans several) and
  NCCL runs a ring for this collective: a ring's ranks all do the same
  relative to their neighbours, and each rail's ring (node after node from
  one local rank) maps onto the same rail's ring;
* otherwise (a tree's root or a chain's ends move, a node is split) the
  members play other parts after the translation. That is still exact where
  the part does not change when the collective ends: on a congestion-unaware
  network (``message_ns`` given), a collective whose messages, replayed with
  every member starting at once (:func:`~.collectives.nccl.replay.replay`),
  are all over before NCCL's predicted time ends on every member at that
  time. Such a collective is *folded*: the representatives run it at NCCL's
  time and the run checks afterwards, from the members' real start times,
  that it still ends there on each (:mod:`.floor_fold`). The small
  all-reduces of FP8 scaling factors over a pipeline stage (NCCL's tree) are
  the case in point. Any other collective refuses the translation.

NCCL's choice (algorithm, protocol, channels, its time) depends on the
communicator's shape only, which ``T`` keeps when it maps nodes onto nodes:
dimension 0 must be the node (or a node one GPU), as the model reads it.
Point-to-point costs depend on whether both ends share a node, which such a
``T`` keeps too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from astra_core.system.collectives.logical_topology import involved_members
from astra_core.system.collectives.nccl.replay import replay
from astra_core.system.collectives.nccl.tuning import Algo
from astra_core.system.comm_types import CONFIGURABLE, CommType
from astra_core.system.peer_offsets import relative_uneven
from astra_core.workload.chakra_types import COMM_COLL, NO_GROUP
from astra_core.workload.et_peers import GroupTemplate
from astra_core.workload.graph import RankGraph, distinct_shapes, peerless, shape_key

_CONFIGURABLE = {c.value for c in CONFIGURABLE}

__all__ = ["NcclCollectives", "Collective", "translation_class"]

#: One NCCL collective of a run: (comm type, members, bytes).
Collective = tuple[CommType, tuple[int, ...], int]
#: Messages a collective may have for the folding check to replay it (more: not folded).
REPLAY_MESSAGES_MAX = 200_000


def translation_class(members: tuple[int, ...], sizes: Sequence[int], nccl_order: Sequence[int]) -> tuple:
    """What a collective's replay depends on, up to a translation: each member's
    coordinates (dimension sizes ``sizes``, rotations) relative to the first of
    ``members``, and NCCL's order of them (``nccl_order``) as positions in ``members``.

    Two collectives of one comm type and size with the same class are translations of
    each other that keep NCCL's order: member ``i`` of one plays the part of member ``i``
    of the other, on the same node structure (dimension 0 is the node), and on a
    translation-invariant backend every message takes the same time. Their replays from
    starts given member by member are then one replay, its members relabelled."""
    strides, stride = [], 1
    for size in sizes:
        strides.append(stride)
        stride *= size
    first = [members[0] // s % n for s, n in zip(strides, sizes)]
    relative = tuple(tuple((m // s % n - f) % n for s, n, f in zip(strides, sizes, first)) for m in members)
    index = {m: i for i, m in enumerate(members)}
    return relative, tuple(index[m] for m in nccl_order)


def _pg(name: str | None) -> str | None:
    return name if name not in NO_GROUP else None


def _entry(node) -> tuple | None:
    """A collective node's (comm type, bytes, group name or None, involved dimensions
    where it names no group, uneven), None for one NCCL does not run."""
    if node.is_cpu_op or node.comm_type not in _CONFIGURABLE:
        return None
    pg = _pg(node.pg_name)
    return (
        CommType(node.comm_type),
        node.comm_size,
        pg,
        None if pg else node.involved_dim,
        relative_uneven(node),
    )


def _entries(nodes, of_node: dict[int, tuple | None]) -> set[tuple]:
    """The :func:`_entry` of each collective among ``nodes`` that NCCL runs."""
    entries = set()
    for node in nodes:
        if node.type == COMM_COLL:
            if id(node) not in of_node:
                of_node[id(node)] = _entry(node)
            entry = of_node[id(node)]
            if entry is not None:
                entries.add(entry)
    return entries


class NcclCollectives:
    """Every NCCL collective of a run, as ``(comm type, members, bytes)``.

    ``graphs``: per-rank graphs; ``sizes``: network dimension sizes;
    ``groups``: comm-group name -> members; ``nccl``: the run's
    :class:`~.collectives.nccl.model.NcclModel`; ``message_ns(src, dst, bytes)``:
    the congestion-unaware backend's message time, which lets collectives be folded
    (module docstring; None: never).
    """

    def __init__(
        self,
        graphs: Sequence[RankGraph],
        sizes: Sequence[int],
        groups: dict[str, tuple[int, ...]],
        nccl,
        message_ns: Callable[[int, int, int], float] | None = None,
    ):
        self.nccl = nccl
        self.message_ns = message_ns
        self._ends_in_time: dict[tuple, bool] = {}
        self._classes: dict[tuple[int, ...], tuple] = {}
        self._algos: dict[Collective, Algo] = {}
        self.sizes = tuple(sizes)
        npus = 1
        for n in sizes:
            npus *= n
        # per distinct graph: its collectives' (comm type, size, pg name or involved dims)
        kinds: dict[int, set] = {}
        of_node: dict[int, tuple | None] = {}  # nodes are shared between ranks' graphs
        renamed: dict[int, set] = {}  # per timing of group templates: its collectives' entries
        for graph in distinct_shapes(graphs):
            base = peerless(graph.nodes)
            if isinstance(base, GroupTemplate) and base.timing is not base:  # its first of kind's, renamed
                if id(base.timing) not in renamed:
                    renamed[id(base.timing)] = _entries(base.timing, of_node)
                names = base.names
                kinds[shape_key(graph.nodes)] = {
                    (e[0], e[1], names.get(e[2], e[2]), *e[3:]) if e[2] is not None else e
                    for e in renamed[id(base.timing)]
                }
                continue
            found = kinds[shape_key(graph.nodes)] = set()
            for node, key in graph.notable_nodes():
                if node.type != COMM_COLL:
                    continue
                if key in of_node:
                    entry = of_node[key]
                else:
                    entry = _entry(node)
                    if key is not None:
                        of_node[key] = entry
                if entry is not None:
                    found.add(entry)
        self.collectives: set[Collective] = set()
        whole = tuple(range(npus))
        for rank, graph in enumerate(graphs):
            for comm_type, size, pg, involved, uneven in kinds[shape_key(graph.nodes)]:
                if uneven:
                    # grouped sends whose bytes rank symmetry has compared member offset by
                    # member offset: a translation moves them onto the translated rank's own,
                    # whatever NCCL's order, and their time depends on the node structure alone
                    continue
                if pg is not None:
                    key = pg.strip()
                    members = tuple(sorted(groups.get(str(int(key)) if key.isdigit() else key, whole)))
                elif involved is not None:
                    members = tuple(involved_members(rank, self.sizes, involved))
                else:
                    members = whole
                self.collectives.add((comm_type, members, size))

    def nodes_preserved(self) -> bool:
        """Does every translation map NCCL's nodes onto nodes (dimension 0 is a node)?"""
        return self.nccl.gpus_per_node in (1, self.sizes[0])

    def preserved_by(self, shift) -> bool:
        """Does the translation ``shift`` (rank -> rank) keep every NCCL collective, or
        move only collectives that can be folded (module docstring)?"""
        return self.moved_by(shift) is not None

    def moved_by(self, shift) -> frozenset[Collective] | None:
        """The collectives the translation ``shift`` (rank -> rank) keeps only by folding
        them (module docstring); None if it breaks one that cannot be folded."""
        L = self.nccl.gpus_per_node
        by_members: dict[tuple[int, ...], list[tuple[CommType, int]]] = {}
        for comm_type, members, size in self.collectives:  # a group's collectives move alike
            by_members.setdefault(members, []).append((comm_type, size))
        folded: list[Collective] = []
        for members, entries in by_members.items():
            order = self.nccl.machine(members)[0].members
            moved = [shift(m) for m in order]
            image = tuple(sorted(moved, key=lambda m: (m // L, m)))
            if tuple(moved) == image:
                continue
            folded.extend(
                (comm_type, members, size)
                for comm_type, size in entries
                if not self._turns_a_ring(comm_type, members, size, moved, image)
            )
        # one collective that does not end in time settles it: the one of most messages
        # first (one of more than REPLAY_MESSAGES_MAX settles it unreplayed), in a fixed order
        folded.sort(key=lambda c: (-self._messages_about(c), -c[2] * len(c[1]), c[0].value, c[1]))
        if all(self.ends_at_nccl_time(c) for c in folded):
            return frozenset(folded)
        return None

    def _turns_a_ring(self, comm_type: CommType, members, size: int, moved: list[int], image: tuple) -> bool:
        """Is ``moved`` NCCL's order ``image`` turned, by whole nodes, on a ring?"""
        if comm_type is CommType.ALL_TO_ALL:
            return False
        algo = self._algos.get((comm_type, members, size))
        if algo is None:  # asked again for each translation tried
            algo = self._algos[(comm_type, members, size)] = self.nccl.choose(comm_type, members, size)[0]
        if algo != Algo.RING:
            return False
        L = self.nccl.gpus_per_node
        nodes = len({m // L for m in members})
        start = image.index(moved[0])
        return not (nodes > 1 and start % (len(members) // nodes)) and tuple(
            image[start:] + image[:start]
        ) == tuple(moved)

    def ends_at_nccl_time(self, collective: Collective) -> bool:
        """With every member starting at once, are all the collective's messages over by
        NCCL's predicted time (module docstring)? False without ``message_ns``, and for
        a collective of more than :data:`REPLAY_MESSAGES_MAX` messages."""
        comm_type, members, size = collective
        found = self._classes.get(members)
        if found is None:  # a group's class is asked again for each of its collectives and translations
            order = self.nccl.machine(members)[0].members
            found = self._classes[members] = translation_class(members, self.sizes, order)
        key = (comm_type, size, found)  # one per translation
        known = self._ends_in_time.get(key)
        if known is None:
            known = self._ends_in_time[key] = self._replays_in_time(collective)
        return known

    def _messages_about(self, collective: Collective) -> int:
        """About how many messages ``collective`` sends: its first member's count times
        its members (exact where every member sends alike, as on a ring)."""
        comm_type, members, size = collective
        schedule, _ = self.nccl.schedule(comm_type, members[0], members, size)
        return len(members) * sum(len(lane.sends) for lane in schedule.lanes)

    def _replays_in_time(self, collective: Collective) -> bool:
        if self.message_ns is None:
            return False
        comm_type, members, size = collective
        parts, messages = {}, 0
        for m in members:  # no more schedules than it takes to pass REPLAY_MESSAGES_MAX
            parts[m] = self.nccl.frozen_schedule(comm_type, m, members, size)
            messages += sum(len(sends) for sends, _ in parts[m][0][0])
            if messages > REPLAY_MESSAGES_MAX:
                return False
        try:
            ends = replay({m: s for m, (s, _) in parts.items()}, dict.fromkeys(members, 0.0), self.message_ns)
        except ValueError:
            return False
        return all(ends.ends_ns[m] <= floor_ns for m, (_, floor_ns) in parts.items())
