"""Streamed traces: a long rank trace's nodes decoded when the engine needs them.

:func:`scan_trace` reads a file once, checks every node exactly as
:func:`~astra_core.workload.chakra.read_rank_trace` does (same errors), and
keeps per node only what the dependency graph needs, in compact arrays: its
byte span in the file, its id and its dependency ids (about 30 bytes a node
instead of about 700 for a decoded :class:`~astra_core.workload.chakra.ETNode`).
The trace's ``nodes`` is then a :class:`StreamedNodes`: indexing it decodes the
node from the file. The engine :meth:`~StreamedNodes.hold` s a node from when it
is ready until it completes, so peak memory grows with the nodes that are ready
or running, not with the trace.

:func:`~astra_core.workload.chakra.read_workload` streams every file of at
least ``stream_min_bytes`` (default :data:`STREAM_MIN_BYTES`), and every file
of more than :data:`MAX_DECODED_NODES` nodes whatever its size.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from astra_core.collector import paused
from astra_core.errors import TraceError
from astra_core.workload.chakra_types import COMP, NO_GROUP
from astra_core.workload.et_decode import (
    ETNode,
    RankTrace,
    bad_nodes_error,
    decode_node,
    metadata_and_spans,
    metadata_attrs,
)

__all__ = [
    "MAX_DECODED_NODES",
    "STREAM_MIN_BYTES",
    "SortedIds",
    "StreamedNodes",
    "is_notable",
    "scan_trace",
    "timing_item",
]


#: Files this large or larger are streamed (about 450,000 nodes of a PyTorch step).
STREAM_MIN_BYTES = 32 << 20
#: Bytes a streamed file is read in (one read serves the nodes decoded after it).
READ_BLOCK_BYTES = 1 << 14
#: A file of more nodes than this is streamed whatever its size: decoded, a node costs
#: about 1 KB; streamed, about 120 bytes (a rank of 1,000,000 chained compute nodes,
#: an 18.7 MB file, ran in 1,069 MiB decoded and 244 MiB streamed,
#: ``benchmarks/trace_memory.py --compact --npus 2``).
MAX_DECODED_NODES = 1 << 18


def timing_item(node: ETNode) -> tuple:
    """The fields of a node that set how long it takes, besides its peers and groups
    (what rank symmetry compares node by node): an uneven all-to-all's bytes per member
    (``send_bytes`` / ``recv_bytes``, :mod:`astra_core.system.collectives.uneven`) too."""
    attrs = node.attrs
    return (
        node.type,
        node.is_cpu_op,
        node.duration_micros,
        node.comm_type,
        node.comm_size,
        node.comm_tag,
        node.involved_dim,
        node.num_ops,
        node.tensor_size,
        (_as_key(attrs.get("send_bytes")), _as_key(attrs.get("recv_bytes"))) if attrs else None,
    )


def _as_key(value):
    return tuple(value) if isinstance(value, list) else value


def is_notable(node: ETNode) -> bool:
    """Not a plain compute node: it communicates, carries metadata, or names peers
    or a group (what rank symmetry and NCCL's model look at besides timings)."""
    return (
        node.type != COMP
        or node.pg_name not in NO_GROUP
        or node.comm_src is not None
        or node.comm_dst is not None
    )


class StreamedNodes(Sequence):
    """The nodes of one file, decoded from it on demand (module docstring).

    ``ids`` (array of int64): node id per position; ``data_deps(pos)`` and
    ``ctrl_deps(pos)``: a node's dependency ids (tuples) without decoding it;
    ``notable``: positions of the nodes :func:`is_notable` picks;
    ``timing_digest``: BLAKE2b of every node's :func:`timing_item` in order.
    ``nodes[pos]`` returns the held node, or decodes a fresh one (raises
    TraceError naming the file if it changed or vanished since the scan).
    ``hold(pos)`` keeps a node decoded until as many ``release(pos)`` calls
    (one per engine that runs this file's graph).
    """

    def __init__(
        self,
        path: str,
        starts: array,
        lengths: array,
        ids: array,
        data_starts: array,
        data: array,
        ctrl_starts: array,
        ctrl: array,
        notable: array,
        timing_digest: bytes,
    ):
        self.path = path
        self.notable = notable
        self.timing_digest = timing_digest
        self._starts, self._lengths = starts, lengths  # node i: its message's bytes
        self.ids = ids
        self._data_starts, self._data = data_starts, data
        self._ctrl_starts, self._ctrl = ctrl_starts, ctrl
        self._held: dict[int, list] = {}  # pos -> [node, holds]
        self._file: BinaryIO | None = None  # opened on the first decode
        self._block = b""  # the file's bytes last read, from _block_start on
        self._block_start = 0

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, pos):  # type: ignore[override]
        if isinstance(pos, slice):
            return [self[i] for i in range(*pos.indices(len(self)))]
        held = self._held.get(pos)
        if held is not None:
            return held[0]
        if pos < 0:
            pos += len(self)
        if not 0 <= pos < len(self):
            raise IndexError(pos)
        return self._decode(pos)

    def __iter__(self) -> Iterator[ETNode]:
        for pos in range(len(self)):
            yield self[pos]

    def data_deps(self, pos: int) -> tuple[int, ...]:
        starts = self._data_starts
        return tuple(self._data[starts[pos] : starts[pos + 1]])

    def ctrl_deps(self, pos: int) -> tuple[int, ...]:
        starts = self._ctrl_starts
        return tuple(self._ctrl[starts[pos] : starts[pos + 1]])

    def structure_arrays(self) -> tuple[array, ...]:
        """The ids and dependency arrays: equal exactly when two files have the same
        ids and dependencies in the same order."""
        return self.ids, self._data_starts, self._data, self._ctrl_starts, self._ctrl

    def hold(self, pos: int) -> None:
        """Keep node ``pos`` decoded until the matching :meth:`release`."""
        held = self._held.get(pos)
        if held is None:
            self._held[pos] = [self._decode(pos), 1]
        else:
            held[1] += 1

    def release(self, pos: int) -> None:
        held = self._held.get(pos)
        if held is not None:
            held[1] -= 1
            if held[1] <= 0:
                del self._held[pos]

    @property
    def held(self) -> int:
        """How many nodes are decoded and held now."""
        return len(self._held)

    def _read(self, start: int, length: int) -> bytes:
        """``length`` bytes of the file from ``start``: from the block read last when it
        holds them, else from a fresh block of :data:`READ_BLOCK_BYTES` (nodes are
        mostly decoded in file order: one read serves hundreds of them)."""
        offset = start - self._block_start
        block = self._block
        if offset >= 0 and offset + length <= len(block):
            return block[offset : offset + length]
        if self._file is None:
            self._file = open(self.path, "rb")  # noqa: SIM115 (kept open for the run)
        block = os.pread(self._file.fileno(), max(length, READ_BLOCK_BYTES), start)
        self._block, self._block_start = block, start
        return block[:length]

    def _decode(self, pos: int) -> ETNode:
        start, length = self._starts[pos], self._lengths[pos]
        try:
            payload = self._read(start, length)
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        if len(payload) != length:
            raise TraceError(f"{self.path}: changed while it was simulated (node #{pos} is cut off)")
        bad: list[tuple[int, str]] = []
        try:
            node = decode_node(payload, self.path, pos, start, bad)
        except TraceError:
            node = None
        if node is None or bad or node.id != self.ids[pos]:
            raise TraceError(f"{self.path}: changed while it was simulated (node #{pos} differs)")
        return node

    def __del__(self) -> None:
        if self._file is not None:
            self._file.close()

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_file"] = None
        state["_block"], state["_block_start"] = b"", 0
        return state


