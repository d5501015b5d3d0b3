"""GPT-3 175B training step on 1024 H100 GPUs: DP 8 x TP 8 x PP 16, 1F1B, simulated end to end.

    python examples/gpt3_175b/run.py [--microbatches 16 | --full] [--zero 1] [--sequence-parallel]
                                     [--out DIR] [--json result.json]

Generates the per-rank Chakra traces with ``astra gen llm`` (the Python API of
it), simulates one step on the analytical backend over ``network.yml``
(NVSwitch inside each 8-GPU server for tensor parallelism, 400 Gb/s
InfiniBand rails for data parallelism and pipeline sends) and prints the
per-rank breakdown by pipeline stage, the step time, the model FLOPs
utilisation and the wall time of generation and simulation.

The default is 16 micro-batches of one 2048-token sequence per data-parallel
replica (a global batch of 128); ``--full`` runs GPT-3's published global
batch of 1536 sequences (Brown et al. 2020, Table 2.1), i.e. 192 micro-batches
(12x the nodes and time).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--microbatches", type=int, default=16)
    parser.add_argument("--full", action="store_true", help="global batch 1536 (192 micro-batches)")
    parser.add_argument("--zero", type=int, default=1, choices=[0, 1, 2, 3])
    parser.add_argument("--sequence-parallel", action="store_true")
    parser.add_argument("--gpu", default="H100")
    parser.add_argument("--out", help="keep the traces in this folder (default: a temporary one)")
    parser.add_argument("--json", help="write the per-rank results here")
    args = parser.parse_args()

    from astra import simulate
    from astra_core.workload.generators.gpus import load_gpu
    from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm
    from astra_core.workload.generators.models import MODELS

    model = MODELS["gpt3-175b"]
    cfg = LLMConfig(
        model,
        load_gpu(args.gpu),
        dp=8,
        tp=8,
        pp=16,
        zero=args.zero,
        microbatches=None if args.full else args.microbatches,
        global_batch=1536 if args.full else None,
        sequence_parallel=args.sequence_parallel,
        dims=[8, 8, 16],
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.out or tmp)
        started = time.perf_counter()
        wl = generate_llm(cfg)
        paths, groups = write_llm(wl, folder / "gpt3")
        generated = time.perf_counter()
        result = simulate(
            folder / "gpt3",
            HERE / "system.json",
            HERE / "network.yml",
            comm_groups=groups,
            backend="analytical",
        )
        done = time.perf_counter()

    tokens = cfg.dp * wl.microbatches * model.seq_len
    flops = sum(wl.flops.values())
    gpus = wl.layout.npus
    print(
        f"GPT-3 175B, {gpus} x {cfg.gpu.name}, dp {cfg.dp} x tp {cfg.tp} x pp {cfg.pp}, "
        f"{wl.microbatches} micro-batches ({tokens} tokens), 1F1B, ZeRO {cfg.zero}"
        f"{', sequence parallel' if cfg.sequence_parallel else ''}"
    )
    print(f"{'stage':>5} {'ranks':>9} {'finish ms':>11} {'compute ms':>11} {'exposed comm ms':>16}")
    for p in range(cfg.pp):
        ranks = [r for r in result.ranks if wl.layout.coords(r.rank)[2] == p]
        first = ranks[0]
        same = all(r.finish_ns == first.finish_ns for r in ranks)
        print(
            f"{p:>5} {ranks[0].rank:>4}-{ranks[-1].rank:<4} {first.finish_ns / 1e6:>11.3f} "
            f"{first.compute_ns / 1e6:>11.3f} {first.exposed_comm_ns / 1e6:>16.3f}{'' if same else ' (varies)'}"
        )
    step_s = result.step_ns / 1e9
    mfu = flops / step_s / (gpus * cfg.gpu.peak_tflops * 1e12)
    print(f"step {step_s * 1e3:.1f} ms, {tokens / step_s:,.0f} tokens/s, model FLOPs utilisation {mfu:.1%}")
    print(
        f"wall time: generate {generated - started:.1f} s ({len(paths)} traces, "
        f"{max(map(len, wl.stages))} nodes per rank), simulate {done - generated:.1f} s"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_dict(), indent=1))


if __name__ == "__main__":
    main()
