"""Sets of time instants as flat numpy arrays, for the per-rank breakdown of a large run and
the in-flight time that rank symmetry's folded collectives add to every rank.

A set is ``[s0, e0, s1, e1, ...]`` (ns, float64): half-open intervals, sorted,
non-empty and apart (touching intervals merged), so the array is strictly
increasing and an instant ``x`` is in the set when the count of boundaries
``<= x`` is odd. :attr:`~astra_core.results.RankTimeline.in_flight` has this
form already. Every function here costs a few numpy calls per set, whatever
its length: a rank of a full-rank LLM run has tens of thousands of in-flight
intervals, which the list arithmetic of :mod:`astra_core.intervals` walks one
at a time in Python (about 0.1 s a rank).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from astra_core.intervals import Interval

FlatSet = npt.NDArray[np.float64]


def empty() -> FlatSet:
    """The empty set."""
    return np.empty(0, dtype=np.float64)


def merged(starts: npt.ArrayLike, ends: npt.ArrayLike) -> FlatSet:
    """The set covered by intervals ``[starts[i], ends[i])`` in any order, overlapping or
    not (empty ones dropped), as :func:`astra_core.intervals.union` merges them."""
    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    keep = e > s
    s, e = s[keep], e[keep]
    if not s.size:
        return empty()
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    # an interval opens a new piece when it starts after everything before it ended
    opens = np.empty(s.size, dtype=bool)
    opens[0] = True
    opens[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(opens)
    last = np.append(first[1:] - 1, s.size - 1)
    return _interleave(s[first], reach[last])


def from_pairs(pairs: Sequence[Interval] | np.ndarray) -> FlatSet:
    """:func:`merged` of ``(start, end)`` pairs (or an array of shape (n, 2))."""
    if not len(pairs):
        return empty()
    array = np.asarray(pairs, dtype=np.float64).reshape(-1, 2)
    return merged(array[:, 0], array[:, 1])


def from_flat(flat: Sequence[float] | npt.ArrayLike, extra: Sequence[Interval] | np.ndarray = ()) -> FlatSet:
    """The set of a flat ``start, end, ...`` sequence (e.g. an ``array('d')``, read without
    a copy where it allows) together with the ``extra`` pairs (or an array of shape (n, 2))."""
    array = np.asarray(flat, dtype=np.float64)
    more = np.asarray(extra, dtype=np.float64).reshape(-1, 2)
    if not len(more) and array.size % 2 == 0 and bool(np.all(array[1:] > array[:-1])):
        return array  # already a set, as a rank's in-flight log is: no sort
    if len(more):
        return merged(np.concatenate((array[0::2], more[:, 0])), np.concatenate((array[1::2], more[:, 1])))
    return merged(array[0::2], array[1::2])


def clip(flat: FlatSet, low: float, high: float) -> FlatSet:
    """The instants of ``flat`` in ``[low, high)``."""
    s, e = flat[0::2], flat[1::2]
    keep = (e > low) & (s < high)
    return _interleave(np.maximum(s[keep], low), np.minimum(e[keep], high))


def union(*sets: FlatSet) -> FlatSet:
    """The instants in any of ``sets``."""
    return merged(np.concatenate([f[0::2] for f in sets]), np.concatenate([f[1::2] for f in sets]))


def minus(a: FlatSet, *sets: FlatSet) -> FlatSet:
    """The instants of ``a`` in none of ``sets``."""
    return _select(a, union(*sets) if sets else empty(), lambda in_a, in_b: in_a & ~in_b)


def intersect(a: FlatSet, b: FlatSet) -> FlatSet:
    """The instants in both ``a`` and ``b``."""
    return _select(a, b, lambda in_a, in_b: in_a & in_b)


def length(flat: FlatSet) -> float:
    """Summed length of the set's intervals (ns)."""
    return float(np.sum(flat[1::2] - flat[0::2]))


class Measure:
    """How much of a (long) set lies before an instant, for measuring its overlap with
    short sets in time logarithmic in its length: one prefix sum, then a binary search
    per boundary of the short set."""

    def __init__(self, flat: FlatSet):
        self.flat = flat
        self.total = length(flat)
        self._before = np.concatenate(([0.0], np.cumsum(flat[1::2] - flat[0::2])))

    def before(self, instants: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """The set's length before each of ``instants`` (ns)."""
        if not self.flat.size:  # nothing in flight: a rank that only computes
            return np.zeros(len(instants))
        i = np.searchsorted(self.flat, instants, side="right")
        inside = (i & 1).astype(bool)  # an odd count of boundaries up to it: inside an interval
        opened = self.flat[np.maximum(i - 1, 0)]
        return self._before[i // 2] + np.where(inside, instants - opened, 0.0)

    def within(self, other: FlatSet) -> float:
        """The length of the set's intersection with ``other`` (ns)."""
        if not other.size:
            return 0.0
        return float(np.sum(self.before(other[1::2]) - self.before(other[0::2])))


def coarsen(flat: FlatSet, gap_ns: float) -> FlatSet:
    """``flat`` with every gap shorter than ``gap_ns`` closed: what a plot or a trace
    viewer shows at a resolution of ``gap_ns`` (ns)."""
    s, e = flat[0::2], flat[1::2]
    if not s.size:
        return empty()
    apart = s[1:] - e[:-1] >= gap_ns
    return _interleave(s[np.append(True, apart)], e[np.append(apart, True)])


def pairs(flat: FlatSet) -> list[Interval]:
    """The set as ``(start, end)`` tuples of Python floats."""
    return list(zip(flat[0::2].tolist(), flat[1::2].tolist()))


def _interleave(starts: npt.NDArray[np.float64], ends: npt.NDArray[np.float64]) -> FlatSet:
    flat = np.empty(2 * starts.size, dtype=np.float64)
    flat[0::2] = starts
    flat[1::2] = ends
    return flat


def _select(a: FlatSet, b: FlatSet, keep) -> FlatSet:
    """The set of the instants where ``keep(in a, in b)`` holds: each elementary segment
    between consecutive boundaries of ``a`` and ``b`` is in or out of each set as a whole."""
    points = np.union1d(a, b)
    if points.size < 2:
        return empty()
    lows = points[:-1]
    in_a = (np.searchsorted(a, lows, side="right") & 1).astype(bool)
    in_b = (np.searchsorted(b, lows, side="right") & 1).astype(bool)
    runs = np.diff(np.concatenate(([0], keep(in_a, in_b).astype(np.int8), [0])))
    return _interleave(points[np.flatnonzero(runs == 1)], points[np.flatnonzero(runs == -1)])
