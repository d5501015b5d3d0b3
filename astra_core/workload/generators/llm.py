"""Megatron-style LLM training step as per-rank Chakra traces (``astra gen llm``).

One training step of a decoder-only transformer (:mod:`.models`) on
D x T x P x C NPUs (:mod:`.layout`) with E-way expert parallelism and C-way
context parallelism (:class:`LLMConfig`):

* **Tensor parallelism** (Megatron-LM, Shoeybi et al. 2019): each attention
  and MLP block ends (forward) / starts (backward) with an all-reduce of the
  block's activations over the T ranks; with sequence parallelism
  (Korthikanti et al. 2022) an all-gather before and a reduce-scatter after
  each block, mirrored in backward, where the block's input is all-gathered
  again for its first GEMM's weight gradient beside the data gradient, and
  the data gradient reduce-scattered beside the weight gradient (Megatron-LM's
  asynchronous communication in its linear layers). The vocabulary-parallel embedding
  all-reduces (reduce-scatters) its output.
* **Pipeline parallelism**: layers split evenly over P stages (or with given
  counts on the first and last, :func:`.pipeline.stage_layers`); activations
  go forward and gradients backward with send/receive pairs (1/T of them with
  sequence parallelism), in the GPipe or 1F1B order (:mod:`.pipeline`).
* **Data parallelism**: gradients of the last micro-batch's backward pass
  are reduced in buckets as their layers finish (PyTorch DDP / Megatron
  overlap), all-reduce for ZeRO 0, reduce-scatter for ZeRO 1-2 (then an
  all-gather of the updated weights after the optimizer), and for ZeRO 3
  (FSDP) weights all-gathered before each layer's forward and backward
  (prefetched one layer ahead) and gradients reduce-scattered per layer.
* **Expert parallelism**: MoE layers dispatch and combine tokens with
  all-to-alls over the E ranks; expert gradients are reduced over the D/E
  ranks holding the same experts.
* **Tied embeddings** with P > 1: the first and last stage all-reduce the
  embedding gradient (Megatron's embedding group).

Collective sizes (``comm_size``) follow upstream ASTRA-sim's meaning
(``Ring.cc``, and Chakra's generators): an all-gather's is what each rank
contributes (its shard), an all-reduce's, reduce-scatter's and all-to-all's
the whole input of each rank. A gather of a tensor split T ways therefore
has 1/T of the size of the reduce-scatter that produced the shards.

Compute nodes carry the GPU compute model's times (:mod:`.kernels`) of their
kernels (:mod:`.ops`) in ``duration_micros`` and the FLOPs/bytes in
``num_ops`` / ``tensor_size``. Each rank runs its compute in program order and its
communication in program order on one stream (upstream ASTRA-sim runs one
communication at a time per NPU; a fixed order keeps every group's members
in step), overlapping the two where the dependencies allow.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astra_core.collector import few_passes, paused
from astra_core.errors import ConfigError
from astra_core.workload.generators.gpus import GPUSpec
from astra_core.workload.generators.kernels import PRECISIONS
from astra_core.workload.generators.layout import Layout, experts_folded
from astra_core.workload.generators.llm_memory import StageMemory, stage_memory
from astra_core.workload.generators.llm_size import check_plan, check_values
from astra_core.workload.generators.llm_stage import CP_TAG, TP_TAG, StageBuilder, StageNode
from astra_core.workload.generators.models import ModelConfig
from astra_core.workload.generators.ops import DDP_IMPLS
from astra_core.workload.generators.pipeline import SCHEDULES, parse_layout
from astra_core.workload.generators.routing import BALANCED, check_routing, rows_by_layer
from astra_core.workload.generators.token_dispatch import check_backend
from astra_core.workload.generators.userbuffers import GemmOverlap
from astra_core.workload.trace_size import MAX_RANK_NODES

__all__ = ["LLMConfig", "LLMWorkload", "generate_llm", "megatron_bucket_bytes", "write_llm"]

#: Transformer Engine's FP8 scaling recipes, as Megatron-core's ``--fp8-recipe`` names them.
FP8_RECIPES = ("delayed", "tensorwise", "mxfp8")
#: Context parallelism's communication (Transformer Engine's ``cp_comm_type``).
CP_COMM_TYPES = ("p2p", "all_gather", "a2a")


#: Megatron-LM's activation recomputation granularities (see LLMConfig).
RECOMPUTE = ("none", "selective", "full")
#: Megatron-core's ``--recompute-modules`` that the generator runs (see LLMConfig).
RECOMPUTE_MODULES = ("core_attn", "layernorm", "moe_act", "mlp", "mla_up_proj")
#: Attention implementations (see :mod:`.ops`).
ATTENTIONS = ("flash", "unfused")


def megatron_bucket_bytes(dp: int, grad_bytes: int) -> int:
    """Megatron-LM DDP's default gradient bucket [bytes] for ``dp`` data-parallel ranks:
    max(40M, 1M x dp) elements of ``grad_bytes`` each (megatron/core/distributed/
    distributed_data_parallel.py, ``bucket_size``)."""
    return max(40_000_000, 1_000_000 * dp) * grad_bytes


@dataclass
class LLMConfig:
    """Parallelism plan. Batch sizes in sequences; ``bucket_bytes`` of the gradient buckets.

    ``microbatches`` (M) and ``global_batch`` (B) must agree, B = D x M x
    ``micro_batch``; with neither, M = 2P (M = 1 without pipelining).
    ``dims``: the network's dimension sizes, to place whole-dimension groups
    with involved_dim. ``bucket_bytes`` defaults to Megatron-LM's gradient bucket of
    max(40M, 1M x D) elements.

    Megatron-LM's options, with its meaning:

    * ``recompute``: ``none``; ``full`` (``--recompute-granularity full``,
      ``--recompute-method uniform`` with one layer per checkpoint: each
      layer's forward, tensor-parallel communication included, runs again
      just before its backward); ``selective`` (``--recompute-granularity
      selective``: the modules of ``recompute_modules``).
    * ``recompute_modules``: with ``recompute`` ``selective``, Megatron-core's
      ``--recompute-modules`` (``transformer_config.py``), each run forward again
      just before its layer's backward: ``core_attn`` (the attention core,
      Korthikanti et al. 2022; the default), ``layernorm`` (the layer norms that are
      modules of their own: with Transformer Engine the one before a mixture-of-experts
      block, the others fused into the GEMM after them), ``moe_act`` (the experts'
      activation), ``mlp`` (a dense layer's MLP block, its tensor-parallel
      communication included), ``mla_up_proj`` (multi-head latent attention's up
      projections with their fused latent norms).
    * ``mtp_layers``: Megatron-core's ``--mtp-num-layers`` (DeepSeek-V3's
      multi-token prediction): after the last layer, on the last pipeline stage, each
      depth embeds the tokens one further ahead, projects them with the hidden states
      (:func:`.ops.mtp_input_ops`), runs one more transformer layer of the model's last
      layer's kind and the shared output layer and loss again; with P > 1 the last
      stage keeps a copy of the embedding, whose gradient it all-reduces with the
      first stage's (the embedding group). Routing skew leaves its MoE layer balanced.
    * ``overlap_grad_reduce``: reduce gradient buckets while the backward pass
      runs (PyTorch DDP, ``--overlap-grad-reduce``); off: one reduction of
      all gradients after it (Megatron's ``local`` DDP of SC'21), whose
      backward also adds each micro-batch's gradients into its gradient
      buffer (:func:`.ops.grad_accumulation_op`, :attr:`grad_bytes`).
    * ``ddp``: ``megatron`` (Megatron's DDP with one contiguous gradient buffer,
      zeroed every step: the ``local`` DDP of 2021 and Megatron-core's since) or
      ``torch`` (``--DDP-impl torch`` of 2021: PyTorch DistributedDataParallel,
      always overlapped, gradients in the parameters' dtype accumulating in
      ``.grad`` from the second micro-batch on and copied into and out of
      buckets of 25 MiB, its ``bucket_cap_mb`` default; see :func:`.ops.optimizer_ops`).
    * ``grad_reduce_in_bf16``: BF16 gradient buffers and reductions
      (``--grad-reduce-in-bf16``) instead of Megatron's FP32 for BF16 training.
    * ``overlap_param_gather``: Megatron-core's ``--overlap-param-gather`` with the
      distributed optimizer (``zero`` 1 or 2): the updated weights are not all-gathered
      after the optimizer step but during the next step's first forward pass of each
      model chunk, each layer's awaited before the layer runs, the embedding and output
      layer's with the stage's first layer, on the data-parallel group's own stream beside
      the step's other communication. Without interleaving each layer's gather starts
      when the layer before it starts (``DistributedDataParallel``'s forward pre-hooks);
      with interleaved stages whole chunks' gathers start as Megatron-core's interleaved
      schedule launches them under its default ``align_param_gather``: chunks 0 and 1 at
      the step's start, chunk v + 1 as chunk v's first forward starts
      (``schedules.py``, ``param_sync_func``). In a step of the steady state this is the
      gather of the previous step's update; the step simulated runs it for its own.
    * ``fp8_param_gather``: ``--fp8-param-gather``: the weights are kept in FP8 and
      all-gathered in FP8, 1 byte each (ZeRO 1-3) under the per-tensor recipes
      (``delayed``, ``tensorwise``); under ``mxfp8`` Megatron-core gathers them in BF16
      and quantizes after (``_copy_main_params_to_param_buffer`` of
      ``distrib_optimizer.py``: "only used for MXFP8 params"), 2 bytes. (Megatron-FSDP
      gathers per-tensor FP8 weights row-wise and builds the transpose after, 1 byte; MXFP8
      weights with their column-wise copy, 2 x 1.03 bytes, taken as the 2:
      ``megatron_fsdp/mixed_precision.py``, ``fp8_need_transpose_data``.)
    * ``virtual_stages``: V model chunks per pipeline stage, run with the
      interleaved 1F1B schedule (``--num-layers-per-virtual-pipeline-stage``
      = layers / (P V)); chunk ``v`` of stage ``p`` holds the layers of
      virtual stage ``v P + p``.
    * ``first_stage_layers``, ``last_stage_layers``: layers on the first and the
      last pipeline stage (``--decoder-first-pipeline-num-layers``,
      ``--decoder-last-pipeline-num-layers``), the rest evenly over the stages
      between; the first stage also holds the embedding and the last the output
      layer. Not with ``virtual_stages`` (Megatron-core refuses it too).
    * ``account_for_embedding``, ``account_for_loss``: the embedding and the
      loss each count as one layer in the pipeline split, with or without
      ``virtual_stages`` (Megatron-core's ``--account-for-embedding-in-pipeline-split``
      and ``--account-for-loss-in-pipeline-split``: ``L + 2`` layers over the
      ``P V`` virtual stages, the first and the last building one layer less).
    * ``pipeline_layout``: every virtual stage's layers spelled out
      (Megatron-core's ``--pipeline-model-parallel-layout``, e.g.
      ``"Et|(tt|)*62tL"``; :func:`.pipeline.parse_layout`); ``virtual_stages``
      must be its virtual stages over P.
    * ``scatter_gather``: a pipeline send carries 1/T of the activation from
      each tensor-parallel rank and the receiving stage all-gathers it over
      its T ranks (``--scatter-gather-tensors-in-pipeline``, on by default in
      Megatron-LM); with sequence parallelism the activation is split already.
    * ``attention``: ``flash`` (FlashAttention, ``--use-flash-attn``) or
      ``unfused`` (Megatron's softmax path of 2021: the score matrix is written).
    * ``dropout``: attention and hidden dropout on (Megatron's default 0.1 of
      ``--attention-dropout`` / ``--hidden-dropout``): their kernels and masks run.
    * ``precision``: ``fp16`` / ``bf16`` (16-bit tensor-core GEMMs) or ``fp8``
      (Transformer Engine's delayed scaling; needs a GPU with FP8): the layers'
      linear GEMMs in FP8 with their casts (:func:`.ops.fp8_cast_op`), the weights
      cast once a step, and the amax all-reduces over each stage's ranks after every
      forward and backward pass of a model chunk.
    * ``fp8_recipe``: Transformer Engine's scaling under ``fp8`` (Megatron-core's
      ``--fp8-recipe``): ``delayed`` (above) or ``tensorwise`` (current scaling:
      each operand's amax computed before its cast, no amax history, and under
      sequence parallelism the amax of a tensor all-gathered in FP8 all-reduced over
      the tensor-parallel ranks; :func:`.ops.fp8_cast_op`), or ``mxfp8``
      (Blackwell's block scaling: a scale per 32 elements computed in the cast, no
      amax reduction at all; needs a GPU with ``mx_block_scaling``).
    * ``cp``: context parallelism (``--context-parallel-size``): each of C
      ranks holds s / C tokens of every sequence; attention goes round the C
      ranks' ring, each step sending its keys and values on while the next
      block is computed (backward: keys, values and their gradients), and
      gradients are reduced over the D x C ranks (:mod:`.layout`).
    * ``cp_comm_type``: how attention reaches the other ranks' keys and values
      (Megatron-Core's ``--cp-comm-type``, Transformer Engine's ``cp_comm_type``):
      ``p2p`` (the ring above) or ``all_gather`` (each rank all-gathers the keys and
      values over the C ranks before its attention, the gather exposed; backward
      gathers them again and reduce-scatters their gradients:
      ``AttnFuncWithCPAndKVAllGather``; the Llama 3 paper's context parallelism) or
      ``a2a`` (DeepSpeed-Ulysses: all-to-alls give each rank the whole sequence for
      H / (T C) of the heads before the kernel and return its output's share after it;
      backward the same for the gradients: ``AttnFuncWithCPAndQKVOA2A``; the query and
      key-value heads per tensor-parallel rank must divide by C).
    * ``tp_comm_overlap``: Megatron-Core's ``--tp-comm-overlap`` (Transformer
      Engine's userbuffers, with sequence parallelism): the all-gather in
      front of a block's first GEMM and the reduce-scatter after its last
      become rings of T steps, each step's GEMM on one rank's share of the
      tokens running while the next share travels (backward: the output
      gradient's all-gather with the first data-gradient GEMM, the input
      gradient's reduce-scatter with the last). With ``cp`` the attention
      core between an attention block's two rings is the context-parallel
      ring, as Megatron-Core runs both (Llama 3.1 405B's 2025 recipe: TP 8,
      CP 2, TP overlap).
    * ``fp8_attention``: Transformer Engine's FP8 dot-product attention (Megatron's
      ``--fp8-dot-product-attention``; MXFP8 under ``fp8_recipe`` mxfp8): the attention
      kernel at the part's measured MXFP8 rate (``GPUSpec.fp8_attention_tflops``) after a
      cast of its queries, keys and values (:func:`.ops.fp8_attention`). Needs the MXFP8
      recipe, FlashAttention-style kernels, no context parallelism and a part with the rates.
    * ``tp_comm_overlap_cfg``: how each of those overlaps runs, Transformer Engine's
      ``ub_cfgs`` (:mod:`.userbuffers`: ring exchange, pipelined reduce-scatter in
      splits, bulk kernels beside the backward GEMMs, the SMs their kernels hold and
      whether the GEMM leaves them free); None: Transformer Engine 2's defaults.
    * ``moe_routing``, ``moe_routing_seed``: each MoE layer's share of tokens per
      expert (:mod:`.routing`: ``balanced``, ``zipf:S`` or a file of recorded loads).
      Unbalanced, each expert-parallel rank's experts process the assignments routed
      to them (spread evenly over its local experts) and the all-to-alls carry each
      rank's own bytes to and from each member (uneven all-to-alls,
      :mod:`astra_core.system.collectives.uneven`): the rank with the most-loaded
      experts finishes its layer last. Needs ``ep`` > 1.
    * ``moe_capacity_factor``, ``moe_pad_to_capacity``: Megatron-core's
      ``--moe-expert-capacity-factor`` (each rank keeps at most ``ceil(A / E x cf)``
      of its A assignment rows per expert, dropping the rest) and
      ``--moe-pad-expert-input-to-capacity`` (every expert exactly that many);
      None: dropless (:func:`.routing.rows_to_ranks`).
    * ``etp``: expert-tensor parallelism (Megatron-core's
      ``--expert-tensor-parallel-size``): ``tp`` (None, the default: each expert's
      matrices split over the tensor-parallel ranks, expert groups from the data-parallel
      ranks) or 1 (MoE parallel folding: whole experts, expert groups carved from the
      stage's T x D ranks, so ``ep`` may exceed ``dp``; the MoE block keeps its
      sequence-parallel tokens, :mod:`.layout`). Needs ``sequence_parallel`` with T > 1.
    * ``moe_token_dispatcher``: Megatron-core's ``--moe-token-dispatcher-type``:
      ``alltoall`` (all-to-alls over the expert-parallel ranks), ``allgather``
      (every rank's tokens, routing map and probabilities all-gathered over the
      tensor- and expert-parallel ranks, the outputs reduce-scattered back) or
      ``flex`` (a token-based dispatcher, ``moe_flex_dispatcher_backend``
      ``deepep`` or ``hybridep``: each token sent once per rank and once per NVLink
      domain that needs it, the network's first dimension taken as the NVLink
      domain, :mod:`.token_dispatch`; balanced dropless routing, and expert-tensor
      parallelism 1 when T > 1). ``moe_flex_sms``: the SMs its dispatch and combine
      kernels hold (Megatron-core's ``moe_deepep_num_sms`` / ``moe_hybridep_num_sms``;
      None: their defaults, 20 / 16, :data:`.token_dispatch.FLEX_SMS`), which slow the
      compute beside them (:mod:`astra_core.system.contention`).
    * ``moe_grouped_gemm``: the kernel of the local experts' GEMMs: ``multi_stream``
      (Transformer Engine's ``GroupedLinear`` behind ``--moe-grouped-gemm``: one cuBLAS
      GEMM per expert over several streams; FP8 ones no faster than the GPU's measured
      ``grouped_fp8_tflops``) or ``fused`` (one fused grouped kernel, e.g. Transformer
      Engine's op fuser with ``NVTE_CUTEDSL_FUSED_GROUPED_MLP``: the GEMM model).
    * ``moe_a2a_overlap``: Megatron-core's ``--overlap-moe-expert-parallel-comm`` with
      ``--delay-wgrad-compute`` (its combined 1F1B schedule,
      ``models/common/model_chunk_schedule_plan.py``): one micro-batch's forward pass and
      another's backward pass run together, layer by layer (the forward's first layer
      with the backward's last), so that each one's token dispatch and combine overlap
      the other's attention and experts (:meth:`.llm_stage.StageBuilder.combined`). With
      P = 1 the forward of micro-batch m runs beside the backward of m - 1; with
      interleaved stages every steady-state forward beside its backward. Megatron-core's
      conditions hold: ``ep`` > 1, the all-to-all or flex dispatcher, interleaved stages
      when P > 1, no full recomputation.
    """

    model: ModelConfig
    gpu: GPUSpec
    dp: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    microbatches: int | None = None
    micro_batch: int = 1
    global_batch: int | None = None
    schedule: str = "1f1b"
    zero: int = 0
    seq_len: int | None = None
    sequence_parallel: bool = False
    bucket_bytes: int | None = None
    dims: Sequence[int] | None = None
    recompute: str = "none"
    recompute_modules: tuple[str, ...] = ("core_attn",)
    mtp_layers: int = 0
    overlap_grad_reduce: bool = True
    scatter_gather: bool = True
    virtual_stages: int = 1
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    account_for_embedding: bool = False
    account_for_loss: bool = False
    pipeline_layout: str | None = None
    attention: str = "flash"
    dropout: bool = False
    precision: str = "bf16"
    fp8_recipe: str = "delayed"
    fp8_attention: bool = False
    cp: int = 1
    cp_comm_type: str = "p2p"
    tp_comm_overlap: bool = False
    tp_comm_overlap_cfg: Mapping[str, GemmOverlap] | None = None
    grad_reduce_in_bf16: bool = False
    overlap_param_gather: bool = False
    fp8_param_gather: bool = False
    ddp: str = "megatron"
    moe_routing: str = "balanced"
    moe_routing_seed: int = 0
    moe_capacity_factor: float | None = None
    moe_pad_to_capacity: bool = False
    moe_token_dispatcher: str = "alltoall"
    moe_flex_dispatcher_backend: str = "deepep"
    moe_grouped_gemm: str = "multi_stream"
    moe_a2a_overlap: bool = False
    moe_flex_sms: int | None = None
    etp: int | None = None

    def __post_init__(self):
        if self.bucket_bytes is None and isinstance(self.dp, int):
            if self.ddp == "torch":  # torch.nn.parallel.DistributedDataParallel(bucket_cap_mb=25)
                self.bucket_bytes = 25 << 20
            else:
                self.bucket_bytes = megatron_bucket_bytes(self.dp, self.grad_bytes)

    @property
    def grad_bytes(self) -> int:
        """Bytes per gradient element in the data-parallel buffers and their reduction.

        Megatron-LM keeps them in the parameters' dtype for FP16 and in FP32 for BF16
        (and FP8, whose parameters are BF16): ``--accumulate-allreduce-grads-in-fp32``
        is forced on for BF16 (megatron/training/arguments.py); ``--grad-reduce-in-bf16``
        reduces them in BF16. PyTorch DDP keeps them in the parameters' 16-bit dtype."""
        return 2 if self.precision == "fp16" or self.grad_reduce_in_bf16 or self.ddp == "torch" else 4

    @property
    def param_gather_bytes(self) -> int:
        """Bytes per weight in the weights' all-gathers of ZeRO 1-3: 1 under
        ``fp8_param_gather`` with a per-tensor FP8 recipe, else 2 (the 16-bit weights)."""
        return 1 if self.fp8_param_gather and self.fp8_recipe != "mxfp8" else 2

    @property
    def sequence_length(self) -> int:
        """Tokens per sequence: ``seq_len`` if given (None: the model's)."""
        return self.model.seq_len if self.seq_len is None else self.seq_len


@dataclass
class LLMWorkload:
    """Generated step: per-stage node templates, the layout, and summary numbers.

    ``dp_grad_bytes[rank]``: bytes this rank reduces over its data-parallel
    groups; ``flops[rank]``: forward+backward FLOPs of its compute nodes, recomputation
    included (hardware FLOPs); ``model_flops[rank]``: the same without recomputation.
    ``moe_rows``: per MoE layer, the assignment rows every rank sends each
    expert-parallel index under unbalanced routing or a capacity, ``moe_assigned`` the
    rows each rank routes (:func:`.routing.rows_by_layer`; empty when balanced and
    dropless). ``memory``: each pipeline stage's peak memory per rank
    (:func:`.llm_memory.stage_memory`).
    """

    config: LLMConfig
    layout: Layout
    microbatches: int
    stages: list[list[StageNode]]
    dp_grad_bytes: dict[int, int] = field(default_factory=dict)
    flops: dict[int, float] = field(default_factory=dict)
    model_flops: dict[int, float] = field(default_factory=dict)
    moe_rows: dict[int, Any] = field(default_factory=dict)
    moe_assigned: float = 0.0
    memory: list[StageMemory] = field(default_factory=list)

    def stage_of(self, rank: int) -> int:
        return self.layout.coords(rank)[2]


#: Options that must be integers >= 1 where given (None: the default applies).
_COUNT_OPTIONS = (
    "dp",
    "tp",
    "pp",
    "ep",
    "cp",
    "micro_batch",
    "microbatches",
    "global_batch",
    "seq_len",
    "virtual_stages",
    "first_stage_layers",
    "last_stage_layers",
    "moe_flex_sms",
)


def _check(cfg: LLMConfig) -> int:
    """Validate the plan; return the number of micro-batches. Raises ConfigError naming the option.

    The checks run in a fixed order and the first failing one raises, so that a plan with
    several faults always reports the same one."""
    _check_counts(cfg)
    _check_dims(cfg)
    _check_choices(cfg)
    _check_context_parallel(cfg)
    _check_features(cfg)
    _check_model_split(cfg)
    return _microbatches(cfg)


def _check_counts(cfg: LLMConfig) -> None:
    """The sizes and counts (integers >= 1) and the gradient bucket (bytes >= 1)."""
    for key in _COUNT_OPTIONS:
        value = getattr(cfg, key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ConfigError(f"--{key.replace('_', '-')}: must be an integer >= 1, got {value!r}")
    bucket = cfg.bucket_bytes
    if not isinstance(bucket, int) or isinstance(bucket, bool) or bucket < 1:
        # a bucket of 0 bytes would never fill: the gradient loop would not end
        raise ConfigError(f"--bucket-mb: the gradient bucket must hold at least 1 byte, got {bucket!r} bytes")


def _check_dims(cfg: LLMConfig) -> None:
    """The network's dimension sizes, if given: integers >= 1 whose product is the NPU count."""
    if cfg.dims is None:
        return
    if any(not isinstance(d, int) or d < 1 for d in cfg.dims):
        raise ConfigError(f"--dims {list(cfg.dims)}: every dimension size must be an integer >= 1")
    if math.prod(cfg.dims) != cfg.dp * cfg.tp * cfg.pp * cfg.cp:
        raise ConfigError(
            f"--dims {'x'.join(map(str, cfg.dims))}: must multiply to dp x tp x pp x cp = "
            f"{cfg.dp * cfg.tp * cfg.pp * cfg.cp}"
        )


def _check_choices(cfg: LLMConfig) -> None:
    """The options with a fixed set of values: schedule, ZeRO stage, attention, precision."""
    if cfg.schedule not in SCHEDULES:
        raise ConfigError(f"--schedule: expected one of {', '.join(SCHEDULES)}, got '{cfg.schedule}'")
    if cfg.zero not in (0, 1, 2, 3):
        raise ConfigError(f"--zero: expected 0, 1, 2 or 3, got {cfg.zero}")
    if cfg.attention not in ATTENTIONS:
        raise ConfigError(f"--attention: expected one of {', '.join(ATTENTIONS)}, got '{cfg.attention}'")
    if cfg.precision not in PRECISIONS:
        raise ConfigError(f"--precision: expected one of {', '.join(PRECISIONS)}, got '{cfg.precision}'")
    if cfg.fp8_recipe not in FP8_RECIPES:
        raise ConfigError(f"--fp8-recipe: expected one of {', '.join(FP8_RECIPES)}, got '{cfg.fp8_recipe}'")


def _check_context_parallel(cfg: LLMConfig) -> None:
    """Context parallelism: FlashAttention only, no experts, and a sequence of 2C equal chunks;
    sliding-window attention: FlashAttention without context parallelism."""
    if cfg.model.sliding_window and (cfg.attention != "flash" or cfg.cp > 1):
        raise ConfigError(
            f"model {cfg.model.name}: sliding-window attention is modelled for FlashAttention "
            "without context parallelism (--attention flash, --cp 1)"
        )
    if cfg.cp_comm_type not in CP_COMM_TYPES:
        raise ConfigError(
            f"--cp-comm-type: expected one of {', '.join(CP_COMM_TYPES)}, got {cfg.cp_comm_type!r}"
        )
    if cfg.cp == 1:
        return
    if cfg.attention != "flash":
        raise ConfigError(
            f"--cp {cfg.cp}: context parallelism runs FlashAttention kernels "
            "(Transformer Engine); --attention unfused cannot be split"
        )
    if (cfg.ep > 1 or cfg.model.experts) and cfg.etp != 1:
        raise ConfigError(
            f"--cp {cfg.cp}: mixture-of-experts layers with context parallelism need "
            "--expert-tensor-parallel-size 1 (experts folded over the context-parallel ranks)"
        )
    heads = (cfg.model.heads // cfg.tp, cfg.model.kv // cfg.tp)
    if cfg.cp_comm_type == "a2a" and any(h % cfg.cp for h in heads):
        raise ConfigError(
            f"--cp-comm-type a2a: the attention heads per tensor-parallel rank ({heads[0]} query, "
            f"{heads[1]} key-value) must divide by --cp {cfg.cp} (Transformer Engine)"
        )
    if cfg.sequence_length % (2 * cfg.cp):
        raise ConfigError(
            f"--cp {cfg.cp}: the sequence ({cfg.sequence_length} tokens) must split "
            f"into 2 x cp = {2 * cfg.cp} equal chunks (Megatron-Core)"
        )


def _check_features(cfg: LLMConfig) -> None:
    """Options that need another one or the GPU: --tp-comm-overlap, FP8, recomputation."""
    if cfg.tp_comm_overlap and not (cfg.sequence_parallel or cfg.tp == 1):
        raise ConfigError(
            "--tp-comm-overlap needs --sequence-parallel (Megatron-LM): it overlaps the "
            "sequence-parallel all-gathers and reduce-scatters with GEMMs"
        )
    if cfg.fp8_attention:
        if cfg.precision != "fp8" or cfg.fp8_recipe != "mxfp8" or cfg.attention != "flash" or cfg.cp > 1:
            raise ConfigError(
                "--fp8-attention needs --precision fp8 --fp8-recipe mxfp8 and --attention flash, "
                "without --cp (the measured FP8 attention rates are MXFP8's; context "
                "parallelism's attention steps are not modelled in FP8)"
            )
        if not cfg.gpu.fp8_attention_tflops:
            raise ConfigError(f"--fp8-attention: the {cfg.gpu.name} has no measured FP8 attention rate")
    if cfg.tp_comm_overlap_cfg is not None and not cfg.tp_comm_overlap:
        raise ConfigError("--tp-comm-overlap-cfg needs --tp-comm-overlap: it says how those overlaps run")
    for name, ub in (cfg.tp_comm_overlap_cfg or {}).items():
        if cfg.gpu.sms and ub.sms >= cfg.gpu.sms:
            raise ConfigError(
                f"--tp-comm-overlap-cfg: {name}.num_sm {ub.sms}: the {cfg.gpu.name} has {cfg.gpu.sms} SMs"
            )
    if cfg.precision == "fp8" and not cfg.gpu.fp8_tflops:
        raise ConfigError(f"--precision fp8: the {cfg.gpu.name} has no FP8 tensor cores (fp8_tflops 0)")
    if cfg.precision == "fp8" and cfg.fp8_recipe == "mxfp8" and not cfg.gpu.mx_block_scaling:
        raise ConfigError(
            f"--fp8-recipe mxfp8: the {cfg.gpu.name}'s tensor cores do not apply MX block scales "
            "(mx_block_scaling false; Blackwell's do: B200, GB200, GB300)"
        )
    if cfg.overlap_param_gather and cfg.zero not in (1, 2):
        raise ConfigError(
            "--overlap-param-gather: overlaps the distributed optimizer's weight all-gather "
            f"with the next forward pass; needs --zero 1 or 2, got --zero {cfg.zero}"
        )
    if cfg.fp8_param_gather and (cfg.precision != "fp8" or cfg.zero == 0):
        raise ConfigError(
            "--fp8-param-gather: all-gathers the FP8 weights of ZeRO 1-3; needs --precision fp8 "
            f"and --zero 1, 2 or 3, got --precision {cfg.precision} --zero {cfg.zero}"
        )
    if cfg.ddp not in DDP_IMPLS:
        raise ConfigError(f"--ddp: expected one of {', '.join(DDP_IMPLS)}, got '{cfg.ddp}'")
    if cfg.ddp == "torch" and (not cfg.overlap_grad_reduce or cfg.zero or cfg.grad_reduce_in_bf16):
        raise ConfigError(
            "--ddp torch: PyTorch DDP always overlaps its all-reduce with the backward pass, "
            "in the parameters' dtype, without ZeRO; drop --no-overlap-grad-reduce, --zero "
            "and --grad-reduce-in-bf16"
        )
    if cfg.recompute not in RECOMPUTE:
        raise ConfigError(f"--recompute: expected one of {', '.join(RECOMPUTE)}, got '{cfg.recompute}'")
    _check_recompute_modules(cfg)
    if cfg.mtp_layers < 0 or (cfg.mtp_layers and not cfg.model.vocab):
        raise ConfigError(
            f"--mtp-num-layers {cfg.mtp_layers}: needs 0 or more, and a model with a vocabulary"
        )
    _check_capacity(cfg)
    if cfg.moe_routing != BALANCED:
        check_routing(cfg.moe_routing)
        if not cfg.model.experts or (cfg.ep == 1 and cfg.moe_capacity_factor is None):
            raise ConfigError(
                f"--moe-routing {cfg.moe_routing}: needs a mixture-of-experts model with --ep > 1 "
                "(one rank holding every expert: the imbalance between its experts is not modelled)"
            )


def _check_recompute_modules(cfg: LLMConfig) -> None:
    """--recompute-modules: known modules, with --recompute selective; moe_act needs experts."""
    modules = tuple(cfg.recompute_modules)
    unknown = [m for m in modules if m not in RECOMPUTE_MODULES]
    if unknown:
        raise ConfigError(
            f"--recompute-modules: {unknown[0]!r} is not one the generator runs "
            f"(expected some of {', '.join(RECOMPUTE_MODULES)})"
        )
    if modules != ("core_attn",) and cfg.recompute != "selective":
        raise ConfigError("--recompute-modules needs --recompute selective (Megatron-core's rule)")
    if "moe_act" in modules and not cfg.model.experts:
        raise ConfigError(f"--recompute-modules moe_act: {cfg.model.name} has no experts")
    if "mla_up_proj" in modules and not cfg.model.mla:
        raise ConfigError(
            f"--recompute-modules mla_up_proj: {cfg.model.name} has no multi-head latent attention"
        )


#: Megatron-core's token dispatchers that the generator runs (``--moe-token-dispatcher-type``).
MOE_DISPATCHERS = ("alltoall", "allgather", "flex")
#: Kernels of the local experts' GEMMs (``moe_grouped_gemm``).
MOE_GROUPED_GEMMS = ("multi_stream", "fused")


def _check_capacity(cfg: LLMConfig) -> None:
    """--moe-capacity-factor: a mixture-of-experts model and a factor in (0, 1000];
    --moe-pad-to-capacity needs it (Megatron-core refuses padding without one); a
    known --moe-token-dispatcher and --moe-grouped-gemm."""
    factor = cfg.moe_capacity_factor
    if factor is not None and (not cfg.model.experts or not 0 < factor <= 1000):
        raise ConfigError(
            f"--moe-capacity-factor {factor}: needs a mixture-of-experts model and a factor in (0, 1000]"
        )
    if cfg.moe_pad_to_capacity and factor is None:
        raise ConfigError("--moe-pad-to-capacity needs --moe-capacity-factor (Megatron-core's rule)")
    if cfg.moe_token_dispatcher not in MOE_DISPATCHERS:
        raise ConfigError(
            f"--moe-token-dispatcher: expected one of {', '.join(MOE_DISPATCHERS)}, got {cfg.moe_token_dispatcher!r}"
        )
    if cfg.moe_grouped_gemm not in MOE_GROUPED_GEMMS:
        raise ConfigError(
            f"--moe-grouped-gemm: expected one of {', '.join(MOE_GROUPED_GEMMS)}, got {cfg.moe_grouped_gemm!r}"
        )
    if cfg.moe_token_dispatcher == "flex":
        _check_flex(cfg)
    elif cfg.moe_flex_sms is not None:
        raise ConfigError("--moe-flex-sms: needs --moe-token-dispatcher flex")
    if cfg.moe_a2a_overlap:
        _check_a2a_overlap(cfg)


def _check_a2a_overlap(cfg: LLMConfig) -> None:
    """--moe-a2a-overlap under Megatron-core's conditions (``TransformerConfig``'s checks of
    ``overlap_moe_expert_parallel_comm``), and without ZeRO-3 (its per-layer gathers are
    not modelled inside the combined passes)."""
    flag = "--moe-a2a-overlap"
    if not cfg.model.experts or cfg.ep == 1:
        raise ConfigError(f"{flag}: needs a mixture-of-experts model with --ep > 1")
    if cfg.moe_token_dispatcher not in ("alltoall", "flex"):
        raise ConfigError(f"{flag}: needs --moe-token-dispatcher alltoall or flex")
    if cfg.pp > 1 and cfg.virtual_stages == 1:
        raise ConfigError(f"{flag}: with --pp > 1 needs --virtual-stages > 1 (Megatron-core's rule)")
    if cfg.recompute == "full":
        raise ConfigError(f"{flag}: cannot be combined with --recompute full (Megatron-core's rule)")
    if cfg.zero == 3:
        raise ConfigError(f"{flag}: cannot be combined with --zero 3 (not modelled)")


def _check_flex(cfg: LLMConfig) -> None:
    """The flex dispatcher: a known backend, balanced dropless routing (what its byte
    counts assume), and whole experts when T > 1 (its group is the tensor- and
    expert-parallel ranks, the expert-parallel ones under parallel folding)."""
    check_backend(cfg.moe_flex_dispatcher_backend)
    if cfg.moe_routing != BALANCED or cfg.moe_capacity_factor is not None:
        raise ConfigError(
            "--moe-token-dispatcher flex: runs balanced dropless routing only (no --moe-routing "
            "or --moe-capacity-factor)"
        )
    if cfg.tp > 1 and cfg.etp != 1:
        raise ConfigError("--moe-token-dispatcher flex with --tp > 1: needs --expert-tensor-parallel-size 1")
    sms = cfg.moe_flex_sms
    if sms is not None and cfg.gpu.sms and sms >= cfg.gpu.sms:
        raise ConfigError(f"--moe-flex-sms {sms}: must be fewer than the {cfg.gpu.name}'s {cfg.gpu.sms} SMs")


def _check_model_split(cfg: LLMConfig) -> None:
    """The model divides over the plan: heads over T, layers over P (x V), experts over E."""
    m = cfg.model
    if m.heads % cfg.tp or (m.kv % cfg.tp and cfg.tp % m.kv):
        raise ConfigError(
            f"--tp {cfg.tp}: must divide the {m.heads} attention heads and divide or be "
            f"divided by the {m.kv} key/value heads of {m.name}"
        )
    uneven = [
        (flag, n)
        for flag, n in (
            ("--decoder-first-pipeline-num-layers", cfg.first_stage_layers),
            ("--decoder-last-pipeline-num-layers", cfg.last_stage_layers),
        )
        if n is not None
    ]
    flexible = cfg.pipeline_layout is not None or cfg.account_for_embedding or cfg.account_for_loss
    if flexible:
        _check_flexible_split(cfg, uneven)
    elif uneven:
        _check_uneven_stages(cfg, uneven)
    elif m.layers % cfg.pp:
        raise ConfigError(f"--pp {cfg.pp}: must divide the {m.layers} layers of {m.name}")
    if cfg.virtual_stages > 1:
        if cfg.pp == 1 or cfg.schedule != "1f1b":
            raise ConfigError(
                f"--virtual-stages {cfg.virtual_stages}: needs --pp > 1 and the 1f1b "
                "schedule (interleaved 1F1B)"
            )
        if not flexible and m.layers % (cfg.pp * cfg.virtual_stages):
            raise ConfigError(
                f"--virtual-stages {cfg.virtual_stages}: pp x virtual stages must divide "
                f"the {m.layers} layers of {m.name}"
            )
    if cfg.etp not in (None, 1, cfg.tp):
        raise ConfigError(
            f"--expert-tensor-parallel-size {cfg.etp}: 1 (MoE parallel folding) or --tp {cfg.tp} are modelled"
        )
    folded = experts_folded(cfg.etp, cfg.tp, cfg.cp)
    if folded and (not m.experts or (cfg.tp > 1 and not cfg.sequence_parallel)):
        raise ConfigError(
            "--expert-tensor-parallel-size 1: needs an MoE model and --sequence-parallel "
            "(Megatron-core's MoE layers with tensor parallelism)"
        )
    stage = cfg.tp * cfg.cp * cfg.dp
    if cfg.ep > 1 and folded and (m.experts % cfg.ep or stage % cfg.ep):
        raise ConfigError(
            f"--ep {cfg.ep}: needs an MoE model whose expert count it divides, and must divide "
            f"--tp x --cp x --dp = {stage} (folded: expert-parallel ranks come from all three)"
        )
    if cfg.ep > 1 and not folded and (not m.experts or cfg.dp % cfg.ep or m.experts % cfg.ep):
        raise ConfigError(
            f"--ep {cfg.ep}: needs an MoE model whose expert count it divides, and must "
            f"divide --dp {cfg.dp} (expert-parallel ranks come from the data-parallel ones)"
        )


def _check_flexible_split(cfg: LLMConfig, uneven: list[tuple[str, int]]) -> None:
    """--pipeline-layout or the embedding and loss counted in the split (Megatron-core's
    rules): alone, not with first and last stage layer counts, dividing as they say."""
    m, P, V = cfg.model, cfg.pp, cfg.virtual_stages
    flags = [
        flag
        for flag, on in (
            ("--pipeline-layout", cfg.pipeline_layout is not None),
            ("--account-for-embedding-in-pipeline-split", cfg.account_for_embedding),
            ("--account-for-loss-in-pipeline-split", cfg.account_for_loss),
        )
        if on
    ]
    if uneven or (cfg.pipeline_layout is not None and len(flags) > 1):
        others = [flag for flag, _ in uneven] + flags[1:]
        raise ConfigError(
            f"{flags[0]}: not with {' or '.join(others)} (Megatron-core takes one way to split)"
        )
    if cfg.pipeline_layout is None:
        units = m.layers + cfg.account_for_embedding + cfg.account_for_loss
        if units % (P * V) or units // (P * V) < 1:
            raise ConfigError(
                f"{' and '.join(flags)}: {m.name}'s {m.layers} layers + {units - m.layers} for the "
                f"{' and '.join(n for n, on in (('embedding', cfg.account_for_embedding), ('loss', cfg.account_for_loss)) if on)}"
                f" = {units} must split evenly over pp {P} x {V} virtual stages"
            )
        return
    try:
        counts = parse_layout(cfg.pipeline_layout, P, m.layers, cfg.mtp_layers)
    except ValueError as why:
        raise ConfigError(f"--pipeline-layout {cfg.pipeline_layout!r}: {why}") from None
    if len(counts) != P * V:
        raise ConfigError(
            f"--pipeline-layout: its {len(counts)} virtual stages are {len(counts) // P} per pipeline "
            f"stage, but --virtual-stages is {V}"
        )


def _check_uneven_stages(cfg: LLMConfig, given: list[tuple[str, int]]) -> None:
    """First and last stage layer counts: with P > 1 stages and no virtual pipeline,
    leaving the stages between an equal share of the rest (Megatron-LM's rule)."""
    m, flags = cfg.model, " and ".join(f"{flag} {n}" for flag, n in given)
    if cfg.pp == 1:
        raise ConfigError(f"{flags}: needs --pp of at least 2 stages, got 1")
    if cfg.virtual_stages > 1:
        raise ConfigError(f"{flags}: not with --virtual-stages (Megatron-core refuses uneven stages there)")
    rest, others = m.layers - sum(n for _, n in given), cfg.pp - len(given)
    if rest < 0 or (others == 0 and rest) or (others and (rest < others or rest % others)):
        between = f"the other {others} stages" if others else "no other stage"
        raise ConfigError(
            f"{flags}: the remaining {rest} of the {m.layers} layers of {m.name} must split evenly "
            f"over {between}, at least one layer each"
        )


def _microbatches(cfg: LLMConfig) -> int:
    """Micro-batches per step: from --global-batch (which must agree with --microbatches),
    else --microbatches, else 2P (1 without pipelining)."""
    per_replica = cfg.micro_batch
    if cfg.global_batch is not None:
        if cfg.global_batch % (cfg.dp * per_replica):
            raise ConfigError(
                f"--global-batch {cfg.global_batch}: must be a multiple of dp x micro-batch "
                f"= {cfg.dp * per_replica}"
            )
        mb = cfg.global_batch // (cfg.dp * per_replica)
        if cfg.microbatches is not None and cfg.microbatches != mb:
            raise ConfigError(
                f"--microbatches {cfg.microbatches} disagrees with --global-batch "
                f"{cfg.global_batch} / (dp {cfg.dp} x micro-batch {per_replica}) = {mb}"
            )
        return mb
    return cfg.microbatches if cfg.microbatches is not None else (2 * cfg.pp if cfg.pp > 1 else 1)


def _stage_program(
    cfg: LLMConfig, mb: int, p: int, budget: int, moe_rows: dict
) -> tuple[list[StageNode], float, float]:
    """Build stage ``p``'s nodes (at most ``budget``); return them with this rank's dense and
    expert gradient bytes (:class:`.llm_stage.StageBuilder`)."""
    return StageBuilder(cfg, mb, p, budget, MAX_RANK_NODES, moe_rows).build()


def _moe_rows(cfg: LLMConfig) -> tuple[dict, float]:
    """(per MoE layer the rows every rank sends each expert-parallel index, the rows each
    rank routes: micro-batch x its tokens x top-k): :func:`.routing.rows_by_layer`, the
    loads file read once for every stage."""
    model = cfg.model
    if not model.experts:
        return {}, 0.0
    assigned = cfg.micro_batch * (cfg.sequence_length // cfg.cp) * model.top_k / cfg.tp
    moe_layers = [i for i in range(model.layers) if model.is_moe_layer(i)]
    rows = rows_by_layer(
        cfg.moe_routing,
        cfg.moe_routing_seed,
        model.experts,
        moe_layers,
        assigned,
        cfg.ep,
        cfg.moe_capacity_factor,
        cfg.moe_pad_to_capacity,
    )
    return rows, assigned


@few_passes()  # millions of acyclic nodes: kept off the cyclic collector's passes
@paused()
def generate_llm(cfg: LLMConfig) -> LLMWorkload:
    """Build the step's per-stage programs (see the module docstring). Raises ConfigError,
    also for a step past astra's size limits, before building it where the inputs
    tell (:mod:`.llm_size`), else as soon as a stage passes them."""
    mb = _check(cfg)
    check_plan(cfg, mb)
    if cfg.virtual_stages > 1 and mb % cfg.pp:
        raise ConfigError(
            f"--virtual-stages {cfg.virtual_stages}: interleaved 1F1B needs the "
            f"micro-batches ({mb}) to be a multiple of --pp {cfg.pp} (Megatron-LM)"
        )
    if cfg.tp_comm_overlap and TP_TAG + (mb * cfg.model.layers * 12 + 1) * (cfg.tp + 1) >= 1 << 30:
        raise ConfigError(
            f"--tp-comm-overlap: {mb} micro-batches x {cfg.model.layers} layers need more "
            "tensor-parallel message tags than this generator numbers"
        )
    if cfg.cp > 1 and CP_TAG + (mb * cfg.model.layers * 3 + 1) * (cfg.cp + 1) >= 1 << 31:
        raise ConfigError(
            f"--cp {cfg.cp}: {mb} micro-batches x {cfg.model.layers} layers need more "
            "context-parallel message tags than Chakra's int32 comm_tag holds"
        )
    layout = Layout(cfg.dp, cfg.tp, cfg.pp, cfg.ep, list(cfg.dims) if cfg.dims else None, cfg.cp, cfg.etp)
    stages: list[list[StageNode]] = []
    grads, flops, model_flops = [], [], []
    moe_rows, moe_assigned = _moe_rows(cfg)
    for p in range(cfg.pp):
        budget = MAX_RANK_NODES - sum(map(len, stages))
        nodes, dense_bytes, expert_bytes = _stage_program(cfg, mb, p, budget, moe_rows)
        stages.append(nodes)
        grads.append(int(dense_bytes + expert_bytes))
        flops.append(sum(n.flops for n in nodes if n.name != "optimizer"))
        model_flops.append(sum(n.flops for n in nodes if n.name != "optimizer" and not n.recompute))
    check_values(cfg, stages)
    wl = LLMWorkload(cfg, layout, mb, stages, moe_rows=moe_rows, moe_assigned=moe_assigned)
    wl.memory = stage_memory(cfg, mb)
    for rank in range(layout.npus):
        p = layout.coords(rank)[2]
        wl.dp_grad_bytes[rank] = grads[p]
        wl.flops[rank] = flops[p]
        wl.model_flops[rank] = model_flops[p]
    return wl


def write_llm(
    wl: LLMWorkload,
    prefix: str | os.PathLike,
    comm_groups_path: str | os.PathLike | None = None,
    on_written: Callable[[int], None] | None = None,
) -> tuple[list[Path], Path | None]:
    """Write the step's traces and comm groups (see :func:`.llm_writer.write_llm`)."""
    from astra_core.workload.generators.llm_writer import write_llm as _write

    return _write(wl, prefix, comm_groups_path, on_written)
