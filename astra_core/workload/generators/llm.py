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
* **Pipeline parallelism**: layers split evenly over P stages; activations
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from astra_core.errors import ConfigError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators import ops as O
from astra_core.workload.generators.gpus import GPUSpec
from astra_core.workload.generators.kernels import PRECISIONS
from astra_core.workload.generators.layout import Layout
from astra_core.workload.generators.llm_size import check_plan, check_values
from astra_core.workload.generators.models import ModelConfig
from astra_core.workload.generators.pipeline import SCHEDULES, interleaved, schedule
from astra_core.workload.trace_size import MAX_RANK_NODES

__all__ = ["LLMConfig", "LLMWorkload", "generate_llm", "write_llm"]


_AR, _AG, _RS, _A2A = pb.ALL_REDUCE, pb.ALL_GATHER, pb.REDUCE_SCATTER, pb.ALL_TO_ALL
#: Tags of context-parallel ring messages start here, above the pipeline's (Chakra's
#: comm_tag is an int32).
_CP_TAG = 1 << 30
#: Tags of tensor-parallel ring messages (--tp-comm-overlap) start here.
_TP_TAG = 1 << 29
#: Megatron-LM's activation recomputation granularities (see LLMConfig).
RECOMPUTE = ("none", "selective", "full")
#: Attention implementations (see :mod:`.ops`).
ATTENTIONS = ("flash", "unfused")


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
      selective``: only the attention core, Korthikanti et al. 2022).
    * ``overlap_grad_reduce``: reduce gradient buckets while the backward pass
      runs (PyTorch DDP, ``--overlap-grad-reduce``); off: one reduction of
      all gradients after it (Megatron's ``local`` DDP of SC'21), whose
      backward also adds each micro-batch's gradients into its gradient
      buffer (:func:`.ops.grad_accumulation_op`, :attr:`grad_bytes`).
    * ``grad_reduce_in_bf16``: BF16 gradient buffers and reductions
      (``--grad-reduce-in-bf16``) instead of Megatron's FP32 for BF16 training.
    * ``virtual_stages``: V model chunks per pipeline stage, run with the
      interleaved 1F1B schedule (``--num-layers-per-virtual-pipeline-stage``
      = layers / (P V)); chunk ``v`` of stage ``p`` holds the layers of
      virtual stage ``v P + p``.
    * ``scatter_gather``: a pipeline send carries 1/T of the activation from
      each tensor-parallel rank and the receiving stage all-gathers it over
      its T ranks (``--scatter-gather-tensors-in-pipeline``, on by default in
      Megatron-LM); with sequence parallelism the activation is split already.
    * ``attention``: ``flash`` (FlashAttention, ``--use-flash-attn``) or
      ``unfused`` (Megatron's softmax path of 2021: the score matrix is written).
    * ``dropout``: attention and hidden dropout on (Megatron's default 0.1 of
      ``--attention-dropout`` / ``--hidden-dropout``): their kernels and masks run.
    * ``precision``: ``fp16`` / ``bf16`` (16-bit tensor-core GEMMs) or ``fp8``
      (FP8 GEMMs, Transformer Engine; needs a GPU with FP8).
    * ``cp``: context parallelism (``--context-parallel-size``): each of C
      ranks holds s / C tokens of every sequence; attention goes round the C
      ranks' ring, each step sending its keys and values on while the next
      block is computed (backward: keys, values and their gradients), and
      gradients are reduced over the D x C ranks (:mod:`.layout`).
    * ``tp_comm_overlap``: Megatron-Core's ``--tp-comm-overlap`` (Transformer
      Engine's userbuffers, with sequence parallelism): the all-gather in
      front of a block's first GEMM and the reduce-scatter after its last
      become rings of T steps, each step's GEMM on one rank's share of the
      tokens running while the next share travels (backward: the output
      gradient's all-gather with the first data-gradient GEMM, the input
      gradient's reduce-scatter with the last).
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
    overlap_grad_reduce: bool = True
    scatter_gather: bool = True
    virtual_stages: int = 1
    attention: str = "flash"
    dropout: bool = False
    precision: str = "bf16"
    cp: int = 1
    tp_comm_overlap: bool = False
    grad_reduce_in_bf16: bool = False

    def __post_init__(self):
        if self.bucket_bytes is None and isinstance(self.dp, int):
            # Megatron-LM DDP: max(40M, 1M x D) elements per bucket
            self.bucket_bytes = max(40_000_000, 1_000_000 * self.dp) * self.grad_bytes

    @property
    def grad_bytes(self) -> int:
        """Bytes per gradient element in the data-parallel buffers and their reduction.

        Megatron-LM keeps them in the parameters' dtype for FP16 and in FP32 for BF16
        (and FP8, whose parameters are BF16): ``--accumulate-allreduce-grads-in-fp32``
        is forced on for BF16 (megatron/training/arguments.py); ``--grad-reduce-in-bf16``
        reduces them in BF16."""
        return 2 if self.precision == "fp16" or self.grad_reduce_in_bf16 else 4

    @property
    def sequence_length(self) -> int:
        """Tokens per sequence: ``seq_len`` if given (None: the model's)."""
        return self.model.seq_len if self.seq_len is None else self.seq_len


@dataclass
class _Node:
    name: str
    type: int
    deps: tuple[int, ...] = ()
    duration_ns: float = 0.0
    flops: float = 0.0
    nbytes: float = 0.0
    comm_type: int | None = None
    size: int = 0
    role: str | None = None  # collective group role, or "prev"/"next" peer stage for send/recv
    tag: int = 0
    late: bool = False  # gradient reduction: numbered after every other node (lower issue priority)
    recompute: bool = False  # activation recomputation: hardware FLOPs, not model FLOPs


@dataclass
class LLMWorkload:
    """Generated step: per-stage node templates, the layout, and summary numbers.

    ``dp_grad_bytes[rank]``: bytes this rank reduces over its data-parallel
    groups; ``flops[rank]``: forward+backward FLOPs of its compute nodes, recomputation
    included (hardware FLOPs); ``model_flops[rank]``: the same without recomputation.
    """

    config: LLMConfig
    layout: Layout
    microbatches: int
    stages: list[list[_Node]]
    dp_grad_bytes: dict[int, int] = field(default_factory=dict)
    flops: dict[int, float] = field(default_factory=dict)
    model_flops: dict[int, float] = field(default_factory=dict)

    def stage_of(self, rank: int) -> int:
        return self.layout.coords(rank)[2]


class _Program:
    """One stage's node list: a compute chain and a communication chain."""

    def __init__(self, gpu: GPUSpec, precision: str, group_sizes: dict[str, int], budget: int):
        self.nodes: list[_Node] = []
        self.budget = budget  # most nodes this stage may have (trace_size.MAX_RANK_NODES in all)
        self.gpu = gpu
        self.precision = precision
        self.group_sizes = group_sizes  # role -> members; a one-NPU group communicates nothing
        self.compute: int | None = None
        self.comm: int | None = None
        self.pending: list[int | None] = []  # extra parents of the next compute-chain node
        self.grads: int | None = None  # last gradient-reduction collective (their own chain)

    def _add(self, node: _Node, deps, chain: bool = False) -> int:
        if chain:
            deps = (*deps, *self.pending)
            self.pending = []
        node.deps = tuple(dict.fromkeys(d for d in deps if d is not None))
        if len(self.nodes) >= self.budget:
            raise ConfigError(
                f"gen llm: the pipeline stages together pass astra's limit of {MAX_RANK_NODES:,} "
                "nodes (2^22, about 10 GB to simulate one rank); use fewer micro-batches, layers or ring steps"
            )
        self.nodes.append(node)
        return len(self.nodes) - 1

    def comp(self, name: str, op_list: list[O.Op], *extra, recompute: bool = False) -> int:
        """A compute node running ``op_list``'s kernels one after another (:mod:`.kernels`)."""
        ns = sum(self.gpu.op_time_ns(o, self.precision) for o in op_list)
        node = _Node(
            name,
            pb.COMP_NODE,
            duration_ns=ns,
            flops=sum(o.flops for o in op_list),
            nbytes=sum(o.bytes for o in op_list),
            recompute=recompute,
        )
        self.compute = self._add(node, (self.compute, *extra), chain=True)
        return self.compute

    def coll(
        self, name: str, ctype: int, size: float, role: str, blocking: bool = True, *extra
    ) -> int | None:
        if size <= 0 or self.group_sizes[role] == 1:
            return None
        node = _Node(name, pb.COMM_COLL_NODE, comm_type=ctype, size=int(math.ceil(size)), role=role)
        idx = self._add(node, (self.compute, self.comm, *extra), chain=blocking)
        self.comm = idx
        if blocking:
            self.compute = idx
        return idx

    def grad_coll(self, name: str, ctype: int, size: float, role: str) -> int | None:
        """A gradient reduction: after the compute that produced it and the previous reduction,
        off the communication chain and numbered last, so tensor-parallel collectives and
        pipeline sends that become ready at the same time go first (one collective at a time
        per NPU, lowest node id first)."""
        if size <= 0 or self.group_sizes[role] == 1:
            return None
        node = _Node(
            name, pb.COMM_COLL_NODE, comm_type=ctype, size=int(math.ceil(size)), role=role, late=True
        )
        self.grads = self._add(node, (self.compute, self.grads))
        return self.grads

    def send(self, name: str, size: float, peer: str, tag: int, after: tuple = ()) -> None:
        """A send on the communication chain, once the nodes ``after`` (default: the latest
        compute) are done."""
        node = _Node(name, pb.COMM_SEND_NODE, size=int(size), role=peer, tag=tag)
        self.comm = self._add(node, (*(after or (self.compute,)), self.comm))

    def recv(self, name: str, size: float, peer: str, tag: int) -> int:
        return self._add(_Node(name, pb.COMM_RECV_NODE, size=int(size), role=peer, tag=tag), ())


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


def _check_context_parallel(cfg: LLMConfig) -> None:
    """Context parallelism: FlashAttention only, no experts, and a sequence of 2C equal chunks."""
    if cfg.cp == 1:
        return
    if cfg.attention != "flash":
        raise ConfigError(
            f"--cp {cfg.cp}: context parallelism runs FlashAttention kernels "
            "(Transformer Engine); --attention unfused cannot be split"
        )
    if cfg.ep > 1 or cfg.model.experts:
        raise ConfigError(
            f"--cp {cfg.cp}: context parallelism with mixture-of-experts layers is not modelled"
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
    if cfg.tp_comm_overlap and cfg.cp > 1:
        raise ConfigError("--tp-comm-overlap with --cp is not modelled")
    if cfg.precision == "fp8" and not cfg.gpu.fp8_tflops:
        raise ConfigError(f"--precision fp8: the {cfg.gpu.name} has no FP8 tensor cores (fp8_tflops 0)")
    if cfg.recompute not in RECOMPUTE:
        raise ConfigError(f"--recompute: expected one of {', '.join(RECOMPUTE)}, got '{cfg.recompute}'")


def _check_model_split(cfg: LLMConfig) -> None:
    """The model divides over the plan: heads over T, layers over P (x V), experts over E."""
    m = cfg.model
    if m.heads % cfg.tp or (m.kv % cfg.tp and cfg.tp % m.kv):
        raise ConfigError(
            f"--tp {cfg.tp}: must divide the {m.heads} attention heads and divide or be "
            f"divided by the {m.kv} key/value heads of {m.name}"
        )
    if m.layers % cfg.pp:
        raise ConfigError(f"--pp {cfg.pp}: must divide the {m.layers} layers of {m.name}")
    if cfg.virtual_stages > 1:
        if cfg.pp == 1 or cfg.schedule != "1f1b":
            raise ConfigError(
                f"--virtual-stages {cfg.virtual_stages}: needs --pp > 1 and the 1f1b "
                "schedule (interleaved 1F1B)"
            )
        if m.layers % (cfg.pp * cfg.virtual_stages):
            raise ConfigError(
                f"--virtual-stages {cfg.virtual_stages}: pp x virtual stages must divide "
                f"the {m.layers} layers of {m.name}"
            )
    if cfg.ep > 1 and (not m.experts or cfg.dp % cfg.ep or m.experts % cfg.ep):
        raise ConfigError(
            f"--ep {cfg.ep}: needs an MoE model whose expert count it divides, and must "
            f"divide --dp {cfg.dp} (expert-parallel ranks come from the data-parallel ones)"
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


def _layer_params(model: ModelConfig, layer: int, t: int, ep: int) -> tuple[float, float]:
    """(dense, expert) parameters of one layer on one rank: sharded matrices / t, norms whole."""
    dense = model.attention_params() / t + model.norm_params()
    if model.is_moe_layer(layer):
        dense += model.shared_experts * model.expert_params() / t + model.hidden * model.experts
        return dense, model.experts / ep * model.expert_params() / t
    return dense + model.dense_mlp_params() / t, 0.0


def _stage_program(cfg: LLMConfig, mb: int, p: int, budget: int) -> tuple[list[_Node], float, float]:
    """Build stage ``p``'s nodes; return them with this rank's dense and expert gradient bytes."""
    return _StageBuilder(cfg, mb, p, budget).build()


def _gemm_positions(ops: list[O.Op], forward: bool) -> tuple[int, int]:
    """Positions of a dense block's first and last GEMM (backward: data-gradient GEMM)."""
    gemms = [j for j, o in enumerate(ops) if o.kind == O.GEMM and (forward or o.name.endswith("_dgrad"))]
    return gemms[0], gemms[-1]


class _GradBuckets:
    """A stage's data-parallel gradient reduction: gradients [bytes] collect in a dense and an
    expert bucket, reduced over the ``dp`` and ``edp`` groups (all-reduce for ZeRO 0, else
    reduce-scatter) off the communication chain (:meth:`_Program.grad_coll`)."""

    def __init__(self, prog: _Program, cfg: LLMConfig):
        self.prog = prog
        self.cfg = cfg
        self.bytes = {"dense": 0.0, "expert": 0.0}  # gradients not yet reduced
        self.handles: list[int] = []  # every reduction, for the optimizer to wait on
        self.ctype = _AR if cfg.zero == 0 else _RS

    @staticmethod
    def _role(kind: str) -> str:
        return "dp" if kind == "dense" else "edp"

    def flush(self, kind: str, force: bool = False) -> None:
        """Reduce full buckets (and with ``force`` the rest): a bucket never exceeds
        bucket_bytes, so one reduction never holds the NPU's communication for long."""
        limit = cast(int, self.cfg.bucket_bytes)  # an int >= 1 (_check)
        if self.prog.group_sizes[self._role(kind)] == 1:
            self.bytes[kind] = 0.0  # nothing to reduce (and no loop over countless buckets)
            return
        while self.bytes[kind] >= limit or (force and self.bytes[kind] > 0):
            size = min(self.bytes[kind], limit)
            h = self.prog.grad_coll(
                f"grads_{kind}_bucket{len(self.handles)}", self.ctype, size, self._role(kind)
            )
            if h is not None:
                self.handles.append(h)
            self.bytes[kind] -= size

    def add(self, dense_elems: float, expert_elems: float) -> None:
        """Gradients [elements] whose backward pass is done: a layer's (its last micro-batch's)
        or, after the last backward pass, the embedding's and output head's."""
        if self.cfg.zero == 3:  # FSDP: per-layer reduce-scatter
            for kind, elems in (("dense", dense_elems), ("expert", expert_elems)):
                if elems:
                    self.bytes[kind] += elems * self.cfg.grad_bytes
                    self.flush(kind, force=True)
            return
        self.bytes["dense"] += dense_elems * self.cfg.grad_bytes
        self.bytes["expert"] += expert_elems * self.cfg.grad_bytes
        if self.cfg.overlap_grad_reduce:
            self.flush("dense")
            self.flush("expert")

    def finish(self) -> None:
        """After the last backward pass: reduce what is left in the buckets, or, for
        Megatron's local DDP, all gradients in one reduction per group."""
        if self.cfg.overlap_grad_reduce or self.cfg.zero == 3:
            self.flush("dense", True)
            self.flush("expert", True)
            return
        for kind in ("dense", "expert"):
            if self.bytes[kind] > 0:
                h = self.prog.grad_coll(f"grads_{kind}_all", self.ctype, self.bytes[kind], self._role(kind))
                if h is not None:
                    self.handles.append(h)
                self.bytes[kind] = 0.0


class _StageBuilder:
    """Pipeline stage ``p``'s program (:meth:`build`): its passes in Megatron's schedule
    order, each layer's blocks with their tensor-, context- and expert-parallel
    communication, the pipeline's sends and receives, the gradient reduction and the
    optimizer.

    Shapes of one micro-batch on one rank: ``b`` sequences of ``s`` tokens (1/C of each
    sequence); sizes in bytes, parameter counts in elements. T, P, C, V: tensor-parallel,
    pipeline and context-parallel sizes, model chunks per stage.
    """

    def __init__(self, cfg: LLMConfig, mb: int, p: int, budget: int):
        model = cfg.model
        self.cfg, self.model, self.p = cfg, model, p
        self.T, self.P, self.C, self.V = cfg.tp, cfg.pp, cfg.cp, cfg.virtual_stages
        self.b, self.sp = cfg.micro_batch, cfg.sequence_parallel
        self.s = cfg.sequence_length // self.C  # this rank's tokens of each sequence (context parallelism)
        self.act = self.b * self.s * model.hidden * O.BYTES  # one activation tensor [B]
        self.act_shard = self.act / self.T  # one rank's share of an activation (sequence parallelism)
        self.per = model.layers // (self.P * self.V)  # layers per model chunk
        self.layers = [i for v in range(self.V) for i in self.chunk_layers(v)]
        self.first, self.last = p == 0, p == self.P - 1
        self.edp = cfg.dp // cfg.ep  # ranks holding the same experts
        self.prog = _Program(
            cfg.gpu,
            cfg.precision,
            {"tp": self.T, "cp": self.C, "dp": cfg.dp * self.C, "ep": cfg.ep, "edp": self.edp, "emb": 2},
            budget,
        )
        self.grads = _GradBuckets(self.prog, cfg)
        self._init_params()
        self._init_kernels()
        self._init_schedule(mb)
        split = self.T > 1 and (self.sp or cfg.scatter_gather)
        # Megatron scatter-gather: 1/T of the activation per TP rank
        self.p2p = self.act / self.T if split else self.act
        # without sequence parallelism the receiving stage needs the whole tensor
        self.p2p_gather = split and not self.sp

    def _init_params(self) -> None:
        """Parameters of this stage's layers, ``params[layer]`` = (dense, expert), and the
        stage's totals ``dense`` (``edge`` included) and ``expert``."""
        model, T = self.model, self.T
        self.params = {i: _layer_params(model, i, T, self.cfg.ep) for i in self.layers}
        dense = sum(v[0] for v in self.params.values())
        self.expert = sum(v[1] for v in self.params.values())
        # embedding on the first stage; final norm and output projection on the last (a copy
        # of the embedding when tied and pipelined, none when tied on one stage)
        self.edge = 0.0
        if model.vocab:  # vocab 0: a bare stack of layers, no embedding or head
            self.edge = (model.vocab * model.hidden / T if self.first else 0.0) + (
                model.hidden
                + (model.vocab * model.hidden / T if not model.tie_embeddings or self.P > 1 else 0.0)
                if self.last
                else 0.0
            )
        self.dense = dense + self.edge

    def _init_kernels(self) -> None:
        """The kernels of one layer's blocks for one micro-batch (:mod:`.ops`)."""
        cfg, model, b, s, T, sp = self.cfg, self.model, self.b, self.s, self.T, self.sp
        drop = cfg.dropout
        self.attn = O.attention_ops(model, b, s, T, sp, cfg.attention, drop)
        self.dense_mlp = O.mlp_ops(model, b, s, T, sp, dropout=drop)
        self.router, self.experts = O.moe_ops(model, b, s, T, sp, cfg.ep, drop) if model.experts else ([], [])
        self.core = O.attention_core_ops(model, b, s, T, cfg.attention, drop)
        self.pre: list[O.Op] = []
        self.post: list[O.Op] = []
        self.kv_block = 0.0
        if self.C > 1:  # the block's kernels before and after the attention core, and the ring's steps
            self.pre, self.post = self.attn[:2], self.attn[-2:]
            self.core = O.context_parallel_attention_ops(model, b, cfg.sequence_length, T, self.C)
            self.kv_block = 2 * b * s * model.kv / T * model.hd * O.BYTES  # this rank's keys and values
        self.overlap = cfg.tp_comm_overlap and T > 1
        # local DDP adds every micro-batch's weight gradients into its buffer; PyTorch DDP
        # and Megatron's --overlap-grad-reduce with gradient-accumulation fusion accumulate in place
        self.accumulate = {
            i: []
            if cfg.overlap_grad_reduce
            else [O.grad_accumulation_op(sum(self.params[i]), cfg.grad_bytes)]
            for i in self.layers
        }

    def _init_schedule(self, mb: int) -> None:
        """The stage's passes ``order`` = [(F or B, micro-batch, chunk)], the step of its
        last backward pass, and ``chunk_done[v]``, the step of chunk v's last one."""
        P, V = self.P, self.V
        if V > 1:
            self.order = interleaved(P, self.p, mb, V)
        else:
            self.order = [(kind, m, 0) for kind, m in schedule(self.cfg.schedule, P, self.p, mb)]
        self.last_backward = max(i for i, (kind, _, _) in enumerate(self.order) if kind == "B")
        self.chunk_done = {
            v: max(i for i, (kind, _, c) in enumerate(self.order) if kind == "B" and c == v) for v in range(V)
        }

    def chunk_layers(self, v: int) -> range:
        """Layers of model chunk ``v`` on this stage: virtual stage ``v P + p``."""
        q = v * self.P + self.p
        return range(q * self.per, (q + 1) * self.per)

    def build(self) -> tuple[list[_Node], float, float]:
        """The stage's nodes, with this rank's dense and expert gradient bytes."""
        for step, (kind, m, v) in enumerate(self.order):
            if kind == "F":
                self._forward(m, v)
            else:
                self._backward(step, m, v)
        self._tied_embedding_grads()
        return self._optimizer()

    # -- passes -----------------------------------------------------------------------
    def _forward(self, m: int, v: int) -> None:
        """Micro-batch ``m``'s forward pass through model chunk ``v``: from the previous
        stage (or the embedding) to the next stage (or the output head)."""
        prog, model, sp, T = self.prog, self.model, self.sp, self.T
        q = v * self.P + self.p  # virtual stage
        chunk = self.chunk_layers(v)
        tm = f"mb{m}" if self.V == 1 else f"mb{m}_c{v}"
        if q != 0:
            self._receive(f"{tm}_act_recv", "prev", self._p2p_tag(m, q, False))
        elif model.vocab:
            prog.comp(f"mb{m}_embedding", O.embedding_ops(model, self.b, self.s, T, sp))
            if T > 1:
                prog.coll(f"mb{m}_embedding_{'RS' if sp else 'AR'}", _RS if sp else _AR, self.act, "tp")
        gathered = self._zero3_gather(chunk[0], f"mb{m}_fwd")
        for i in chunk:
            prog.pending.append(gathered)
            gathered = self._zero3_gather(i + 1, f"mb{m}_fwd") if i + 1 in chunk else None  # prefetch
            self._attention_block(i, m, "fwd")
            self._mlp(i, m, True)
        tail_chunk = q == self.P * self.V - 1
        if tail_chunk and model.vocab:
            prog.comp(f"mb{m}_lm_head", O.head_ops(model, self.b, self.s, T, sp))
        elif not tail_chunk:
            prog.send(f"{tm}_act_send", self.p2p, "next", self._p2p_tag(m, q + 1, False))

    def _backward(self, step: int, m: int, v: int) -> None:
        """Micro-batch ``m``'s backward pass (schedule step ``step``) through model chunk ``v``,
        reducing each layer's gradients once its last micro-batch is through."""
        prog, model, sp, T = self.prog, self.model, self.sp, self.T
        q = v * self.P + self.p  # virtual stage
        chunk = self.chunk_layers(v)
        tm = f"mb{m}" if self.V == 1 else f"mb{m}_c{v}"
        tail_chunk = q == self.P * self.V - 1
        if tail_chunk and model.vocab:
            prog.comp(f"mb{m}_lm_head_bwd", O.backward(O.head_ops(model, self.b, self.s, T, sp)))
        elif not tail_chunk:
            self._receive(f"{tm}_grad_recv", "next", self._p2p_tag(m, q, True))
        gathered = self._zero3_gather(chunk[-1], f"mb{m}_bwd")
        for i in reversed(chunk):
            prog.pending.append(gathered)
            gathered = self._zero3_gather(i - 1, f"mb{m}_bwd") if i - 1 in chunk else None
            self._recompute_layer(i, m)
            self._mlp(i, m, False)
            self._attention_block(i, m, "bwd")
            if step == self.chunk_done[v]:
                self.grads.add(*self.params[i])
        if q == 0 and model.vocab:
            prog.comp(f"mb{m}_embedding_bwd", O.backward(O.embedding_ops(model, self.b, self.s, T, sp)))
        elif q != 0:
            prog.send(f"{tm}_grad_send", self.p2p, "prev", self._p2p_tag(m, q - 1, True))
        if step == self.last_backward:
            self.grads.add(self.edge, 0.0)
            self.grads.finish()

    def _recompute_layer(self, i: int, m: int) -> None:
        """Megatron's activation recomputation just before layer ``i``'s backward."""
        if self.cfg.recompute == "full":
            self._attention_block(i, m, "recompute")
            self._mlp(i, m, True, "recompute")
        elif self.cfg.recompute == "selective" and self.C == 1:
            self.prog.comp(f"L{i}_mb{m}_recompute_core", self.core, recompute=True)
        elif self.cfg.recompute == "selective":
            self._cp_ring(
                f"L{i}_mb{m}_recompute_core", self.core, True, True, self._phase_key(i, m, "recompute")
            )

    def _phase_key(self, i: int, m: int, phase: str) -> int:
        """A number for layer ``i``'s pass ``phase`` (fwd, recompute, bwd) over micro-batch ``m``."""
        return (m * self.model.layers + i) * 3 + ("fwd", "recompute", "bwd").index(phase)

    # -- attention ----------------------------------------------------------------------
    def _attention_block(self, i: int, m: int, phase: str) -> None:
        """Layer ``i``'s attention block with its tensor-parallel communication."""
        forward = phase != "bwd"
        if self.overlap:
            name = f"L{i}_mb{m}_{phase}_attn"
            ops = self.attn if forward else O.backward(self.attn)
            self._overlapped(
                name,
                ops,
                forward,
                phase == "recompute",
                2 * self._phase_key(i, m, phase),
                () if forward else self.accumulate[i],
            )
            return
        self._tp_comm(f"L{i}_mb{m}_{phase}_attn_{'in' if forward else 'out'}", forward, forward)
        if not forward and self.sp and self.T > 1 and self.C == 1:
            self._sp_backward(f"L{i}_mb{m}_bwd_attn", O.backward(self.attn), self.accumulate[i])
            return
        self._attention(i, m, phase)
        self._tp_comm(f"L{i}_mb{m}_{phase}_attn_{'out' if forward else 'in'}", forward, not forward)

    def _attention(self, i: int, m: int, phase: str) -> None:
        """Layer ``i``'s attention block of micro-batch ``m`` (phase fwd, recompute or bwd)."""
        prog = self.prog
        name, again = f"L{i}_mb{m}_{phase}_attn", phase == "recompute"
        if self.C == 1:
            ops = O.backward(self.attn) + self.accumulate[i] if phase == "bwd" else self.attn
            prog.comp(name, ops, recompute=again)
            return
        key = self._phase_key(i, m, phase)
        if phase != "bwd":
            prog.comp(f"{name}_qkv", self.pre, recompute=again)
            self._cp_ring(name, self.core, True, again, key)
            prog.comp(f"{name}_out", self.post, recompute=again)
        else:
            prog.comp(f"{name}_out", O.backward(self.post))
            self._cp_ring(name, O.backward(self.core)[::-1], False, False, key)
            prog.comp(f"{name}_qkv", O.backward(self.pre) + self.accumulate[i])

    def _cp_ring(self, name: str, steps: list[O.Op], forward: bool, again: bool, key: int) -> None:
        """The context-parallel ring of one attention core (Transformer Engine's KV P2P):
        step j computes with the block received at step j - 1 while the next block is on
        its way; backward blocks carry the keys' and values' gradients too, and a last
        hop returns each gradient block to its owner."""
        C, kv_block = self.C, self.kv_block
        tags = _CP_TAG + key * (C + 1)
        self._ring(f"{name}_cp", steps, kv_block if forward else 2 * kv_block, "cp", tags, True, again)
        if not forward:
            self.prog.send(f"{name}_dkv_send", kv_block, "cp_next", tags + C)
            self.prog.pending.append(self.prog.recv(f"{name}_dkv_recv", kv_block, "cp_prev", tags + C))

    # -- MLP and mixture of experts -------------------------------------------------------
    def _mlp(self, layer: int, m: int, forward: bool, phase: str | None = None) -> None:
        """Layer ``layer``'s MLP (or MoE) block of micro-batch ``m``; ``phase`` (default fwd
        or bwd by ``forward``) recompute for a forward pass run again."""
        phase = phase or ("fwd" if forward else "bwd")
        tag = f"L{layer}_mb{m}_{phase}"
        again = phase == "recompute"
        if self.model.is_moe_layer(layer):
            self._moe(tag, forward, again)
            return
        ops = self.dense_mlp if forward else O.backward(self.dense_mlp)
        if self.overlap:
            self._overlapped(f"{tag}_mlp", ops, forward, again, 2 * self._phase_key(layer, m, phase) + 1)
        elif forward:
            self._tp_comm(f"{tag}_mlp_in", True, True)
            self.prog.comp(f"{tag}_mlp", ops, recompute=again)
            self._tp_comm(f"{tag}_mlp_out", True, False)
        elif self.sp and self.T > 1:
            self._tp_comm(f"{tag}_mlp_out", False, False)
            self._sp_backward(f"{tag}_mlp", ops)
        else:
            self._tp_comm(f"{tag}_mlp_out", False, False)
            self.prog.comp(f"{tag}_mlp", ops)
            self._tp_comm(f"{tag}_mlp_in", False, True)

    def _moe(self, tag: str, forward: bool, again: bool) -> None:
        """A mixture-of-experts block (node names ``tag``_...): router, then the experts
        between the all-to-alls that dispatch the tokens to their experts' ranks and
        combine the results (E > 1); backward in reverse."""
        prog, model = self.prog, self.model
        dispatch = self.b * self.s * model.top_k * model.hidden * O.BYTES / self.T
        a2a = self.cfg.ep > 1
        if forward:
            self._tp_comm(f"{tag}_moe_in", True, True)
            prog.comp(f"{tag}_router", self.router, recompute=again)
            if a2a:
                prog.coll(f"{tag}_dispatch_A2A", _A2A, dispatch, "ep")
            prog.comp(f"{tag}_experts", self.experts, recompute=again)
            if a2a:
                prog.coll(f"{tag}_combine_A2A", _A2A, dispatch, "ep")
            self._tp_comm(f"{tag}_moe_out", True, False)
        else:
            self._tp_comm(f"{tag}_moe_out", False, False)
            if a2a:
                prog.coll(f"{tag}_combine_A2A", _A2A, dispatch, "ep")
            prog.comp(f"{tag}_experts", O.backward(self.experts))
            if a2a:
                prog.coll(f"{tag}_dispatch_A2A", _A2A, dispatch, "ep")
            prog.comp(f"{tag}_router", O.backward(self.router))
            self._tp_comm(f"{tag}_moe_in", False, True)

    # -- tensor parallelism -----------------------------------------------------------------
    def _tp_comm(self, name: str, forward: bool, at_input: bool) -> None:
        """Tensor-parallel communication at a block's input or output.

        Sizes follow upstream's comm_size semantics (``Ring.cc``): an all-gather's
        is each rank's input (its 1/T sequence shard of the activation), a
        reduce-scatter's the whole input (the full activation); both then move
        (T - 1)/T of the activation per rank."""
        T = self.T
        if T == 1:
            return
        if self.sp:
            if at_input == forward:
                self.prog.coll(f"{name}_AG", _AG, self.act / T, "tp")
            else:
                self.prog.coll(f"{name}_RS", _RS, self.act, "tp")
        elif forward != at_input:  # Megatron's g (forward output) and f (backward input) all-reduces
            self.prog.coll(f"{name}_AR", _AR, self.act, "tp")

    def _column_backward(self, name: str, ops: list[O.Op], extra: Sequence[O.Op] = ()) -> None:
        """The backward of a block's first (column-parallel) GEMM under sequence parallelism,
        ``ops`` = [data gradient, weight gradient, the rest]: Megatron-LM all-gathers the
        block's input again for the weight gradient while the data gradient runs, then
        reduce-scatters the data gradient while the weight gradient runs
        (``LinearWithGradAccumulationAndAsyncCommunication``; Transformer Engine's bulk
        overlaps); the rest (the layer norm's backward) needs the scattered gradient."""
        prog = self.prog
        gathered = prog.coll(f"{name}_input_AG", _AG, self.act_shard, "tp", False)
        prog.comp(f"{name}_dgrad", ops[:1])
        scattered = prog.coll(f"{name}_in_RS", _RS, self.act, "tp", False)
        prog.pending.append(gathered)
        prog.comp(f"{name}_wgrad", ops[1:2])
        prog.pending.append(scattered)
        if ops[2:] or extra:
            prog.comp(f"{name}_post", ops[2:] + list(extra))

    def _sp_backward(self, name: str, ops: list[O.Op], extra: Sequence[O.Op] = ()) -> None:
        """A dense block's backward kernels under sequence parallelism (the output gradient
        already gathered): up to the first GEMM's, then :meth:`_column_backward`."""
        _, last = _gemm_positions(ops, False)
        self.prog.comp(name, ops[:last])
        self._column_backward(name, ops[last:], extra)

    def _overlapped(
        self, name: str, ops: list[O.Op], forward: bool, again: bool, key: int, extra: Sequence[O.Op] = ()
    ) -> None:
        """A dense block's kernels with its tensor-parallel communication in rings of T steps
        (:meth:`_ring`), each beside one GEMM split into T row blocks: forward an all-gather
        before the first GEMM and a reduce-scatter after the last; backward an all-gather of
        the output gradient beside the first data-gradient GEMM, then
        :meth:`_column_backward`. ``extra`` kernels run at the end."""
        prog, T = self.prog, self.T
        first, last = _gemm_positions(ops, forward)
        if ops[:first]:
            prog.comp(f"{name}_pre", ops[:first], recompute=again)
        for j, gather in ((first, True), (last, False)) if forward else ((first, True),):
            batch, rows, n, k = ops[j].shape
            block = O.Op(ops[j].name, ops[j].flops / T, ops[j].bytes / T, O.GEMM, (batch, rows / T, n, k))
            self._ring(
                f"{name}_{'ag' if gather else 'rs'}_tp",
                [block] * T,
                self.act_shard,
                "tp",
                _TP_TAG + (2 * key + (not gather)) * (T + 1),
                gather,
                again,
            )
            if gather and ops[first + 1 : last]:
                prog.comp(f"{name}_mid", ops[first + 1 : last], recompute=again)
        if not forward:
            self._column_backward(name, ops[last:], extra)
        elif ops[last + 1 :] or extra:
            prog.comp(f"{name}_post", ops[last + 1 :] + list(extra), recompute=again)

    def _ring(
        self, prefix: str, blocks: list[O.Op], size: float, role: str, tags: int, gather: bool, again: bool
    ) -> None:
        """Kernels ``blocks`` overlapped with a ring of as many steps over the ``role`` group.
        ``gather``: each step computes with what arrived at the step before while it sends
        that on (an all-gather beside the kernels); otherwise each step's result goes on once
        computed, with what came in added (a reduce-scatter). Tags ``tags`` + step."""
        prog = self.prog
        received = None
        for j, block in enumerate(blocks):
            arriving = None
            more = j + 1 < len(blocks)
            if gather and more:
                after: tuple[int | None, ...] = () if received is None else (received,)
                prog.send(f"{prefix}{j + 1}_send", size, f"{role}_next", tags + j, after=after)
                arriving = prog.recv(f"{prefix}{j + 1}_recv", size, f"{role}_prev", tags + j)
            if gather and received is not None:
                prog.pending.append(received)
            prog.comp(f"{prefix}{j}", [block], recompute=again)
            if not gather and more:
                after = (prog.compute,) if received is None else (prog.compute, received)
                prog.send(f"{prefix}{j + 1}_send", size, f"{role}_next", tags + j, after=after)
                arriving = prog.recv(f"{prefix}{j + 1}_recv", size, f"{role}_prev", tags + j)
            received = arriving
        if received is not None:
            prog.pending.append(received)

    # -- pipeline and ZeRO-3 ------------------------------------------------------------------
    def _p2p_tag(self, m: int, q: int, backward: bool) -> int:
        """Message tag of micro-batch ``m`` arriving at virtual stage ``q``."""
        return 2 * (m * self.P * self.V + q if self.V > 1 else m) + backward

    def _receive(self, name: str, peer: str, tag: int) -> None:
        """A pipeline receive from stage ``peer`` that the next compute waits for (all-gathered
        over the T ranks where the sender scattered it)."""
        self.prog.pending.append(self.prog.recv(name, self.p2p, peer, tag))
        if self.p2p_gather:
            self.prog.coll(f"{name}_AG", _AG, self.p2p, "tp")

    def _zero3_gather(self, layer: int, phase: str) -> int | None:
        """FSDP: gather a layer's weights; each rank contributes its 1/D (1/(D/E)) shard."""
        if self.cfg.zero != 3:
            return None
        d, e = self.params[layer]
        h = self.prog.coll(f"L{layer}_{phase}_params_AG", _AG, d * O.BYTES / self.cfg.dp, "dp", False)
        if e:
            h = self.prog.coll(f"L{layer}_{phase}_experts_AG", _AG, e * O.BYTES / self.edp, "edp", False) or h
        return h

    # -- after the backward passes -------------------------------------------------------------
    def _tied_embedding_grads(self) -> None:
        """Tied embeddings with P > 1: the first and last stage all-reduce the embedding
        gradient (Megatron's embedding group)."""
        model = self.model
        if model.tie_embeddings and model.vocab and self.P > 1 and (self.first or self.last):
            size = model.vocab * model.hidden / self.T * self.cfg.grad_bytes
            h = self.prog.grad_coll("embedding_grads_AR", _AR, size, "emb")
            if h is not None:
                self.grads.handles.append(h)

    def _optimizer(self) -> tuple[list[_Node], float, float]:
        """The optimizer step once every gradient is reduced (on a 1/D shard with ZeRO >= 1,
        whose updated weights ZeRO 1-2 then all-gather); return the nodes and this rank's
        dense and expert gradient bytes."""
        cfg, prog, dense, expert, edp = self.cfg, self.prog, self.dense, self.expert, self.edp
        shard = cfg.dp if cfg.zero >= 1 else 1
        eshard = edp if cfg.zero >= 1 else 1
        prog.comp("optimizer", [O.optimizer_op(dense / shard + expert / eshard)], *self.grads.handles)
        if cfg.zero in (1, 2):  # each rank updated its 1/D shard: all-gather input = the shard
            prog.coll("params_AG", _AG, dense * O.BYTES / cfg.dp, "dp")
            if expert:
                prog.coll("expert_params_AG", _AG, expert * O.BYTES / edp, "edp")
        dense_bytes = dense * cfg.grad_bytes if cfg.dp > 1 else 0
        expert_bytes = expert * cfg.grad_bytes if cfg.dp // cfg.ep > 1 else 0
        return prog.nodes, dense_bytes, expert_bytes


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
    if cfg.tp_comm_overlap and _TP_TAG + (mb * cfg.model.layers * 12 + 1) * (cfg.tp + 1) >= 1 << 30:
        raise ConfigError(
            f"--tp-comm-overlap: {mb} micro-batches x {cfg.model.layers} layers need more "
            "tensor-parallel message tags than this generator numbers"
        )
    if cfg.cp > 1 and _CP_TAG + (mb * cfg.model.layers * 3 + 1) * (cfg.cp + 1) >= 1 << 31:
        raise ConfigError(
            f"--cp {cfg.cp}: {mb} micro-batches x {cfg.model.layers} layers need more "
            "context-parallel message tags than Chakra's int32 comm_tag holds"
        )
    layout = Layout(cfg.dp, cfg.tp, cfg.pp, cfg.ep, list(cfg.dims) if cfg.dims else None, cfg.cp)
    stages: list[list[_Node]] = []
    grads, flops, model_flops = [], [], []
    for p in range(cfg.pp):
        nodes, dense_bytes, expert_bytes = _stage_program(cfg, mb, p, MAX_RANK_NODES - sum(map(len, stages)))
        stages.append(nodes)
        grads.append(int(dense_bytes + expert_bytes))
        flops.append(sum(n.flops for n in nodes if n.name != "optimizer"))
        model_flops.append(sum(n.flops for n in nodes if n.name != "optimizer" and not n.recompute))
    check_values(cfg, stages)
    wl = LLMWorkload(cfg, layout, mb, stages)
    for rank in range(layout.npus):
        p = layout.coords(rank)[2]
        wl.dp_grad_bytes[rank] = grads[p]
        wl.flops[rank] = flops[p]
        wl.model_flops[rank] = model_flops[p]
    return wl


def write_llm(
    wl: LLMWorkload, prefix: str | os.PathLike, comm_groups_path: str | os.PathLike | None = None
) -> tuple[list[Path], Path | None]:
    """Write the step's traces and comm groups (see :func:`.llm_writer.write_llm`)."""
    from astra_core.workload.generators.llm_writer import write_llm as _write

    return _write(wl, prefix, comm_groups_path)
