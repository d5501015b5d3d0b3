"""What a run left undone: the deadlock report and the unreceived-sends warning.

Both name real ranks, with or without rank symmetry
(:mod:`astra_core.system.symmetry`). Under symmetry one engine runs per class
of ranks and the matcher keys messages in its representative's frame; a rank
of the class is the representative moved by a translation, so its report is
the representative's with every rank, communicator group and chunk tag moved
the same way, and its nodes are the ones at the same positions in its own
trace. Both runs therefore name the same ranks and say the same about each.

Messages stay one line: the first few ranks (or sends), and how many more.
"""

from __future__ import annotations

import re
import warnings
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from astra_core.errors import SimulationDeadlock
from astra_core.system.collectives.logical_topology import involved_members
from astra_core.workload.chakra_types import NodeType
from astra_core.workload.graph import TraceWarning

if TYPE_CHECKING:
    from astra_core.system.attempt import RunAttempt
    from astra_core.system.engine import RankEngine
    from astra_core.workload.chakra import ETNode

_COMM_SEND, _COMM_RECV, _COMM_COLL = NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE, NodeType.COMM_COLL_NODE
SHOWN_RANKS = 3  # ranks described in a deadlock message
SHOWN_MEMBERS = 8  # members listed for a ring or group before "..."

# Rank numbers in the collectives' wait descriptions (``waiting_for``):
# "over ranks [0, 2, 4, 6]", "waiting for rank(s) 6, 7", "rank 3".
_RANKS = re.compile(r"\b(ranks \[|rank\(s\) |rank )(\d+(?:, \d+)*)")
_CHUNK_TAG = re.compile(r"\bchunk tag (\d+)")


def rank_view(
    run: RunAttempt, engine: RankEngine, rank: int
) -> tuple[Callable[[int], int], Callable[[int], int]]:
    """(rank renamer, chunk-tag renamer) from ``engine``'s frame to ``rank``'s.

    Identity without symmetry; otherwise the translation taking the
    representative ``engine.rank`` to ``rank``.
    """
    sym = run.symmetry
    if sym is None or rank == engine.rank:
        return (lambda r: r), (lambda t: t)
    _, delta = sym.from_representative(rank)
    return (lambda r: sym.shift(r, delta)), (lambda t: sym.shift_tag(t, delta))


def as_seen_by(text: str, rename: Callable[[int], int], retag: Callable[[int], int]) -> str:
    """A collective's wait description with ranks and chunk tags renamed.

    Member lists (``ranks [...]``) come out ascending and shortened past
    ``SHOWN_MEMBERS``: their members matter, not where the list starts.
    """

    def ranks(match: re.Match) -> str:
        numbers = [rename(int(x)) for x in match.group(2).split(", ")]
        if match.group(1) != "ranks [":
            return match.group(1) + ", ".join(map(str, numbers))
        numbers.sort()
        if len(numbers) > SHOWN_MEMBERS:
            head = ", ".join(map(str, numbers[: SHOWN_MEMBERS - 1]))
            return f"{match.group(1)}{head}, ..., {numbers[-1]}"
        return match.group(1) + ", ".join(map(str, numbers))

    text = _RANKS.sub(ranks, text)
    return _CHUNK_TAG.sub(lambda m: f"chunk tag {retag(int(m.group(1)))}", text)


def describe_wait(run: RunAttempt, engine: RankEngine, rank: int, node: ETNode) -> str:
    """What ``node`` of ``rank`` (run by ``engine``) waits on, in ``rank``'s terms.

    ``node`` is ``rank``'s own node: its peers are already ``rank``'s.
    """
    if node.type == _COMM_RECV:
        tag = node.comm_tag or 0
        text = (
            f"waits for a message from rank {node.comm_src} (tag {tag}, {node.comm_size} "
            "bytes) that was never sent"
        )
        others = _unreceived_from(run, engine, rank, cast(int, node.comm_src))  # a receive names its source
        if others:
            shown = ", ".join(f"tag {t}, {s} bytes" for t, s in others[:2])
            more = f" and {len(others) - 2} more" if len(others) > 2 else ""
            text += (
                f"; rank {node.comm_src} sent it {len(others)} message(s) no receive matched ({shown}{more})"
            )
        return text
    if node.type == _COMM_SEND:
        return (
            f"sent to rank {node.comm_dst} (tag {node.comm_tag or 0}, {node.comm_size} bytes), never arrived"
        )
    if node.type == _COMM_COLL:
        streams = engine.sys.waiting_streams()
        if not streams:
            return "collective never completed: no chunk running"
        rename, retag = rank_view(run, engine, rank)
        detail = as_seen_by(streams[0], rename, retag)
        more = f" (+{len(streams) - 1} more chunks)" if len(streams) > 1 else ""
        return f"collective never completed: {detail}{more}"
    return "never completed"


