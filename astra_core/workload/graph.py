"""Dependency graph of one rank's ET nodes, as compact arrays for the engine.

Nodes are numbered by their position in the file (0..n-1). For each position
the graph gives the number of distinct parents inside the file (``data_deps``
and ``ctrl_deps`` together; a parent named in both, or twice, counts once) and
the positions of its children. The engine copies ``parent_counts``, issues the
nodes whose count is zero, and on each completion decrements the counts of the
children.

Real traces are not always clean, and a trace that cannot run helps nobody, so
two problems are worked around, each reported once per file with a
:class:`TraceWarning`:

- a dependency on a node id that is not in the file is treated as satisfied
  (PyTorch-converted traces refer to host ops that were not kept; upstream
  ASTRA-sim aborts with "not found in index");
- a node depending on itself, and cycles closed by ctrl dependencies
  (PyTorch-converted traces link a CPU op and the kernel it launches both
  ways): a cycle always contains a dependency on a node later in the file, and
  those ctrl deps are dropped, only inside strongly connected components.

Cycles of data dependencies are kept: their nodes can never run, and the
simulation stops with a deadlock error that names them (``cyclic_ids``).

A duplicate node id is an error (:class:`~astra_core.errors.TraceError`).
"""

from __future__ import annotations

import hashlib
import warnings
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import cast

from astra_core.errors import TraceError
from astra_core.workload.chakra import ETNode, RankTrace
from astra_core.workload.et_peers import GroupTemplate, PeerNodes, TemplatePeers
from astra_core.workload.streaming import SortedIds, StreamedNodes

__all__ = [
    "RankGraph",
    "TraceWarning",
    "build_graph",
    "build_graphs",
    "distinct_shapes",
    "distinct_timings",
    "peerless",
    "shape_key",
    "timing_key",
]

_EXAMPLES = 5  # ids quoted in a warning


class TraceWarning(UserWarning):
    """A problem in a trace that astra works around (the message names the file)."""


class RankGraph:
    """One rank's dependency graph; positions index ``nodes`` (file order).

    - ``nodes`` (list[ETNode]): the trace's nodes,
    - ``index`` (dict[int, int]): node id -> position,
    - ``parent_counts`` (list[int]): distinct in-file parents per position,
    - ``children`` (list[list[int]]): child positions per position, ascending,
    - ``roots`` (list[int]): positions with no parents, ascending,
    - ``missing_deps`` (int): dependencies on ids not in the file (dropped),
    - ``self_deps`` (int): dependencies of a node on itself (dropped),
    - ``cycle_deps`` (list[tuple[int, int]]): (child id, parent id) of the
      ctrl dependencies dropped to break cycles,
    - ``cyclic_ids`` (list[int]): ids of nodes on data-dependency cycles that
      remain (these nodes can never run; the simulation reports a deadlock),
    - ``path`` (str): the trace file ("" when built from nodes alone),
    - ``metadata`` (dict): its GlobalMetadata attributes (see
      :class:`~astra_core.workload.chakra.RankTrace`).

    A streamed trace's graph (:mod:`astra_core.workload.streaming`) holds the same
    in compact form: ``nodes`` a :class:`~astra_core.workload.streaming.StreamedNodes`,
    ``index`` a :class:`~astra_core.workload.streaming.SortedIds` where ids rise in
    file order, ``parent_counts`` an ``array('I')``, ``children`` a
    :class:`Children`.

    Read-only: ranks with identical files share one graph.
    """

    __slots__ = (
        "nodes",
        "index",
        "parent_counts",
        "children",
        "roots",
        "missing_deps",
        "self_deps",
        "cycle_deps",
        "cyclic_ids",
        "path",
        "metadata",
    )

    def __init__(
        self,
        nodes,
        index,
        parent_counts,
        children,
        missing_deps=0,
        self_deps=0,
        cycle_deps=(),
        cyclic_ids=(),
        path="",
        metadata=None,
    ) -> None:
        self.nodes: list[ETNode] = nodes
        self.index: dict[int, int] = index
        self.parent_counts: list[int] = parent_counts
        self.children: list[list[int]] = children
        self.roots: list[int] = [i for i, c in enumerate(parent_counts) if c == 0]
        self.missing_deps: int = missing_deps
        self.self_deps: int = self_deps
        self.cycle_deps: list[tuple[int, int]] = list(cycle_deps)
        self.cyclic_ids: list[int] = list(cyclic_ids)
        self.path: str = path
        self.metadata: dict = {} if metadata is None else metadata

    def __len__(self) -> int:
        return len(self.nodes)

    def notable_nodes(self) -> Iterator[tuple[ETNode, int | None]]:
        """``(node, key)`` for every node that may not be a plain compute node (all
        of them, unless the trace is streamed: then only those
        :func:`~astra_core.workload.streaming.is_notable` picks, decoded one by one).
        ``key`` is equal for one node object shared by several graphs (to look
        at it once), None for a streamed node (a fresh object every time). Sends
        and receives of a rank made from a template
        (:class:`~astra_core.workload.et_peers.TemplatePeers`) are the template's,
        without the rank's peers (:func:`peerless`)."""
        nodes = self.nodes
        if isinstance(nodes, StreamedNodes):
            for pos in nodes.notable:
                yield nodes[pos], None
        else:
            for node in peerless(nodes):
                yield node, id(node)

    def __repr__(self) -> str:
        edges = sum(self.parent_counts)
        return f"RankGraph({len(self.nodes)} nodes, {edges} deps, {len(self.roots)} roots)"


