"""A training step run several times back to back (``astra run --iterations N``).

:func:`repeat_trace` writes a rank's trace ``N`` times into one: copy ``i``'s
nodes keep their order and dependencies with ids moved up by ``i x stride``,
and after each copy an *iteration end* node (a METADATA node, done at once)
waits for every node of that copy with no child (its sinks). Every node of copy
``i + 1`` with no parent in the file waits for the end of copy ``i``: the next
iteration of a rank starts when the previous one has finished on that rank, as
a training loop's steps follow each other (and other ranks may still be in
their previous iteration, so iterations overlap across ranks as they do in a
real job).

Copy 0 is the original trace plus its end node, which takes no time, so one
iteration gives the plain run's times exactly. The end node of iteration ``i``
sits at position ``(i + 1) x (n + 1) - 1`` of a rank of ``n`` nodes
(:func:`iteration_end_positions`), which is how results find when each
iteration ended on each rank (:func:`iteration_ends`).

Dependencies on ids that are not in the file (which the graph treats as
satisfied) are kept in copy 0 only, so their warning is given once.
Point-to-point messages keep their tags: copy ``i + 1``'s sends match after
copy ``i``'s, in order, as they do between steps of a real run.
"""

from __future__ import annotations

from collections.abc import Sequence

from astra_core.errors import ConfigError
from astra_core.workload.chakra_types import METADATA
from astra_core.workload.et_decode import ETNode, RankTrace
from astra_core.workload.streaming import StreamedNodes

__all__ = ["ITERATION_END", "iteration_end_positions", "iteration_ends", "repeat_trace", "repeat_traces"]

#: Name of the node that marks the end of an iteration on a rank.
ITERATION_END = "astra.iteration_end"


def _shifted(node: ETNode, offset: int, ids: set[int], start: tuple[int, ...]) -> ETNode:
    """A copy of ``node`` with its id and in-file dependencies moved up by ``offset``;
    ``start``: extra control dependencies (the previous iteration's end) for a node
    with no parent in the file."""
    data = tuple(d + offset for d in node.data_deps if d in ids)
    ctrl = tuple(d + offset for d in node.ctrl_deps if d in ids)
    if not data and not ctrl:
        ctrl = start
    return node.replaced(id=node.id + offset, data_deps=data, ctrl_deps=ctrl)


def repeat_trace(trace: RankTrace, iterations: int) -> RankTrace:
    """``trace`` run ``iterations`` times, each copy followed by its end node (module doc).

    Raises ConfigError when ``iterations`` < 1 or the trace is streamed (a file of
    more than :data:`~astra_core.workload.streaming.MAX_DECODED_NODES` nodes or of
    :data:`~astra_core.workload.streaming.STREAM_MIN_BYTES` and more: its copies
    would not fit in memory as decoded nodes).
    """
    if iterations < 1:
        raise ConfigError(f"--iterations must be >= 1, got {iterations}")
    if isinstance(trace.nodes, StreamedNodes):
        raise ConfigError(
            f"{trace.path}: --iterations needs the trace decoded in memory, but it is streamed "
            f"({len(trace.nodes):,} nodes); run one iteration"
        )
    nodes = list(trace.nodes)
    ids = {n.id for n in nodes}
    parents = {d for n in nodes for d in (*n.data_deps, *n.ctrl_deps) if d in ids}
    sinks = tuple(n.id for n in nodes if n.id not in parents)
    stride = max(ids, default=-1) + 2  # the copy's ids, then its end node's
    out: list[ETNode] = []
    start: tuple[int, ...] = ()
    for i in range(iterations):
        offset = i * stride
        if i == 0:
            out += nodes
        else:
            out += [_shifted(n, offset, ids, start) for n in nodes]
        end = offset + stride - 1
        out.append(ETNode(end, ITERATION_END, METADATA, ctrl_deps=[s + offset for s in sinks]))
        start = (end,)
    return RankTrace(trace.path, out, trace.version, trace.metadata, trace.rank)


#: What a repeated node costs in memory, decoded, with its graph [bytes]
#: (:data:`~astra_core.workload.streaming.MAX_DECODED_NODES`' measurement: about 1 KB).
NODE_BYTES = 1024


def repeated_nodes(traces: Sequence[RankTrace], iterations: int) -> int:
    """How many nodes :func:`repeat_traces` would hold (node lists shared by ranks once)."""
    return sum({id(t.nodes): len(t.nodes) for t in traces}.values()) * iterations


def repeat_traces(traces: Sequence[RankTrace], iterations: int) -> list[RankTrace]:
    """Every rank's trace repeated (:func:`repeat_trace`); ranks that shared one node
    list share the repeated one too (rank symmetry keeps working)."""
    done: dict[int, RankTrace] = {}
    out = []
    for trace in traces:
        key = id(trace.nodes)
        if key not in done:
            done[key] = repeat_trace(trace, iterations)
        shared = done[key]
        out.append(RankTrace(trace.path, shared.nodes, trace.version, trace.metadata, trace.rank))
    return out


def iteration_end_positions(nodes_per_iteration: int, iterations: int) -> list[int]:
    """Positions of the iteration end nodes in a rank repeated by :func:`repeat_trace`
    from ``nodes_per_iteration`` nodes."""
    return [(i + 1) * (nodes_per_iteration + 1) - 1 for i in range(iterations)]


def iteration_ends(records, positions: Sequence[int]) -> list[float | None]:
    """When each iteration ended on a rank [ns]: the end times of the nodes at
    ``positions`` in its ``(position, start_ns, end_ns)`` ``records`` (None: that
    iteration never ended)."""
    wanted = {p: k for k, p in enumerate(positions)}
    ends: list[float | None] = [None] * len(positions)
    for pos, _start, end in records:
        k = wanted.get(pos)
        if k is not None:
            ends[k] = end
    return ends
