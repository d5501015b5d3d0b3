"""Folded NCCL collectives: rank symmetry over collectives whose members play different parts.

A translation that moves a tree's root (or a chain's ends) onto another
member cannot map one member's messages onto another's. It can still map
their timelines onto each other where the collective ends at the same point
on every member whatever its part: when all its messages are over before
NCCL's predicted time has passed since the member started, the member ends
at that time (:mod:`.collectives.nccl.phase`). :mod:`.nccl_symmetry` admits
such translations for collectives that do so with every member starting at
once; the representatives then run those collectives *folded*
(:class:`~.collectives.nccl.phase.FoldedNcclPhase`: NCCL's time, no
messages), and :class:`FloorFold` records when each started.

After the run, :meth:`FloorFold.settle` gives every member of every folded
collective its start (its representative's, translated, as the classes
promise), replays the collective's messages from those starts on the
backend's message times (:func:`~.collectives.nccl.replay.replay`: exact on a
congestion-unaware network) and checks that each member's messages are over
by its start plus NCCL's time. If so the folded run is what the full run
gives, and the replayed messages are added to each rank's message counts and
in-flight times. If not (members that started far apart, or one that never
did), the run is done again without symmetry. By induction over time, the
first collective that would end later than NCCL's time started at the times
the full run has, so the check finds it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from astra_core import interval_sets as sets
from astra_core.intervals import Interval, flat_uncovered, flight_pairs, overlap, total, union
from astra_core.system.collectives.nccl.phase import FoldedNcclPhase
from astra_core.system.collectives.nccl.replay import Replay, replay
from astra_core.system.nccl_symmetry import translation_class


@dataclass
class FoldedTraffic:
    """The messages the folded collectives would have sent: ``collectives`` (one
    per communicator and call), ``messages`` and ``message_bytes`` over all ranks,
    and per rank the intervals (ns) in which one of its messages was in flight: an
    array of shape (intervals, 2), start and end, in no order, overlapping."""

    collectives: int = 0
    messages: int = 0
    message_bytes: int = 0
    in_flight: dict[int, np.ndarray] = field(default_factory=dict)


class _Images:
    """Where each rank of a class sees its representative's collectives: per
    representative, the ranks it stands for and, computed once per communicator
    or tag for the whole class, the members (ascending) and chunk tags translated
    by each rank's translation (:meth:`~.symmetry.Symmetry.from_representative`)."""

    def __init__(self, symmetry):
        self.symmetry = symmetry
        classes = symmetry.classes()
        self.ranks = {rep: np.asarray(ranks, dtype=np.int64) for rep, ranks in classes.items()}
        self._deltas = {rep: self._translations(ranks) for rep, ranks in classes.items()}
        self._members: dict[tuple[int, tuple[int, ...]], np.ndarray] = {}
        # members -> a number: an instance keys on it, not on a tuple rehashed each time
        self._numbers: dict[tuple[int, ...], int] = {}
        self.numbered: list[tuple[int, ...]] = []  # number -> members
        self._groups: dict[tuple[int, int], np.ndarray] = {}  # (rep, group) -> moved groups' tag bases

    def _translations(self, ranks: list[int]) -> np.ndarray:
        """Each rank's translation from its representative: shape (ranks, dimensions)."""
        deltas = [self.symmetry.from_representative(m)[1] for m in ranks]
        return np.array(deltas, dtype=np.int64).reshape(len(ranks), -1)

    def members(self, rep: int, members: tuple[int, ...]) -> np.ndarray:
        """``members`` as each rank of ``rep``'s class sees them, each as its number
        (:attr:`numbered` gives the members back): shape (ranks,)."""
        key = (rep, members)
        moved = self._members.get(key)
        if moved is None:
            rows = self.symmetry.translated(members, self._deltas[rep]).tolist()
            moved = self._members[key] = np.asarray(
                [self._number(tuple(row)) for row in rows], dtype=np.int64
            )
        return moved

    def _number(self, members: tuple[int, ...]) -> int:
        number = self._numbers.get(members)
        if number is None:
            number = self._numbers[members] = len(self.numbered)
            self.numbered.append(members)
        return number

    def tags(self, rep: int, tag: int) -> np.ndarray:
        """Chunk tag ``tag`` as each rank of ``rep``'s class sees it (the tag's
        communicator group moved, :meth:`~.symmetry.Symmetry.shift_tag`): shape (ranks,)."""
        sym = self.symmetry
        group, count = divmod(tag, sym.tag_base)
        key = (rep, group)
        bases = self._groups.get(key)
        if bases is None:
            moved = sym.moved_groups(group, self._deltas[rep])
            bases = self._groups[key] = np.asarray(moved, dtype=np.int64) * sym.tag_base
        return bases + count


