"""16 jobs on a 1,024-GPU cluster: the cluster simulation's speed target.

128 servers of 8 H100s (NVSwitch inside, one 400 Gb/s NIC per GPU on a
rail-optimized leaf-spine whose spines carry half of what the leaves take in,
2:1), 16 jobs of 64 GPUs placed packed, 3 iterations each: 8 LLM jobs (a
1.2 B-parameter GPT, tensor parallel 8 x data parallel 8, 4 micro-batches) and
8 ResNet-50 data-parallel jobs (ASTRA-sim 1.0's text workload, converted), the
ResNet jobs starting 1 ms after the LLM jobs. ``--placement spread`` spreads every
job over all servers instead (its tensor-parallel groups then cross the spines,
which every job shares). Runs ``astra.simulate_cluster``
(all jobs together and each alone, beside it in worker processes: one per CPU
in all, or ``--processes N``) and prints the wall time, the peak memory of this
process and of the largest worker, and the per-job slowdowns.

    python benchmarks/cluster_scale.py [--backend flow|analytical-congestion] [--jobs 16]
        [--placement spread|random --collectives ring] [--processes N] [--failed-cables N]

Targets: under 10 minutes on flow, under 2 minutes on analytical-congestion.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import yaml
from common import write_system, write_workload

ROOT = Path(__file__).resolve().parents[1]


def prepare(folder: Path, jobs: int, placement: str = "packed", collectives: str = "nccl") -> Path:
    from astra_core.topology.generators import gpu_cluster
    from astra_core.topology.ns3_format import write_ns3_topology
    from astra_core.workload.generators.gpus import GPUS
    from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm
    from astra_core.workload.generators.models import load_model

    servers = jobs * 8
    # 8 rails: each leaf takes `servers` NICs of 400 Gb/s; 8 spines carry half of that
    write_ns3_topology(
        gpu_cluster(servers, 8, spines=8, spine_gbps=servers * 400.0 / 2 / 8), folder / "fabric.txt"
    )
    model = load_model(ROOT / "examples" / "multi_job" / "model.yaml")
    cfg = LLMConfig(model, GPUS["h100"], dp=8, tp=8, micro_batch=1, global_batch=32, dims=[8, 8])
    write_llm(generate_llm(cfg), folder / "llm")
    write_workload(folder / "resnet", 64, "resnet50")
    spec = {
        "topology": "fabric.txt",
        "dims": f"8x{servers}",
        "system": str(
            ROOT / "examples" / "validation" / "hgx_h100_4nodes" / "system.json"
            if collectives == "nccl"
            else write_system(folder / "system.json", collectives, 2)
        ),
        "jobs": [
            {"name": f"llm-{i}", "workload": "llm", "iterations": 3, "placement": placement}
            if i % 2 == 0
            else {
                "name": f"resnet-{i}",
                "workload": "resnet",
                "iterations": 3,
                "start_us": 1000,
                "placement": placement,
            }
            for i in range(jobs)
        ],
    }
    path = folder / "cluster.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def failed_cables(fabric: Path, count: int) -> list[dict]:
    """Faults taking the first ``count`` switch-to-switch cables of ``fabric`` down from
    20 ms to 120 ms."""
    from astra_core.topology.ns3_format import read_ns3_topology

    topology = read_ns3_topology(fabric)
    switches = topology.switches
    cables = sorted(
        {tuple(sorted(pair)) for pair in zip(topology.link_src, topology.link_dst) if set(pair) <= switches}
    )
    return [{"link": list(c), "down": True, "at_us": 20_000, "until_us": 120_000} for c in cables[:count]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="flow")
    parser.add_argument("--jobs", type=int, default=16, help="jobs of 64 GPUs (the cluster has 64 x jobs)")
    parser.add_argument("--placement", default="packed", help="every job's placement policy")
    parser.add_argument(
        "--failed-cables",
        type=int,
        default=0,
        help="this many leaf-spine cables (the first in node order) down from 20 ms to 120 ms",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=None,
        help="processes in all (default: one per CPU; 1: one run at a time)",
    )
    parser.add_argument(
        "--collectives",
        default="nccl",
        help="nccl (the H100 NCCL model) or an upstream algorithm on both dimensions (ring, direct, ...); "
        "random placements need the latter",
    )
    args = parser.parse_args()
    import astra

    with tempfile.TemporaryDirectory() as tmp:
        spec = prepare(Path(tmp), args.jobs, args.placement, args.collectives)
        data = yaml.safe_load(spec.read_text())
        data["backend"] = args.backend
        if args.failed_cables:
            data["faults"] = failed_cables(Path(tmp) / data["topology"], args.failed_cables)
        spec.write_text(yaml.safe_dump(data, sort_keys=False))
        started = time.perf_counter()
        result = astra.simulate_cluster(spec, processes=args.processes)
        wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"{args.jobs} jobs on {64 * args.jobs} GPUs, backend {result.backend}: {wall:.1f} s, peak {peak:.0f} MiB"
        + (f" (a worker process: {workers:.0f} MiB)" if args.processes != 1 else "")
    )
    for job in result.jobs:
        steps = ", ".join(f"{t / 1e6:.2f}" for t in job.iteration_ns)
        print(f"  {job.name}: iterations {steps} ms, slowdown {job.slowdown:.3f}")


if __name__ == "__main__":
    main()
