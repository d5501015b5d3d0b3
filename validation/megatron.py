"""Megatron-LM's Table 1 (Narayanan et al., SC'21): astra's TFLOP/s per GPU against the paper's.

Usage::

    .venv/bin/python validation/megatron.py --rows 1-4        # the rows to run (1..10)
    .venv/bin/python validation/megatron.py --rows 1-4 --markdown docs/validation-megatron.md

Each row is generated with ``astra gen llm``'s generator from the run settings
of Megatron-LM's ``examples/sc21/run_table_1.sh`` (tensor and pipeline sizes,
micro-batch and global batch, layers, hidden size, heads, nodes; sequence 2048,
vocabulary 51,200, GPT with GELU MLP of 4h) and simulated on DGX A100 nodes:
8 A100 SXM on NVSwitch (NVLink3, 300 GB/s per GPU and direction) and 8 HDR
InfiniBand ports of 200 Gb/s per node on rails, with the NCCL model
(``examples/validation/dgx_a100``). TFLOP/s per GPU uses the paper's count:
``F = 96 B s l h^2 (1 + s / 6h + V / 16 l h)`` per iteration, with activation
recomputation, over the step time and the GPU count.

Kernel times come from the GPU compute model (:mod:`astra_core.workload.generators.kernels`,
calibrated from kernel benchmarks, never from this table); the report ends with
what is still left out.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from summary import emit, geomean_abs, gpu_servers, nccl_system, parse_rows, simulate_plan

from astra_core.config.network import NetworkConfig
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig
from astra_core.workload.generators.models import ModelConfig

SEQ, VOCAB = 2048, 51200  # all Table 1 models (paper section 5.1; run scripts' CONFIG)
GIB = 1 << 30
RUN_SCRIPT = (
    "NVIDIA/Megatron-LM examples/sc21/run_table_1.sh (commit 79a3bb6b): TP, PP, MBS, GBS, "
    "NLS, HS, NAH, DDP, NNODES and the extra parameters of each model size"
)
PAPER = (
    "D. Narayanan et al., 'Efficient Large-Scale Language Model Training on GPU Clusters "
    "Using Megatron-LM', SC'21 (arXiv 2104.04473), Table 1: achieved teraFLOP/s per GPU"
)


@dataclass(frozen=True)
class Row:
    """One Table 1 row: the run script's settings and the paper's result."""

    name: str
    tp: int
    pp: int
    micro_batch: int
    global_batch: int
    layers: int
    hidden: int
    heads: int
    ddp: str  # "torch" (overlapping gradient all-reduce) or "local" (after the backward pass)
    nodes: int
    layers_per_virtual_stage: int | None
    published_tflops: float

    @property
    def gpus(self) -> int:
        return 8 * self.nodes

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)

    def paper_flops(self) -> float:
        """The paper's FLOPs of one iteration (its eq. 3, with recomputation)."""
        B, s, L, h, V = self.global_batch, SEQ, self.layers, self.hidden, VOCAB
        return 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))

    @property
    def virtual_stages(self) -> int:
        """Model chunks per stage: layers / (PP x layers per virtual stage)."""
        if not self.layers_per_virtual_stage:
            return 1
        return self.layers // (self.pp * self.layers_per_virtual_stage)

    def plan(self) -> LLMConfig:
        """The run script's plan for astra's generator."""
        model = ModelConfig(
            f"gpt-{self.name}",
            layers=self.layers,
            hidden=self.hidden,
            heads=self.heads,
            ffn_hidden=4 * self.hidden,
            vocab=VOCAB,
            seq_len=SEQ,
            mlp="gelu",
            source=RUN_SCRIPT,
        )
        # the run script's --recompute-method uniform (full recomputation), its DDP (torch:
        # overlapped gradient reduction; local: after the backward pass), its virtual pipeline
        # stages (interleaved 1F1B) and Megatron's default scatter/gather of pipeline sends
        return LLMConfig(
            model=model,
            gpu=GPUS["a100"],
            dp=self.dp,
            tp=self.tp,
            pp=self.pp,
            micro_batch=self.micro_batch,
            global_batch=self.global_batch,
            dims=[8, self.nodes] if self.nodes > 1 else [8],
            recompute="full",
            overlap_grad_reduce=self.ddp == "torch",
            ddp="torch" if self.ddp == "torch" else "megatron",
            scatter_gather=True,
            virtual_stages=self.virtual_stages,
            attention="unfused",
            dropout=True,
            precision="fp16",
        )


