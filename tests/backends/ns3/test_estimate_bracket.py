"""The ns3 estimate's bounds hold the measured wall time of the project's ns3 benchmarks,
within 3x either way.

With fast-forward on, the estimate priced every packet as if simulated: 8.32 h for the
128-GPU Llama-3-8B step that runs in about 2 minutes, 220x too high (and a floor that
counted the messages alone). It now prices what the model simulates: the last packets
of each message on a pair that can be found steady, the whole of its longest message
once, and every packet where a pair's messages are too short to be measured or its
route crosses an overloaded port. Only the estimate runs here (the analytical model
behind a tally); the measured figures are copied from the benchmarks' records.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from astra_core.api import estimate

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))  # scripts, not a package

#: Measured wall seconds of the Llama-3-8B step of benchmarks/ns3_llm.py with the default
#: ns3 config (fast-forward on), by GPUs.
MEASURED_S = {
    # benchmarks/results/ns3_llm.md, "16 GPUs": simulated in 5.3 s
    "16": [5.3],
    # benchmarks/results/ns3_llm.md, "128 GPUs": simulated in 133.2 s, wall 2 min 16.7 s,
    # and `python benchmarks/ns3_llm.py --gpus 128` 141.9 s;
    # benchmarks/results/speed_record.json, "ns3-llm-128": wall_s 116.80532687999948
    "128": [133.2, 136.7, 141.9, 116.80532687999948],
    # benchmarks/results/ns3_llm.md, "1,024 GPUs": simulated in 1,704.0 s, wall 28 min 54 s
    "1024": [1704.0, 1734.0],
}


@pytest.mark.parametrize("gpus", list(MEASURED_S))
def test_the_estimates_bounds_hold_the_llm_steps_measured_time_within_3x(gpus, tmp_path):
    from ns3_llm import SYSTEM, write_inputs

    prefix, network = write_inputs(gpus, tmp_path)
    est = estimate(
        str(prefix), str(SYSTEM), str(network), backend="ns3", backend_config={"max_packet_hops": 0}
    )
    assert est.low_s is not None and est.high_s is not None and est.packet_s is not None
    for measured in MEASURED_S[gpus]:
        assert est.low_s <= measured <= est.high_s
        assert est.high_s <= 3 * measured and measured <= 3 * est.low_s
    assert est.low_s <= est.wall_s <= est.high_s < est.packet_s / 20  # most packets are skipped


def test_an_all_to_all_over_overloaded_core_links_is_priced_packet_by_packet_there():
    # The 64 MiB all-to-all of 16 hosts on a k = 4 fat-tree (benchmarks/ns3_fast_forward.py,
    # case a2a-fat-tree): ECMP puts two flows on some core links, whose queues, ECN marks
    # and CNPs are never steady. benchmarks/results/ns3_fast_forward.jsonl, DCQCN: with
    # fast_forward true, 2,747,113 packet-hops, none skipped, sim_wall_s 7.990 s.
    from ns3_fast_forward import _trace_cases

    from astra_core.config.system import upstream_system

    case = _trace_cases()["a2a-fat-tree"](64 << 20)
    fabric = case.fabric()
    traces = case.nodes(fabric.npus_count)
    est = _estimate_nodes(traces, fabric, upstream_system(case.algorithm, 1), case.comm_groups)
    assert est.simulated > est.work / 2  # the pairs whose route meets two flows on a link
    assert est.low_s <= 7.990 <= est.high_s
    assert est.high_s <= 3 * 7.990
    assert 3 * est.low_s >= 7.990


def _estimate_nodes(traces, fabric, system, comm_groups, config=None):
    import tempfile

    from astra_core.topology.ns3_format import write_ns3_topology
    from astra_core.workload.writer import write_rank_trace

    with tempfile.TemporaryDirectory() as folder:
        write_ns3_topology(fabric, f"{folder}/fabric.txt")
        for rank, nodes in traces.items():
            write_rank_trace(f"{folder}/w.{rank}.et", nodes)
        return estimate(
            f"{folder}/w",
            system,
            topology=f"{folder}/fabric.txt",
            backend="ns3",
            comm_groups=comm_groups,
            backend_config=config,
        )


def test_an_incast_is_priced_packet_by_packet_and_a_ring_by_its_messages_tails():
    from astra_ns3.config import load_config
    from astra_ns3.tests.fabrics import star
    from astra_ns3.work import Ns3Work

    model = Ns3Work(star(5), load_config({}))  # 100 Gb/s links, ACK every packet
    mib = [(1 << 20, 10)]  # ten messages of 256 whole packets: 512 frames a link each
    # four senders into host 0: its link is offered 4x its rate, never steady
    assert model.simulated_work({(s, 0): mib for s in range(1, 5)}) == (4 * 10 * 512 * 2,) * 2
    # a ring on one switch (every route as long: its queue pairs start together): each
    # message's last packet and its ACK on both links, and each pair measured once from a
    # standing start: a base RTT to settle and windows of 9 and 18 frames (a third
    # window, at most)
    expected, most = model.simulated_work({(s, (s + 1) % 5): mib for s in range(5)})
    rtt = model._latency_ns(star(5).route(1, 2, 0), 2)
    frame_ns = 4096 / star(5).link_bandwidth[0]
    measured = [math.ceil((rtt + windows * 9 * frame_ns) / frame_ns) * 2 for windows in (3, 7)]
    assert (expected, most) == tuple(5 * (10 * 2 + m) * 2 for m in measured)


OUTSIDE = "outside"
#: Every run of benchmarks/results/ns3_fast_forward.jsonl (model of 8a91dbb, 2026-11-26,
#: nice 19 beside the 1,024-GPU Llama step): case, size, cc, fast_forward, sim_wall_s (s).
#: OUTSIDE: the estimate's bounds miss the 3x bracket there. The short fat-tree and
#: leaf-spine runs (4 MiB, 16 packets a message) cost 2x the projection: they complete
#: their messages at many distinct instants, one caller-worker round trip each, which the
#: per-message cost does not see; the others miss by less than the same run's own
#: +-30 % scatter (ring-switch 4 MiB: 0.30-0.53 s for the same packets).
FAST_FORWARD_RUNS = [
    ("p2p-fat-tree", "4 MiB", "dcqcn", False, 0.076),
    ("p2p-fat-tree", "4 MiB", "dcqcn", True, 0.026),
    ("p2p-fat-tree", "4 MiB", "hpcc", False, 0.061),
    ("p2p-fat-tree", "4 MiB", "hpcc", True, 0.079),
    ("p2p-fat-tree", "4 MiB", "none", False, 0.062),
    ("p2p-fat-tree", "4 MiB", "none", True, 0.027),
    ("p2p-fat-tree", "64 MiB", "dcqcn", False, 0.375, OUTSIDE),
    ("p2p-fat-tree", "64 MiB", "dcqcn", True, 0.045),
    ("p2p-fat-tree", "64 MiB", "hpcc", False, 0.663),
    ("p2p-fat-tree", "64 MiB", "hpcc", True, 0.200, OUTSIDE),
    ("p2p-fat-tree", "64 MiB", "none", False, 0.532),
    ("p2p-fat-tree", "64 MiB", "none", True, 0.049),
    ("p2p-gpu-cluster", "4 MiB", "dcqcn", False, 0.075),
    ("p2p-gpu-cluster", "4 MiB", "dcqcn", True, 0.054),
    ("p2p-gpu-cluster", "4 MiB", "hpcc", False, 0.074),
    ("p2p-gpu-cluster", "4 MiB", "hpcc", True, 0.043),
    ("p2p-gpu-cluster", "4 MiB", "none", False, 0.058),
    ("p2p-gpu-cluster", "4 MiB", "none", True, 0.041),
    ("p2p-gpu-cluster", "64 MiB", "dcqcn", False, 0.311),
    ("p2p-gpu-cluster", "64 MiB", "dcqcn", True, 0.055),
    ("p2p-gpu-cluster", "64 MiB", "hpcc", False, 0.491),
    ("p2p-gpu-cluster", "64 MiB", "hpcc", True, 0.316),
    ("p2p-gpu-cluster", "64 MiB", "none", False, 0.292),
    ("p2p-gpu-cluster", "64 MiB", "none", True, 0.031),
    ("ring-switch", "4 MiB", "dcqcn", False, 0.304, OUTSIDE),
    ("ring-switch", "4 MiB", "dcqcn", True, 0.404),
    ("ring-switch", "4 MiB", "hpcc", False, 0.421),
    ("ring-switch", "4 MiB", "hpcc", True, 0.323),
    ("ring-switch", "4 MiB", "none", False, 0.297, OUTSIDE),
    ("ring-switch", "4 MiB", "none", True, 0.528),
    ("ring-switch", "64 MiB", "dcqcn", False, 4.785),
    ("ring-switch", "64 MiB", "dcqcn", True, 0.118),
    ("ring-switch", "64 MiB", "hpcc", False, 5.066),
    ("ring-switch", "64 MiB", "hpcc", True, 4.705),
    ("ring-switch", "64 MiB", "none", False, 4.776),
    ("ring-switch", "64 MiB", "none", True, 0.093, OUTSIDE),
    ("ring-fat-tree", "4 MiB", "dcqcn", False, 0.937),
    ("ring-fat-tree", "4 MiB", "dcqcn", True, 1.004),
    ("ring-fat-tree", "4 MiB", "hpcc", False, 0.892),
    ("ring-fat-tree", "4 MiB", "hpcc", True, 0.943),
    ("ring-fat-tree", "4 MiB", "none", False, 1.120),
    ("ring-fat-tree", "4 MiB", "none", True, 1.361, OUTSIDE),
    ("ring-fat-tree", "64 MiB", "dcqcn", False, 9.105),
    ("ring-fat-tree", "64 MiB", "dcqcn", True, 0.951),
    ("ring-fat-tree", "64 MiB", "hpcc", False, 13.061),
    ("ring-fat-tree", "64 MiB", "hpcc", True, 11.241),
    ("ring-fat-tree", "64 MiB", "none", False, 9.653),
    ("ring-fat-tree", "64 MiB", "none", True, 1.031),
    ("a2a-fat-tree", "4 MiB", "dcqcn", False, 0.774),
    ("a2a-fat-tree", "4 MiB", "dcqcn", True, 0.714),
    ("a2a-fat-tree", "4 MiB", "hpcc", False, 0.973, OUTSIDE),
    ("a2a-fat-tree", "4 MiB", "hpcc", True, 1.232, OUTSIDE),
    ("a2a-fat-tree", "4 MiB", "none", False, 1.032, OUTSIDE),
    ("a2a-fat-tree", "4 MiB", "none", True, 1.194, OUTSIDE),
    ("a2a-fat-tree", "64 MiB", "dcqcn", False, 8.754),
    ("a2a-fat-tree", "64 MiB", "dcqcn", True, 7.990),
    ("a2a-fat-tree", "64 MiB", "hpcc", False, 6.678),
    ("a2a-fat-tree", "64 MiB", "hpcc", True, 7.536),
    ("a2a-fat-tree", "64 MiB", "none", False, 7.572),
    ("a2a-fat-tree", "64 MiB", "none", True, 7.915),
    ("ring-leaf-spine", "4 MiB", "dcqcn", False, 1.110, OUTSIDE),
    ("ring-leaf-spine", "4 MiB", "dcqcn", True, 1.118, OUTSIDE),
    ("ring-leaf-spine", "4 MiB", "hpcc", False, 0.816),
    ("ring-leaf-spine", "4 MiB", "hpcc", True, 1.193, OUTSIDE),
    ("ring-leaf-spine", "4 MiB", "none", False, 0.817),
    ("ring-leaf-spine", "4 MiB", "none", True, 0.889, OUTSIDE),
    ("ring-leaf-spine", "64 MiB", "dcqcn", False, 4.795, OUTSIDE),
    ("ring-leaf-spine", "64 MiB", "dcqcn", True, 0.405),
    ("ring-leaf-spine", "64 MiB", "hpcc", False, 5.874),
    ("ring-leaf-spine", "64 MiB", "hpcc", True, 5.687),
    ("ring-leaf-spine", "64 MiB", "none", False, 5.585),
    ("ring-leaf-spine", "64 MiB", "none", True, 0.433),
    ("a2a-leaf-spine", "4 MiB", "dcqcn", False, 0.715, OUTSIDE),
    ("a2a-leaf-spine", "4 MiB", "dcqcn", True, 0.821, OUTSIDE),
    ("a2a-leaf-spine", "4 MiB", "hpcc", False, 0.746, OUTSIDE),
    ("a2a-leaf-spine", "4 MiB", "hpcc", True, 0.594),
    ("a2a-leaf-spine", "4 MiB", "none", False, 0.820, OUTSIDE),
    ("a2a-leaf-spine", "4 MiB", "none", True, 0.773, OUTSIDE),
    ("a2a-leaf-spine", "64 MiB", "dcqcn", False, 4.197),
    ("a2a-leaf-spine", "64 MiB", "dcqcn", True, 4.830),
    ("a2a-leaf-spine", "64 MiB", "hpcc", False, 3.883),
    ("a2a-leaf-spine", "64 MiB", "hpcc", True, 4.768),
    ("a2a-leaf-spine", "64 MiB", "none", False, 5.042),
    ("a2a-leaf-spine", "64 MiB", "none", True, 4.900),
    ("incast", "4 MiB", "dcqcn", False, 0.072),
    ("incast", "4 MiB", "dcqcn", True, 0.116),
    ("incast", "4 MiB", "hpcc", False, 0.107),
    ("incast", "4 MiB", "hpcc", True, 0.071),
    ("incast", "4 MiB", "none", False, 0.113),
    ("incast", "4 MiB", "none", True, 0.110),
    ("incast", "64 MiB", "dcqcn", False, 1.074),
    ("incast", "64 MiB", "dcqcn", True, 0.706),
    ("incast", "64 MiB", "hpcc", False, 0.734),
    ("incast", "64 MiB", "hpcc", True, 0.794),
    ("incast", "64 MiB", "none", False, 0.858),
    ("incast", "64 MiB", "none", True, 0.699),
    ("two-jobs", "4 MiB", "dcqcn", False, 0.638),
    ("two-jobs", "4 MiB", "dcqcn", True, 0.556),
    ("two-jobs", "4 MiB", "hpcc", False, 0.700),
    ("two-jobs", "4 MiB", "hpcc", True, 0.639),
    ("two-jobs", "4 MiB", "none", False, 0.393),
    ("two-jobs", "4 MiB", "none", True, 0.728),
    ("two-jobs", "64 MiB", "dcqcn", False, 5.710),
    ("two-jobs", "64 MiB", "dcqcn", True, 0.396, OUTSIDE),
    ("two-jobs", "64 MiB", "hpcc", False, 6.427),
    ("two-jobs", "64 MiB", "hpcc", True, 5.756),
    ("two-jobs", "64 MiB", "none", False, 6.432),
    ("two-jobs", "64 MiB", "none", True, 0.365, OUTSIDE),
    ("ring-switch8", "256 MiB", "dcqcn", False, 7.027, OUTSIDE),
    ("ring-switch8", "256 MiB", "dcqcn", True, 0.075),
    ("ring-switch8", "256 MiB", "hpcc", False, 8.175),
    ("ring-switch8", "256 MiB", "hpcc", True, 4.322, OUTSIDE),
    ("ring-switch8", "256 MiB", "none", False, 7.487),
    ("ring-switch8", "256 MiB", "none", True, 0.055),
    ("a2a-switch8", "256 MiB", "dcqcn", False, 3.304, OUTSIDE),
    ("a2a-switch8", "256 MiB", "dcqcn", True, 0.073),
    ("a2a-switch8", "256 MiB", "hpcc", False, 4.001),
    ("a2a-switch8", "256 MiB", "hpcc", True, 5.820),
    ("a2a-switch8", "256 MiB", "none", False, 3.943),
    ("a2a-switch8", "256 MiB", "none", True, 0.071),
    ("cc-study-incast", "8 x 12.5 MB", "dcqcn", False, 0.291),
    ("cc-study-incast", "8 x 12.5 MB", "dcqcn", True, 0.212),
    ("cc-study-incast", "8 x 12.5 MB", "hpcc", False, 0.269),
    ("cc-study-incast", "8 x 12.5 MB", "hpcc", True, 0.283),
    ("cc-study-incast", "8 x 12.5 MB", "none", False, 0.226),
    ("cc-study-incast", "8 x 12.5 MB", "none", True, 0.277),
    ("websearch-50", "10 ms", "dcqcn", False, 6.840),
    ("websearch-50", "10 ms", "dcqcn", True, 5.540),
    ("websearch-50", "10 ms", "hpcc", False, 6.239),
    ("websearch-50", "10 ms", "hpcc", True, 5.759),
    ("websearch-50", "10 ms", "none", False, 5.310),
    ("websearch-50", "10 ms", "none", True, 5.311),
]


def _trace_estimate(name: str, size: str, cc: str, fast_forward: bool):
    from ns3_fast_forward import MIB, _trace_cases

    from astra_core.config.system import upstream_system

    case = _trace_cases()[name](round(float(size.split()[0]) * MIB))
    fabric = case.fabric()
    config = {"cc": cc, "fast_forward": fast_forward, "max_packet_hops": 0}
    system = upstream_system(case.algorithm, 1)
    return _estimate_nodes(case.nodes(fabric.npus_count), fabric, system, case.comm_groups, config)


def _flows_estimate(name: str, cc: str, fast_forward: bool):
    from ns3_fast_forward import incast_flows, star, websearch_flows

    from astra_core.estimate import price_run as price
    from astra_core.topology.generators import fat_tree
    from astra_ns3.config import load_config
    from astra_ns3.work import Ns3Work

    if name == "websearch-50":
        flows, fabric = websearch_flows(10.0), fat_tree(4, 100.0, 1000.0)
    else:
        flows, fabric = incast_flows(), star(9)
    model = Ns3Work(fabric, load_config({"cc": cc, "fast_forward": fast_forward}))
    return price("ns3", model, lambda: ({}, None, False), flows)


@pytest.mark.parametrize(
    ("name", "size", "cc", "fast_forward", "measured"),
    [
        pytest.param(*run[:5], marks=pytest.mark.xfail(strict=True, reason="see OUTSIDE"))
        if len(run) > 5
        else run
        for run in FAST_FORWARD_RUNS
    ],
)
def test_the_estimates_bounds_hold_every_fast_forward_benchmark_run_within_3x(
    name, size, cc, fast_forward, measured
):
    if name in ("websearch-50", "cc-study-incast"):
        est = _flows_estimate(name, cc, fast_forward)
    else:
        est = _trace_estimate(name, size, cc, fast_forward)
    assert est.low_s is not None and est.high_s is not None
    assert measured / 3 <= est.low_s <= measured <= est.high_s <= 3 * measured
