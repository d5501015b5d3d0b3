"""Two LLM jobs on one 2:1 oversubscribed leaf-spine: packed on their own leaves, or
spread over every leaf (docs/cluster.md).

    .venv/bin/python examples/multi_job/run.py --output multi_job_out

Builds the fabric (64 hosts of 400 Gb/s on 8 leaves, 4 spines, leaf uplinks half
the downlinks) and the traces (each job a 1.2 B-parameter GPT on 32 GPUs, tensor
parallel 8 x data parallel 4, 2 iterations of 4 micro-batches), then runs the two
jobs together and alone on the flow backend for each placement, prints per job its
iteration times, JCT and slowdown, and writes ``<placement>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

import astra
from astra_core.topology.generators import leaf_spine
from astra_core.topology.ns3_format import write_ns3_topology
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm
from astra_core.workload.generators.models import load_model

HERE = Path(__file__).resolve().parent


def prepare(out: Path) -> None:
    """The fabric and one job's traces (both jobs run the same traces)."""
    write_ns3_topology(leaf_spine(64, 8, 4, oversubscription=2.0, host_gbps=400.0), out / "fabric.txt")
    cfg = LLMConfig(
        load_model(HERE / "model.yaml"), GPUS["h100"], dp=4, tp=8, micro_batch=1, global_batch=16, dims=[8, 4]
    )
    write_llm(generate_llm(cfg), out / "traces" / "gpt")


def spec(out: Path, placement: str) -> Path:
    data = {
        "topology": "fabric.txt",
        "dims": "8x8",
        "backend": "flow",
        "system": str(HERE / "system.json"),
        "jobs": [
            {"name": name, "workload": "traces/gpt", "placement": placement, "iterations": 2}
            for name in ("llm-a", "llm-b")
        ],
    }
    path = out / f"{placement}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--output", default="multi_job_out", help="directory for the fabric, traces and results"
    )
    args = parser.parse_args(argv)
    out = Path(args.output)
    (out / "traces").mkdir(parents=True, exist_ok=True)
    prepare(out)
    for placement in ("packed", "spread"):
        result = astra.simulate_cluster(spec(out, placement))
        (out / f"{placement}.json").write_text(json.dumps(result.to_dict(), indent=1))
        for job in result.jobs:
            steps = ", ".join(f"{t / 1e6:.3f}" for t in job.iteration_ns)
            print(
                f"{placement:7s} {job.name}: NPUs {min(job.npus)}..{max(job.npus)}, iterations {steps} ms, "
                f"JCT {job.jct_ns / 1e6:.3f} ms, alone {(job.alone_end_ns - job.start_ns) / 1e6:.3f} ms, "
                f"slowdown {job.slowdown:.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