def _unreceived_from(run: RunAttempt, engine: RankEngine, rank: int, src: int) -> list[tuple[int, int]]:
    """(tag, bytes) of the messages ``src`` sent to ``rank`` that arrived and
    no receive matched (the matcher keys them in ``engine.rank``'s frame)."""
    sym = run.symmetry
    if sym is not None and rank != engine.rank:
        _, delta = sym.to_representative(rank)
        src = sym.shift(src, delta)
    matcher = run.matcher
    index = _ARRIVED_INDEX.get(matcher)
    if index is None:  # one pass over the matcher per report, not one per rank
        index = _ARRIVED_INDEX[matcher] = {}
        for s, dst, tag, size in matcher.arrived_unreceived():
            index.setdefault((s, dst), []).append((tag, size))
    return sorted(index.get((src, engine.rank), ()))


# matcher -> {(src, dst): [(tag, bytes)]} of arrived, unreceived messages, built
# once per deadlock report (raise_deadlock drops the previous one).
_ARRIVED_INDEX: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def raise_deadlock(run: RunAttempt) -> None:
    """Raise :class:`SimulationDeadlock` naming the ranks that cannot finish.

    One line: the time, how many ranks wait, what the first rank's first
    unfinished node waits on, the next ranks' nodes (``SHOWN_RANKS`` in all),
    and how many more ranks.
    ``SimulationDeadlock.waiting`` maps every waiting rank to all its lines.
    """
    _ARRIVED_INDEX.pop(run.matcher, None)  # index the matcher as the run left it
    stuck = {e.rank: e for e in run.engines if e.finish_ns is None}
    sym = run.symmetry
    if sym is None:
        owners = {rank: stuck[rank] for rank in sorted(stuck)}
    else:
        owners = {
            rank: stuck[rep]
            for rank in range(run.context.npus_count)
            if (rep := sym.representative(rank)) in stuck
        }
    waiting = {
        rank: engine.waiting(rank) or ["nothing running, nodes left unissued"]
        for rank, engine in owners.items()
    }
    shown = list(waiting)[:SHOWN_RANKS]
    first = waiting[shown[0]]
    more = f" (+{len(first) - 1} more nodes)" if len(first) > 1 else ""
    text = f"rank {shown[0]}: {first[0]}{more}"
    if len(shown) > 1:  # the others by node only: the line stays readable
        text += "; also " + ", ".join(f"rank {r}: {_node_only(waiting[r][0])}" for r in shown[1:])
    rest = len(waiting) - len(shown)
    message = (
        f"simulation cannot finish at t={run.backend.now():.0f} ns: {len(waiting)} "
        f"rank(s) wait forever: {text}" + (f" (+{rest} more ranks)" if rest else "")
    )
    cause = queue_order_conflict(run) if sym is None else None
    if cause:
        message += f"; cause: {cause}"
    raise SimulationDeadlock(message, waiting)


