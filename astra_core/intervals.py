"""Arithmetic on time intervals ``(start_ns, end_ns)``: merging, lengths, overlaps.

The system layer sums each rank's communication in flight with these when a
run ends; :mod:`astra_core.report.collectives` sums phase times with them (the
breakdown and the folded collectives' traffic use the numpy sets of
:mod:`astra_core.interval_sets`).
Interval lists are sorted and disjoint unless a function says otherwise.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence

#: ``(start_ns, end_ns)``, half-open.
Interval = tuple[float, float]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same instants (empty ones dropped)."""
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1][1] = end
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def total(intervals: Sequence[Interval]) -> float:
    """Summed length of disjoint intervals (ns)."""
    return sum(e - s for s, e in intervals)


def overlap(a: Sequence[Interval], b: Sequence[Interval]) -> float:
    """Length of the intersection of two sorted disjoint interval lists (ns)."""
    i = j = 0
    length = 0.0
    while i < len(a) and j < len(b):
        start = max(a[i][0], b[j][0])
        end = min(a[i][1], b[j][1])
        if end > start:
            length += end - start
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return length


def subtract(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """The instants of ``a`` not in ``b`` (both sorted and disjoint), sorted and disjoint."""
    out: list[Interval] = []
    j = 0
    for start, end in a:
        while j < len(b) and b[j][1] <= start:
            j += 1
        k = j
        cursor = start
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cursor:
                out.append((cursor, b[k][0]))
            cursor = max(cursor, b[k][1])
            k += 1
        if cursor < end:
            out.append((cursor, end))
    return out


def flat_covered(flat: Sequence[float], start: float, end: float) -> float:
    """How much of ``[start, end)`` the intervals ``flat`` (``s0, e0, s1, e1, ...``, sorted
    and disjoint, as :attr:`RankTimeline.in_flight`) cover (ns). Two binary searches and
    two slice sums: cheap on the hundreds of thousands of intervals of a large run."""
    if end <= start:
        return 0.0
    i = bisect_right(flat, start)
    j = bisect_left(flat, end)
    points = list(flat[i:j])
    if i % 2:  # start lies inside an interval
        points.insert(0, start)
    if j % 2:  # so does end
        points.append(end)
    return sum(points[1::2]) - sum(points[0::2])


def flat_uncovered(flat: Sequence[float], intervals: Iterable[Interval]) -> list[Interval]:
    """The parts of ``intervals`` (any order, may overlap) outside the intervals ``flat``
    (as :func:`flat_covered`'s), sorted and disjoint: :func:`subtract` by binary search,
    for a few intervals against a long log."""
    out: list[Interval] = []
    for start, end in union(intervals):
        i = bisect_right(flat, start)
        if i % 2:  # inside one of flat's intervals
            start = max(start, flat[i])
            i += 1
        while start < end:
            if i >= len(flat) or flat[i] >= end:
                out.append((start, end))
                break
            if flat[i] > start:
                out.append((start, flat[i]))
            start = max(start, flat[i + 1])
            i += 2
    return out


def flight_pairs(flat: Sequence[float]) -> list[Interval]:
    """``[s0, e0, s1, e1, ...]`` (a :attr:`RankTimeline.in_flight`) as ``[(s0, e0), (s1, e1), ...]``."""
    return list(zip(flat[0::2], flat[1::2]))
