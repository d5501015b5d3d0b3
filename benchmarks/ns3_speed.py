"""Speed of the ns3 backend: packet-hops per second and wall time of two workloads.

* a 1 GiB ring all-reduce on 8 NPUs (upstream's ALL_REDUCE_8npus_1GB trace,
  ring_1d.json, one 8-NPU switch at 50 GB/s);
* a 64 MiB direct all-to-all on the 16 hosts of a k = 4 fat-tree (100 Gbps,
  1 us links, astra's generator).

A packet-hop is one packet (data, ACK, CNP or PFC frame) sent over one link.
The model runs in one worker process, i.e. on one core; the target is
>= 0.15 M packet-hops per second per core. A warm-up run first loads (and if
needed compiles) the model, so the times are the simulations' own.

    python benchmarks/ns3_speed.py [--cc dcqcn|hpcc|none]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import write_system

REFERENCE = Path(__file__).resolve().parents[1] / "tests" / "data" / "reference"
TARGET_HOPS_PER_S = 150_000


def fat_tree_inputs(folder: Path) -> tuple[Path, Path, Path]:
    from astra_core.topology.generators import fat_tree
    from astra_core.topology.ns3_format import write_ns3_topology
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    topology = fat_tree(4)
    topo_path = folder / "fat_tree4.txt"
    write_ns3_topology(topology, topo_path)
    system = write_system(folder / "system.json", "direct", 1)
    node = make_node(
        0, "all_to_all_64MiB", pb.COMM_COLL_NODE, comm_type=pb.ALL_TO_ALL, comm_size=64 << 20, is_cpu_op=False
    )
    prefix = folder / "a2a"
    for rank in range(topology.npus_count):
        write_rank_trace(f"{prefix}.{rank}.et", [node])
    return prefix, system, topo_path


def timed(label: str, cc: str, **case) -> dict:
    from astra_core.api import simulate

    started = time.perf_counter()
    result = simulate(backend="ns3", backend_config={"cc": cc}, **case)
    wall = time.perf_counter() - started
    stats = result.counters
    hops = stats["packet_hops"]
    row = {
        "case": label,
        "cc": cc,
        "wall_s": wall,
        "step_ms": result.step_ns / 1e6,
        "messages": stats["messages"],
        "packet_hops": hops,
        "hops_per_s": hops / wall,
        "drops": stats["drops"],
        "pfc_pauses": stats["pfc_pauses"],
        "cnps": stats["cnps"],
    }
    print(
        f"{label:<34} {cc:<6} wall {wall:7.2f} s  step {row['step_ms']:9.3f} ms  "
        f"{stats['messages']:6,} messages  {hops / 1e6:6.2f} M packet-hops  "
        f"{hops / wall / 1e6:5.2f} M hops/s  drops {stats['drops']}  "
        f"pauses {stats['pfc_pauses']}  CNPs {stats['cnps']}"
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cc", default="dcqcn", choices=["dcqcn", "hpcc", "none"])
    args = parser.parse_args()
    micro = REFERENCE / "workload" / "micro"
    system = REFERENCE / "system" / "ring_1d.json"
    # Warm-up: load (or compile) the model in a worker.
    timed(
        "warm-up (1 MiB all-reduce)",
        args.cc,
        workload=micro / "ALL_REDUCE_8npus_1MB/ALL_REDUCE",
        system=system,
        network=REFERENCE / "network/sw8.yml",
    )
    rows = [
        timed(
            "all-reduce 1 GiB, 8 NPUs, switch",
            args.cc,
            workload=micro / "ALL_REDUCE_8npus_1GB/ALL_REDUCE",
            system=system,
            network=REFERENCE / "network/sw8.yml",
        )
    ]
    with tempfile.TemporaryDirectory() as tmp:
        prefix, a2a_system, topo = fat_tree_inputs(Path(tmp))
        rows.append(
            timed(
                "all-to-all 64 MiB, fat-tree k=4", args.cc, workload=prefix, system=a2a_system, topology=topo
            )
        )
    worst = min(r["hops_per_s"] for r in rows)
    verdict = "meets" if worst >= TARGET_HOPS_PER_S else "misses"
    print(
        f"slowest: {worst / 1e6:.2f} M packet-hops/s on one core; {verdict} the target of "
        f"{TARGET_HOPS_PER_S / 1e6:.2f} M"
    )


if __name__ == "__main__":
    main()
