"""Read Chakra execution traces (ET): one ``<prefix>.<rank>.et`` file per rank.

A file is a varint-length-delimited ``GlobalMetadata`` message followed by
varint-length-delimited ``Node`` messages until EOF (schema: ``et_def.proto``).
Each file is read into memory once; the length prefixes are walked here and
each message is decoded by the upb protobuf runtime, then turned into a small
:class:`ETNode` holding what the system layer needs.

Attributes are looked up by name the way upstream ASTRA-sim's Chakra feeder
(FeederV3) does: the first attribute of a name wins, any integer oneof case
(int32/int64/uint32/uint64/sint*/fixed*/sfixed*/bool) gives an integer, and a
missing attribute gets a default (``is_cpu_op`` defaults to false, as in
FeederV3's ``REGISTER_ATTR_WITH_DEFAULT(is_cpu_op, false)``). Attributes the
system layer does not use are kept, decoded, in :attr:`ETNode.attrs`.

Every problem with a file is a :class:`~astra_core.errors.TraceError` whose
one-line message names the file and the node, never a protobuf traceback.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

from astra_core.collector import paused
from astra_core.errors import TraceError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload import streaming
from astra_core.workload.chakra_types import COLLECTIVE_NAMES, NODE_TYPE_NAMES
from astra_core.workload.et_decode import (
    ETNode,
    RankTrace,
    bad_nodes_error,
    decode_node,
    metadata_and_spans,
    metadata_attrs,
)
from astra_core.workload.et_peers import GroupPlan, PeerPlan, peer_key, split_groups, split_peers, with_peers

__all__ = [
    "COMM_TYPE_NAMES",
    "NODE_TYPE_NAMES",
    "ETNode",
    "RankTrace",
    "read_rank_trace",
    "read_workload",
    "trace_path",
]


#: CollectiveCommType value -> name, e.g. 0 -> "ALL_REDUCE".
COMM_TYPE_NAMES = COLLECTIVE_NAMES
_PEER_TYPES = frozenset((pb.COMM_SEND_NODE, pb.COMM_RECV_NODE))


def read_rank_trace(path: str | os.PathLike, rank: int | None = None) -> RankTrace:
    """Read one Chakra ``.et`` file into a :class:`RankTrace`.

    ``rank`` is only recorded on the result. Node order is file order.

    Raises :class:`TraceError` (one line naming the file and the node) when
    the file cannot be read, is empty, is cut short (a length prefix promises
    more bytes than remain, or a varint is cut off), holds bytes protobuf
    cannot decode, or has a node whose ``type`` is not a ``NodeType``, or an
    attribute the system layer uses has the wrong kind of value. Also for a
    node that decodes as an empty INVALID node (garbage bytes), and, naming
    the first few bad nodes and counting the rest, for a GPU-side
    collective, send or receive without a positive ``comm_size``, a negative,
    NaN or infinite ``num_ops`` or a negative ``tensor_size``.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return cast(RankTrace, _parse(data, str(path), rank))  # no node limit: never None


def _share_values(node: ETNode, shared: dict) -> None:
    """Point ``node``'s name, dependency tuples, id, peers, tag and size at equal values
    already read (keys tagged by kind in ``shared``): thousands of ranks' sends and
    receives then cost little more than their own node objects."""
    node.name = shared.setdefault(("name", node.name), node.name)
    node.data_deps = shared.setdefault(("deps", node.data_deps), node.data_deps)
    node.ctrl_deps = shared.setdefault(("deps", node.ctrl_deps), node.ctrl_deps)
    for field in ("id", "comm_src", "comm_dst", "comm_tag", "comm_size"):
        value = getattr(node, field)
        if type(value) is int:
            setattr(node, field, shared.setdefault(("int", value), value))


def _parse(
    data: bytes,
    fname: str,
    rank: int | None,
    shared: dict | None = None,
    max_nodes: int | None = None,
    slots: list[tuple[int, int]] | None = None,
) -> RankTrace | None:
    """Parse the bytes of one ``.et`` file (see :func:`read_rank_trace`).

    ``shared`` maps a node's encoded bytes to the node already decoded from
    them (in another rank's file): equal bytes decode to one shared, read-only
    :class:`ETNode`; sends and receives share their values (:func:`_share_values`),
    and one of the same bytes but for its peer ranks is copied from the first
    (:mod:`~astra_core.workload.et_peers`).
    None, before any node is decoded, when the file has more than ``max_nodes``."""
    with paused():
        return _parse_messages(data, fname, rank, shared, max_nodes, slots)


