"""Streamed traces: the same graphs, the same results, and only ready or running
nodes held decoded."""

from __future__ import annotations

import json
import os
import random
import warnings

import pytest

from astra_core.api import simulate
from astra_core.errors import TraceError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload import streaming
from astra_core.workload.chakra import read_rank_trace, read_workload
from astra_core.workload.graph import build_graph
from astra_core.workload.streaming import StreamedNodes, scan_trace
from astra_core.workload.writer import make_node, write_rank_trace
from tests.conftest import REFERENCE_DIR, run_reference_case

_CASES = json.loads((REFERENCE_DIR / "expected.json").read_text())["cases"]
# one case of every workload family and both backends, and the 16-NPU and 1 GiB ones
_PICKED = [c for c in _CASES if c["workload"].split("/")[1] in ("models", "custom")] + [
    c for c in _CASES if "16npus_1GB" in c["workload"] or "all_to_all" in c["workload"]
][:6]


def _graph_parts(graph) -> tuple:
    return (
        list(graph.parent_counts),
        [list(c) for c in graph.children],
        graph.roots,
        graph.missing_deps,
        graph.self_deps,
        graph.cycle_deps,
        graph.cyclic_ids,
        {i: graph.index[i] for i in (graph.nodes[p].id for p in range(len(graph.nodes)))},
    )


