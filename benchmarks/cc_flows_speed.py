"""Speed of a congestion-control study on the ns3 backend: the HPCC paper's fabric at 50 % load.

The fabric of the HPCC evaluation (Li et al., SIGCOMM'19 §5.1; the artifact's
``simulation/mix/fat.txt``): 320 hosts at 100 Gbps, 16 per ToR; 5 pods of 4
ToRs and 4 aggregation switches, fully connected inside the pod at 400 Gbps;
aggregation switch ``i`` of every pod connects to core switches ``4i .. 4i +
3`` (16 cores) at 400 Gbps; 1 us per link. WebSearch flows at 50 % load
(``astra flows gen``) for ``--duration-ms`` (default 10, the study of
``docs/cc-studies.md``: about 11,700 flows, 20 GB) run with ``--cc`` (default DCQCN). Reports the
wall time of the run, packet-hops (packets of every kind sent over any link)
and packet-hops per second, and the slowdown percentiles.

    python benchmarks/cc_flows_speed.py [--duration-ms 10] [--cc dcqcn] [--load 0.5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from astra_core.flows.cdf import load_cdf
from astra_core.flows.generate import poisson_flows
from astra_core.flows_api import run_flows
from astra_core.topology.physical import PhysicalTopology

HOST_GBPS, FABRIC_GBPS, LATENCY_NS = 100.0, 400.0, 1000.0
PODS, TORS_PER_POD, AGGS_PER_POD, HOSTS_PER_TOR, CORES_PER_AGG = 5, 4, 4, 16, 4


def hpcc_fat_tree() -> PhysicalTopology:
    """The HPCC paper's 320-host fabric (node ids as the artifact's fat.txt: hosts
    0-319, ToRs 320-339, aggregation 340-359, cores 360-375)."""
    hosts = PODS * TORS_PER_POD * HOSTS_PER_TOR
    tors = hosts
    aggs = tors + PODS * TORS_PER_POD
    cores = aggs + PODS * AGGS_PER_POD
    nodes = cores + AGGS_PER_POD * CORES_PER_AGG
    host_bw, fabric_bw = HOST_GBPS / 8, FABRIC_GBPS / 8  # bytes/ns
    cables = [(h, tors + h // HOSTS_PER_TOR, host_bw) for h in range(hosts)]
    for pod in range(PODS):
        for t in range(TORS_PER_POD):
            for a in range(AGGS_PER_POD):
                cables.append((tors + pod * TORS_PER_POD + t, aggs + pod * AGGS_PER_POD + a, fabric_bw))
        for a in range(AGGS_PER_POD):
            for c in range(CORES_PER_AGG):
                cables.append((aggs + pod * AGGS_PER_POD + a, cores + a * CORES_PER_AGG + c, fabric_bw))
    links = [link for a, b, bw in cables for link in ((a, b, bw, LATENCY_NS), (b, a, bw, LATENCY_NS))]
    return PhysicalTopology(nodes, range(hosts, nodes), links, source="hpcc-fat-tree")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-ms", type=float, default=10.0)
    parser.add_argument("--load", type=float, default=0.5)
    parser.add_argument("--cc", default="dcqcn")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    fabric = hpcc_fat_tree()
    flows = poisson_flows(
        load_cdf("websearch"),
        fabric.npus_count,
        HOST_GBPS,
        args.load,
        round(args.duration_ms * 1e6),
        args.seed,
    )
    print(
        f"{len(flows):,} WebSearch flows, {sum(f.size_bytes for f in flows) / 1e9:.1f} GB, "
        f"{args.load:g} load over {args.duration_ms:g} ms on {fabric.npus_count} hosts, cc "
        f"{args.cc}",
        flush=True,
    )
    started = time.perf_counter()
    run = run_flows(flows, fabric, "ns3", {"cc": args.cc})
    wall = time.perf_counter() - started
    hops = run.backend.stats["packet_hops"]
    slowdown = np.array([f.slowdown for f in run.flows])
    print(
        f"wall {wall:.1f} s (simulation {run.wall_s:.1f} s), {hops:,} packet-hops, "
        f"{hops / run.wall_s / 1e6:.2f} M packet-hops/s; slowdown median "
        f"{np.median(slowdown):.2f}, p99 {np.percentile(slowdown, 99):.2f}; simulated "
        f"{max(f.start_ns + f.fct_ns for f in run.flows) / 1e6:.2f} ms"
    )


if __name__ == "__main__":
    main()
