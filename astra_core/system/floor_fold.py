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
from collections import defaultdict
from collections.abc import Callable, Sequence
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
    and per rank the intervals (ns) in which one of its messages was in flight."""

    collectives: int = 0
    messages: int = 0
    message_bytes: int = 0
    in_flight: dict[int, list[Interval]] = field(default_factory=lambda: defaultdict(list))


class _Images:
    """Where each rank of a class sees its representative's collectives: per
    representative, the ranks it stands for and, computed once per communicator
    or tag for the whole class, the members (ascending) and chunk tags translated
    by each rank's translation (:meth:`~.symmetry.Symmetry.from_representative`)."""

    def __init__(self, symmetry):
        self.symmetry = symmetry
        self.ranks = symmetry.classes()
        self._deltas = {rep: self._translations(ranks) for rep, ranks in self.ranks.items()}
        self._members: dict[tuple[int, tuple[int, ...]], list[int]] = {}
        # members -> a number: an instance keys on it, not on a tuple rehashed each time
        self._numbers: dict[tuple[int, ...], int] = {}
        self.numbered: list[tuple[int, ...]] = []  # number -> members
        self._groups: dict[tuple[int, int], list[int]] = {}  # (rep, group) -> moved groups' tag bases

    def _translations(self, ranks: list[int]) -> np.ndarray:
        """Each rank's translation from its representative: shape (ranks, dimensions)."""
        deltas = [self.symmetry.from_representative(m)[1] for m in ranks]
        return np.array(deltas, dtype=np.int64).reshape(len(ranks), -1)

    def members(self, rep: int, members: tuple[int, ...]) -> list[int]:
        """``members`` as each rank of ``rep``'s class sees them, each as its number
        (:attr:`numbered` gives the members back)."""
        key = (rep, members)
        moved = self._members.get(key)
        if moved is None:
            rows = self.symmetry.translated(members, self._deltas[rep]).tolist()
            moved = self._members[key] = [self._number(tuple(row)) for row in rows]
        return moved

    def _number(self, members: tuple[int, ...]) -> int:
        number = self._numbers.get(members)
        if number is None:
            number = self._numbers[members] = len(self.numbered)
            self.numbered.append(members)
        return number

    def tags(self, rep: int, tag: int) -> list[int]:
        """Chunk tag ``tag`` as each rank of ``rep``'s class sees it (the tag's
        communicator group moved, :meth:`~.symmetry.Symmetry.shift_tag`)."""
        sym = self.symmetry
        group, count = divmod(tag, sym.tag_base)
        key = (rep, group)
        groups = self._groups.get(key)
        if groups is None:
            moved = sym.moved_groups(group, self._deltas[rep])
            groups = self._groups[key] = [g * sym.tag_base for g in moved]
        return [moved + count for moved in groups]


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
        not the full run's (one line)."""
        instances: dict[tuple, dict[int, float]] = defaultdict(dict)
        images = _Images(self.symmetry)
        for rep, comm_type, members, size, stream_id, start in self.starts:
            ranks = images.ranks[rep]
            for m, number, tag in zip(ranks, images.members(rep, members), images.tags(rep, stream_id)):
                instances[(comm_type, number, size, tag)][m] = start
        traffic = FoldedTraffic(collectives=len(instances))
        for (comm_type, number, size, _), starts in instances.items():
            members = images.numbered[number]
            missing = [m for m in members if m not in starts]
            if missing:
                return (
                    f"rank {missing[0]} never starts a folded NCCL {comm_type.label} that "
                    f"rank {next(iter(starts))} started"
                )
            first = min(starts.values())
            found, floor_ns = self._replay(
                comm_type, members, size, tuple(starts[m] - first for m in members)
            )
            for m in members:
                if found.ends_ns[m] + first > starts[m] + floor_ns:
                    return (
                        f"a folded NCCL {comm_type.label} of {size:,} B on {len(members)} ranks "
                        f"ends on rank {m} after NCCL's predicted time: its members start "
                        f"{max(starts.values()) - first:,.0f} ns apart"
                    )
            traffic.messages += found.messages
            traffic.message_bytes += found.message_bytes
            # merged per member once per pattern: every consumer takes the union of a rank's
            # intervals, and shifting touching intervals by one ``first`` keeps them touching
            for m, spans in found.flights.items():
                traffic.in_flight[m].extend((start + first, end + first) for start, end in spans)
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


#: Folded intervals of one rank past which its in-flight arithmetic runs on numpy sets
#: (:mod:`astra_core.interval_sets`: a few numpy calls whatever the length) rather than
#: on lists (:mod:`astra_core.intervals`: cheaper for a few intervals, as most ranks have).
NUMPY_FROM = 1024


def with_traffic(result, log: Sequence[float], comm: list[Interval], extra: list[Interval]):
    """``result`` (a rank's :class:`~astra_core.results.RankResult`, its in-flight
    ``log`` as flat start, end pairs, ``comm`` its communication nodes' merged
    intervals) with the folded messages ``extra`` in flight too."""
    finish = result.finish_ns
    if len(extra) < NUMPY_FROM:
        added = [(s, min(e, finish)) for s, e in flat_uncovered(log, extra) if s < finish]
        added_ns, waited_ns = total(added), overlap(comm, added)
    else:
        flying = sets.clip(sets.minus(sets.from_pairs(extra), sets.from_flat(log)), -math.inf, finish)
        added_ns, waited_ns = sets.length(flying), sets.length(sets.intersect(sets.from_pairs(comm), flying))
    return replace(result, comm_ns=result.comm_ns + added_ns, comm_wait_ns=result.comm_wait_ns - waited_ns)


def merged_log(log: Sequence[float], extra: list[Interval]) -> list[float]:
    """A flat in-flight log (start, end, ...) with the intervals ``extra`` added."""
    if len(extra) < NUMPY_FROM:
        return [t for span in union(flight_pairs(log) + extra) for t in span]
    return sets.from_flat(log, extra).tolist()
