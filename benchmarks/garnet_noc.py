"""Speed of the garnetlike model: flit-hops per second at an 8x8 mesh load point, and the
wall time of the 8x8 mesh latency-load sweep (`astra noc --sweep`).

A flit-hop is one flit crossing one router-to-router link (ejections into the
NIs are counted apart). CPU time is reported next to wall time because the
machine may be shared.

    python benchmarks/garnet_noc.py [--rate 0.3] [--cycles 5000] [--sweep-cycles 2000] [--jobs 1]
"""

from __future__ import annotations

import argparse
import time

from astra_garnetlike.cli import DEFAULT_RATES
from astra_garnetlike.noc import plot_sweep, run_noc, sweep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=0.3, help="offered load, flits/node/cycle")
    parser.add_argument("--cycles", type=int, default=5000)
    parser.add_argument("--sweep-cycles", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--plot", help="also draw the sweep to this PNG")
    args = parser.parse_args()

    cpu, wall = time.process_time(), time.perf_counter()
    point = run_noc("mesh", (8, 8), "uniform_random", args.rate, cycles=args.cycles)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(
        f"8x8 mesh, uniform random, {args.rate} flits/node/cycle, {args.cycles} cycles: "
        f"{point.flit_hops:,} flit-hops in {cpu:.2f} s CPU ({wall:.2f} s wall): "
        f"{point.flit_hops / cpu / 1e6:.3f} M flit-hops/s CPU "
        f"({point.flit_hops / wall / 1e6:.3f} M/s wall); latency {point.avg_packet_latency:.1f} "
        f"cycles, accepted {point.accepted:.3f}"
    )

    wall = time.perf_counter()
    results = sweep(
        DEFAULT_RATES,
        jobs=args.jobs,
        topology="mesh",
        dims=(8, 8),
        pattern="uniform_random",
        cycles=args.sweep_cycles,
    )
    wall = time.perf_counter() - wall
    hops = sum(r.flit_hops for r in results)
    best = max(r.accepted for r in results)
    print(
        f"8x8 mesh sweep, {len(results)} load points of {args.sweep_cycles} cycles "
        f"(jobs={args.jobs}): wall {wall:.1f} s, {hops:,} flit-hops, saturation throughput "
        f"{best:.3f} flits/node/cycle"
    )
    if args.plot:
        plot_sweep(results, args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