class SortedIds:
    """Node id -> position for ids that rise strictly in file order (the usual
    case): a binary search in the ids array instead of a dict of a million ints."""

    __slots__ = ("ids",)

    def __init__(self, ids: Sequence[int]):  # the ids array
        self.ids = ids

    def get(self, node_id: int, default=None):
        ids = self.ids
        pos = bisect_left(ids, node_id)
        return pos if pos < len(ids) and ids[pos] == node_id else default

    def __getitem__(self, node_id: int) -> int:
        pos = self.get(node_id)
        if pos is None:
            raise KeyError(node_id)
        return pos

    def __contains__(self, node_id: int) -> bool:
        return self.get(node_id) is not None

    def __len__(self) -> int:
        return len(self.ids)


def scan_trace(data: bytes, path: str, rank: int | None = None) -> RankTrace:
    """A :class:`RankTrace` of the file ``path`` whose bytes are ``data``, with
    :class:`StreamedNodes`: every node is decoded and checked here, then only its
    span, id and dependencies are kept. Raises TraceError as
    :func:`~astra_core.workload.chakra.read_rank_trace` does."""
    with paused():
        return _scan(data, path, rank)


def _scan(data: bytes, path: str, rank: int | None) -> RankTrace:
    meta, spans = metadata_and_spans(data, path)
    view = memoryview(data)
    decode = decode_node
    starts, lengths, ids = array("Q"), array("I"), array("q")
    data_starts, deps, ctrl_starts, ctrl = array("Q", [0]), array("q"), array("Q", [0]), array("q")
    notable = array("q")
    timings = hashlib.blake2b(digest_size=32)
    bad: list[tuple[int, str]] = []
    for index, pos, start, stop in spans:
        node = decode(view[start:stop], path, index, pos, bad)
        timings.update(repr(timing_item(node)).encode())
        if is_notable(node):
            notable.append(index)
        starts.append(start)
        lengths.append(stop - start)
        ids.append(node.id)
        deps.extend(node.data_deps)
        data_starts.append(len(deps))
        ctrl.extend(node.ctrl_deps)
        ctrl_starts.append(len(ctrl))
    if bad:
        raise bad_nodes_error(path, bad)
    nodes = StreamedNodes(
        path, starts, lengths, ids, data_starts, deps, ctrl_starts, ctrl, notable, timings.digest()
    )
    return RankTrace(path, nodes, meta.version, metadata_attrs(meta), rank)
