"""Published training runs on 1,024 to 16,384 H100s: astra's step time against the measured one.

Usage::

    .venv/bin/python validation/h100_scale.py --rows 4-7        # the rows to run (1..7)
    .venv/bin/python validation/h100_scale.py --rows 1-7 --jobs 2 --markdown docs/validation-h100.md

Two sources, one table each; every row is generated with ``astra gen llm``'s
generator from the run's published plan and simulated with the NCCL model on H100
servers of 8 GPUs on NVSwitch (NVLink4: 450 GB/s per GPU and direction, H100
datasheet) and one 400 Gb/s port per GPU across servers (dimension 0 the NVSwitch,
dimension 1 the rails, as ``examples/validation/hgx_h100_4nodes``; latencies as
there). Error = predicted throughput / published - 1 (= published step time /
predicted step time - 1, whatever the FLOP count).

**Rows 1-3, Llama 3 405B** (Meta): A. Dubey et al., "The Llama 3 Herd of Models",
arXiv 2407.21783 (https://arxiv.org/abs/2407.21783), Table 4: GPUs, TP, CP, PP, DP,
sequence length, batch size per DP group, 16M tokens per batch, TFLOP/s per GPU (430,
400, 380). Section 3.3.1: Grand Teton servers of 8 H100 SXM 80 GB on NVLink, "400 Gbps
interconnects between GPUs" (RoCE). Section 3.3.2 gives the rest of the plan:

* groups in the order [TP, CP, PP, DP], TP inside a server;
* FSDP that shards optimizer states and gradients and keeps the gathered weights
  from forward to backward: a reduce-scatter of the gradients and an all-gather of
  the weights per step (``zero=2``), gradients accumulated and reduce-scattered in FP32;
  the weights gathered during the step's first forward pass (FSDP's pre-forward
  all-gather; astra runs Megatron-core's overlapped gather, ``overlap_param_gather``,
  chunk by chunk under interleaving);
* interleaved 1F1B "with V pipeline stages on one pipeline rank", one Transformer
  layer taken from the first and the last stage so that "the first model chunk on the
  first stage has only the embedding, and the last model chunk on the last stage has
  only output projection and loss": 126 layers + an embedding chunk + an output chunk
  = 128 chunks of one layer, V = 128 / 16 = 8;
* no activation recomputation at 8K tokens ("we could pre-train Llama 3 on sequences
  of 8K tokens without activation checkpointing"), and none assumed at 128K;
* context parallelism over 2 x CP chunks of the sequence, rank i holding chunks i and
  2 CP - 1 - i, "all-gather based": the keys and values all-gathered, then the local
  queries' attention, the gather's latency exposed (``cp_comm_type="all_gather"``);
  tensor parallelism with sequence parallelism (Korthikanti et al.).

The rows run that pipeline as written: 126 layers of Llama 3 405B one per chunk, the
first chunk of the first stage the embedding alone and the last chunk of the last stage
the output projection and loss alone (``astra gen llm --pipeline-layout``). TFLOP/s per
GPU counts the model's FLOPs after Chowdhery et al. (PaLM, 2022, appendix B), ``6 N +
12 L H Q T`` per token (N parameters, L layers, H Q the hidden size, T the sequence
length; attention without the causal mask's saving). The paper does not state its
count; the report's `causal` column gives the same prediction counted with ``6 L H Q T``,
which matters only at 131,072 tokens. Table 4 prints DP 4 for the 131K row; its 16,384
GPUs and 16M tokens need DP 8 (8 x 16 x 16 x 8 = 16,384; 8 x 16 sequences x 131,072 =
16M), used here.

**Rows 4-7, Nemotron-4 340B** (NVIDIA DGX Cloud benchmarking recipe "Nemotron4 340b
24.11", NVIDIA/dgxc-benchmarking ``nemotron/README_340b.md``, commit 143b90dd,
https://github.com/NVIDIA/dgxc-benchmarking): measured seconds per step on 1,024 and
2,048 H100s in BF16 and FP8, TP 8, PP 8, VP 12, micro-batch 1, global batch 2 per
node, sequence 4,096. The model and the rest of the plan are NeMo's configuration
that the recipe names (NVIDIA/NeMo-Framework-Launcher
``launcher_scripts/conf/training/nemotron/nemotron_340b.yaml``, commit 3be81fc1): 96
layers, hidden 18,432, 96 heads in 8 query groups, FFN 4h with squared ReLU (two
matrices: astra's non-gated MLP), vocabulary 256,000, untied embeddings, no dropout,
no recomputation, sequence parallelism, the distributed optimizer's weight all-gather
overlapped with the next forward pass (``overlap_param_sync``), ``ub_tp_comm_overlap``
(Transformer Engine's
userbuffers: ``tp_comm_overlap``, with Transformer Engine 1's default per-GEMM settings:
the forward reduce-scatters pipelined in 4 splits and the backward's bulk overlaps, each
on 16 SMs beside the GEMM), Megatron-Core's distributed optimizer
(``zero=1``) with BF16 gradient reduction (``grad_sync_dtype: bf16``) overlapped
with the backward pass. DGX H100 nodes: 8 x 400 Gb/s NDR InfiniBand per node (DGX
H100 datasheet). NCCL 2.23.4, the newest release NeMo's 24.09 container could hold
(:data:`NCCL_RELEASES`); the Llama 3 rows run 2.22.3, the newest NCCLX's base could be.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import time
from dataclasses import dataclass, replace

from summary import emit, geomean_abs, gpu_servers, nccl_system, parse_rows, simulate_plan

from astra_core.config.network import NetworkConfig
from astra_core.errors import AstraError
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig
from astra_core.workload.generators.models import MODELS, ModelConfig
from astra_core.workload.generators.userbuffers import te_defaults

GIB = 1 << 30
LLAMA3 = (
    "A. Dubey et al. (Llama Team, AI @ Meta), 'The Llama 3 Herd of Models', arXiv 2407.21783 "
    "(https://arxiv.org/abs/2407.21783), Table 4 and section 3.3"
)
NEMOTRON = (
    "NVIDIA DGX Cloud benchmarking, 'Nemotron4 340b 24.11' (NVIDIA/dgxc-benchmarking "
    "nemotron/README_340b.md, commit 143b90dd): training step time; model and plan from "
    "NVIDIA/NeMo-Framework-Launcher launcher_scripts/conf/training/nemotron/nemotron_340b.yaml"
)
LLAMA3_405B = replace(MODELS["llama3-405b"], source=LLAMA3)
#: Llama 3's pipeline (section 3.3.2): 16 stages x 8 chunks, the first chunk the embedding
#: alone, then the 126 layers one per chunk, the last chunk the output layer and loss alone
#: (Megatron-core's pipeline layout notation).
LLAMA3_LAYOUT = "E|" + "t|" * 126 + "L"
NEMOTRON4_340B = ModelConfig(
    "nemotron4-340b",
    layers=96,
    hidden=18432,
    heads=96,
    kv_heads=8,
    ffn_hidden=4 * 18432,
    vocab=256000,
    seq_len=4096,
    mlp="gelu",  # squared ReLU: two matrices and an element-wise activation, as GELU
    source=NEMOTRON,
)
LLAMA3_TOKENS = 16 * 2**20  # Table 4: "16M" tokens per batch = 2,048 x 8,192 = 128 x 131,072


@dataclass(frozen=True)
class Row:
    """One published run: its plan and its measured result.

    ``published`` is TFLOP/s per GPU (Llama 3) or seconds per step (Nemotron-4)."""

    source: str  # "llama3" or "nemotron4"
    gpus: int
    tp: int
    cp: int
    pp: int
    seq: int
    global_batch: int
    virtual_stages: int
    precision: str
    published: float

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.cp * self.pp)

    @property
    def microbatches(self) -> int:
        return self.global_batch // self.dp

    @property
    def name(self) -> str:
        return f"{self.gpus:,} GPUs, {self.seq // 1024}K, {self.precision.upper()}"

    def llama3_flops(self, causal: bool = False) -> float:
        """Llama 3 405B FLOPs of one step by PaLM's count (appendix B), or with causal attention."""
        m = LLAMA3_405B
        attention = (6 if causal else 12) * m.layers * m.hidden * self.seq
        return (6 * m.params() + attention) * self.global_batch * self.seq

    def plan(self) -> LLMConfig:
        """The run's plan for astra's generator (see the module docstring)."""
        llama = self.source == "llama3"
        return LLMConfig(
            model=LLAMA3_405B if llama else NEMOTRON4_340B,
            pipeline_layout=LLAMA3_LAYOUT if llama else None,
            gpu=GPUS["h100"],
            dp=self.dp,
            tp=self.tp,
            pp=self.pp,
            cp=self.cp,
            cp_comm_type="all_gather" if llama and self.cp > 1 else "p2p",
            micro_batch=1,
            global_batch=self.global_batch,
            seq_len=self.seq,
            dims=[8, self.gpus // 8],
            virtual_stages=self.virtual_stages,
            sequence_parallel=True,
            tp_comm_overlap=not llama,  # NeMo's ub_tp_comm_overlap; Llama 3's paper is silent
            # the recipe names no ub_cfgs: Transformer Engine's defaults, 1.x in NeMo 24.09
            # (no SM margin before 2.0: transformer_engine/pytorch/module/base.py, 5ee98175)
            tp_comm_overlap_cfg=None if llama else te_defaults(margin=False),
            recompute="none",
            zero=2 if llama else 1,  # Llama 3: FSDP; NeMo: distributed optimizer
            # the weights gathered in the next forward pass: FSDP's pre-forward all-gather;
            # NeMo's optim.overlap_param_sync: true
            overlap_param_gather=True,
            overlap_grad_reduce=True,
            grad_reduce_in_bf16=not llama,  # Llama 3: FP32; NeMo: grad_sync_dtype bf16
            attention="flash",
            dropout=False,
            precision=self.precision,
        )


ROWS = (
    # Llama 3 Table 4: GPUs, TP, CP, PP, sequence, DP x batch per DP, TFLOP/s per GPU
    Row("llama3", 8192, 8, 1, 16, 8192, 64 * 32, 8, "bf16", 430.0),
    Row("llama3", 16384, 8, 1, 16, 8192, 128 * 16, 8, "bf16", 400.0),
    Row("llama3", 16384, 8, 16, 16, 131072, 8 * 16, 8, "bf16", 380.0),
    # dgxc-benchmarking Nemotron4 340b 24.11: GBS = 2 x nodes, seconds per step
    Row("nemotron4", 1024, 8, 1, 8, 4096, 256, 12, "bf16", 4.73),
    Row("nemotron4", 2048, 8, 1, 8, 4096, 512, 12, "bf16", 4.84),
    Row("nemotron4", 1024, 8, 1, 8, 4096, 256, 12, "fp8", 3.34),
    Row("nemotron4", 2048, 8, 1, 8, 4096, 512, 12, "fp8", 3.49),
)


def network(nodes: int) -> NetworkConfig:
    """Servers of 8 H100 on NVSwitch (450 GB/s per GPU and direction), one 400 Gb/s port per
    GPU across servers."""
    return gpu_servers(nodes, 450.0, 50.0)


#: The NCCL release of each source's runs: the newest one public facts allow (PyPI
#: nvidia-nccl-cu12 release dates). The Nemotron-4 recipe runs NeMo's 24.09 container (its
#: README's setup: ``nvcr.io/nvidia/nemo:24.09``), which cannot hold an NCCL released
#: after September 2024 (2.23.4 on 2024-09-11, 2.24.3 on 2025-01-07). Llama 3 ran NCCLX,
#: Meta's fork of NCCL, before the paper (July 2024): its base is at most 2.22.3
#: (2024-06-19); NCCLX's own changes are not modelled.
NCCL_RELEASES = {"llama3": "2.22.3", "nemotron4": "2.23.4"}


def predict(row: Row) -> float:
    """Step time [s] of one row."""
    system = nccl_system("H100", NCCL_RELEASES[row.source])
    return simulate_plan(row.plan(), system, network(row.gpus // 8)).step_ns * 1e-9


def peak_rss_gib() -> float:
    """Peak resident memory of this process so far [GiB] (Linux counts ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


#: What the runs did that the simulations leave out, per source.
LEFT_OUT = {
    "llama3": (
        "Not modelled: the 1:7 oversubscription between 3,072-GPU pods of the paper's "
        "three-layer Clos and NCCLX's changes to NCCL (the network is one non-blocking "
        "400 Gb/s port per GPU, NCCL's cost model); the tunable number N of consecutive "
        "micro-batches of Llama 3's schedule (astra runs Megatron's interleaved 1F1B); the "
        "document mask (attention is causal over the whole sequence)."
    ),
    "nemotron4": (
        "Not modelled: the deferred embedding weight gradient (`defer_embedding_wgrad_compute`), NeMo's "
        "gradient bucket of 50 MB (astra: Megatron's default of max(40M, 1M x DP) elements), "
        "and the DGX Cloud fabric beyond one "
        "non-blocking 400 Gb/s port per GPU."
    ),
}
TAIL = (
    "`run s` is the wall time of generating (`astra gen llm`'s generator, the rank traces "
    "built in memory) and simulating the run in its own process (`--jobs` at a time, on a 2-core "
    "machine shared with other work), `peak GiB` that process's peak resident memory.\n\n"
    "Regenerate with `.venv/bin/python validation/h100_scale.py --rows 1-7 --jobs 2 "
    "--markdown docs/validation-h100.md` (about a minute on 2 cores; the 128K run takes about 1 GiB)."
)


def _header(source: str) -> list[str]:
    if source == "llama3":
        return [
            "## Llama 3 405B on 8K and 16K H100s (TFLOP/s per GPU)",
            "",
            f"Published: {LLAMA3}. Plan: the paper's TP, CP, PP, DP, sequence length and "
            "batch per DP group (= micro-batches M of one sequence); interleaved 1F1B with 8 "
            "chunks per pipeline rank: the embedding alone, the 126 layers one per chunk, the "
            "output layer and loss alone (`--pipeline-layout`), FSDP (reduce-scatter of FP32 gradients, all-gather "
            "of the weights during the first forward pass), no recomputation, sequence parallelism, fused attention (cuDNN), BF16. "
            "TFLOP/s per GPU by PaLM's count (6 N + 12 L H Q T per token, 16,777,216 tokens "
            "per step); `causal`: the same prediction counted with 6 L H Q T.",
            "",
            "| run | GPUs | TP | CP | PP | DP | M | step s | astra TFLOP/s | published "
            "| error | causal | run s | peak GiB |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
    return [
        "## Nemotron-4 340B on 1K and 2K H100s (seconds per step)",
        "",
        f"Published: {NEMOTRON}. Plan: TP 8, PP 8, 12 one-layer chunks per pipeline rank "
        "(interleaved 1F1B), micro-batch 1, global batch 2 per node (M micro-batches per "
        "DP rank), sequence 4,096, sequence parallelism with tensor-parallel communication "
        "overlap, distributed optimizer with BF16 gradient reduction, no recomputation, "
        "fused attention (cuDNN).",
        "",
        "| run | GPUs | TP | PP | DP | M | astra step s | published step s | error | run s | peak GiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]


def _line(row: Row, seconds: float, wall: float, peak: float) -> tuple[str, float]:
    """The row's table line and its error."""
    if row.source == "llama3":
        tflops = row.llama3_flops() / (seconds * row.gpus) / 1e12
        causal = row.llama3_flops(causal=True) / (seconds * row.gpus) / 1e12
        err = tflops / row.published - 1
        return (
            f"| {row.name} | {row.gpus:,} | {row.tp} | {row.cp} | {row.pp} | {row.dp} "
            f"| {row.microbatches} | {seconds:.2f} | {tflops:.1f} | {row.published:.0f} "
            f"| {err:+.1%} | {causal:.1f} | {wall:.0f} | {peak:.1f} |"
        ), err
    err = row.published / seconds - 1
    return (
        f"| {row.name} | {row.gpus:,} | {row.tp} | {row.pp} | {row.dp} | {row.microbatches} "
        f"| {seconds:.2f} | {row.published:.2f} | {err:+.1%} | {wall:.0f} | {peak:.1f} |"
    ), err


def _run(index: int) -> tuple[float | None, float, float, str | None]:
    """Row ``index`` of :data:`ROWS` in a fresh process: (step s, wall s, peak resident GiB,
    None), or (None, wall s, peak GiB, astra's one-line refusal) when astra refuses it."""
    start = time.perf_counter()
    try:
        seconds: float | None = predict(ROWS[index])
        refusal = None
    except AstraError as exc:  # astra refuses the plan, in one line
        seconds, refusal = None, str(exc)
    return seconds, time.perf_counter() - start, peak_rss_gib(), refusal


def report(rows: list[Row], jobs: int = 1) -> str:
    """The report of ``rows``, each simulated in its own process, ``jobs`` at a time."""
    # one process per row (maxtasksperchild): each row's peak memory is its own
    # the largest first, so that the last to finish is a small one
    order = sorted(rows, key=lambda row: -row.gpus * row.seq)
    with multiprocessing.get_context("spawn").Pool(jobs, maxtasksperchild=1) as pool:
        results = dict(zip(order, pool.map(_run, [ROWS.index(row) for row in order], chunksize=1)))
    return render(rows, results)


def render(rows: list[Row], results: dict[Row, tuple[float | None, float, float, str | None]]) -> str:
    """The report's markdown from each row's :func:`_run` result."""
    lines = [
        "# Published H100 training runs at scale: predicted vs measured",
        "",
        "Network: 8 H100 SXM per server on NVSwitch (450 GB/s per GPU and direction), one "
        "400 Gb/s port per GPU across servers on a non-blocking switch, NCCL model, default "
        "backend. Error = predicted throughput / published - 1 (= published step time / "
        "predicted step time - 1). `validation/h100_scale.py` cites the source of every "
        "number of each plan.",
    ]
    errors = []
    for source in ("llama3", "nemotron4"):
        chosen = [row for row in rows if row.source == source]
        if not chosen:
            continue
        lines += ["", *_header(source)]
        for row in chosen:
            seconds, wall, peak, refusal = results[row]
            if seconds is None:
                lines.append(f"| {row.name} | {row.gpus:,} | not run: {refusal} |")
                continue
            line, err = _line(row, seconds, wall, peak)
            lines.append(line)
            errors.append(err)
        lines += ["", LEFT_OUT[source]]
    if errors:
        lines += [
            "",
            "## Summary",
            "",
            f"Geometric mean of |error| over {len(errors)} runs: {geomean_abs(errors):.1%}; "
            f"largest: {max(abs(e) for e in errors):.1%}; within 10 %: "
            f"{sum(abs(e) <= 0.10 for e in errors)} of {len(errors)}.",
            "",
            TAIL,
        ]
    left_out = [i for i, row in enumerate(ROWS, 1) if row not in rows]
    if left_out:
        lines += ["", "## Runs not in the tables", ""]
        lines += [f"* Run {i}: not in this report (`--rows {i}` runs it alone)." for i in left_out]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="4-7", help="runs, e.g. 1-7 or 1,4 (1-3 Llama 3, 4-7 Nemotron-4)")
    parser.add_argument("--markdown", help="also write the report to this file")
    parser.add_argument("--jobs", type=int, default=1, help="rows simulated at once (one process each)")
    args = parser.parse_args(argv)
    return emit(report(parse_rows(args.rows, ROWS), max(1, args.jobs)), args.markdown)


if __name__ == "__main__":
    sys.exit(main())
