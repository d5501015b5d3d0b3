"""Wall time and peak memory of the flow backend at scale.

Two cases, each in a fresh process (so the peak RSS is the case's own), with
traces written by astra's ET writer and fabrics from astra's generators:

* ``a2a``: a direct all-to-all of 256 KiB per rank on a k = 16 fat-tree
  (1024 hosts, 100 Gbps, 1000 ns links): every rank sends a 1/1024 share to
  every other rank, all peers in flight, 4 chunks one after the other.
* ``rail-ring``: a 1 GiB ring all-reduce over 4096 GPUs of a rail-optimized
  cluster: 512 servers of 8 GPUs (NVSwitch at 3600 Gbps, 936.25 ns; one
  400 Gbps NIC per GPU), 128 leaves (16 per rail, 32 servers each) and 128
  spines, non-blocking. The collective runs as ASTRA-sim runs a hierarchical
  ring: logical dimensions 8 x 16 x 32 (the GPUs of a server, the servers on a
  leaf, the leaf groups), ring on each, 4 chunks.

Both use the system.json of ``benchmarks/common.py`` (LIFO, 4 chunks, one
active chunk per dimension). Alongside, ``--baseline`` runs the same inputs on
the congestion-unaware ``analytical`` backend: the cost of the system layer
and routing alone, which the flow backend cannot go below.

    python benchmarks/flow_scale.py [--only a2a|rail-ring] [--baseline]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from common import in_child, measure, parse_args, write_system

CASES = {
    "a2a": "all-to-all 256 KiB, direct, k=16 fat-tree (1024 hosts)",
    "rail-ring": "ring all-reduce 1 GiB, 8x16x32, rail-optimized 4096 GPUs",
}


def fat_tree_all_to_all(folder: Path, k: int, splits: int = 4) -> tuple[Path, Path, Path, int]:
    """Inputs of a direct all-to-all of 256 KiB per rank on a k-ary fat-tree, in
    ``splits`` chunks: (trace prefix, system.json, fabric, hosts)."""
    from astra_core.topology.generators import fat_tree
    from astra_core.topology.ns3_format import write_ns3_topology
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    topology = fat_tree(k)
    write_ns3_topology(topology, folder / "fabric.txt")
    system = write_system(folder / "system.json", "direct", 1)
    config = json.loads(system.read_text())
    config["preferred-dataset-splits"] = splits
    system.write_text(json.dumps(config))
    node = make_node(
        0, "all_to_all", pb.COMM_COLL_NODE, comm_type=pb.ALL_TO_ALL, comm_size=256 << 10, is_cpu_op=False
    )
    prefix = folder / "a2a"
    for rank in range(topology.npus_count):
        write_rank_trace(f"{prefix}.{rank}.et", [node])
    return prefix, system, folder / "fabric.txt", topology.npus_count


def write_inputs(case: str, folder: Path) -> tuple[Path, Path, Path, str]:
    from astra_core.topology.generators import gpu_cluster
    from astra_core.topology.ns3_format import write_ns3_topology
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    if case == "a2a":
        prefix, system, topology, hosts = fat_tree_all_to_all(folder, 16)
        return prefix, system, topology, str(hosts)
    topology = gpu_cluster(512, 8, leaves=128, spines=128)
    node = make_node(
        0, "all_reduce", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=1 << 30, is_cpu_op=False
    )
    topo_path = folder / "fabric.txt"
    write_ns3_topology(topology, topo_path)
    system = write_system(folder / "system.json", "ring", 3)
    prefix = folder / "rail-ring"
    for rank in range(topology.npus_count):
        write_rank_trace(f"{prefix}.{rank}.et", [node])
    return prefix, system, topo_path, "8x16x32"


def run_case(prefix: str, system: str, topology: str, dims: str, backend: str) -> None:
    """Child process: simulate and print one JSON line of measurements."""
    from astra_core.api import simulate

    def run():
        return simulate(
            prefix, system, topology=topology, dims=[int(d) for d in dims.split("x")], backend=backend
        )

    out = measure(run)
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(CASES))
    parser.add_argument(
        "--baseline", action="store_true", help="also run the analytical backend on the same inputs"
    )
    args = parse_args(parser, run_case, 5)
    if args is None:
        return
    backends = ["flow"] + (["analytical"] if args.baseline else [])
    for case in [args.only] if args.only else list(CASES):
        with tempfile.TemporaryDirectory() as tmp:
            prefix, system, topology, dims = write_inputs(case, Path(tmp))
            for backend in backends:
                m = in_child(__file__, [str(prefix), str(system), str(topology), dims, backend])
                print(
                    f"{CASES[case]}, {backend}: wall {m['wall_s']:.1f} s, "
                    f"peak RSS {m['peak_mib']:.0f} MiB, step {m['step_ns'] / 1e3:.1f} us, "
                    f"{m['messages']:,} messages",
                    flush=True,
                )


if __name__ == "__main__":
    main()
