"""Wall time and peak memory of the flow backend under many short flows joining one by one.

Thousands of 1,000-byte flows between random host pairs of a
k = 4 fat-tree (16 hosts, 100 Gbps, 1 us links), one starting every
``--spacing-ns`` (1 ns: the hosts are offered about 5x their capacity, so
the flows pile up and every start changes the max-min rate of the flows on
its links). Prints the wall time, the peak RSS of this process, the events
the queue processed and the flows the max-min solver refilled (its work).

    python benchmarks/flow_many_flows.py [--flows 2000] [--spacing-ns 1] [--seed 1]

Run it in a fresh process per measurement (the peak RSS is the process's).
"""

from __future__ import annotations

import argparse
import random
import resource
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flows", type=int, default=2000)
    parser.add_argument("--spacing-ns", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    from astra_core.flows.flowfile import FlowSpec
    from astra_core.flows_api import run_flows
    from astra_core.topology.generators import fat_tree

    rng = random.Random(args.seed)
    flows = []
    for i in range(args.flows):
        src = rng.randrange(16)
        dst = rng.randrange(15)
        dst += dst >= src
        flows.append(FlowSpec(src, dst, 1000, i * args.spacing_ns))
    started = time.perf_counter()
    run = run_flows(flows, fat_tree(4, 100.0, 1000.0), "flow")
    wall = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    last = max(f.start_ns + f.fct_ns for f in run.flows)
    print(
        f"{args.flows} flows of 1000 B, one every {args.spacing_ns} ns: {wall:.2f} s, peak RSS "
        f"{peak_mb:.0f} MB, {run.backend.events.events_processed:,} events, "
        f"{run.backend.flows_solved:,} flows refilled, last arrival {last:,.3f} ns"
    )


if __name__ == "__main__":
    main()
