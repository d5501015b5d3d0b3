"""examples/comm_bound_allreduce: its files load, and the backends differ as its README says.

The README's closed forms, on the example's k = 4 fat-tree (100 Gbps = 12.5
bytes/ns, 1000 ns per link): the ring's next rank is 2, 4 or 6 links away
(ranks 0-1 share an edge switch, 1-2 an aggregation switch, 3-4 and 15-0 go
through a core switch). A ring step moves 64 MiB / 4 chunks / 16 ranks = 1 MiB.
``analytical`` stores and forwards it: links x int(1000 + 2^20 / 12.5) ns;
``flow`` pipelines 256 RoCE packets of 4096 + 82 bytes:
4178 x (256 + links - 1) / 12.5 + links x 1000 ns.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

import astra
from astra_core.config.system import load_system
from astra_core.topology.ns3_format import read_ns3_topology
from astra_core.topology.pipeline import pipeline_ns
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra import read_rank_trace

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "comm_bound_allreduce"
MIB = 1 << 20
#: Links from rank r to rank r + 1 round the ring (the fat-tree's wiring, see above).
RING_LINKS = [2, 4, 2, 6] * 4
#: Step times the README documents (ns, rounded; the simulator is deterministic).
DOCUMENTED_NS = {"analytical": 35_771_260, "analytical-congestion": 35_771_260, "flow": 10_907_265}


def _compare_module():
    spec = importlib.util.spec_from_file_location("comm_bound_compare", EXAMPLE / "compare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_files_load():
    system = load_system(EXAMPLE / "system.json")
    assert system.preferred_dataset_splits == 4
    fabric = read_ns3_topology(EXAMPLE / "fabric.txt")
    assert fabric.npus_count == 16
    assert set(fabric.link_bandwidth) == {12.5} and set(fabric.link_latency) == {1000.0}
    traces = sorted((EXAMPLE / "workload").glob("allreduce_64MiB.*.et"))
    assert len(traces) == 16
    for rank in range(16):
        (node,) = read_rank_trace(EXAMPLE / "workload" / f"allreduce_64MiB.{rank}.et", rank).nodes
        assert (node.type, node.comm_type, node.comm_size) == (pb.COMM_COLL_NODE, pb.ALL_REDUCE, 64 * MIB)


def test_the_ring_crosses_2_4_or_6_links_and_analytical_pays_each_one_whole(built_backends):
    fabric = read_ns3_topology(EXAMPLE / "fabric.txt")
    assert [len(fabric.route(r, (r + 1) % 16, 0)) for r in range(16)] == RING_LINKS
    astra.simulate(**_compare_module().INPUTS, backend="analytical")
    per_link = int(1000 + MIB / 12.5)
    assert per_link == 84_886
    for rank, links in enumerate(RING_LINKS):
        assert built_backends[-1].delay_ns(rank, (rank + 1) % 16, MIB) == links * per_link
    # flow's lone 1 MiB message: one serialization plus a packet per extra hop
    for links, expected in ((2, 87_900), (6, 93_237)):
        lone = pipeline_ns([1 / 12.5] * links, MIB, 4096, 82) + links * 1000
        assert lone == pytest.approx(4178 * (256 + links - 1) / 12.5 + links * 1000)
        assert round(lone) == expected
    # per ring step on average: 3.5 store-and-forward serializations against about one
    assert sum(RING_LINKS) / 16 == 3.5


def test_the_backends_differ_as_documented():
    compare = _compare_module()
    steps = {name: compare.step_ns(name) for name in DOCUMENTED_NS}
    assert steps == pytest.approx(DOCUMENTED_NS, abs=1)  # flow's times are float ns
    # no two messages of a ring step share a link: the congestion-aware model adds nothing
    assert steps["analytical"] == steps["analytical-congestion"]
    # the ratio lies between one serialization per step and 3.5
    ratio = steps["analytical"] / steps["flow"]
    assert 1 < ratio < 3.5 and math.isclose(ratio, 3.28, abs_tol=0.005)
    assert compare.comparison(steps) == (
        "64 MiB all-reduce, 16 NPUs, k = 4 fat-tree: analytical 35.771 ms, analytical-congestion "
        "35.771 ms, flow 10.907 ms (analytical / flow = 3.28x; why: examples/comm_bound_allreduce/README.md)"
    )