class FloorFold:
    """Start times of the folded collectives of a rank-symmetric run, and the check
    (module docstring). ``symmetry``: the run's
    :class:`~.symmetry.Symmetry` (its ``folded`` collectives); ``nccl``: the NCCL
    model; ``message_ns(src, dst, bytes)``: the backend's message time."""

    def __init__(self, symmetry, nccl, message_ns: Callable[[int, int, int], float]):
        self.symmetry = symmetry
        self.nccl = nccl
        self.message_ns = message_ns
        # (representative, comm type, members, bytes, stream id, start ns)
        self.starts: list[tuple] = []
        self._replays: dict[tuple, tuple[Replay, int, tuple[int, ...]]] = {}
        self._patterns: dict[tuple[int, ...], tuple] = {}  # members -> their translation class

    def started(self, phase: FoldedNcclPhase) -> None:
        """A representative's folded phase starts now."""
        stream = phase.stream
        self.starts.append(
            (
                phase.rank,
                phase.comm_type,
                phase.members,
                phase.data_size,
                stream.stream_id,
                stream.phase_start_ns,
            )
        )

    def settle(self) -> FoldedTraffic | str:
        """The folded collectives' messages over every rank, or why the folded run is
        not the full run's (one line). The collectives that replay alike (one kind, one
        set of members, their starts alike) are checked and their messages placed by a
        few array operations for all of them (:class:`_Starts`)."""
        starts = _Starts.of(self.starts, _Images(self.symmetry))
        why = starts.unmatched()
        if why:
            return why
        traffic = FoldedTraffic(collectives=starts.count)
        # the first collective ending late: (its first start's place, collective, member)
        late: tuple[int, int, int] | None = None
        ranks, spans = [], []
        for group, (comm_type, members, size, offsets) in starts.replays():
            found, floor_ns = self._replay(comm_type, members, size, offsets)
            first = starts.first[group]
            at = starts.at[group][:, None] + np.arange(len(members))  # (collectives, members)
            ends = np.asarray([found.ends_ns[m] for m in members])
            over = ends[None, :] + first[:, None] > starts.times[at] + floor_ns
            rows = np.flatnonzero(over.any(axis=1))
            if len(rows):
                row = int(rows[np.argmin(starts.order_of[group[rows]])])
                here = (int(starts.order_of[group[row]]), int(group[row]), int(np.argmax(over[row])))
                late = here if late is None else min(late, here)
            traffic.messages += found.messages * len(group)
            traffic.message_bytes += found.message_bytes * len(group)
            for j, m in enumerate(members):
                flights = found.flights.get(m)
                if flights:
                    pairs = np.asarray(flights, dtype=np.float64)  # (intervals, 2)
                    spans.append((first[:, None, None] + pairs[None]).reshape(-1, 2))
                    ranks.append(np.repeat(starts.ranks[at[:, j]], len(pairs)))
        if late is not None:
            _, c, j = late
            times = starts.times[starts.entries(c)]
            comm_type, size = starts.kind(c)
            members = starts.members(c)
            return (
                f"a folded NCCL {comm_type.label} of {size:,} B on {len(members)} ranks "
                f"ends on rank {members[j]} after NCCL's predicted time: its members start "
                f"{times.max() - times.min():,.0f} ns apart"
            )
        traffic.in_flight = _by_rank(ranks, spans)
        return traffic

    def _replay(
        self, comm_type, members: tuple[int, ...], size: int, offsets: tuple[float, ...]
    ) -> tuple[Replay, int]:
        """The collective replayed from starts ``offsets`` (ns after the first), and
        NCCL's time; one replay per pattern of starts and class of translations
        (:func:`~.nccl_symmetry.translation_class`), its members relabelled."""
        pattern = self._patterns.get(members)
        if pattern is None:
            sym = self.symmetry
            exact = "xor" in sym.kinds  # a class of rotations only
            pattern = self._patterns[members] = (
                members
                if exact
                else translation_class(members, sym.sizes, self.nccl.machine(members)[0].members)
            )
        key = (comm_type, size, offsets, pattern)
        found = self._replays.get(key)
        if found is None:
            parts = {m: self.nccl.frozen_schedule(comm_type, m, members, size) for m in members}
            floor_ns = parts[members[0]][1]
            schedules = {m: schedule for m, (schedule, _) in parts.items()}
            replayed = replay(schedules, dict(zip(members, offsets)), self.message_ns)
            found = self._replays[key] = (replayed, floor_ns, members)
        replayed, floor_ns, played = found
        return (replayed if played == members else replayed.relabelled(dict(zip(played, members)))), floor_ns