def _parse_messages(
    data: bytes,
    fname: str,
    rank: int | None,
    shared: dict | None,
    max_nodes: int | None,
    slots: list[tuple[int, int]] | None,
) -> RankTrace | None:
    meta, spans = metadata_and_spans(data, fname)
    # A node takes at least a byte (its length prefix): only a file of more bytes than
    # max_nodes can have more nodes, and only there are they counted first.
    if max_nodes is not None and len(data) > max_nodes:
        if sum(1 for _ in spans) > max_nodes:
            return None
        meta, spans = metadata_and_spans(data, fname)
    view = memoryview(data)
    nodes: list[ETNode] = []
    append = nodes.append
    bad: list[tuple[int, str]] = []  # (node id, problem): reported together, first few named
    for index, pos, start, stop in spans:
        peers = None
        if shared is not None:
            payload = data[start:stop]
            node = shared.get(payload)
            if node is not None:  # decoded and checked in an earlier file
                append(node)
                continue
            peers = peer_key(payload)
            if peers is not None:
                template = shared.get(("peers", peers[0]))
                if template is not None:  # the same node but for its peer ranks
                    append(with_peers(template, peers[1], peers[2]))
                    if slots is not None:
                        slots.append((index, peers[3]))
                    continue
        node = decode_node(view[start:stop], fname, index, pos, bad)
        if shared is not None and not bad:
            if node.type not in _PEER_TYPES:
                shared[payload] = node
            else:  # each rank's own, but most of their values repeat from rank to rank
                _share_values(node, shared)
                if peers is not None and (node.comm_src, node.comm_dst) == peers[1:3]:
                    shared[("peers", peers[0])] = node
                    if slots is not None:
                        slots.append((index, peers[3]))
        append(node)
    if bad:
        raise bad_nodes_error(fname, bad)
    return RankTrace(fname, nodes, meta.version, metadata_attrs(meta), rank)


def _parse_like(
    data: bytes, fname: str, rank: int, shared: dict, max_nodes: int, templates: dict
) -> RankTrace:
    """Parse one file of :func:`read_workload`: as a template's nodes with other peers
    when its bytes equal but for the peer values a file parsed before (``templates``:
    bytes without peer values -> :class:`~astra_core.workload.et_peers.PeerPlan`, trace);
    as a template's nodes with other groups and peers when they equal but for those
    (``templates[("groups", bytes without either)]``: a
    :class:`~astra_core.workload.et_peers.GroupPlan`, trace; the ranks of a pipeline
    stage, whose groups differ, then time as one); else in full (and streamed when it
    has more than ``max_nodes`` nodes)."""
    rest, values = split_peers(data)
    known = templates.get(rest)
    if known is not None and known[0].values == len(values):
        plan, template = known
        with paused():
            nodes = plan.nodes_with(values, rank)
        return RankTrace(fname, nodes, template.version, template.metadata, rank)
    bare, names = split_groups(rest)
    like = templates.get(("groups", bare))
    if like is not None and like[0].peers.values == len(values):
        with paused():
            renamed = like[0].nodes_with(names, values, rank)
        if renamed is not None:
            return RankTrace(fname, renamed, like[1].version, like[1].metadata, rank)
    slots: list[tuple[int, int]] = []
    parsed = _parse(data, fname, rank, shared, max_nodes, slots)
    if parsed is None:
        return streaming.scan_trace(data, fname, rank)
    plan = PeerPlan(cast(list, parsed.nodes), slots)
    # every value split_peers cut out is one the decoder read (and no other): then a file
    # of the same other bytes has its values in the same places
    if plan.values == len(values):
        if values:
            templates[rest] = (plan, parsed)
            # kept by role as the files made from it will be: rank symmetry then compares like with like
            kept = plan.by_role(values, rank)
            if kept is not None:
                parsed = RankTrace(fname, cast(list, kept), parsed.version, parsed.metadata, rank)
        group = GroupPlan.of(plan, names) if names else None
        if group is not None:
            templates.setdefault(("groups", bare), (group, parsed))
    return parsed


def trace_path(prefix: str | os.PathLike, rank: int) -> Path:
    """The file rank ``rank`` reads: ``<prefix>.<rank>.et``."""
    return Path(f"{os.fspath(prefix)}.{rank}.et")


