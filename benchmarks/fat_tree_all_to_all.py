"""Wall time of a 64 MiB all-to-all on a k = 8 fat-tree (128 hosts), congestion-aware.

Writes its own traces (one ALL_TO_ALL node per rank) with astra's ET writer,
builds the fat-tree with astra's generator (100 Gbps, 1000 ns links), and runs
the direct algorithm (every rank sends a 1/128 share to every other rank, 4
chunks, all peers in flight) on ``analytical-congestion``, in a fresh process
so the peak RSS is the run's own.

    python benchmarks/fat_tree_all_to_all.py [--k 8]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from common import in_child, measure, parse_args, write_system

SIZE = 64 << 20


def write_inputs(k: int, folder: Path) -> tuple[Path, Path, Path]:
    from astra_core.topology.generators import fat_tree
    from astra_core.topology.ns3_format import write_ns3_topology
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    topology = fat_tree(k)
    topo_path = folder / "fat_tree.txt"
    write_ns3_topology(topology, topo_path)
    system = write_system(folder / "system.json", "direct", 1)
    node = make_node(
        0, "all_to_all_64MiB", pb.COMM_COLL_NODE, comm_type=pb.ALL_TO_ALL, comm_size=SIZE, is_cpu_op=False
    )
    prefix = folder / "a2a"
    for rank in range(topology.npus_count):
        write_rank_trace(f"{prefix}.{rank}.et", [node])
    return prefix, system, topo_path


def run_case(prefix: str, system: str, topology: str) -> None:
    from astra_core.api import simulate

    print(
        json.dumps(
            measure(lambda: simulate(prefix, system, topology=topology, backend="analytical-congestion"))
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=8)
    args = parse_args(parser, run_case, 3)
    if args is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        prefix, system, topology = write_inputs(args.k, Path(tmp))
        m = in_child(__file__, [str(prefix), str(system), str(topology)])
        hosts = args.k**3 // 4
        print(
            f"fat-tree k={args.k} ({hosts} hosts), all-to-all 64 MiB, direct, "
            f"analytical-congestion: wall {m['wall_s']:.2f} s, peak RSS {m['peak_mib']:.0f} MiB, "
            f"step {m['step_ns'] / 1e6:.3f} ms, {m['messages']:,} messages, "
            f"longest link queue {m['max_queue']}"
        )


if __name__ == "__main__":
    main()
