"""Wall time and peak memory of generating and simulating Llama 3.1 405B's FP8 recipe at scale.

The plan is Megatron-Bridge's DGX H100 recipe for Llama 3.1 405B
(validation/megatron_bridge.py: TP 8, PP 8, CP 2, 8 virtual stages, the embedding and
the loss counted in the pipeline split, sequence parallelism with TP communication
overlap, FP8 current scaling, distributed optimizer, BF16 gradient reduction;
micro-batch 1, sequence 8,192) on ``--gpus`` H100s (data parallel = GPUs / 128) with
a global batch of ``--gbs`` sequences (the recipe's 512 or 1,536). One fresh subprocess
generates the step and simulates its rank traces from memory with the NCCL model on DGX
H100 servers; its wall time and peak RSS are measured. The target is
10 minutes and 8 GB at 8,192 GPUs on a 2-core machine.

    python benchmarks/frontier_recipe.py [--gpus 8192] [--gbs 512]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "validation"))  # validation/ holds scripts, not a package
from common import in_child, measure, parse_args  # noqa: E402


def run_plan(gpus: str, gbs: str) -> None:
    """Child process: generate and simulate the plan, print one JSON line."""
    from megatron_bridge import Row, predict

    row = Row("H100", "llama3-405b", int(gpus), "fp8-cs", int(gbs), 1, 8192, 0, 8, 8, 2, 8, math.nan)
    holder = {}

    class _Result:  # what measure() reads of a RunResult
        step_ns = 0
        messages = 0
        links = None

    def run():
        out = _Result()
        out.step_ns = int(predict(row) * 1e9)
        holder["tokens_per_gpu_s"] = row.gbs * row.seq / (out.step_ns * 1e-9 * row.gpus)
        return out

    m = measure(run)
    m.update(holder)
    print(json.dumps(m))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=8192, help="H100s, a multiple of 128")
    parser.add_argument("--gbs", type=int, default=512, help="global batch (sequences)")
    args = parse_args(parser, run_plan, 2)
    if args is None:
        return
    m = in_child(__file__, [str(args.gpus), str(args.gbs)])
    print(
        f"Llama 3.1 405B FP8 recipe on {args.gpus:,} H100s, GBS {args.gbs}: wall {m['wall_s']:.1f} s, peak RSS "
        f"{m['peak_mib']:.0f} MiB, step {m['step_ns'] / 1e9:.2f} s, "
        f"{m['tokens_per_gpu_s']:.0f} tokens/s per GPU"
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