def read_workload(
    prefix: str | os.PathLike, npus_count: int, stream_min_bytes: int | None = None
) -> list[RankTrace]:
    """Read ``<prefix>.<r>.et`` for every rank ``r`` in ``range(npus_count)``.

    Files of at least ``stream_min_bytes`` (default
    :data:`~astra_core.workload.streaming.STREAM_MIN_BYTES`, 32 MiB) are streamed:
    checked whole here, then decoded node by node as the engine needs them
    (:mod:`astra_core.workload.streaming`). So is a smaller file of more than
    :data:`~astra_core.workload.streaming.MAX_DECODED_NODES` nodes: a decoded
    node costs about 1 KB, a streamed one about a tenth of that.

    Ranks whose files are byte-identical share one parsed node list (and
    :func:`~astra_core.workload.graph.build_graphs` one graph), so thousands of
    symmetric ranks load quickly; nodes are read-only. Chakra's own tools
    number nodes with one counter across ranks, so their files differ. Within
    differing files, nodes of equal bytes (a generator's compute nodes, a
    group's collectives) are decoded once and shared, and a file equal to one
    read before but for its peer ranks (a tensor-parallel ring's sends and
    receives) is that file's nodes with its own peers
    (:mod:`~astra_core.workload.et_peers`); one equal but for its peers and the names of
    its groups (the ranks of a pipeline stage) is that file's nodes renamed, and rank
    symmetry compares the two ranks' timings once.

    Raises :class:`TraceError` naming the prefix and the counts when the
    number of trace files differs from ``npus_count``: a rank's file is
    missing, or a ``<prefix>.<r>.et`` with ``r >= npus_count`` exists. The
    latter is an error, not a warning: the prefix then describes a bigger
    job (traces made for another network, or left from an earlier
    generation), whose first ranks alone would run to a plausible but wrong
    step time. With no file at all, the message suggests the prefix a rank's
    file or a folder of traces given instead stands for
    (:func:`~astra_core.workload.prefix.suggest_prefix`). Also whatever
    :func:`read_rank_trace` raises for a bad file.
    """
    prefix = os.fspath(prefix)
    if npus_count < 1:
        raise TraceError(f"{prefix}: npus_count must be >= 1, got {npus_count}")
    if stream_min_bytes is None:
        stream_min_bytes = streaming.STREAM_MIN_BYTES
    # One open() per file (no separate existence checks): thousands of ranks load fast.
    # files by (size, Python's hash of their bytes: SipHash, twice as fast as BLAKE2b),
    # confirmed byte for byte on a match: the bytes of thousands of differing files are not kept
    by_digest: dict[tuple[int, int], RankTrace] = {}
    shared: dict = {}
    templates: dict = {}  # see _parse_like
    most_nodes = streaming.MAX_DECODED_NODES
    traces = []
    missing = []
    for r in range(npus_count):
        path = f"{prefix}.{r}.et"
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            missing.append(r)
            continue
        except OSError as exc:
            raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from None
        key = (len(data), hash(data))
        same = by_digest.get(key)
        if same is not None and Path(same.path).read_bytes() != data:
            same = None  # a hash collision: parse the file on its own
        if same is None and len(data) < stream_min_bytes:
            trace = _parse_like(data, path, r, shared, most_nodes, templates)
            by_digest.setdefault(key, trace)
        elif same is None:
            trace = streaming.scan_trace(data, path, r)
            by_digest.setdefault(key, trace)
        else:
            trace = RankTrace(path, same.nodes, same.version, same.metadata, r)
        del data  # a streamed file's bytes are not kept
        traces.append(trace)
    _check_file_count(prefix, npus_count, missing)
    return traces


def _check_file_count(prefix: str, npus_count: int, missing: list[int]) -> None:
    """Raise TraceError (see :func:`read_workload`) when rank files are ``missing`` or a
    file of a rank past ``npus_count`` exists."""
    from astra_core.workload.prefix import suggest_prefix

    extra = _extra_ranks(prefix, npus_count)
    if not (missing or extra):
        return
    problems = []
    if missing:
        problems.append(f"missing {_ranks_text(missing)}")
    if extra:
        problems.append(f"extra {_files_text(prefix, extra)}")
    found = npus_count - len(missing) + len(extra)
    hint = suggest_prefix(prefix) if found == 0 else None
    raise TraceError(
        f"{prefix}: {npus_count} NPUs need {npus_count} trace files {prefix}.<rank>.et, "
        f"found {found}: {'; '.join(problems)}{f'; {hint}' if hint else ''}"
    )


def rank_trace_files(prefix: str | os.PathLike) -> dict[int, str]:
    """rank -> path of every existing ``<prefix>.<rank>.et`` regular file (rank written
    canonically: ``p.7.et``, not ``p.07.et``), from one directory listing; empty when the
    folder cannot be listed."""
    folder, base = os.path.split(os.fspath(prefix))
    head = base + "."
    try:
        entries = os.listdir(folder or ".")
    except OSError:
        return {}
    found = {}
    for name in entries:
        if name.startswith(head) and name.endswith(".et"):
            middle = name[len(head) : -3]
            path = os.path.join(folder, name)
            if middle.isdigit() and middle.isascii() and str(int(middle)) == middle and os.path.isfile(path):
                found[int(middle)] = path
    return found


def _extra_ranks(prefix: str, npus_count: int) -> list[int]:
    """Ranks >= ``npus_count`` that have a ``<prefix>.<rank>.et`` file, ascending.

    One directory listing: a stray file is found even past a gap (``.9.et``
    without ``.8.et``).
    """
    return sorted(rank for rank in rank_trace_files(prefix) if rank >= npus_count)


def _files_text(prefix: str, ranks: list[int]) -> str:
    """``p.8.et`` / ``p.8.et .. p.15.et`` (a run) / ``p.8.et, p.11.et, p.12.et and 4 more``."""
    if len(ranks) > 1 and ranks[-1] - ranks[0] == len(ranks) - 1:
        return f"{prefix}.{ranks[0]}.et .. {prefix}.{ranks[-1]}.et"
    shown = ", ".join(f"{prefix}.{r}.et" for r in ranks[:3])
    return shown + (f" and {len(ranks) - 3} more" if len(ranks) > 3 else "")


def _ranks_text(ranks: list[int]) -> str:
    shown = ", ".join(str(r) for r in ranks[:5])
    more = f" and {len(ranks) - 5} more" if len(ranks) > 5 else ""
    return f"rank{'s' if len(ranks) > 1 else ''} {shown}{more}"