def build_graph(trace: RankTrace) -> RankGraph:
    """Index ``trace.nodes`` by id and resolve their dependencies.

    Warns (:class:`TraceWarning`, once per file each) about dependencies on
    ids not in the file and about dropped self-dependencies and cycles.
    Raises :class:`TraceError` naming the file and the id when two nodes share
    an id.
    """
    nodes = trace.nodes
    streamed = isinstance(nodes, StreamedNodes)
    ids, deps = _ids_and_deps(nodes)
    index = _index(ids, trace.path, streamed)
    counts, children, missing_refs, missing_ids, self_deps, forward = _resolve(deps, index, len(nodes))
    if missing_refs:
        _warn_missing(trace.path, missing_refs, missing_ids)
    cycle_deps, cyclic_ids = _break_cycles(ids, counts, children, forward) if forward else ([], [])
    if self_deps or cycle_deps:
        _warn_dropped(trace.path, self_deps, cycle_deps)
    # a streamed trace's graph is compact: 4-byte counts, children in two arrays
    return RankGraph(
        nodes,
        index,
        array("I", counts) if streamed else counts,
        Children(children) if streamed else children,
        missing_refs,
        self_deps,
        cycle_deps,
        cyclic_ids,
        trace.path,
        trace.metadata,
    )


def _ids_and_deps(nodes) -> tuple[Sequence[int], Iterable[tuple[tuple[int, ...], tuple[int, ...]]]]:
    """The nodes' ids, and their ``(data_deps, ctrl_deps)`` in file order (read
    from a streamed trace's arrays without decoding its nodes)."""
    if isinstance(nodes, StreamedNodes):
        n = len(nodes)
        return nodes.ids, zip(map(nodes.data_deps, range(n)), map(nodes.ctrl_deps, range(n)))
    nodes = peerless(nodes)  # ids and dependencies do not depend on peers
    return [node.id for node in nodes], ((node.data_deps, node.ctrl_deps) for node in nodes)


def _resolve(
    deps: Iterable[tuple[tuple[int, ...], tuple[int, ...]]], index, n: int
) -> tuple[list[int], list[list[int]], int, dict[int, None], int, list[tuple[int, int, bool]]]:
    """Resolve every node's dependencies to positions: ``(parent counts, children,
    dependencies on missing ids, those ids, self-dependencies, forward deps)``.

    Each dependency on a later node is listed in ``forward`` as ``(parent pos,
    child pos, is a data dep)``: only those can close a cycle. This loop runs
    over every node of every distinct file, so it stays one flat loop.
    """
    children: list[list[int]] = [[] for _ in range(n)]
    counts = [0] * n
    missing_refs = 0
    missing_ids: dict[int, None] = {}  # insertion-ordered set, for examples
    self_deps = 0
    forward: list[tuple[int, int, bool]] = []
    get = index.get
    for pos, (data_deps, ctrl_deps) in enumerate(deps):
        if ctrl_deps:
            parents: Iterable[int] = dict.fromkeys(data_deps + ctrl_deps)
        elif len(data_deps) > 1:
            parents = dict.fromkeys(data_deps)
        elif data_deps:
            parents = data_deps
        else:
            continue
        count = 0
        for dep in parents:
            parent = get(dep)
            if parent is None:
                missing_refs += 1
                missing_ids[dep] = None
            elif parent == pos:
                self_deps += 1
            else:
                if parent > pos:
                    forward.append((parent, pos, dep in data_deps))
                children[parent].append(pos)
                count += 1
        counts[pos] = count
    return counts, children, missing_refs, missing_ids, self_deps, forward


