"""Wall time and peak memory of large all-reduces on the analytical backend.

Writes its own traces with astra's ET writer (one all-reduce node per rank),
then runs each case in a fresh subprocess so peak RSS is the case's own:

* 1 GiB all-reduce on [Ring 8, FullyConnected 8, Switch 16] = 1024 NPUs,
* 1 GiB all-reduce on [Ring 16, FullyConnected 16, Switch 16] = 4096 NPUs,

both at 200/100/50 GB/s and 100/500/1000 ns with the ring algorithm on every
dimension (LIFO, localBWAware, 4 chunks, 1 active chunk per dimension).
Upstream ASTRA-sim needs 0.3-0.9 s and 4-9 s for these on this kind of machine.

    python benchmarks/scale_allreduce.py [--only 1024] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from common import in_child, measure, parse_args, write_system

CASES = {
    "1024": ([8, 8, 16], "1024 NPUs [Ring 8, FC 8, Switch 16]"),
    "4096": ([16, 16, 16], "4096 NPUs [Ring 16, FC 16, Switch 16]"),
}
UPSTREAM_S = {"1024": "0.3-0.9", "4096": "4-9"}
SIZE = 1 << 30


def write_inputs(key: str, folder: Path) -> tuple[Path, Path, Path]:
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    sizes, _ = CASES[key]
    npus = sizes[0] * sizes[1] * sizes[2]
    network = folder / "network.yml"
    network.write_text(
        "topology: [ Ring, FullyConnected, Switch ]\n"
        f"npus_count: [ {sizes[0]}, {sizes[1]}, {sizes[2]} ]\n"
        "bandwidth: [ 200.0, 100.0, 50.0 ]\n"
        "latency: [ 100.0, 500.0, 1000.0 ]\n"
    )
    system = write_system(folder / "system.json", "ring", 3)
    node = make_node(
        0, "all_reduce_1GiB", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=SIZE, is_cpu_op=False
    )
    prefix = folder / "allreduce"
    for rank in range(npus):
        write_rank_trace(f"{prefix}.{rank}.et", [node])
    return prefix, system, network


def run_case(prefix: str, system: str, network: str) -> None:
    """Child process: simulate and print one JSON line of measurements."""
    from astra_core.api import simulate

    print(json.dumps(measure(lambda: simulate(prefix, system, network, backend="analytical"))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(CASES))
    parser.add_argument("--keep", type=Path, help="write the inputs here and keep them")
    args = parse_args(parser, run_case, 3)
    if args is None:
        return
    for key in [args.only] if args.only else list(CASES):
        with tempfile.TemporaryDirectory() as tmp:
            folder = args.keep / key if args.keep else Path(tmp)
            folder.mkdir(parents=True, exist_ok=True)
            prefix, system, network = write_inputs(key, folder)
            try:
                m = in_child(__file__, [str(prefix), str(system), str(network)])
            except RuntimeError as exc:
                print(f"{CASES[key][1]}: FAILED: {exc}", file=sys.stderr)
                continue
            print(
                f"{CASES[key][1]}: all-reduce 1 GiB, wall {m['wall_s']:.2f} s, peak RSS "
                f"{m['peak_mib']:.0f} MiB, step {m['step_ns'] / 1e6:.3f} ms, "
                f"{m['messages']:,} messages (upstream: {UPSTREAM_S[key]} s)"
            )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
