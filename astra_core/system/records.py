"""When each ET node of a rank ran, and each phase of a collective: compact records.

A rank of a million nodes keeps 24 bytes a node here instead of about 110 for
a list of tuples. Times are ns, kept as float64 (exact for integers below
2**53 ns, 104 days).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator, Sequence
from typing import overload

from astra_core.results import PhaseSpan
from astra_core.system.comm_types import CommType


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


#: One phase's span as the kernel logs it (``astra_core/cpp/kernel/streams.h``): int32
#: dimension, int32 collective (Chakra's number), float64 start and end ns, native order.
_PHASE_RECORD = struct.Struct("=iidd")
_LABELS = {t.value: t.label for t in CommType}


class PhaseTimes(Sequence[PhaseSpan]):
    """``(dim, type label, start_ns, end_ns)`` per phase of every chunk of one
    collective on one rank, in the order the phases ended, kept as the kernel's
    24-byte records (a tuple per phase took about 150 bytes: ResNet-50 on 1,024
    NPUs held 140 MB of them). Equal when the records are."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes = b""):
        if len(data) % _PHASE_RECORD.size:
            raise ValueError(f"phase records are {_PHASE_RECORD.size} bytes each, got {len(data)} bytes")
        self._data = bytes(data)

    def __len__(self) -> int:
        return len(self._data) // _PHASE_RECORD.size

    @overload
    def __getitem__(self, index: int) -> PhaseSpan: ...

    @overload
    def __getitem__(self, index: slice) -> list[PhaseSpan]: ...

    def __getitem__(self, index: int | slice) -> PhaseSpan | list[PhaseSpan]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("phase index out of range")
        dim, kind, start, end = _PHASE_RECORD.unpack_from(self._data, index * _PHASE_RECORD.size)
        return dim, _LABELS[kind], start, end

    def __iter__(self) -> Iterator[PhaseSpan]:
        labels = _LABELS
        for dim, kind, start, end in _PHASE_RECORD.iter_unpack(self._data):
            yield dim, labels[kind], start, end

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PhaseTimes):
            return self._data == other._data
        return isinstance(other, Sequence) and list(self) == list(other)

    def __hash__(self) -> int:
        return hash(self._data)

    def __repr__(self) -> str:
        return f"PhaseTimes({list(self)!r})"
