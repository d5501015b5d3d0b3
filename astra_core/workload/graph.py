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

import warnings
from collections.abc import Iterable

from astra_core.errors import TraceError
from astra_core.workload.chakra import ETNode, RankTrace

__all__ = ["RankGraph", "TraceWarning", "build_graph", "build_graphs"]

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

    def __init__(self, nodes, index, parent_counts, children, missing_deps=0, self_deps=0,
                 cycle_deps=(), cyclic_ids=(), path="", metadata=None):
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
    fname = trace.path
    n = len(nodes)
    index = {node.id: pos for pos, node in enumerate(nodes)}
    if len(index) != n:
        first: dict[int, int] = {}
        for pos, node in enumerate(nodes):
            if node.id in first:
                raise TraceError(
                    f"{fname}: duplicate node id {node.id} (nodes #{first[node.id]} and #{pos} in file)"
                )
            first[node.id] = pos

    children: list[list[int]] = [[] for _ in range(n)]
    counts = [0] * n
    missing_refs = 0
    missing_ids: dict[int, None] = {}  # insertion-ordered set, for examples
    self_deps = 0
    forward: list[tuple[int, int, bool]] = []  # (parent pos, child pos, is data dep)
    get = index.get
    for pos, node in enumerate(nodes):
        data_deps = node.data_deps
        ctrl_deps = node.ctrl_deps
        if ctrl_deps:
            parents = dict.fromkeys(data_deps + ctrl_deps)
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

    if missing_refs:
        examples = ", ".join(str(i) for i in list(missing_ids)[:_EXAMPLES])
        warnings.warn(
            f"{fname}: {missing_refs} dependencies on {len(missing_ids)} node ids not in "
            f"the file, treated as satisfied (e.g. ids {examples})",
            TraceWarning,
            stacklevel=2,
        )

    cycle_deps: list[tuple[int, int]] = []
    # Only a dependency on a later node can close a cycle: without one, skip the
    # search. Every cycle keeps one while it exists, so dropping the ctrl ones
    # inside strongly connected components breaks every cycle they close.
    # Cycles of data dependencies are real errors in the trace: they are kept,
    # and the run reports them as a deadlock (see ``cyclic_ids``).
    cyclic_ids: list[int] = []
    if forward:
        in_cycle = _cyclic_components(counts, children)
        if in_cycle:
            get_component = in_cycle.get
            for parent, child, is_data in forward:
                if not is_data and get_component(parent, -1) == get_component(child, -2):
                    children[parent].remove(child)
                    counts[child] -= 1
                    cycle_deps.append((nodes[child].id, nodes[parent].id))
            in_cycle = _cyclic_components(counts, children) if cycle_deps else in_cycle
            cyclic_ids = sorted(nodes[p].id for p in in_cycle)

    if self_deps or cycle_deps:
        parts = []
        if self_deps:
            parts.append(f"{self_deps} self-dependencies")
        if cycle_deps:
            examples = ", ".join(f"{c} on {p}" for c, p in cycle_deps[:_EXAMPLES])
            parts.append(
                f"{len(cycle_deps)} ctrl dependencies on later nodes that closed cycles "
                f"(e.g. node {examples})"
            )
        warnings.warn(
            f"{fname}: dropped {' and '.join(parts)}, which would deadlock",
            TraceWarning,
            stacklevel=2,
        )
    return RankGraph(nodes, index, counts, children, missing_refs, self_deps, cycle_deps, cyclic_ids,
                     trace.path, trace.metadata)


def build_graphs(traces: Iterable[RankTrace]) -> list[RankGraph]:
    """:func:`build_graph` for each rank; ranks sharing a node list share a graph.

    :func:`~astra_core.workload.chakra.read_workload` gives byte-identical
    files one node list, so their graph is built, and warned about, once.
    Ranks whose nodes have the same ids and dependencies in the same order
    (a pipeline stage of a generated step, whose ranks differ in peers and
    groups) share the graph's structure (index, parent counts, children,
    roots): it is resolved, and warned about, for the first of them.
    """
    built: dict[int, RankGraph] = {}
    structures: dict[tuple, RankGraph] = {}
    out = []
    for trace in traces:
        graph = built.get(id(trace.nodes))
        if graph is None:
            key = tuple([(n.id, n.data_deps, n.ctrl_deps) for n in trace.nodes])
            same = structures.get(key)
            if same is None:
                graph = structures[key] = build_graph(trace)
            else:
                graph = _sharing_structure(same, trace)
            built[id(trace.nodes)] = graph
        out.append(graph)
    return out


def _sharing_structure(graph: RankGraph, trace: RankTrace) -> RankGraph:
    """``trace``'s graph with ``graph``'s structure (same ids and dependencies)."""
    out = RankGraph.__new__(RankGraph)
    for name in RankGraph.__slots__:
        setattr(out, name, getattr(graph, name))
    out.nodes, out.path, out.metadata = trace.nodes, trace.path, trace.metadata
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