ROWS = (
    Row("1.7B", 1, 1, 16, 512, 24, 2304, 24, "torch", 4, None, 137.0),
    Row("3.6B", 2, 1, 16, 512, 30, 3072, 32, "torch", 8, None, 138.0),
    Row("7.5B", 4, 1, 16, 512, 36, 4096, 32, "torch", 16, None, 142.0),
    Row("18.4B", 8, 1, 8, 1024, 40, 6144, 48, "torch", 32, None, 135.0),
    Row("39.1B", 8, 2, 4, 1536, 48, 8192, 64, "local", 64, None, 138.0),
    Row("76.1B", 8, 4, 2, 1792, 60, 10240, 80, "local", 128, 5, 140.0),
    Row("145.6B", 8, 8, 2, 2304, 80, 12288, 96, "local", 192, 5, 148.0),
    Row("310.1B", 8, 16, 1, 2160, 96, 16384, 128, "local", 240, 3, 155.0),
    Row("529.6B", 8, 35, 1, 2520, 105, 20480, 128, "local", 315, 1, 163.0),
    Row("1008.0B", 8, 64, 1, 3072, 128, 25600, 160, "local", 384, None, 163.0),
)


def network(nodes: int) -> NetworkConfig:
    """DGX A100 nodes on rails: dimension 0 the NVSwitch (300 GB/s per GPU), dimension
    1 one 200 Gb/s HDR port per GPU."""
    return gpu_servers(nodes, 300.0, 25.0)


SYSTEM = nccl_system("A100")


def predict(row: Row) -> tuple[float, float]:
    """(step time in s, TFLOP/s per GPU by the paper's count) of one row."""
    result = simulate_plan(row.plan(), SYSTEM, network(row.nodes))
    seconds = result.step_ns * 1e-9
    return seconds, row.paper_flops() / (seconds * row.gpus) / 1e12


#: What the runs did that the generator and the compute model leave out.
LEFT_OUT = (
    "Modelled around the passes (docs/llm.md, 'The step around the passes'): the run "
    "script's FP16 optimizer step kernel by kernel (FP16 gradients copied to FP32, "
    "unscaled and checked for overflow under its --loss-scale 8192, their norm for "
    "--clip-grad 1.0, Adam, the FP32 master weights copied to FP16, the local DDP's "
    "buffer zeroed), PyTorch DDP's accumulation from the second micro-batch and its "
    "bucket copies (rows 1-4, 25 MiB buckets), and the FP32 cross-entropy "
    "(no --fp16-lm-cross-entropy). Not modelled: the 4-byte all-reduces of the overflow "
    "flag and of the gradient norm, the device synchronisations of Megatron's 2021 "
    "timers around every pass and pipeline transfer, and the data loader. "
    "`run s` is the wall time of generating and simulating the row on one core.\n\n"
    "Regenerate with `.venv/bin/python validation/megatron.py --rows 1-10 --markdown "
    "docs/validation-megatron.md` (about a minute on one core)."
)


def report(rows: list[Row]) -> str:
    lines = [
        "# Megatron-LM Table 1: predicted vs published TFLOP/s per GPU",
        "",
        f"Settings: {RUN_SCRIPT}. Published: {PAPER}. Network: DGX A100 nodes (8 A100 "
        "SXM, NVSwitch, 8 x HDR 200 Gb/s on rails), NCCL model, default backend. "
        "Error = predicted / published - 1.",
        "",
        "| row | GPUs | TP | PP | DP | V | step s | astra TFLOP/s | published | error | run s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    errors = []
    for row in rows:
        start = time.perf_counter()
        seconds, tflops = predict(row)
        wall = time.perf_counter() - start
        err = tflops / row.published_tflops - 1
        errors.append(err)
        lines.append(
            f"| {row.name} | {row.gpus} | {row.tp} | {row.pp} | {row.dp} | {row.virtual_stages} "
            f"| {seconds:.2f} | {tflops:.1f} | {row.published_tflops:.0f} | {err:+.1%} "
            f"| {wall:.0f} |"
        )
    if errors:
        lines += [
            "",
            f"Geometric mean of |error| over {len(errors)} rows: {geomean_abs(errors):.1%}; "
            f"largest: {max(abs(e) for e in errors):.1%}.",
            "",
            LEFT_OUT,
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1-4", help="rows of Table 1, e.g. 1-4 or 1,3,5")
    parser.add_argument("--markdown", help="also write the report to this file")
    args = parser.parse_args(argv)
    return emit(report(parse_rows(args.rows, ROWS)), args.markdown)


if __name__ == "__main__":
    sys.exit(main())