def _break_cycles(
    ids: Sequence[int], counts: list[int], children: list[list[int]], forward: list[tuple[int, int, bool]]
) -> tuple[list[tuple[int, int]], list[int]]:
    """Drop the forward ctrl deps inside cycles, in place: ``(cycle_deps, cyclic_ids)``.

    Only a dependency on a later node can close a cycle, and every cycle keeps one
    while it exists, so dropping the ctrl ones inside strongly connected components
    breaks every cycle they close. Cycles of data dependencies are real errors in
    the trace: they are kept, and the run reports them as a deadlock (``cyclic_ids``).
    """
    cycle_deps: list[tuple[int, int]] = []
    in_cycle = _cyclic_components(counts, children)
    if not in_cycle:
        return cycle_deps, []
    get_component = in_cycle.get
    for parent, child, is_data in forward:
        if not is_data and get_component(parent, -1) == get_component(child, -2):
            children[parent].remove(child)
            counts[child] -= 1
            cycle_deps.append((ids[child], ids[parent]))
    in_cycle = _cyclic_components(counts, children) if cycle_deps else in_cycle
    return cycle_deps, sorted(ids[p] for p in in_cycle)


def _warn_missing(fname: str, missing_refs: int, missing_ids: dict[int, None]) -> None:
    examples = ", ".join(str(i) for i in list(missing_ids)[:_EXAMPLES])
    warnings.warn(
        f"{fname}: {missing_refs} dependencies on {len(missing_ids)} node ids not in "
        f"the file, treated as satisfied (e.g. ids {examples})",
        TraceWarning,
        stacklevel=3,  # build_graph's caller
    )


def _warn_dropped(fname: str, self_deps: int, cycle_deps: list[tuple[int, int]]) -> None:
    parts = []
    if self_deps:
        parts.append(f"{self_deps} self-dependencies")
    if cycle_deps:
        examples = ", ".join(f"{c} on {p}" for c, p in cycle_deps[:_EXAMPLES])
        parts.append(
            f"{len(cycle_deps)} ctrl dependencies on later nodes that closed cycles (e.g. node {examples})"
        )
    warnings.warn(
        f"{fname}: dropped {' and '.join(parts)}, which would deadlock",
        TraceWarning,
        stacklevel=3,  # build_graph's caller
    )


def _index(ids: Sequence[int], fname: str, streamed: bool):
    """Node id -> position; raises TraceError naming the file and a duplicate id.
    Streamed traces whose ids rise in file order get a :class:`SortedIds`."""
    if streamed and all(a < b for a, b in zip(ids, ids[1:])):
        return SortedIds(ids)
    index = {node_id: pos for pos, node_id in enumerate(ids)}
    if len(index) != len(ids):
        first: dict[int, int] = {}
        for pos, node_id in enumerate(ids):
            if node_id in first:
                raise TraceError(
                    f"{fname}: duplicate node id {node_id} (nodes #{first[node_id]} and #{pos} in file)"
                )
            first[node_id] = pos
    return index


class Children(Sequence):
    """Child positions per position, in two arrays (a streamed trace's graph):
    ``children[pos]`` is an ascending array of positions."""

    def __init__(self, lists: list[list[int]]):
        self.starts = array("Q", [0])
        self.values = array("I")
        for kids in lists:
            self.values.extend(kids)
            self.starts.append(len(self.values))

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, pos):  # type: ignore[override]
        if isinstance(pos, slice):
            return [self[i] for i in range(*pos.indices(len(self)))]
        if pos < 0:
            pos += len(self)
        return self.values[self.starts[pos] : self.starts[pos + 1]]


def shape_key(nodes) -> int:
    """Equal for node lists that are one list, or were made from one template and differ
    only in peer ranks (:class:`~astra_core.workload.et_peers.PeerNodes`,
    :class:`~astra_core.workload.et_peers.TemplatePeers`): whatever does not look at
    peers (structure, timings, collectives) is the same for them. Valid while the lists
    are alive (an object id)."""
    return id(_template_of(nodes))


def _template_of(nodes):
    """The template a rank's nodes were made from, or the nodes themselves."""
    return nodes.template if isinstance(nodes, (PeerNodes, TemplatePeers)) else nodes


def peerless(nodes) -> Sequence[ETNode]:
    """``nodes``, or for a rank made from a template
    (:class:`~astra_core.workload.et_peers.TemplatePeers`) the template's nodes: the
    same nodes but for the peers of sends and receives, without making a node per
    peer, for what reads no peers."""
    return nodes.template if isinstance(nodes, TemplatePeers) else nodes


def timing_key(nodes) -> int:
    """Equal for node lists of one :func:`shape_key`, or whose templates time alike and
    differ only in the groups their collectives name
    (:class:`~astra_core.workload.et_peers.GroupTemplate`): their structure, timings
    and the positions of the nodes naming peers or groups are the same. Valid while the
    lists are alive (an object id)."""
    base = _template_of(nodes)
    return id(base.timing) if isinstance(base, GroupTemplate) else id(base)