def _by_rank(ranks: list[np.ndarray], spans: list[np.ndarray]) -> dict[int, np.ndarray]:
    """Intervals ``spans`` (arrays of shape (n, 2)) of the ranks ``ranks`` (arrays of
    shape (n,)), gathered per rank: rank -> shape (intervals, 2), in no order."""
    if not ranks:
        return {}
    rank = np.concatenate(ranks)
    pairs = np.concatenate(spans)
    order = np.argsort(rank, kind="stable")
    rank, pairs = rank[order], pairs[order]
    cuts = np.flatnonzero(np.diff(rank)) + 1
    heads = np.concatenate(([0], cuts))
    return {int(rank[h]): part for h, part in zip(heads, np.split(pairs, cuts))}


class _Starts:
    """Every member's start of every folded collective (one entry per start of a
    representative and rank of its class), sorted by collective and, within one, by rank.
    A collective is (comm type, bytes, members, chunk tag) as its members see it; there
    are ``count``. Per entry: ``ranks``, ``times`` (ns), ``key`` (the collective's kind,
    members' number in ``images`` and tag) and ``entry_order`` (its place in
    :attr:`FloorFold.starts`, class by class). Per collective: ``at``, its first entry;
    ``sizes``, its entries; ``first``, its members' earliest start (ns); ``order_of``, its
    first entry's place."""

    def __init__(self, images: _Images, kinds: list[tuple], key: np.ndarray, ranks, times):
        self.images = images
        self.kinds = kinds  # kind -> (comm type, bytes)
        sort = np.lexsort((ranks, key[:, 2], key[:, 1], key[:, 0]))
        self.key, self.ranks, self.times, self.entry_order = key[sort], ranks[sort], times[sort], sort
        new = np.ones(len(sort), dtype=bool)
        new[1:] = (self.key[1:] != self.key[:-1]).any(axis=1)
        self.at = np.flatnonzero(new)
        self.count = len(self.at)
        self.sizes = np.diff(np.append(self.at, len(sort)))
        some = self.count > 0
        self.first = np.minimum.reduceat(self.times, self.at) if some else self.times
        self.order_of = np.minimum.reduceat(sort, self.at) if some else sort

    @classmethod
    def of(cls, starts: list[tuple], images: _Images) -> _Starts:
        """From the representatives' starts (rep, comm type, members, bytes, stream id,
        start ns), each as every rank of its class sees it."""
        kinds: dict[tuple, int] = {}
        kind, start_ns, count = [], [], []
        numbers, tags, ranks = (
            [np.zeros(0, dtype=np.int64)],
            [np.zeros(0, dtype=np.int64)],
            [np.zeros(0, dtype=np.int64)],
        )
        for rep, comm_type, members, size, stream_id, start in starts:
            mine = images.ranks[rep]
            kind.append(kinds.setdefault((comm_type, size), len(kinds)))
            start_ns.append(start)
            count.append(len(mine))
            ranks.append(mine)
            numbers.append(images.members(rep, members))
            tags.append(images.tags(rep, stream_id))
        key = np.column_stack(
            (
                np.repeat(np.asarray(kind, dtype=np.int64), count),
                np.concatenate(numbers),
                np.concatenate(tags),
            )
        )
        times = np.repeat(np.asarray(start_ns, dtype=np.float64), count)
        return cls(images, list(kinds), key.reshape(-1, 3), np.concatenate(ranks), times)

    def members(self, c: int) -> tuple[int, ...]:
        """Collective ``c``'s members (ascending)."""
        return self.images.numbered[int(self.key[self.at[c], 1])]

    def kind(self, c: int) -> tuple:
        """Collective ``c``'s (comm type, bytes)."""
        return self.kinds[int(self.key[self.at[c], 0])]

    def entries(self, c: int) -> slice:
        """Collective ``c``'s entries."""
        return slice(int(self.at[c]), int(self.at[c] + self.sizes[c]))

    def unmatched(self) -> str:
        """Why some collective's starts are not its members' once each (one line: the
        first such collective in the order of :attr:`FloorFold.starts`), or ""."""
        numbered = self.images.numbered
        lengths = np.asarray([len(m) for m in numbered], dtype=np.int64)
        numbers = self.key[self.at, 1]
        odd = self.sizes != lengths[numbers]
        if not odd.any():
            # each entry's expected rank: its place in its collective's members
            flat = np.asarray([m for members in numbered for m in members], dtype=np.int64)
            offset = np.concatenate(([0], np.cumsum(lengths)[:-1]))
            place = np.arange(len(self.ranks)) - np.repeat(self.at, self.sizes)
            expected = flat[np.repeat(offset[numbers], self.sizes) + place]
            if np.array_equal(expected, self.ranks):
                return ""
            odd = np.logical_or.reduceat(expected != self.ranks, self.at)
        chosen = np.flatnonzero(odd)
        c = int(chosen[np.argmin(self.order_of[chosen])])
        here = self.entries(c)
        mine = self.ranks[here]
        first = int(mine[np.argmin(self.entry_order[here])])
        started = set(mine.tolist())
        missing = [m for m in self.members(c) if m not in started]
        label = self.kind(c)[0].label
        if missing:
            return f"rank {missing[0]} never starts a folded NCCL {label} that rank {first} started"
        return f"rank {first} starts a folded NCCL {label} that is not its members' once each"

    def replays(self) -> Iterator[tuple[np.ndarray, tuple]]:
        """(collectives, (comm type, members, bytes, offsets)) per group of collectives of
        one kind and members whose starts lie alike (``offsets``: ns after the first, in
        members' order), which :meth:`FloorFold._replay` replays once."""
        by_size: dict[int, list[int]] = {}
        for c, n in enumerate(self.sizes.tolist()):
            by_size.setdefault(n, []).append(c)
        for n, collectives in by_size.items():
            chosen = np.asarray(collectives, dtype=np.int64)
            offsets = self.times[self.at[chosen][:, None] + np.arange(n)] - self.first[chosen][:, None]
            rows = np.column_stack((self.key[self.at[chosen], :2].astype(np.float64), offsets))
            _, heads, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
            for u, head in enumerate(heads.tolist()):
                c = int(chosen[head])
                comm_type, size = self.kind(c)
                yield chosen[inverse == u], (comm_type, self.members(c), size, tuple(offsets[head].tolist()))


