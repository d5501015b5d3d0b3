"""When each ET node of a rank ran: compact (position, start, end) records.

A rank of a million nodes keeps 24 bytes a node here instead of about 110 for
a list of tuples. Times are ns, kept as float64 (exact for integers below
2**53 ns, 104 days).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator


class NodeRecords:
    """``(position, start_ns, end_ns)`` per completed node, in completion order.

    ``add(pos, start, end)`` records one; iterating yields the triples,
    ``records[i]`` the i-th, ``len(records)`` how many.
    """

    __slots__ = ("_pos", "_start", "_end")

    def __init__(self) -> None:
        self._pos = array("q")
        self._start = array("d")
        self._end = array("d")

    def add(self, pos: int, start: float, end: float) -> None:
        self._pos.append(pos)
        self._start.append(start)
        self._end.append(end)

    def __len__(self) -> int:
        return len(self._pos)

    def __iter__(self) -> Iterator[tuple[int, float, float]]:
        return zip(self._pos, self._start, self._end)

    def __getitem__(self, i: int) -> tuple[int, float, float]:
        return self._pos[i], self._start[i], self._end[i]

    def __repr__(self) -> str:
        return f"NodeRecords({len(self)} nodes)"
