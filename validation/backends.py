"""The backend ladder on the same cases: step times, agreement with ns3, wall time.

Every case runs the same traces on the same physical fabric (100 Gbps, 1000 ns
links unless said) with each backend, in this process, one after the other.
The reference is ``ns3`` with its default config (RoCE, DCQCN, PFC): the
packet-level model. Cases (at most 32 hosts, so ns3 stays affordable):

unshared (no two messages in flight share a link)
  * ``p2p-fat-tree``: S bytes from rank 0 to rank 15 of a k = 4 fat-tree (6 hops).
  * ``p2p-gpu-cluster``: S between GPU 0 of two 8-GPU servers (rail leaf), and
    S between two GPUs of one server (NVSwitch, 3600 Gbps), at once.
  * ``ring-switch``: ring all-reduce of S over one 16-port switch.
contended
  * ``ring-fat-tree`` / ``a2a-fat-tree``: ring all-reduce / direct all-to-all of
    S on a k = 4 fat-tree (16 hosts; ECMP spreads flows over the core).
  * ``ring-leaf-spine`` / ``a2a-leaf-spine``: the same on a 2:1 leaf-spine
    (16 hosts, 4 leaves, 2 spines).
  * ``incast``: 8 senders in 4 pods of a k = 4 fat-tree send S / 4 each to rank 0.
  * ``two-jobs``: two 8-rank ring all-reduces of S on a leaf-spine of 2
    leaves and 1 spine (2:1), each job with 4 ranks per leaf: both cross the
    same uplinks.

Sizes scale with ``--size-mib`` (default 4; the incast sends a quarter of it per
sender). Each case's step time is the last rank's finish. Collectives use the
system.json of ``benchmarks/common.py`` (4 chunks, 1 active chunk per
dimension) with one logical dimension.

    python validation/backends.py [--size-mib 4] [--cases a,b] [--backends flow,ns3]
        [--markdown FILE]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from summary import emit

MIB = 1 << 20
LADDER = ("analytical", "analytical-congestion", "flow", "garnetlike", "ns3")
REFERENCE = "ns3"
#: garnetlike with flits coarse enough for MiB messages (as its speed benchmark does).
CONFIGS = {"garnetlike": {"flit_bytes": 4096, "packet_bytes": 65536}}


@dataclass
class Case:
    """One comparison: a fabric, per-rank ET nodes, the collective algorithm and groups."""

    name: str
    contended: bool
    fabric: Callable[[], object]  # () -> PhysicalTopology
    nodes: Callable[[int], dict[int, list]]  # hosts -> rank -> [pb.Node]
    algorithm: str = "ring"
    comm_groups: dict[str, list[int]] | None = None


def _pb():
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node

    return pb, make_node


def _collective(kind: str, size: int, pg: str | None = None):
    pb, make_node = _pb()
    comm = {"ring": pb.ALL_REDUCE, "a2a": pb.ALL_TO_ALL}[kind]
    return make_node(1, kind, pb.COMM_COLL_NODE, comm_type=comm, comm_size=size, is_cpu_op=False, pg_name=pg)


def _every_rank(kind: str, size: int) -> Callable[[int], dict[int, list]]:
    return lambda hosts: {r: [_collective(kind, size)] for r in range(hosts)}


def _pairs(pairs: list[tuple[int, int]], size: int) -> Callable[[int], dict[int, list]]:
    """Point-to-point messages of ``size`` bytes, all at t = 0."""

    def build(hosts: int) -> dict[int, list]:
        pb, make_node = _pb()
        nodes: dict[int, list] = {r: [] for r in range(hosts)}
        for i, (src, dst) in enumerate(pairs):
            nodes[src].append(
                make_node(
                    len(nodes[src]) + 1,
                    f"send{i}",
                    pb.COMM_SEND_NODE,
                    comm_dst=dst,
                    comm_size=size,
                    comm_tag=i,
                )
            )
            nodes[dst].append(
                make_node(
                    len(nodes[dst]) + 1,
                    f"recv{i}",
                    pb.COMM_RECV_NODE,
                    comm_src=src,
                    comm_size=size,
                    comm_tag=i,
                )
            )
        return nodes

    return build


def _two_jobs(size: int) -> Callable[[int], dict[int, list]]:
    return lambda hosts: {r: [_collective("ring", size, "1" if (r % 8) < 4 else "2")] for r in range(hosts)}


def _fabrics():
    from astra_core.topology import generators as g

    return {
        "fat-tree": lambda: g.fat_tree(4),
        "leaf-spine": lambda: g.leaf_spine(16, 4, 2, oversubscription=2.0),
        "switch": lambda: g.leaf_spine(16, 1, 1),
        "gpu-cluster": lambda: g.gpu_cluster(2, 8),
        "two-leaves": lambda: g.leaf_spine(16, 2, 1, oversubscription=2.0),
    }


def cases(size: int = 4 * MIB) -> list[Case]:
    """The cases with collectives and transfers of ``size`` bytes (incast: size / 4 per sender)."""
    f = _fabrics()
    jobs = {"1": [r for r in range(16) if r % 8 < 4], "2": [r for r in range(16) if r % 8 >= 4]}
    return [
        Case("p2p-fat-tree", False, f["fat-tree"], _pairs([(0, 15)], size)),
        Case("p2p-gpu-cluster", False, f["gpu-cluster"], _pairs([(0, 8), (1, 2)], size)),
        Case("ring-switch", False, f["switch"], _every_rank("ring", size)),
        Case("ring-fat-tree", True, f["fat-tree"], _every_rank("ring", size)),
        Case("a2a-fat-tree", True, f["fat-tree"], _every_rank("a2a", size), "direct"),
        Case("ring-leaf-spine", True, f["leaf-spine"], _every_rank("ring", size)),
        Case("a2a-leaf-spine", True, f["leaf-spine"], _every_rank("a2a", size), "direct"),
        Case("incast", True, f["fat-tree"], _pairs([(s, 0) for s in (1, 2, 4, 6, 8, 10, 12, 14)], size // 4)),
        Case("two-jobs", True, f["two-leaves"], _two_jobs(size), comm_groups=jobs),
    ]


def run_case(case: Case, backends: list[str], folder: Path) -> dict[str, tuple[float, float]]:
    """backend -> (step ns, wall s) for one case."""
    from astra_core.api import simulate
    from astra_core.config.system import upstream_system
    from astra_core.topology.ns3_format import write_ns3_topology
    from astra_core.workload.writer import write_rank_trace

    fabric = case.fabric()
    topo = folder / f"{case.name}.txt"
    write_ns3_topology(fabric, topo)
    system = upstream_system(case.algorithm, 1)
    prefix = folder / case.name
    for rank, nodes in case.nodes(fabric.npus_count).items():
        write_rank_trace(f"{prefix}.{rank}.et", nodes)
    out = {}
    for backend in backends:
        started = time.perf_counter()
        result = simulate(
            str(prefix),
            system,
            topology=str(topo),
            backend=backend,
            backend_config=CONFIGS.get(backend),
            comm_groups=case.comm_groups,
        )
        out[backend] = (result.step_ns, time.perf_counter() - started)
    return out


def report(results: dict[str, dict[str, tuple[float, float]]], backends: list[str]) -> str:
    by_name = {c.name: c for c in cases()}
    lines = [
        "| case | kind | " + " | ".join(f"{b} µs" for b in backends) + " |",
        "|---|---|" + "---:|" * len(backends),
    ]
    for name, row in results.items():
        ref = row.get(REFERENCE, (None,))[0]
        cells = []
        for b in backends:
            step = row[b][0]
            err = f" ({step / ref - 1:+.1%})" if ref and b != REFERENCE else ""
            cells.append(f"{step / 1e3:.1f}{err}")
        kind = "contended" if by_name[name].contended else "unshared"
        lines.append(f"| {name} | {kind} | " + " | ".join(cells) + " |")
    ratio = "flow" in backends and REFERENCE in backends
    lines += [
        "",
        "Wall time (s, this machine, in one run):",
        "",
        "| case | " + " | ".join(backends) + (" | ns3 / flow |" if ratio else " |"),
        "|---|" + "---:|" * (len(backends) + ratio),
    ]
    for name, row in results.items():
        cells = [f"{row[b][1]:.2f}" for b in backends]
        if ratio:
            cells.append(f"{row[REFERENCE][1] / row['flow'][1]:.1f}x")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--backends", default=",".join(LADDER))
    parser.add_argument(
        "--size-mib",
        type=int,
        default=4,
        help="collective and transfer size in MiB (incast: a quarter per sender)",
    )
    parser.add_argument("--markdown", help="also write the report here")
    args = parser.parse_args(argv)
    chosen = [c for c in cases(args.size_mib * MIB) if not args.cases or c.name in args.cases.split(",")]
    backends = args.backends.split(",")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        if REFERENCE in backends:  # compile and load ns-3 once, outside the timings
            run_case(
                Case("warm-up", False, _fabrics()["switch"], _pairs([(0, 1)], 4096)), [REFERENCE], Path(tmp)
            )
        for case in chosen:
            results[case.name] = run_case(case, backends, Path(tmp))
            print(
                case.name, {b: round(s / 1e3, 1) for b, (s, _) in results[case.name].items()}, file=sys.stderr
            )
    return emit(report(results, backends), args.markdown)


if __name__ == "__main__":
    raise SystemExit(main())
