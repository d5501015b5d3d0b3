"""Two all-to-all jobs sharing a 2:1 leaf-spine: their slowdown on flow against ns3.

16 hosts of 100 Gb/s on 4 leaves and 2 spines (leaf uplinks half the downlinks),
logical dims 4x4; two 8-rank all-to-all jobs placed ``spread`` (each on 2 hosts
of every leaf, so both cross the spines). For each all-to-all size, runs the
cluster on ``flow`` and on ``ns3`` (DCQCN, its defaults) and prints each job's
slowdown on both and their ratio.

    python benchmarks/cluster_flow_vs_ns3.py [--sizes 2MiB,16MiB]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2MiB,16MiB", help="all-to-all sizes per rank")
    args = parser.parse_args()
    import astra
    from astra_core.topology.generators import leaf_spine
    from astra_core.topology.ns3_format import write_ns3_topology
    from astra_core.workload.generators.micro import parse_size, write_micro

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_ns3_topology(leaf_spine(16, 4, 2, oversubscription=2.0, host_gbps=100.0), folder / "fabric.txt")
        system = json.loads((ROOT / "tests/data/reference/system/ring_1d.json").read_text())
        for key in [k for k in system if k.endswith("-implementation")]:
            system[key] = system[key] * 2
        (folder / "system.json").write_text(json.dumps(system))
        print("| size | job | slowdown, flow | slowdown, ns3 | flow / ns3 - 1 |")
        print("|---|---|---|---|---|")
        for size in args.sizes.split(","):
            write_micro("all-to-all", parse_size(size), 8, folder / "a2a")
            slowdowns = {}
            for backend in ("flow", "ns3"):
                spec = {
                    "topology": "fabric.txt",
                    "dims": "4x4",
                    "backend": backend,
                    "system": "system.json",
                    "jobs": [{"name": n, "workload": "a2a", "placement": "spread"} for n in ("a", "b")],
                }
                (folder / "cluster.yaml").write_text(yaml.safe_dump(spec))
                result = astra.simulate_cluster(folder / "cluster.yaml")
                slowdowns[backend] = [job.slowdown for job in result.jobs]
            for name, flow, ns3 in zip(("a", "b"), slowdowns["flow"], slowdowns["ns3"]):
                print(f"| {size} | {name} | {flow:.3f} | {ns3:.3f} | {flow / ns3 - 1:+.1%} |")


if __name__ == "__main__":
    main()