def _both_graphs(path) -> tuple:
    """(graph read whole, warnings), (graph streamed, warnings) of one file."""
    out = []
    for streamed in (False, True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trace = scan_trace(path.read_bytes(), str(path)) if streamed else read_rank_trace(path)
            graph = build_graph(trace)
        out.append((graph, [str(w.message) for w in caught]))
    return out


def test_a_pytorch_trace_streams_to_the_same_graph(reference_dir):
    # 3643 nodes with dependencies on missing ids and ctrl cycles to break
    (whole, warned), (streamed, warned_streamed) = _both_graphs(reference_dir / "pytorch" / "ddp_step.0.et")
    assert isinstance(streamed.nodes, StreamedNodes)
    assert warned and warned_streamed == warned
    assert _graph_parts(streamed) == _graph_parts(whole)
    assert [streamed.nodes[p] for p in (0, 100, 3642)] == [whole.nodes[p] for p in (0, 100, 3642)]


def test_random_traces_stream_to_the_same_graph(tmp_path):
    rng = random.Random(15)
    for trial in range(30):
        n = rng.randint(1, 60)
        ids = rng.sample(range(1000), n)
        if trial % 2:
            ids.sort()  # rising ids: looked up by binary search instead of a dict
        nodes = []
        for pos, node_id in enumerate(ids):
            pick = lambda: [rng.choice(ids + [5000]) for _ in range(rng.randint(0, 3))]  # noqa: E731, B023
            nodes.append(
                make_node(
                    node_id,
                    f"n{pos}",
                    pb.COMP_NODE,
                    data_deps=pick(),
                    ctrl_deps=pick(),
                    duration_micros=rng.randint(0, 9),
                )
            )
        path = write_rank_trace(tmp_path / f"r{trial}.0.et", nodes)
        (whole, warned), (streamed, warned_streamed) = _both_graphs(path)
        assert warned_streamed == warned
        assert _graph_parts(streamed) == _graph_parts(whole), trial


def test_duplicate_ids_and_bad_nodes_fail_as_when_read_whole(tmp_path):
    dup = write_rank_trace(
        tmp_path / "d.0.et", [make_node(1, "a", pb.COMP_NODE), make_node(1, "b", pb.COMP_NODE)]
    )
    bad = write_rank_trace(
        tmp_path / "b.0.et",
        [make_node(1, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=0, is_cpu_op=False)],
    )
    for path in (dup, bad):
        with pytest.raises(TraceError) as whole:
            build_graph(read_rank_trace(path))
        with pytest.raises(TraceError) as streamed:
            build_graph(scan_trace(path.read_bytes(), str(path)))
        assert str(streamed.value) == str(whole.value)


def test_a_file_changed_during_the_run_is_named(tmp_path):
    path = write_rank_trace(tmp_path / "c.0.et", [make_node(i, "k", pb.COMP_NODE) for i in range(3)])
    trace = scan_trace(path.read_bytes(), str(path))
    write_rank_trace(path, [make_node(i + 7, "k", pb.COMP_NODE) for i in range(3)])
    with pytest.raises(TraceError, match=r"c\.0\.et: changed while it was simulated"):
        trace.nodes[1]


@pytest.mark.parametrize("case", _PICKED, ids=[c["name"] for c in _PICKED])
def test_streamed_runs_equal_whole_runs(case, reference_dir, monkeypatch):
    whole = run_reference_case(case)
    monkeypatch.setattr(streaming, "STREAM_MIN_BYTES", 0)
    streamed = run_reference_case(case)
    assert isinstance(streamed.traces[0].nodes, StreamedNodes)
    assert streamed.symmetric == whole.symmetric
    assert [(r.finish_ns, r.exposed_comm_ns, r.compute_ns, r.comm_ns) for r in streamed.ranks] == [
        (r.finish_ns, r.exposed_comm_ns, r.compute_ns, r.comm_ns) for r in whole.ranks
    ]
    assert [list(e.records) for e in streamed.traces] == [list(e.records) for e in whole.traces]
    assert [r.finish_ns for r in streamed.ranks] == case["finish_ns"]  # upstream's numbers


def test_only_ready_and_running_nodes_are_held(tmp_path, monkeypatch):
    # A chain of compute kernels with an all-reduce every 10th node, on 4 ranks without
    # symmetry: a node is held from ready to done, so at most 2 a rank (a node and the
    # child it readies), 8 in all, whatever the length; none after the run.
    nodes = [
        make_node(i, "k", pb.COMP_NODE, data_deps=[i - 1] if i else [], duration_micros=3)
        if i % 10
        else make_node(
            i,
            "ar",
            pb.COMM_COLL_NODE,
            data_deps=[i - 1] if i else [],
            comm_type=pb.ALL_REDUCE,
            comm_size=1 << 16,
            is_cpu_op=False,
        )
        for i in range(400)
    ]
    write_rank_trace(tmp_path / "chain.0.et", nodes)
    for rank in range(1, 4):
        os.symlink(tmp_path / "chain.0.et", tmp_path / f"chain.{rank}.et")
    (tmp_path / "net.yml").write_text(
        "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n"
    )
    (tmp_path / "sys.json").write_text(
        json.dumps(
            {
                "scheduling-policy": "LIFO",
                "endpoint-delay": 10,
                "active-chunks-per-dimension": 1,
                "preferred-dataset-splits": 1,
                "collective-optimization": "baseline",
                "local-mem-bw": 1600,
                "all-reduce-implementation": ["ring"],
            }
        )
    )
    traces = read_workload(tmp_path / "chain", 4, stream_min_bytes=0)
    streamed = traces[0].nodes
    most = []
    hold = StreamedNodes.hold

    def counting_hold(self, pos):
        hold(self, pos)
        most.append(self.held)

    monkeypatch.setattr(StreamedNodes, "hold", counting_hold)
    result = simulate(traces, tmp_path / "sys.json", tmp_path / "net.yml", symmetry=False)
    assert len(most) == 4 * 400
    assert max(most) <= 8
    assert streamed.held == 0
    assert len({r.finish_ns for r in result.ranks}) == 1 and result.ranks[0].finish_ns > 0


def test_a_small_file_of_many_nodes_is_streamed(tmp_path, monkeypatch):
    # A decoded node costs about 1 KB, so a small file of many small nodes (1,000,000
    # chained kernels: 18.7 MB) takes 1 GB read whole. A file of more than
    # MAX_DECODED_NODES nodes streams, whatever its size.
    def chain(n: int, duration_us: int) -> list:
        return [
            make_node(i, "k", pb.COMP_NODE, data_deps=[i - 1] if i else [], duration_micros=duration_us)
            for i in range(n)
        ]

    write_rank_trace(tmp_path / "t.0.et", chain(6, 1))  # 6: decoded
    write_rank_trace(tmp_path / "t.1.et", chain(7, 2))  # 7: streamed
    write_rank_trace(tmp_path / "t.2.et", chain(6, 1))  # rank 0's bytes: shares its nodes
    write_rank_trace(tmp_path / "t.3.et", chain(6, 3))  # 6 again, other bytes: decoded
    monkeypatch.setattr(streaming, "MAX_DECODED_NODES", 6)
    traces = read_workload(tmp_path / "t", 4)
    kinds = [type(t.nodes).__name__ for t in traces]
    assert kinds == ["list", "StreamedNodes", "list", "list"]
    assert traces[2].nodes is traces[0].nodes
    assert all(os.path.getsize(tmp_path / f"t.{r}.et") < streaming.STREAM_MIN_BYTES for r in range(4))
    # Streamed or not, each rank's nodes are the file's, in order.
    assert [[n.duration_micros for n in t.nodes] for t in traces] == [[1] * 6, [2] * 7, [1] * 6, [3] * 6]
