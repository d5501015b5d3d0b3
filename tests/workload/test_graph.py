"""Dependency graphs: counts and children, missing deps, cycles, duplicate ids."""

from __future__ import annotations

import warnings

import pytest

from astra_core.errors import TraceError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra import ETNode, RankTrace, read_rank_trace, read_workload
from astra_core.workload.graph import RankGraph, TraceWarning, build_graph, build_graphs

COMP = pb.COMP_NODE


def _trace(*nodes: ETNode, path="t.0.et") -> RankTrace:
    return RankTrace(path, list(nodes))


def _run_order(graph: RankGraph) -> list[int]:
    """Issue nodes as an engine would (lowest ready position first); return node ids."""
    remaining = graph.parent_counts[:]
    ready = sorted(graph.roots)
    order = []
    while ready:
        pos = ready.pop(0)
        order.append(graph.nodes[pos].id)
        for child in graph.children[pos]:
            remaining[child] -= 1
            if remaining[child] == 0:
                ready.append(child)
                ready.sort()
    return order


def _build_quietly(trace: RankTrace) -> tuple[RankGraph, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = build_graph(trace)
    assert all(w.category is TraceWarning for w in caught)
    return graph, [str(w.message) for w in caught]


def test_counts_and_children():
    graph, messages = _build_quietly(
        _trace(
            ETNode(10, "a", COMP),
            ETNode(11, "b", COMP, data_deps=(10,)),
            ETNode(12, "c", COMP, data_deps=(10, 11), ctrl_deps=(11,)),  # 11 twice: counts once
            ETNode(13, "d", COMP, ctrl_deps=(10,)),
            ETNode(14, "e", COMP, data_deps=(12, 12)),
        )
    )
    assert messages == []
    assert graph.index == {10: 0, 11: 1, 12: 2, 13: 3, 14: 4}
    assert graph.parent_counts == [0, 1, 2, 1, 1]
    assert graph.children == [[1, 2, 3], [2], [4], [], []]
    assert graph.roots == [0]
    assert _run_order(graph) == [10, 11, 12, 13, 14]
    assert (graph.missing_deps, graph.self_deps, graph.cycle_deps) == (0, 0, [])


def test_forward_dependencies_without_cycles_are_kept():
    graph, messages = _build_quietly(_trace(ETNode(1, "a", COMP, data_deps=(2,)), ETNode(2, "b", COMP)))
    assert messages == []
    assert graph.parent_counts == [1, 0]
    assert _run_order(graph) == [2, 1]


def test_duplicate_id():
    with pytest.raises(TraceError) as info:
        build_graph(_trace(ETNode(1, "a", COMP), ETNode(2, "b", COMP), ETNode(1, "c", COMP), path="dup.4.et"))
    assert str(info.value) == "dup.4.et: duplicate node id 1 (nodes #0 and #2 in file)"


def test_missing_dependencies_warn_once_per_file():
    trace = _trace(
        ETNode(1, "a", COMP, data_deps=(100,)),
        ETNode(2, "b", COMP, data_deps=(1, 101), ctrl_deps=(100,)),
        path="miss.2.et",
    )
    graph, messages = _build_quietly(trace)
    assert messages == [
        "miss.2.et: 3 dependencies on 2 node ids not in the file, treated as satisfied (e.g. ids 100, 101)"
    ]
    assert graph.parent_counts == [0, 1] and graph.missing_deps == 3
    assert _run_order(graph) == [1, 2]


def test_ctrl_cycles_are_broken_data_cycles_kept():
    trace = _trace(
        ETNode(1, "host op", COMP, ctrl_deps=(2,)),  # depends on the kernel it launches...
        ETNode(2, "kernel", COMP, ctrl_deps=(1,)),  # ...which depends on it: a cycle
        ETNode(3, "self", COMP, data_deps=(2,), ctrl_deps=(3,)),
        ETNode(4, "data cycle", COMP, data_deps=(5,)),
        ETNode(5, "data cycle", COMP, data_deps=(4, 3)),
        ETNode(6, "waits for a later node, no cycle", COMP, ctrl_deps=(7,)),
        ETNode(7, "late", COMP),
        path="cyc.0.et",
    )
    graph, messages = _build_quietly(trace)
    assert messages == [
        (
            "cyc.0.et: dropped 1 self-dependencies and 1 ctrl dependencies on later nodes that "
            "closed cycles (e.g. node 1 on 2), which would deadlock"
        )
    ]
    assert graph.self_deps == 1 and graph.cycle_deps == [(1, 2)]
    # The data cycle 4 <-> 5 stays: those nodes never run and are named.
    assert graph.cyclic_ids == [4, 5]
    assert sorted(_run_order(graph)) == [1, 2, 3, 6, 7]
    assert graph.parent_counts[5] == 1  # 6 still waits for 7


def test_reference_workloads_have_clean_graphs(reference_dir):
    for first in sorted((reference_dir / "workload").glob("*/*/*.0.et")):
        prefix = str(first)[: -len(".0.et")]
        count = len(list(first.parent.glob("*.et")))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            graphs = build_graphs(read_workload(prefix, count))
        for graph in graphs:
            assert len(_run_order(graph)) == len(graph)


def test_resnet_graph(reference_dir):
    trace = read_rank_trace(
        reference_dir / "workload/models/Resnet50_DataParallel_8npus/Resnet50_DataParallel.0.et"
    )
    graph = build_graph(trace)
    assert len(graph) == 215 and sum(graph.parent_counts) == 214 and graph.roots == [0]


def test_identical_ranks_share_a_graph(reference_dir):
    graphs = build_graphs(read_workload(reference_dir / "workload/custom/CHAIN_COMP_AR_COMP_8npus/chain", 8))
    assert all(g is graphs[0] for g in graphs)
    assert graphs[0].parent_counts == [0, 1, 1]


def test_pytorch_ddp_step(reference_dir):
    trace = read_rank_trace(reference_dir / "pytorch" / "ddp_step.0.et")
    with pytest.warns(TraceWarning) as caught:
        graph = build_graph(trace)
    missing = [str(w.message) for w in caught if "not in the file" in str(w.message)]
    assert missing == [
        (
            f"{trace.path}: 1277 dependencies on 210 node ids not in the file, treated as satisfied "
            "(e.g. ids 3, 429, 434, 617, 621)"
        )
    ]
    cycles = [str(w.message) for w in caught if "deadlock" in str(w.message)]
    assert len(cycles) == 1 and len(caught) == 2
    assert "383 self-dependencies and 554 ctrl dependencies on later nodes" in cycles[0]
    assert graph.missing_deps == 1277 and graph.self_deps == 383 and len(graph.cycle_deps) == 554
    assert len(_run_order(graph)) == 3664