def queue_order_conflict(run: RunAttempt) -> str | None:
    """Why ranks wait on each other at a dimension's queue, if they do.

    Upstream's system layer runs at most ``active-chunks-per-dimension``
    chunks per dimension and starts the queued ones in arrival order
    (``Sys::insert_stream``). When the ranks' timing differs (any backend that
    times ranks apart: contention, unequal paths), two ranks can start two
    chunks in opposite orders: rank A runs chunk x and holds chunk y queued,
    rank B the reverse, and each waits for the other's messages. Found by
    comparing the ranks' queues; None when no pair of ranks disagrees.
    A symmetric run times every rank alike and cannot disagree.
    """
    running: dict[tuple[int, int], set[int]] = {}  # (rank, dim) -> chunk tags running
    queued: dict[tuple[int, int], set[int]] = {}  # (rank, dim) -> chunk tags waiting for the queue
    queued_by: dict[tuple[int, int], list[int]] = {}  # (dim, tag) -> ranks holding it queued
    for engine in run.engines:
        if engine.finish_ns is not None:
            continue
        for dim, queue in enumerate(engine.sys.active_streams):
            for stream in queue:
                into = running if stream.initialized else queued
                into.setdefault((engine.rank, dim), set()).add(stream.stream_id)
                if not stream.initialized:
                    queued_by.setdefault((dim, stream.stream_id), []).append(engine.rank)
    sizes = [d.npus for d in run.context.network.dims]
    for (rank, dim), tags in sorted(running.items()):
        if dim >= len(sizes):
            continue
        peers = set(involved_members(rank, sizes, [d == dim for d in range(len(sizes))]))
        for tag in sorted(tags):
            for other in queued_by.get((dim, tag), ()):
                if other not in peers:
                    continue  # not a partner on this dimension (or a communicator group's own dims)
                crossed = sorted(running.get((other, dim), set()) & queued.get((rank, dim), set()))
                if crossed:
                    limit = run.context.system.active_chunks_per_dimension
                    return (
                        f"ranks {rank} and {other} started chunks in opposite orders on dimension {dim}: "
                        f"rank {rank} runs chunk tag {tag} and holds chunk tag {crossed[0]} queued, rank "
                        f"{other} the reverse, and active-chunks-per-dimension ({limit}) lets no more run; "
                        "upstream's per-dimension queues start chunks in arrival order, which differs "
                        "between ranks whose timing differs. Set active-chunks-per-dimension to "
                        f"preferred-dataset-splits ({run.context.system.preferred_dataset_splits}) or "
                        "preferred-dataset-splits to 1"
                    )
    return None


def _node_only(line: str) -> str:
    """``node 2 (recv)`` of a wait line, or its first words when it names no node."""
    if line.startswith("node ") and ") " in line:
        return line[: line.index(") ") + 1]
    return line if len(line) <= 60 else line[:57] + "..."


def unreceived_sends(run: RunAttempt) -> list[tuple[int, int, int, int]]:
    """(src, dst, tag, bytes) of every message that arrived and that no receive
    matched, per real rank, ascending."""
    leftovers = run.matcher.arrived_unreceived()
    sym = run.symmetry
    if sym is None or not leftovers:
        return sorted(leftovers)
    classes = sym.classes()
    out = []
    for src, rep, tag, size in leftovers:
        for rank in classes[rep]:
            _, delta = sym.from_representative(rank)
            out.append((sym.shift(src, delta), rank, tag, size))
    return sorted(out)


def warn_unreceived_sends(run: RunAttempt) -> None:
    """Warn (:class:`TraceWarning`, one line) about sends no receive matched.

    Upstream's analytical frontend completes a send when its message arrives,
    whether or not the destination ever posts the receive
    (``CommonNetworkApi::process_chunk_arrival``), so the run still finishes;
    a trace that sends what nobody receives is suspicious, though.
    """
    sends = unreceived_sends(run)
    if not sends:
        return
    src, dst, tag, size = sends[0]
    node = next(
        (
            n
            for n in run.context.graphs[src].nodes
            if n.type == _COMM_SEND and n.comm_dst == dst and (n.comm_tag or 0) == tag and n.comm_size == size
        ),
        None,
    )
    where = f"rank {src}" + (f" node {node.id} ({node.name})" if node is not None else "")
    more = f" (+{len(sends) - 1} more such sends)" if len(sends) > 1 else ""
    warnings.warn(
        f"{where} sent {size} bytes to rank {dst} with tag {tag} that no receive "
        f"matched{more}; the send completed when the message arrived, as upstream's",
        TraceWarning,
        stacklevel=3,
    )
