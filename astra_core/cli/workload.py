"""``astra convert`` and ``astra gen``: make Chakra traces from other descriptions.

``convert text``: ASTRA-sim 1.0 text workloads; ``convert pytorch``: PyTorch
execution traces (+ Kineto); ``gen llm``: Megatron-style LLM training;
``gen micro``: single-collective microbenchmarks. Errors are one line
(``error: ...``) and exit 1, like ``astra run``. A trace set past astra's
limits is refused before anything is written
(:mod:`astra_core.workload.trace_size`), and a set is written all or nothing
(:mod:`astra_core.workload.trace_set`; SIGTERM counts as Ctrl-C here).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator

import click

from astra_core.cli.common import POSITIVE as _POSITIVE
from astra_core.cli.common import fail as _fail
from astra_core.config.dims import parse_dims
from astra_core.errors import ConfigError


def _check_paths(output: str, npus: int, comm_groups: str | None, inputs: dict, counted: str) -> None:
    """Before anything is read or written: ``npus`` (from option ``counted``) within
    astra's limit, no input (``{"--model": path}``) among the files the command writes,
    and ``--comm-groups`` not one of the rank traces ``--output`` writes (ConfigError,
    one line)."""
    from astra_core.outputs import check_not_input, trace_outputs
    from astra_core.workload.trace_set import check_not_a_trace
    from astra_core.workload.trace_size import check_npus

    check_npus(counted, npus)  # first: trace_outputs lists every rank's file
    check_not_a_trace(comm_groups, "--comm-groups", output, npus)
    groups_path = comm_groups or f"{output}.comm_groups.json"
    check_not_input({**trace_outputs(output, npus), "--comm-groups": groups_path}, inputs)


def _interruptible() -> contextlib.AbstractContextManager:
    """Within: SIGTERM raises like Ctrl-C, so a half-written trace set is removed."""
    from astra_core.lifetime import sigterm_raises

    return sigterm_raises()


def _dims(text: str | None) -> list[int] | None:
    """``8x16`` (or ``8,16``) -> [8, 16], None stays None (:func:`parse_dims`)."""
    return None if text is None else parse_dims(text)


def _bucket_bytes(mib: float | None) -> int | None:
    """--bucket-mb in MiB -> bytes (None: the default); ConfigError unless finite and >= 1 byte."""
    if mib is None:
        return None
    from astra_core.errors import ConfigError

    if not math.isfinite(mib) or int(mib * 2**20) < 1:
        raise ConfigError(f"--bucket-mb: must be a finite size of at least 1 byte (1/1048576 MiB), got {mib}")
    return int(mib * 2**20)


# -- convert ---------------------------------------------------------------------


@click.group()
def convert() -> None:
    """Convert other workload descriptions to Chakra traces (PREFIX.<rank>.et)."""


@convert.command("text")
@click.argument("file", type=click.Path())
@click.option("--npus", type=_POSITIVE, required=True, help="number of NPUs (one trace per NPU)")
@click.option("--output", required=True, help="trace prefix: rank r writes PREFIX.r.et")
@click.option(
    "--model-parallel-npus",
    type=_POSITIVE,
    help="model-parallel group size M (default: a transformer header's "
    "model_parallel_NPU_group; without it hybrid collectives span all NPUs, as Chakra)",
)
@click.option("--dims", help="network dimension sizes, e.g. 8x16: whole-dimension groups use involved_dim")
@click.option("--passes", type=_POSITIVE, default=1, show_default=True, help="training iterations")
@click.option(
    "--chakra-ids",
    is_flag=True,
    help="number nodes with one counter across ranks (byte-identical to Chakra's converter)",
)
@click.option(
    "--comm-groups",
    type=click.Path(),
    help="where to write the comm-group JSON (default PREFIX.comm_groups.json, only when needed)",
)
def convert_text(file, npus, output, model_parallel_npus, dims, passes, chakra_ids, comm_groups) -> None:
    """Convert an ASTRA-sim 1.0 text workload FILE for NPUS NPUs."""
    from astra_core.workload.converters.text import convert_text_workload, write_converted
    from astra_core.workload.converters.text_format import read_text_workload

    _check_paths(output, npus, comm_groups, {"FILE": file}, "--npus")
    wl = read_text_workload(file)
    conv = convert_text_workload(
        wl,
        npus,
        model_parallel_npus=model_parallel_npus,
        dims=_dims(dims),
        passes=passes,
        chakra_ids=chakra_ids,
    )
    with _interruptible():
        paths, groups = write_converted(conv, output, comm_groups)
    click.echo(
        f"{wl.parallelism}: {len(wl.layers)} layers -> {len(paths)} traces {output}.<rank>.et "
        f"({len(conv.templates)} nodes each)"
    )
    _say_comm_groups(groups, output)


@convert.command("pytorch")
@click.option(
    "--et",
    "et_files",
    multiple=True,
    required=True,
    type=click.Path(),
    help="host execution trace JSON; repeat once per rank, in rank order",
)
@click.option(
    "--kineto",
    "kineto_files",
    multiple=True,
    type=click.Path(),
    help="Kineto (profiler) trace JSON of the same run; repeat per rank, same order",
)
@click.option("--output", required=True, help="trace prefix: rank r writes PREFIX.r.et")
@click.option(
    "--comm-groups",
    type=click.Path(),
    help="where to write the comm-group JSON "
    "(default PREFIX.comm_groups.json, only when the run used sub-groups)",
)
def convert_pytorch(et_files, kineto_files, output, comm_groups) -> None:
    """Convert PyTorch execution traces (one per rank) to Chakra traces."""
    from astra_core.workload.converters.pytorch import convert_pytorch_traces

    _check_paths(output, len(et_files), comm_groups, {"--et": et_files, "--kineto": kineto_files}, "--et")
    with _interruptible():
        result = convert_pytorch_traces(list(et_files), list(kineto_files) or None, output, comm_groups)
    for rank, summary in enumerate(result.summaries):
        click.echo(f"rank {rank}: {summary}")
    _say_comm_groups(result.comm_groups_path, output)


# -- gen -------------------------------------------------------------------------


@click.group()
def gen() -> None:
    """Generate synthetic Chakra traces (PREFIX.<rank>.et)."""


@gen.command("micro")
@click.option(
    "--collective",
    required=True,
    type=click.Choice(["all-reduce", "all-gather", "reduce-scatter", "all-to-all"]),
)
@click.option("--size", required=True, help="collective size: 1048576, 64MiB, 1GiB, 1MB ...")
@click.option("--npus", type=_POSITIVE, required=True, help="number of NPUs")
@click.option("--output", required=True, help="trace prefix: rank r writes PREFIX.r.et")
@click.option("--iterations", type=_POSITIVE, default=1, show_default=True, help="back-to-back collectives")
@click.option(
    "--chakra-ids", is_flag=True, help="number nodes with one counter across ranks, as Chakra's generator"
)
def gen_micro(collective, size, npus, output, iterations, chakra_ids) -> None:
    """A single-collective microbenchmark on NPUS NPUs."""
    from astra_core.workload.generators.micro import parse_size, write_micro

    nbytes = parse_size(size)
    with _interruptible():
        paths = write_micro(collective, nbytes, npus, output, iterations, chakra_ids=chakra_ids)
    click.echo(f"{collective} of {nbytes} bytes x {iterations} -> {len(paths)} traces {output}.<rank>.et")


def _layout_chunks(layout: str | None, pp: int) -> int:
    """Model chunks per pipeline stage that ``--pipeline-layout`` spells (1 without one,
    or where it does not parse: the generator then says why)."""
    from astra_core.workload.generators.pipeline import layout_stages

    parts = layout_stages(layout) if layout is not None else 1
    return parts // pp if parts % pp == 0 and parts >= pp else 1


@gen.command("llm")
@click.option(
    "--model",
    required=True,
    help="preset (gpt3-175b, llama3-8b, llama3-70b, llama3-405b, "
    "mixtral-8x7b, deepseek-v3) or a JSON/YAML model file",
)
@click.option("--dp", type=_POSITIVE, default=1, show_default=True, help="data-parallel size D")
@click.option("--tp", type=_POSITIVE, default=1, show_default=True, help="tensor-parallel size T")
@click.option("--pp", type=_POSITIVE, default=1, show_default=True, help="pipeline-parallel size P")
@click.option("--ep", type=_POSITIVE, default=1, show_default=True, help="expert-parallel size E (divides D)")
@click.option(
    "--microbatches", type=_POSITIVE, help="micro-batches per step M (default 2P, or from --global-batch)"
)
@click.option("--micro-batch", type=_POSITIVE, default=1, show_default=True, help="sequences per micro-batch")
@click.option("--global-batch", type=_POSITIVE, help="sequences per step (= D x M x micro-batch)")
@click.option("--schedule", type=click.Choice(["1f1b", "gpipe"]), default="1f1b", show_default=True)
@click.option(
    "--virtual-stages",
    type=_POSITIVE,
    help="model chunks per pipeline stage: interleaved 1F1B (Megatron's "
    "--num-layers-per-virtual-pipeline-stage = layers / (pp x V)); default 1, or "
    "those of --pipeline-layout",
)
@click.option(
    "--pipeline-layout",
    help="every virtual stage's layers, Megatron-core's --pipeline-model-parallel-layout: "
    "stages v x pp + p split by '|', E embedding, t layer, L loss, x*n and (..)*n repeat "
    "(e.g. 'Et|(tt|)*62tL')",
)
@click.option(
    "--account-for-embedding-in-pipeline-split",
    "account_for_embedding",
    is_flag=True,
    help="the embedding counts as a layer in the pipeline split (Megatron-core)",
)
@click.option(
    "--account-for-loss-in-pipeline-split",
    "account_for_loss",
    is_flag=True,
    help="the loss counts as a layer in the pipeline split (Megatron-core)",
)
@click.option(
    "--decoder-first-pipeline-num-layers",
    "first_stage_layers",
    type=_POSITIVE,
    help="layers on the first pipeline stage (Megatron-LM's option; the rest split evenly over the other stages)",
)
@click.option(
    "--decoder-last-pipeline-num-layers",
    "last_stage_layers",
    type=_POSITIVE,
    help="layers on the last pipeline stage (Megatron-LM's option; the rest split evenly over the other stages)",
)
@click.option(
    "--zero",
    type=click.IntRange(0, 3),
    default=0,
    show_default=True,
    help="ZeRO stage: 0 all-reduce, 1-2 reduce-scatter + all-gather, 3 FSDP",
)
@click.option("--seq-len", type=_POSITIVE, help="sequence length (default: the model's)")
@click.option("--sequence-parallel", is_flag=True, help="Megatron sequence parallelism")
@click.option(
    "--recompute",
    type=click.Choice(["none", "selective", "full"]),
    default="none",
    show_default=True,
    help="Megatron activation recomputation: full = every layer's "
    "forward again before its backward; selective = the --recompute-modules",
)
@click.option(
    "--recompute-modules",
    "recompute_modules",
    default="core_attn",
    show_default=True,
    callback=lambda ctx, param, value: tuple(m.strip() for m in value.split(",") if m.strip()),
    help="with --recompute selective, Megatron-core's modules run again, comma-separated: "
    "core_attn, layernorm, moe_act, mlp, mla_up_proj",
)
@click.option(
    "--mtp-num-layers",
    "mtp_layers",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="multi-token-prediction depths after the last layer (Megatron-core's, DeepSeek-V3's 1)",
)
@click.option(
    "--overlap-grad-reduce/--no-overlap-grad-reduce",
    default=True,
    show_default=True,
    help="reduce gradient buckets during the backward pass (off: one reduction after it, "
    "Megatron's local DDP)",
)
@click.option(
    "--ddp",
    type=click.Choice(["megatron", "torch"]),
    default="megatron",
    show_default=True,
    help="data-parallel implementation: Megatron's (one gradient buffer) or PyTorch DDP "
    "(Megatron's --DDP-impl torch of 2021: 25 MiB buckets copied in and out, gradients in "
    "the parameters' dtype)",
)
@click.option(
    "--scatter-gather/--no-scatter-gather",
    default=True,
    show_default=True,
    help="pipeline sends carry 1/TP of the activation, all-gathered by the receiving "
    "stage (Megatron's --scatter-gather-tensors-in-pipeline)",
)
@click.option(
    "--cp",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="context-parallel size C: each rank holds 1/C of every sequence, attention "
    "goes round a ring (Megatron's --context-parallel-size)",
)
@click.option(
    "--cp-comm-type",
    type=click.Choice(["p2p", "all_gather", "a2a"]),
    default="p2p",
    show_default=True,
    help="how context-parallel attention gets the other ranks' keys and values: a ring "
    "overlapped with the kernels, all-gathered first, or all-to-alls that give each rank "
    "the whole sequence for 1/C of the heads (Megatron's --cp-comm-type)",
)
@click.option(
    "--tp-comm-overlap",
    is_flag=True,
    help="overlap the sequence-parallel all-gathers and reduce-scatters with the GEMMs "
    "beside them, in T-step rings (Megatron's --tp-comm-overlap; needs --sequence-parallel)",
)
@click.option(
    "--fp8-attention",
    is_flag=True,
    help="Transformer Engine's FP8 dot-product attention (Megatron's --fp8-dot-product-attention) "
    "under --fp8-recipe mxfp8: the attention kernel at the GPU's measured MXFP8 rate",
)
@click.option(
    "--tp-comm-overlap-cfg",
    type=click.Path(dir_okay=False),
    help="YAML or JSON of Transformer Engine's ub_cfgs (as NeMo's tp_overlap/*.yaml): per GEMM "
    "the method (ring_exchange, pipeline, bulk), num_sm, set_sm_margin, num_splits "
    "(default: Transformer Engine 2's)",
)
@click.option(
    "--attention",
    type=click.Choice(["flash", "unfused"]),
    default="flash",
    show_default=True,
    help="attention kernels: FlashAttention, or Megatron's unfused softmax path (score matrix in memory)",
)
@click.option(
    "--dropout/--no-dropout",
    default=False,
    show_default=True,
    help="attention and hidden dropout kernels (Megatron's default 0.1)",
)
@click.option(
    "--precision",
    type=click.Choice(["fp16", "bf16", "fp8"]),
    default="bf16",
    show_default=True,
    help="GEMM precision: 16-bit tensor cores, or FP8 (Hopper and later)",
)
@click.option(
    "--fp8-recipe",
    type=click.Choice(["delayed", "tensorwise", "mxfp8"]),
    default="delayed",
    show_default=True,
    help="Transformer Engine's FP8 scaling (Megatron-core's --fp8-recipe): delayed, "
    "tensorwise current scaling, or mxfp8 block scaling (Blackwell)",
)
@click.option(
    "--moe-routing",
    default="balanced",
    show_default=True,
    help="tokens per expert of each MoE layer: balanced (force-balanced routing), zipf:S "
    "(expert shares ~ rank^-S in a random order per layer), or a JSON file of recorded "
    'loads {"layers": [[per expert], ...]}; uneven routing needs --ep > 1',
)
@click.option(
    "--moe-capacity-factor",
    type=float,
    help="each rank keeps at most ceil(its assignments / experts x F) per expert and drops "
    "the rest (Megatron-core's --moe-expert-capacity-factor; default: dropless)",
)
@click.option(
    "--moe-pad-to-capacity",
    is_flag=True,
    help="every expert gets exactly its capacity (Megatron-core's --moe-pad-expert-input-to-capacity)",
)
@click.option(
    "--expert-tensor-parallel-size",
    "etp",
    type=click.IntRange(min=1),
    help="expert-tensor parallelism: --tp (the default: experts split like the dense "
    "layers) or 1 (MoE parallel folding: whole experts, --ep over the tensor- and "
    "data-parallel ranks; needs --sequence-parallel)",
)
@click.option(
    "--moe-token-dispatcher",
    type=click.Choice(["alltoall", "allgather", "flex"]),
    default="alltoall",
    show_default=True,
    help="Megatron-core's --moe-token-dispatcher-type: all-to-alls over the expert-parallel "
    "ranks, all-gathers over the tensor- and expert-parallel ranks, or a token-based "
    "dispatcher (flex: DeepEP or HybridEP, each token once per rank and NVLink domain)",
)
@click.option(
    "--moe-flex-dispatcher-backend",
    type=click.Choice(["deepep", "hybridep"]),
    default="deepep",
    show_default=True,
    help="flex's backend: DeepEP (NVLink groups of at most 8 GPUs, RDMA between them) or "
    "HybridEP (the whole NVLink domain, e.g. an NVL72 rack)",
)
@click.option(
    "--moe-grouped-gemm",
    type=click.Choice(["multi_stream", "fused"]),
    default="multi_stream",
    show_default=True,
    help="the local experts' GEMM kernel: Transformer Engine's GroupedLinear (one cuBLAS GEMM "
    "per expert over several streams, FP8 ones at most at the GPU's measured grouped rate) or "
    "one fused grouped kernel (the GEMM model)",
)
@click.option(
    "--moe-flex-sms",
    type=int,
    default=None,
    help="SMs the flex dispatcher's kernels hold, slowing the compute beside them (Megatron-core's "
    "--moe-deepep-num-sms / --moe-hybridep-num-sms; default theirs: 20 / 16)",
)
@click.option(
    "--moe-a2a-overlap",
    is_flag=True,
    help="Megatron-core's --overlap-moe-expert-parallel-comm with --delay-wgrad-compute: one "
    "micro-batch's forward beside another's backward, layer by layer, each one's token "
    "dispatch and combine under the other's attention and experts (needs --ep > 1, and "
    "--virtual-stages > 1 with --pp > 1)",
)
@click.option(
    "--moe-routing-seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="seed of zipf:S's expert order",
)
@click.option(
    "--grad-reduce-in-bf16",
    is_flag=True,
    help="BF16 gradient buffers and reductions (Megatron keeps them in FP32 for BF16 "
    "training, in FP16 for FP16)",
)
@click.option(
    "--overlap-param-gather",
    is_flag=True,
    help="Megatron-core's --overlap-param-gather (ZeRO 1-2): the updated weights are "
    "all-gathered during each model chunk's first forward pass (layer by layer, or chunk by "
    "chunk with interleaved stages), not after the optimizer step",
)
@click.option(
    "--fp8-param-gather",
    is_flag=True,
    help="FP8 weights all-gathered in FP8 (ZeRO 1-3): 1 byte each under the per-tensor "
    "recipes; MXFP8 weights are gathered in BF16",
)
@click.option(
    "--distributed-optimizer",
    is_flag=True,
    help="Megatron's distributed optimizer: gradients reduce-scattered, optimizer on a 1/DP "
    "shard, parameters all-gathered (the same as --zero 1)",
)
@click.option(
    "--gpu",
    default="H100",
    show_default=True,
    help="A100, A100-40GB, H100, H200, B200, GB200, GB300 or a JSON/YAML file (kernel model constants)",
)
@click.option(
    "--bucket-mb",
    type=click.FloatRange(min=0, min_open=True),
    help="gradient bucket size [MiB] (default: Megatron's max(40M, 1M x DP) elements)",
)
@click.option("--dims", help="network dimension sizes (e.g. 8x8x16): whole-dimension groups use involved_dim")
@click.option(
    "--ignore-memory",
    is_flag=True,
    help="generate a plan whose peak memory per GPU passes the GPU's HBM (refused otherwise)",
)
@click.option("--output", required=True, help="trace prefix: rank r writes PREFIX.r.et")
@click.option(
    "--comm-groups", type=click.Path(), help="comm-group JSON path (default PREFIX.comm_groups.json)"
)
def gen_llm(
    model,
    dp,
    tp,
    pp,
    ep,
    cp,
    schedule,
    virtual_stages,
    pipeline_layout,
    zero,
    distributed_optimizer,
    gpu,
    bucket_mb,
    dims,
    ignore_memory,
    output,
    comm_groups,
    **plan,
) -> None:
    """Megatron-style training step of an LLM on DP x TP x PP x CP NPUs.

    Refuses a plan whose peak memory per GPU passes the GPU's HBM (--ignore-memory
    generates it anyway)."""
    from astra_core.workload.generators.gpus import load_gpu
    from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm
    from astra_core.workload.generators.llm_memory import check_memory
    from astra_core.workload.generators.models import load_model

    sizes = f"dp {dp} x tp {tp} x pp {pp} x cp {cp}"
    inputs = {"--model": model, "--gpu": gpu, "--moe-routing": plan["moe_routing"]}
    _check_paths(output, dp * tp * pp * cp, comm_groups, inputs, sizes)
    zero = _zero_stage(zero, distributed_optimizer)
    if plan["tp_comm_overlap_cfg"] is not None:
        from astra_core.workload.generators.userbuffers import load_ub_cfg

        plan["tp_comm_overlap_cfg"] = load_ub_cfg(plan["tp_comm_overlap_cfg"])
    # every other option has its LLMConfig field's name
    cfg = LLMConfig(
        load_model(model),
        load_gpu(gpu),
        dp=dp,
        tp=tp,
        pp=pp,
        ep=ep,
        cp=cp,
        schedule=schedule,
        zero=zero,
        bucket_bytes=_bucket_bytes(bucket_mb),
        dims=_dims(dims),
        virtual_stages=virtual_stages or _layout_chunks(pipeline_layout, pp),
        pipeline_layout=pipeline_layout,
        **plan,
    )
    with _interruptible(), _writing_progress(dp * tp * pp * cp) as on_written:
        wl = generate_llm(cfg)
        if not ignore_memory:
            check_memory(cfg, wl.memory)
        paths, groups = write_llm(wl, output, comm_groups, on_written)
    _say_llm_written(cfg.model, wl, paths, groups, f"{sizes}, ep {ep}", schedule, zero, output)


@contextlib.contextmanager
def _writing_progress(npus: int) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on a terminal's stderr while thousands of traces are written
    (100,000 ranks take about a minute); nothing for a few ranks or off a terminal."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    if npus < 1000 or not console.is_terminal:
        yield None
        return
    columns = (TextColumn("writing traces"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("traces", total=npus)
        yield lambda rank: progress.update(task, completed=rank + 1)


def _say_comm_groups(path: str | os.PathLike | None, prefix: str) -> None:
    """Where the comm groups went, and how a run finds them."""
    if not path:
        return
    beside = os.path.abspath(path) == os.path.abspath(f"{prefix}.comm_groups.json")
    how = "astra run reads it beside the traces" if beside else "pass it to astra run --comm-groups"
    click.echo(f"comm groups: {path} ({how})")


def _zero_stage(zero: int, distributed_optimizer: bool) -> int:
    """--zero, or 1 with --distributed-optimizer (which is ZeRO 1: another stage fails)."""
    if distributed_optimizer:
        if zero not in (0, 1):
            _fail(ConfigError(f"--distributed-optimizer is ZeRO 1; it cannot be combined with --zero {zero}"))
        zero = 1
    return zero


def _say_llm_written(model, wl, paths, groups, plan: str, schedule: str, zero: int, output: str) -> None:
    """What ``astra gen llm`` wrote: the model and plan, nodes and FLOPs, the comm-group file."""
    click.echo(
        f"{model.name}: {model.params() / 1e9:.1f} B parameters, {wl.layout.npus} NPUs "
        f"({plan}), {wl.microbatches} micro-batches, {schedule}, "
        f"ZeRO {zero} -> {len(paths)} traces {output}.<rank>.et"
    )
    click.echo(
        f"nodes per rank: {min(map(len, wl.stages))}..{max(map(len, wl.stages))}; "
        f"step FLOPs: model {sum(wl.model_flops.values()):.3e}, hardware {sum(wl.flops.values()):.3e} "
        "(recomputation included); astra run reports MFU and HFU"
    )
    cfg = wl.config
    from astra_core.workload.generators.llm_memory import memory_line

    click.echo(memory_line([m.peak_bytes for m in wl.memory], cfg.gpu.hbm_bytes))
    if wl.moe_rows:  # unbalanced routing or a capacity
        from astra_core.workload.generators.routing import load_summary

        summary = load_summary(
            cfg.moe_routing, wl.moe_rows, wl.moe_assigned, cfg.moe_capacity_factor, cfg.moe_pad_to_capacity
        )
        click.echo(summary)
    _say_comm_groups(groups, output)