#: Folded intervals of one rank past which its in-flight arithmetic runs on numpy sets
#: (:mod:`astra_core.interval_sets`: a few numpy calls whatever the length) rather than
#: on lists (:mod:`astra_core.intervals`: cheaper for a few intervals, as most ranks have).
NUMPY_FROM = 1024

#: No intervals: the folded traffic of a rank that has none, shape (0, 2).
NO_INTERVALS = np.zeros((0, 2), dtype=np.float64)


def with_traffic(result, log: Sequence[float], comm: list[Interval], extra: np.ndarray):
    """``result`` (a rank's :class:`~astra_core.results.RankResult`, its in-flight
    ``log`` as flat start, end pairs, ``comm`` its communication nodes' merged
    intervals) with the folded messages ``extra`` (shape (intervals, 2)) in flight too."""
    finish = result.finish_ns
    if len(extra) < NUMPY_FROM:
        pairs = [(s, e) for s, e in extra.tolist()]
        added = [(s, min(e, finish)) for s, e in flat_uncovered(log, pairs) if s < finish]
        added_ns, waited_ns = total(added), overlap(comm, added)
    else:
        flying = sets.clip(sets.minus(sets.from_pairs(extra), sets.from_flat(log)), -math.inf, finish)
        added_ns, waited_ns = sets.length(flying), sets.length(sets.intersect(sets.from_pairs(comm), flying))
    return replace(result, comm_ns=result.comm_ns + added_ns, comm_wait_ns=result.comm_wait_ns - waited_ns)


def merged_log(log: Sequence[float], extra: np.ndarray) -> list[float]:
    """A flat in-flight log (start, end, ...) with the intervals ``extra`` (shape
    (intervals, 2)) added."""
    if len(extra) < NUMPY_FROM:
        return [t for span in union(flight_pairs(log) + [(s, e) for s, e in extra.tolist()]) for t in span]
    return sets.from_flat(log, extra).tolist()
