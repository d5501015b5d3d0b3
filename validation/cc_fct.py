"""Congestion-control FCT study: WebSearch at 50 % load on a k = 4 fat-tree, every CC.

The standard method of the DCTCP and HPCC evaluations: Poisson flow arrivals
between random hosts at a fraction of the host links' capacity, sizes drawn
from the web-search distribution (Alizadeh et al., SIGCOMM'10), each flow on
its own queue pair; FCT slowdown by flow size, switch queue lengths and PFC
pauses per congestion control. Fabric: ``astra topology fat-tree --k 4``
(16 hosts, 20 switches, 100 Gbps, 1 us links), ns3 backend defaults
otherwise (PFC on, 32 MiB shared buffer per switch, 4096-byte MTU).

What the HPCC paper reports on this setup (Li et al., SIGCOMM'19, §5.2,
Fig. 10/11, WebSearch 50 % load, k = 8 fat-tree there): HPCC's short flows
have a lower tail slowdown than DCQCN's, and its switch queues stay near
empty where DCQCN's build to its ECN thresholds. This script measures the
same quantities here:

* per CC: flows, whether every flow completed with slowdown >= 1, median and
  99th percentile slowdown of flows under 100 KB and of all flows, the mean,
  99th percentile and peak of switch egress queues (sampled every
  ``--monitor-us`` over the busy ports), PFC pauses, ECN marks, wall time;
* ``--plots DIR``: slowdown against flow size (median and 99th percentile per
  5 % bin), one line per CC.

    python validation/cc_fct.py [--duration-ms 10] [--load 0.5] [--seed 1]
        [--ccs none,dcqcn,hpcc,hpcc-pint,timely,dctcp] [--plots DIR] [--markdown FILE]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from astra_core.flows.cdf import load_cdf
from astra_core.flows.generate import host_link_gbps, poisson_flows
from astra_core.flows.report import flow_table, plot_slowdown
from astra_core.flows_api import run_flows
from astra_core.topology.generators import fat_tree

CCS = ("none", "dcqcn", "hpcc", "hpcc-pint", "timely", "dctcp")
SMALL_BYTES = 100_000


def study(cc: str, flows, fabric, monitor_us: float) -> tuple[dict, object]:
    """One CC's row of the table and its flow table."""
    run = run_flows(flows, fabric, "ns3", {"cc": cc, "monitor": {"interval_us": monitor_us}})
    table = flow_table(run.flows)
    results = run.backend.results
    queues = results.queues()
    switch_ports = {link for link in range(fabric.links_count) if fabric.link_src[link] in fabric.switches}
    queues = queues[queues.link.isin(switch_ports)]
    end_ns = max(f.start_ns + f.fct_ns for f in run.flows)
    # Samples of empty queues are absent: count every (port, instant) slot of the busy ports.
    slots = len(set(queues.link)) * max(1.0, end_ns / (monitor_us * 1e3))
    samples = np.concatenate([queues.bytes.to_numpy(), np.zeros(max(0, int(slots) - len(queues)))])
    small = table[table.size_bytes < SMALL_BYTES].slowdown
    stats = run.backend.stats
    row = {
        "cc": cc,
        "flows": len(table),
        "all_done": bool(len(table) == len(flows)),
        "min_slowdown": float(table.slowdown.min()),
        "small_p50": float(small.median()),
        "small_p99": float(np.percentile(small, 99)),
        "all_p50": float(table.slowdown.median()),
        "all_p99": float(np.percentile(table.slowdown, 99)),
        "queue_mean_kb": float(samples.mean()) / 1e3,
        "queue_p99_kb": float(np.percentile(samples, 99)) / 1e3,
        "queue_max_kb": float(results.ports().max_queue_bytes[sorted(switch_ports)].max()) / 1e3,
        "pfc_pauses": stats["pfc_pauses"],
        "ecn_marks": stats["ecn_marks"],
        "wall_s": run.wall_s,
    }
    return row, table


def markdown(rows: list[dict]) -> str:
    head = (
        "| cc | flows | min slowdown | <100 KB p50 | <100 KB p99 | all p50 | all p99 | "
        "switch queue mean / p99 / max (KB) | PFC pauses | ECN marks | wall s |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        lines.append(
            f"| {r['cc']} | {r['flows']} | {r['min_slowdown']:.3f} | {r['small_p50']:.2f} | "
            f"{r['small_p99']:.2f} | {r['all_p50']:.2f} | {r['all_p99']:.2f} | "
            f"{r['queue_mean_kb']:.1f} / {r['queue_p99_kb']:.0f} / {r['queue_max_kb']:.0f} | "
            f"{r['pfc_pauses']} | {r['ecn_marks']} | {r['wall_s']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-ms", type=float, default=10.0)
    parser.add_argument("--load", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cdf", default="websearch")
    parser.add_argument("--ccs", default=",".join(CCS))
    parser.add_argument("--monitor-us", type=float, default=10.0)
    parser.add_argument("--plots", help="directory for fct_slowdown_by_cc.png")
    parser.add_argument("--markdown", help="also write the table here")
    args = parser.parse_args()
    fabric = fat_tree(4, 100.0, 1000.0)
    flows = poisson_flows(
        load_cdf(args.cdf),
        fabric.npus_count,
        host_link_gbps(fabric),
        args.load,
        round(args.duration_ms * 1e6),
        args.seed,
    )
    print(
        f"{len(flows)} {args.cdf} flows at load {args.load} over {args.duration_ms:g} ms, "
        f"{sum(f.size_bytes for f in flows) / 1e6:.0f} MB, on a k = 4 fat-tree"
    )
    rows, tables = [], {}
    for cc in args.ccs.split(","):
        row, tables[cc] = study(cc, flows, fabric, args.monitor_us)
        rows.append(row)
        print(f"{cc}: done in {row['wall_s']:.1f} s", flush=True)
    text = markdown(rows)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    if args.plots:
        out = Path(args.plots)
        out.mkdir(parents=True, exist_ok=True)
        plot_slowdown(
            tables,
            out / "fct_slowdown_by_cc.png",
            f"WebSearch {args.load:g} load, k = 4 fat-tree, {len(flows)} flows",
        )
        print(f"wrote {out / 'fct_slowdown_by_cc.png'}")


if __name__ == "__main__":
    main()