def distinct_shapes(graphs: Iterable[RankGraph], key=shape_key) -> list[RankGraph]:
    """One graph of each :func:`shape_key` (or ``key``) among ``graphs``, first come: what
    looks at a run's nodes but not their peers (collectives, node kinds) reads these only."""
    first: dict[int, RankGraph] = {}
    for graph in graphs:
        first.setdefault(key(graph.nodes), graph)
    return list(first.values())


def distinct_timings(graphs: Iterable[RankGraph]) -> list[RankGraph]:
    """One graph of each :func:`timing_key` among ``graphs``, first come: what looks at
    neither peers nor group names reads these only."""
    return distinct_shapes(graphs, timing_key)


def build_graphs(traces: Iterable[RankTrace]) -> list[RankGraph]:
    """:func:`build_graph` for each rank; ranks sharing a node list share a graph.

    :func:`~astra_core.workload.chakra.read_workload` gives byte-identical
    files one node list, so their graph is built, and warned about, once.
    Ranks whose nodes have the same ids and dependencies in the same order
    (a pipeline stage of a generated step, whose ranks differ in peers and
    groups) share the graph's structure (index, parent counts, children,
    roots): it is resolved, and warned about, for the first of them; ranks
    made from one template (:func:`shape_key`), or from templates that time alike
    (:func:`timing_key`), are not even compared.
    """
    built: dict[int, RankGraph] = {}
    structures: dict[tuple, RankGraph] = {}
    out = []
    for trace in traces:
        graph = built.get(id(trace.nodes))
        if graph is None:
            # its template's graph, or one of a template that times alike, built before
            same = built.get(timing_key(trace.nodes))
            if same is None:
                key = _structure_key(trace.nodes)
                same = structures.get(key)
                if same is None:
                    same = graph = structures[key] = build_graph(trace)
            if graph is None:
                graph = _sharing_structure(same, trace)
            built[id(trace.nodes)] = graph
            built.setdefault(timing_key(trace.nodes), graph)  # a template's key is its timing's
        out.append(graph)
    return out


def _structure_key(nodes) -> tuple:
    """Equal for node lists with the same ids and dependencies in the same order."""
    if isinstance(nodes, StreamedNodes):  # a digest: the tuples would be the whole trace
        digest = hashlib.blake2b(digest_size=32)
        for part in nodes.structure_arrays():
            digest.update(part.tobytes())
        return ("streamed", len(nodes), digest.digest())
    return tuple([(n.id, n.data_deps, n.ctrl_deps) for n in peerless(nodes)])


def _sharing_structure(graph: RankGraph, trace: RankTrace) -> RankGraph:
    """``trace``'s graph with ``graph``'s structure (same ids and dependencies)."""
    out = RankGraph.__new__(RankGraph)
    for name in RankGraph.__slots__:
        setattr(out, name, getattr(graph, name))
    # ``nodes`` is declared a list; a streamed trace's is a StreamedNodes (class docstring)
    out.nodes, out.path, out.metadata = cast("list[ETNode]", trace.nodes), trace.path, trace.metadata
    return out


def _cyclic_components(counts: list[int], children: list[list[int]]) -> dict[int, int]:
    """Map each position on a cycle to its strongly connected component number.

    Kahn's algorithm first strips every node that is not on or behind a cycle;
    Tarjan's algorithm (iterative) then splits the rest into components, and
    only components of two or more nodes are kept.
    """
    remaining = counts[:]
    stack = [i for i, c in enumerate(remaining) if c == 0]
    while stack:
        i = stack.pop()
        for child in children[i]:
            remaining[child] -= 1
            if remaining[child] == 0:
                stack.append(child)
    stuck = [i for i, c in enumerate(remaining) if c > 0]
    if not stuck:
        return {}

    stuck_set = set(stuck)
    succs = {v: [w for w in children[v] if w in stuck_set] for v in stuck}
    order: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    scc_stack: list[int] = []
    component: dict[int, int] = {}
    n_components = 0
    for root in stuck:
        if root in order:
            continue
        work = [(root, 0)]
        order[root] = low[root] = len(order)
        scc_stack.append(root)
        on_stack.add(root)
        while work:
            v, i = work[-1]
            succ = succs[v]
            if i < len(succ):
                w = succ[i]
                work[-1] = (v, i + 1)
                if w not in order:
                    order[w] = low[w] = len(order)
                    scc_stack.append(w)
                    on_stack.add(w)
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], order[w])
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == order[v]:
                members = []
                while True:
                    w = scc_stack.pop()
                    on_stack.discard(w)
                    members.append(w)
                    if w == v:
                        break
                if len(members) > 1:
                    for w in members:
                        component[w] = n_components
                    n_components += 1
    return component
