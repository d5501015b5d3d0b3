"""One pipeline stage's program of ``astra gen llm``: the nodes of every pass, layer
and block of stage ``p`` with their communication, built by :class:`StageBuilder`
(:mod:`.llm` has the model of the step, its options and their sources).

:class:`StageProgram` keeps a stage's node list as a compute chain and a
communication chain; :class:`GradBuckets` collects the data-parallel gradient
reduction in buckets; :class:`StageNode` is one node before it is written
(:mod:`.llm_writer`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, cast

import numpy as np

from astra_core.errors import ConfigError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators import ops as O
from astra_core.workload.generators.gpus import GPUSpec
from astra_core.workload.generators.kernels import kernel_ns, without_grouped_rate
from astra_core.workload.generators.layout import experts_folded
from astra_core.workload.generators.llm_params import dense_data_parallel, expert_data_parallel, stage_params
from astra_core.workload.generators.pipeline import combined_passes, stage_passes
from astra_core.workload.generators.token_dispatch import FLEX_SMS, FlexDispatch
from astra_core.workload.generators.userbuffers import GemmOverlap, te_defaults

if TYPE_CHECKING:
    from astra_core.workload.generators.llm import LLMConfig

_AR, _AG, _RS, _A2A = pb.ALL_REDUCE, pb.ALL_GATHER, pb.REDUCE_SCATTER, pb.ALL_TO_ALL
#: Tags of context-parallel ring messages start here, above the pipeline's (Chakra's
#: comm_tag is an int32).
CP_TAG = 1 << 30
#: Tags of tensor-parallel ring messages (--tp-comm-overlap) start here.
TP_TAG = 1 << 29
#: The GPU stream (ET attribute ``comm_stream``) of the gradient reductions: PyTorch's
#: ProcessGroupNCCL launches each process group's collectives on a CUDA stream of that
#: group's own, so the data-parallel reduce-scatters run beside the tensor-parallel,
#: context-parallel and pipeline communication (the system's engine gives the stream a
#: communication slot of its own); the rest share the default stream, in program order.
GRADS_STREAM = 1
#: ``StageNode.sms`` of a collective whose kernels run on SMs the compute leaves free
#: (Transformer Engine's ``set_sm_margin``): written as ``comm_sms`` 0.
RESERVED_SMS = -1
#: A dense block's first and last GEMM as Transformer Engine names their overlaps.
_UB_GEMMS = {"attn": ("qkv", "proj"), "mlp": ("fc1", "fc2")}


@dataclass
class _Chain:
    """One micro-batch's node order in a combined pass: its last node so far (None: none)."""

    last: int | None


@dataclass
class StageNode:
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
    chain: bool = False  # on the compute chain: each such node waits for the one before
    stream: int = 0  # a collective's GPU stream (GRADS_STREAM: the gradient reductions')
    # SMs a collective's kernels hold where they are not NCCL's (DeepEP, HybridEP, userbuffers);
    # RESERVED_SMS: SMs the GEMMs beside it leave free (they do not slow the compute)
    sms: int = 0
    # per expert-parallel index, when routing is not balanced: a compute node's
    # (duration_ns, flops, nbytes), an all-to-all's (send_bytes, recv_bytes)
    by_ep: tuple | None = None


class StageProgram:
    """One stage's node list: a compute chain and a communication chain."""

    def __init__(
        self,
        gpu: GPUSpec,
        precision: str,
        group_sizes: dict[str, int],
        budget: int,
        limit: int,
        fp8_recipe: str = "delayed",
    ):
        self.nodes: list[StageNode] = []
        self.fp8_recipe = fp8_recipe  # Transformer Engine's scaling (:func:`.ops.fp8_cast_op`)
        self.budget = budget  # most nodes this stage may have (``limit`` over all stages)
        self.limit = limit
        self.gpu = gpu
        self.precision = precision
        self.group_sizes = group_sizes  # role -> members; a one-NPU group communicates nothing
        self.compute: int | None = None
        self.comm: int | None = None
        self.pending: list[int | None] = []  # extra parents of the next compute-chain node
        self.grads: int | None = None  # last gradient-reduction collective (their own chain)
        # a kernel list's (time [ns], FLOPs, bytes): every micro-batch repeats the same lists
        self._timed: dict[tuple[O.Op, ...], tuple[float, float, float]] = {}

    def _add(self, node: StageNode, deps, chain: bool = False) -> int:
        if chain:
            deps = (*deps, *self.pending)
            self.pending = []
            node.chain = True
        kept = tuple([d for d in deps if d is not None])
        if len(kept) > 1 and len(set(kept)) != len(kept):
            kept = tuple(dict.fromkeys(kept))  # the first of each, in order
        node.deps = kept
        if len(self.nodes) >= self.budget:
            raise ConfigError(
                f"gen llm: the pipeline stages together pass astra's limit of {self.limit:,} "
                "nodes (2^22, about 10 GB to simulate one rank); use fewer micro-batches, layers or ring steps"
            )
        self.nodes.append(node)
        return len(self.nodes) - 1

    def comp(
        self, name: str, op_list: list[O.Op], *extra, recompute: bool = False, slowdown: float = 1.0
    ) -> int:
        """A compute node running ``op_list``'s kernels one after another (:mod:`.kernels`);
        under FP8 with Transformer Engine's casts (:func:`.ops.fp8_kernels`); ``slowdown``
        times as long (kernels launched on fewer SMs than the GPU's)."""
        node = self._comp_node(name, op_list, recompute, slowdown)
        self.compute = self._add(node, (self.compute, *extra), chain=True)
        return self.compute

    def _comp_node(self, name: str, op_list: list[O.Op], recompute: bool, slowdown: float = 1.0) -> StageNode:
        key = tuple(op_list)
        timed = self._timed.get(key)
        if timed is None:
            if self.precision == "fp8":
                op_list = O.fp8_kernels(op_list, self.fp8_recipe)
            ns = sum(kernel_ns(self.gpu, o, O.kernel_precision(o, self.precision)) for o in op_list)
            timed = self._timed[key] = (ns, sum(o.flops for o in op_list), sum(o.bytes for o in op_list))
        ns, flops, nbytes = timed
        return StageNode(
            name, pb.COMP_NODE, duration_ns=ns * slowdown, flops=flops, nbytes=nbytes, recompute=recompute
        )

    def comp_by_ep(self, name: str, op_lists: list[list[O.Op]], recompute: bool = False) -> int:
        """A compute node whose kernels differ by expert-parallel index (``op_lists[q]``);
        its own figures are their means (a stage's FLOPs over its ranks)."""
        nodes = [self._comp_node(name, ops, recompute) for ops in op_lists]
        node = StageNode(
            name,
            pb.COMP_NODE,
            duration_ns=sum(n.duration_ns for n in nodes) / len(nodes),
            flops=sum(n.flops for n in nodes) / len(nodes),
            nbytes=sum(n.nbytes for n in nodes) / len(nodes),
            recompute=recompute,
            by_ep=tuple((n.duration_ns, n.flops, n.nbytes) for n in nodes),
        )
        self.compute = self._add(node, (self.compute,), chain=True)
        return self.compute

    def coll(
        self, name: str, ctype: int, size: float, role: str, blocking: bool = True, *extra, sms: int = 0
    ) -> int | None:
        if size <= 0 or self.group_sizes[role] == 1:
            return None
        node = StageNode(
            name, pb.COMM_COLL_NODE, comm_type=ctype, size=int(math.ceil(size)), role=role, sms=sms
        )
        idx = self._add(node, (self.compute, self.comm, *extra), chain=blocking)
        self.comm = idx
        if blocking:
            self.compute = idx
        return idx

    def uneven_all_to_all(
        self, name: str, splits: list[tuple[tuple[int, ...], tuple[int, ...]]], sms: int = 0
    ) -> None:
        """A blocking all-to-all over the expert-parallel ranks whose bytes to and from each
        member differ by index: ``splits[q]`` = (send_bytes, recv_bytes) of index q; ``sms``
        the SMs its kernels hold (0: NCCL's channels)."""
        node = StageNode(
            name,
            pb.COMM_COLL_NODE,
            comm_type=_A2A,
            size=sum(splits[0][0]),
            role="ep",
            by_ep=tuple(splits),
            sms=sms,
        )
        self.comm = self.compute = self._add(node, (self.compute, self.comm), chain=True)

    def grad_coll(self, name: str, ctype: int, size: float, role: str) -> int | None:
        """A gradient reduction: after the compute that produced it and the previous reduction,
        off the communication chain, on the gradients' GPU stream (:data:`GRADS_STREAM`),
        numbered last: where a rank has one communication slot (upstream's queues),
        tensor-parallel collectives and pipeline sends that become ready at the same time
        go first (lowest node id first)."""
        return self._data_parallel_coll(name, ctype, size, role, late=True)

    def param_gather(self, name: str, size: float, role: str) -> int | None:
        """An all-gather of updated weights (``size``: each rank's shard [B]) started now,
        after the latest compute, on the data-parallel group's stream (:data:`GRADS_STREAM`)
        after its previous collective; the compute that needs the weights waits for the
        handle returned (None: nothing to gather)."""
        return self._data_parallel_coll(name, _AG, size, role, late=False)

    def _data_parallel_coll(self, name: str, ctype: int, size: float, role: str, late: bool) -> int | None:
        """A collective on :data:`GRADS_STREAM` after the latest compute and that stream's
        previous collective (None where there is nothing to send)."""
        if size <= 0 or self.group_sizes[role] == 1:
            return None
        node = StageNode(
            name,
            pb.COMM_COLL_NODE,
            comm_type=ctype,
            size=int(math.ceil(size)),
            role=role,
            late=late,
            stream=GRADS_STREAM,
        )
        self.grads = self._add(node, (self.compute, self.grads))
        return self.grads

    def send(self, name: str, size: float, peer: str, tag: int, after: tuple = ()) -> None:
        """A send on the communication chain, once the nodes ``after`` (default: the latest
        compute) are done."""
        node = StageNode(name, pb.COMM_SEND_NODE, size=int(size), role=peer, tag=tag)
        self.comm = self._add(node, (*(after or (self.compute,)), self.comm))

    def recv(self, name: str, size: float, peer: str, tag: int) -> int:
        return self._add(StageNode(name, pb.COMM_RECV_NODE, size=int(size), role=peer, tag=tag), ())


def _backward_part(ops: list[O.Op], part: str) -> list[O.Op]:
    """The backward kernels of ``ops``: all (``part`` ""), all but the weight-gradient GEMMs
    ("dgrad"), or those alone ("wgrad")."""
    kernels = O.backward(ops)
    if not part:
        return kernels
    return [o for o in kernels if (O.training_pass(o.name) == "wgrad") == (part == "wgrad")]


def _row_block(op: O.Op, n: int) -> O.Op:
    """One of ``n`` equal row blocks of GEMM ``op`` (a ring step's or a pipeline split's)."""
    batch, rows, cols, k = op.shape
    return O.Op(op.name, op.flops / n, op.bytes / n, O.GEMM, (batch, rows / n, cols, k))


def _gemm_positions(ops: list[O.Op], forward: bool) -> tuple[int, int]:
    """Positions of a dense block's first and last GEMM (backward: data-gradient GEMM)."""
    gemms = [j for j, o in enumerate(ops) if o.kind == O.GEMM and (forward or o.name.endswith("_dgrad"))]
    return gemms[0], gemms[-1]


class GradBuckets:
    """A stage's data-parallel gradient reduction: gradients [bytes] collect in a dense and an
    expert bucket, reduced over the ``dp`` and ``edp`` groups (all-reduce for ZeRO 0, else
    reduce-scatter) off the communication chain (:meth:`StageProgram.grad_coll`)."""

    def __init__(self, prog: StageProgram, cfg: LLMConfig):
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


class StageBuilder:
    """Pipeline stage ``p``'s program (:meth:`build`): its passes in Megatron's schedule
    order, each layer's blocks with their tensor-, context- and expert-parallel
    communication, the pipeline's sends and receives, the gradient reduction and the
    optimizer.

    Shapes of one micro-batch on one rank: ``b`` sequences of ``s`` tokens (1/C of each
    sequence); sizes in bytes, parameter counts in elements. T, P, C, V: tensor-parallel,
    pipeline and context-parallel sizes, model chunks per stage.
    """

    def __init__(
        self, cfg: LLMConfig, mb: int, p: int, budget: int, limit: int, moe_rows: dict | None = None
    ):
        model = cfg.model
        self.cfg, self.model, self.p = cfg, model, p
        self.T, self.P, self.C, self.V = cfg.tp, cfg.pp, cfg.cp, cfg.virtual_stages
        self.b, self.sp = cfg.micro_batch, cfg.sequence_parallel
        self.s = cfg.sequence_length // self.C  # this rank's tokens of each sequence (context parallelism)
        self.act = self.b * self.s * model.hidden * O.BYTES  # one activation tensor [B]
        self.act_shard = self.act / self.T  # one rank's share of an activation (sequence parallelism)
        self.stage_params = stage_params(cfg, p)
        self.layers = self.stage_params.layers
        self.first, self.last = p == 0, p == self.P - 1
        # multi-token prediction's layers (numbered after the model's), on the last stage
        self.mtp = self.stage_params.mtp
        self.folded = experts_folded(cfg.etp, self.T, self.C)  # MoE parallel folding
        # ranks holding the same experts
        self.edp = expert_data_parallel(cfg)
        self.dense_dp = dense_data_parallel(cfg)  # ranks holding the same dense weights
        self.prog = StageProgram(
            cfg.gpu if cfg.moe_grouped_gemm == "multi_stream" else without_grouped_rate(cfg.gpu),
            cfg.precision,
            {
                "tp": self.T,
                "cp": self.C,
                "dp": self.dense_dp,
                "ep": cfg.ep,
                "edp": self.edp,
                "tp_ep": cfg.ep if self.folded else self.T * cfg.ep,
                "emb": 2,
                "amax": self.T * self.C * cfg.dp,
            },
            budget,
            limit,
            cfg.fp8_recipe,
        )
        self.grads = GradBuckets(self.prog, cfg)
        # unbalanced routing or a capacity: per MoE layer of this stage, the assignment rows
        # every rank sends each expert-parallel index (:func:`.routing.rows_by_layer`)
        self.rows_to: dict[int, np.ndarray] = {i: r for i, r in (moe_rows or {}).items() if i in self.layers}
        self._routed_experts: dict[int, list[list[O.Op]]] = {}  # per layer, per index
        self._stream_last: int | None = None  # a combined pass's last compute-stream node
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
        stage's totals ``dense`` (``edge`` included) and ``expert`` (:func:`.llm_params.stage_params`)."""
        sp = self.stage_params
        self.params, self.edge, self.dense, self.expert = dict(sp.params), sp.edge, sp.dense, sp.expert

    def _init_kernels(self) -> None:
        """The kernels of one layer's blocks for one micro-batch (:mod:`.ops`)."""
        cfg, model, b, s, T, sp = self.cfg, self.model, self.b, self.s, self.T, self.sp
        drop = cfg.dropout
        self.attn = O.attention_ops(model, b, s, T, sp, cfg.attention, drop)
        # sliding-window layers' attention block and core (model.window)
        self.window_attn = O.attention_ops(model, b, s, T, sp, cfg.attention, drop, model.sliding_window)
        self.window_core = O.attention_core_ops(
            model, b, s, T, cfg.attention, drop, window=model.sliding_window
        )
        self.dense_mlp = O.mlp_ops(model, b, s, T, sp, dropout=drop)
        self.flex = self._flex_dispatch()
        self._flex_splits: dict[float, list] = {}  # per row size, each index's bytes per member
        token_rows = self.flex.received(b * s / T) if self.flex else None
        self.router, self.experts, self.combine = (
            O.moe_ops(model, b, s, T, sp, cfg.ep, drop, token_rows=token_rows)
            if model.experts
            else ([], [], [])
        )
        self.core = O.attention_core_ops(model, b, s, T, cfg.attention, drop)
        if cfg.fp8_attention:  # Transformer Engine's FP8 dot-product attention
            self.attn = O.fp8_attention(self.attn, model, b, s, T)
            self.core = O.fp8_attention(self.core, model, b, s, T)
        self.pre: list[O.Op] = []
        self.post: list[O.Op] = []
        self.kv_block = 0.0
        if self.C > 1:  # the block's kernels before and after the attention core, and the ring's steps
            core = next(i for i, o in enumerate(self.attn) if o.kind == O.ATTENTION)
            self.pre, self.post = self.attn[:core], self.attn[core + 1 :]
            if cfg.cp_comm_type == "a2a":  # the whole sequence for 1/C of the heads
                self.core = O.attention_core_ops(
                    model, b, cfg.sequence_length, T * self.C, cfg.attention, drop
                )
            elif cfg.cp_comm_type == "all_gather":
                self.core = O.context_parallel_all_gather_ops(model, b, cfg.sequence_length, T, self.C)
            else:
                self.core = O.context_parallel_attention_ops(model, b, cfg.sequence_length, T, self.C)
            # this rank's keys and values
            self.kv_block = b * s * model.kv / T * (model.qk_dim + model.v_dim) * O.BYTES
        self.overlap = cfg.tp_comm_overlap and T > 1
        # Transformer Engine's userbuffers settings of each overlap (:mod:`.userbuffers`)
        self.ub = (cfg.tp_comm_overlap_cfg or te_defaults()) if self.overlap else {}
        self.accumulate: dict[int, list[O.Op]] = {}  # per layer, set by each backward pass

    def _init_schedule(self, mb: int) -> None:
        """The stage's passes ``order`` = [(F or B, micro-batch, chunk)], the step of its
        last backward pass, and ``chunk_done[v]``, the step of chunk v's last one."""
        P, V = self.P, self.V
        self.order = stage_passes(self.cfg.schedule, P, self.p, mb, V)
        self.last_backward = max(i for i, (kind, _, _) in enumerate(self.order) if kind == "B")
        backward = {
            v: [i for i, (kind, _, c) in enumerate(self.order) if kind == "B" and c == v] for v in range(V)
        }
        self.chunk_first = {v: steps[0] for v, steps in backward.items()}
        self.chunk_done = {v: steps[-1] for v, steps in backward.items()}
        # each chunk's first forward micro-batch (where --overlap-param-gather gathers its weights)
        self.first_forward = {
            v: next(m for kind, m, c in self.order if kind == "F" and c == v) for v in range(V)
        }
        self._chunk_gathers: dict[int, dict[int, int | None]] = {}  # interleaved: per chunk, per layer

    def _attn(self, layer: int) -> list[O.Op]:
        """The attention block's kernels of ``layer`` (full or sliding-window)."""
        return self.window_attn if self.model.window(layer) else self.attn

    def _core(self, layer: int) -> list[O.Op]:
        """The attention core's kernels of ``layer`` (full or sliding-window)."""
        return self.window_core if self.model.window(layer) else self.core

    def chunk_layers(self, v: int) -> range:
        """Layers of model chunk ``v`` on this stage: virtual stage ``v P + p``."""
        return self.stage_params.chunks[v]

    def build(self) -> tuple[list[StageNode], float, float]:
        """The stage's nodes, with this rank's dense and expert gradient bytes."""
        if self.cfg.moe_a2a_overlap:
            passes = combined_passes(self.order, self.P)
        else:
            passes = [(i, None) if kind == "F" else (None, i) for i, (kind, _, _) in enumerate(self.order)]
        for f, b in passes:
            if f is not None and b is not None:
                self.combined(f, b)
            elif f is not None:
                self._forward(*self.order[f][1:])
            elif b is not None:
                self._backward(b, *self.order[b][1:])
        self._tied_embedding_grads()
        return self._optimizer()

    # -- passes -----------------------------------------------------------------------
    def _forward(self, m: int, v: int) -> None:
        """Micro-batch ``m``'s forward pass through model chunk ``v``: from the previous
        stage (or the embedding) to the next stage (or the output head)."""
        prog, chunk = self.prog, self.chunk_layers(v)
        self._forward_head(m, v, self._start_gathers(m, v))
        gathered = self._weights(chunk[0], m, v, True) if chunk else None  # a chunk may be empty
        for i in chunk:
            prog.pending.append(gathered)
            gathered = self._weights(i + 1, m, v, True) if i + 1 in chunk else None  # prefetch
            self._forward_layer(i, m)
        self._forward_tail(m, v)

    def _forward_head(self, m: int, v: int, weights: int | None = None) -> None:
        """What a forward pass runs before its layers (after the gather ``weights``): the
        receive from the previous stage, or the embedding."""
        prog, model, sp, T = self.prog, self.model, self.sp, self.T
        prog.pending.append(weights)
        q = v * self.P + self.p  # virtual stage
        if q != 0:
            tm = f"mb{m}" if self.V == 1 else f"mb{m}_c{v}"
            self._receive(f"{tm}_act_recv", "prev", self._p2p_tag(m, q, False))
        elif model.vocab:
            prog.comp(f"mb{m}_embedding", O.embedding_ops(model, self.b, self.s, T, sp))
            if T > 1:
                prog.coll(f"mb{m}_embedding_{'RS' if sp else 'AR'}", _RS if sp else _AR, self.act, "tp")

    def _forward_tail(self, m: int, v: int) -> None:
        """What a forward pass runs after its layers: the amax reduction, then the output
        head (and multi-token prediction) or the send to the next stage."""
        prog, model = self.prog, self.model
        q = v * self.P + self.p  # virtual stage
        tm = f"mb{m}" if self.V == 1 else f"mb{m}_c{v}"
        self._amax_reduction(f"{tm}_fwd_amax_AR", self.chunk_layers(v), True)
        tail_chunk = q == self.P * self.V - 1
        if tail_chunk and model.vocab:
            prog.comp(f"mb{m}_lm_head", O.head_ops(model, self.b, self.s, self.T, self.sp))
            self._mtp(m, True)
        elif not tail_chunk:
            prog.send(f"{tm}_act_send", self.p2p, "next", self._p2p_tag(m, q + 1, False))

    def _backward(self, step: int, m: int, v: int) -> None:
        """Micro-batch ``m``'s backward pass (schedule step ``step``) through model chunk ``v``,
        reducing each layer's gradients once its last micro-batch is through."""
        prog, chunk = self.prog, self.chunk_layers(v)
        self._backward_head(step, m, v)
        gathered = self._weights(chunk[-1], m, v, False) if chunk else None
        for i in reversed(chunk):
            prog.pending.append(gathered)
            gathered = self._weights(i - 1, m, v, False) if i - 1 in chunk else None
            self._backward_layer(i, m, step == self.chunk_done[v])
        self._backward_tail(step, m, v)

    def _backward_head(self, step: int, m: int, v: int) -> None:
        """What a backward pass runs before its layers: the output head's backward (and
        multi-token prediction's), or the receive from the next stage; and the layers'
        gradient accumulation of this pass (:meth:`_gradient_ops`)."""
        prog, model = self.prog, self.model
        q = v * self.P + self.p  # virtual stage
        tail_chunk = q == self.P * self.V - 1
        first, last = step == self.chunk_first[v], step == self.chunk_done[v]
        self.accumulate = {i: self._gradient_ops(i, first, last) for i in self.chunk_layers(v)}
        if tail_chunk and model.vocab:
            self.accumulate.update({i: self._gradient_ops(i, first, last) for i in self.mtp})
            self._mtp(m, False)
            if last:
                for i in self.mtp:
                    self.grads.add(*self.params[i])
            prog.comp(f"mb{m}_lm_head_bwd", O.backward(O.head_ops(model, self.b, self.s, self.T, self.sp)))
        elif not tail_chunk:
            tm = f"mb{m}" if self.V == 1 else f"mb{m}_c{v}"
            self._receive(f"{tm}_grad_recv", "next", self._p2p_tag(m, q, True))

    def _backward_tail(self, step: int, m: int, v: int) -> None:
        """What a backward pass runs after its layers: the amax reduction, then the
        embedding's backward or the send to the previous stage; after the stage's last
        backward pass, the last gradient bucket."""
        prog, model = self.prog, self.model
        q = v * self.P + self.p  # virtual stage
        tm = f"mb{m}" if self.V == 1 else f"mb{m}_c{v}"
        self._amax_reduction(f"{tm}_bwd_amax_AR", self.chunk_layers(v), False)
        if q == 0 and model.vocab:
            embedding = O.embedding_ops(model, self.b, self.s, self.T, self.sp)
            prog.comp(f"mb{m}_embedding_bwd", O.backward(embedding))
        elif q != 0:
            prog.send(f"{tm}_grad_send", self.p2p, "prev", self._p2p_tag(m, q - 1, True))
        if step == self.last_backward:
            self.grads.add(self.edge, 0.0)
            self.grads.finish()

    # -- expert-parallel overlap ----------------------------------------------------------
    def combined(self, f_step: int, b_step: int) -> None:
        """The forward pass ``order[f_step]`` and the backward pass ``order[b_step]`` run
        together, as Megatron-core's ``--overlap-moe-expert-parallel-comm`` does
        (``TransformerModelChunkSchedulePlan.run``): the two heads, then the forward's
        layers from the first paired with the backward's from the last
        (:meth:`_layer_pair`), the unpaired rest, the two tails. Each micro-batch's nodes
        keep their own order (its CUDA event); compute nodes also keep the order they are
        issued in on the compute stream, the all-to-alls on the communication stream.
        The next pass waits for both."""
        prog = self.prog
        _, fm, fv = self.order[f_step]
        _, bm, bv = self.order[b_step]
        fwd, bwd = _Chain(prog.compute), _Chain(prog.compute)
        self._stream_last = prog.compute  # the compute stream's last node
        edge = self._start_gathers(fm, fv)
        self._on(fwd, True, lambda: self._forward_head(fm, fv, edge))
        self._on(bwd, True, lambda: self._backward_head(b_step, bm, bv))
        f_layers, b_layers = list(self.chunk_layers(fv)), list(reversed(self.chunk_layers(bv)))
        done = b_step == self.chunk_done[bv]  # the layers' gradients go to their buckets
        for fi, bi in zip(f_layers, b_layers):
            self._layer_pair(fwd, fi, fm, bwd, bi, bm, done, self._weights(fi, fm, fv, True))
        for bi in b_layers[len(f_layers) :]:
            self._on(bwd, True, partial(self._backward_layer, bi, bm, done))
        for fi in f_layers[len(b_layers) :]:
            self._on(fwd, True, partial(self._forward_layer, fi, fm, self._weights(fi, fm, fv, True)))
        self._on(fwd, True, lambda: self._forward_tail(fm, fv))
        self._on(bwd, True, lambda: self._backward_tail(b_step, bm, bv))
        prog.compute = bwd.last
        prog.pending.append(fwd.last)

    def _layer_pair(
        self, fwd: _Chain, fi: int, fm: int, bwd: _Chain, bi: int, bm: int, last: bool, weights: int | None
    ) -> None:
        """Layer ``fi``'s forward over micro-batch ``fm`` beside layer ``bi``'s backward over
        ``bm`` (``TransformerLayerSchedulePlan.run``), issued in Megatron-core's order:

        ====================  ==================================================
        communication stream  compute stream
        ====================  ==================================================
        combine (backward)    attention, router, permutation (forward)
        dispatch (forward)    experts' data gradients, weight gradients (backward)
        dispatch (backward)   experts (forward)
        combine (forward)     permutation, router, attention (backward)
        ====================  ==================================================

        A dense layer has no dispatch or combine, and its MLP runs whole in the experts'
        place; ``last``: the backward pass is its chunk's last (the layer's gradients go
        to their bucket); ``weights``: the gather of layer ``fi``'s weights its forward waits
        for (None: none)."""
        f_tag, b_tag = f"L{fi}_mb{fm}_fwd", f"L{bi}_mb{bm}_bwd"
        f_moe, b_moe = self.model.is_moe_layer(fi), self.model.is_moe_layer(bi)
        if b_moe:
            self._on(bwd, False, lambda: self._moe_back(b_tag, False, False, bi))
        self._on(fwd, True, lambda: self._attention_front(fi, fm, f_tag, f_moe, weights))
        self._on(bwd, True, lambda: self._mlp_backward(bi, bm, b_tag, b_moe))
        if f_moe:
            self._on(fwd, False, lambda: self._moe_dispatch(f_tag, True, fi))
        if b_moe:
            self._on(bwd, True, lambda: self._moe_experts(b_tag, False, False, bi, "wgrad"))
            self._on(bwd, False, lambda: self._moe_dispatch(b_tag, False, bi))
        if f_moe:
            self._on(fwd, True, lambda: self._moe_experts(f_tag, True, False, fi))
            self._on(fwd, False, lambda: self._moe_back(f_tag, True, False, fi))
        else:
            self._on(fwd, True, lambda: self._mlp(fi, fm, True))
        self._on(bwd, True, lambda: self._attention_back(bi, bm, b_tag, b_moe, last))

    def _attention_front(self, i: int, m: int, tag: str, moe: bool, weights: int | None = None) -> None:
        """Forward: layer ``i``'s attention block (after the gather ``weights``), then its MoE
        router and permutation."""
        self.prog.pending.append(weights)
        self._attention_block(i, m, "fwd")
        if moe:
            self._moe_front(tag, True, False)

    def _mlp_backward(self, i: int, m: int, tag: str, moe: bool) -> None:
        """Backward: layer ``i``'s recomputation, then its experts' data gradients (the
        weight gradients follow separately) or its dense MLP's backward."""
        self._recompute_layer(i, m)
        if moe:
            self._moe_experts(tag, False, False, i, "dgrad")
        else:
            self._mlp(i, m, False)

    def _attention_back(self, i: int, m: int, tag: str, moe: bool, last: bool) -> None:
        """Backward: layer ``i``'s router and permutation, then its attention block; its
        gradients to their bucket after the chunk's ``last`` backward pass."""
        if moe:
            self._moe_front(tag, False, False)
        self._attention_block(i, m, "bwd")
        if last:
            self.grads.add(*self.params[i])

    def _forward_layer(self, i: int, m: int, weights: int | None = None) -> None:
        """Layer ``i``'s forward pass over micro-batch ``m`` (after the gather ``weights``)."""
        self.prog.pending.append(weights)
        self._attention_block(i, m, "fwd")
        self._mlp(i, m, True)

    def _backward_layer(self, i: int, m: int, last: bool) -> None:
        """Layer ``i``'s backward pass over micro-batch ``m`` (recomputation first); its
        gradients to their bucket after the chunk's ``last`` backward pass."""
        self._recompute_layer(i, m)
        self._mlp(i, m, False)
        self._attention_block(i, m, "bwd")
        if last:
            self.grads.add(*self.params[i])

    def _on(self, chain: _Chain, compute_stream: bool, emit: Callable[[], None]) -> None:
        """Emit nodes of one micro-batch's ``chain``: after its last node, and on the compute
        stream (``compute_stream``) after that stream's last node too; collectives go
        after the communication chain's last, as always (:meth:`StageProgram.coll`)."""
        prog = self.prog
        prog.compute = chain.last
        if compute_stream:
            prog.pending.append(self._stream_last)
        emit()
        chain.last = prog.compute
        if compute_stream:
            self._stream_last = prog.compute

    def _mtp(self, m: int, forward: bool) -> None:
        """Micro-batch ``m``'s multi-token-prediction depths (LLMConfig ``mtp_layers``), after
        the output head forward and before it backward: per depth its input
        (:func:`.ops.mtp_input_ops`), its layer, the shared output layer and loss."""
        prog, model, b, s, T, sp = self.prog, self.model, self.b, self.s, self.T, self.sp
        into, head = O.mtp_input_ops(model, b, s, T, sp), O.head_ops(model, b, s, T, sp)
        for i in self.mtp if forward else reversed(self.mtp):
            prog.pending.append(self._weights(i, m, self.V - 1, forward))
            if forward:
                prog.comp(f"mb{m}_mtp{i}_in", into)
                self._attention_block(i, m, "fwd")
                self._mlp(i, m, True)
                prog.comp(f"mb{m}_mtp{i}_head", head)
                continue
            prog.comp(f"mb{m}_mtp{i}_head_bwd", O.backward(head))
            self._recompute_layer(i, m)
            self._mlp(i, m, False)
            self._attention_block(i, m, "bwd")
            prog.comp(f"mb{m}_mtp{i}_in_bwd", O.backward(into))

    def _amax_reduction(self, name: str, chunk: range, forward: bool) -> None:
        """FP8 delayed scaling: Transformer Engine all-reduces (MAX) the amaxes of every
        FP8 GEMM of the chunk over Megatron's amax group (tensor x data x context
        parallel ranks of the stage) when the forward pass leaves its ``fp8_autocast``
        and when the backward pass is through, synchronously (``async_op=False``,
        ``reduce_and_update_fp8_tensors``): FP32 amaxes of 3 tensors per GEMM forward
        (input, weight, output) and 2 backward (output and input gradients)."""
        if self.cfg.precision != "fp8" or self.cfg.fp8_recipe != "delayed" or not chunk:
            return  # current scaling reduces no amax history; a chunk of no layers has no FP8 GEMM
        gemms = 0
        for i in chunk:
            ops = self.attn + (self.experts + self.combine if self.model.is_moe_layer(i) else self.dense_mlp)
            gemms += sum(o.shape[0] for o in ops if o.kind == O.GEMM and o.name in O.FP8_GEMMS)
        self.prog.coll(name, _AR, 4 * (3 if forward else 2) * gemms, "amax")

    def _gradient_ops(self, i: int, first: bool, last: bool) -> list[O.Op]:
        """What a backward pass does with layer ``i``'s weight gradients besides computing
        them, on the chunk's ``first`` and ``last`` micro-batch: Megatron's local DDP adds
        every micro-batch's into its buffer; PyTorch DDP adds them into ``.grad`` from the
        second on and copies them into its buckets on the last; Megatron's
        --overlap-grad-reduce (gradient-accumulation fusion) accumulates in the GEMM."""
        cfg, params = self.cfg, sum(self.params[i])
        if cfg.ddp == "torch":
            return ([] if first else [O.grad_accumulation_op(params, O.BYTES)]) + (
                [O.ddp_bucket_copy_op(params)] if last else []
            )
        return [] if cfg.overlap_grad_reduce else [O.grad_accumulation_op(params, cfg.grad_bytes)]

    def _recompute_layer(self, i: int, m: int) -> None:
        """Megatron's activation recomputation just before layer ``i``'s backward."""
        if self.cfg.recompute == "full":
            self._attention_block(i, m, "recompute")
            self._mlp(i, m, True, "recompute")
            return
        if self.cfg.recompute != "selective":
            return
        modules = self.cfg.recompute_modules
        if "core_attn" in modules and self.C == 1:
            self.prog.comp(f"L{i}_mb{m}_recompute_core", self._core(i), recompute=True)
        elif "core_attn" in modules:
            self._cp_attention(
                f"L{i}_mb{m}_recompute_core", self.core, True, True, self._phase_key(i, m, "recompute")
            )
        if "mla_up_proj" in modules:  # the up projections with their fused latent norms
            up = [o for o in self._attn(i) if o.name in ("q_norm", "q_up", "kv_norm", "kv_up")]
            self.prog.comp(f"L{i}_mb{m}_recompute_up_proj", up, recompute=True)
        moe = self.model.is_moe_layer(i)
        if "mlp" in modules and not moe:
            self._mlp(i, m, True, "recompute")
        if moe and ("layernorm" in modules or "moe_act" in modules):
            self._recompute_moe_parts(i, m)

    def _recompute_moe_parts(self, i: int, m: int) -> None:
        """--recompute-modules layernorm / moe_act in MoE layer ``i``: the norm before the
        block (Transformer Engine fuses the other norms into the GEMM after them) and the
        experts' activation, forward again (each expert-parallel index its own rows)."""
        modules = self.cfg.recompute_modules
        norm = [o for o in self.router if o.name == "ln_moe" and "layernorm" in modules]
        keep = "experts_act" if "moe_act" in modules else None
        name = f"L{i}_mb{m}_recompute_moe"
        if i not in self.rows_to:
            self.prog.comp(name, norm + [o for o in self.experts if o.name == keep], recompute=True)
            return
        per_index = [norm + [o for o in ops if o.name == keep] for ops in self._routed_experts_ops(i)]
        self.prog.comp_by_ep(name, per_index, recompute=True)

    def _phase_key(self, i: int, m: int, phase: str) -> int:
        """A number for layer ``i``'s pass ``phase`` (fwd, recompute, bwd) over micro-batch ``m``."""
        layers = self.model.layers + self.cfg.mtp_layers  # the multi-token-prediction ones numbered last
        return (m * layers + i) * 3 + ("fwd", "recompute", "bwd").index(phase)

    # -- attention ----------------------------------------------------------------------
    def _attention_block(self, i: int, m: int, phase: str) -> None:
        """Layer ``i``'s attention block with its tensor-parallel communication."""
        forward = phase != "bwd"
        if self.overlap:
            name = f"L{i}_mb{m}_{phase}_attn"
            again, key = phase == "recompute", self._phase_key(i, m, phase)
            attn = self._attn(i) if self.C == 1 else self.pre + self.core + self.post
            self._overlapped(
                name,
                "attn",
                attn if forward else O.backward(attn),
                forward,
                again,
                2 * key,
                () if forward else self.accumulate[i],
                None if self.C == 1 else lambda mid: self._cp_middle(name, mid, forward, again, key),
            )
            return
        self._tp_comm(f"L{i}_mb{m}_{phase}_attn_{'in' if forward else 'out'}", forward, forward)
        if not forward and self.sp and self.T > 1 and self.C == 1:
            self._sp_backward(f"L{i}_mb{m}_bwd_attn", O.backward(self._attn(i)), self.accumulate[i])
            return
        self._attention(i, m, phase)
        self._tp_comm(f"L{i}_mb{m}_{phase}_attn_{'out' if forward else 'in'}", forward, not forward)

    def _attention(self, i: int, m: int, phase: str) -> None:
        """Layer ``i``'s attention block of micro-batch ``m`` (phase fwd, recompute or bwd)."""
        prog = self.prog
        name, again = f"L{i}_mb{m}_{phase}_attn", phase == "recompute"
        if self.C == 1:
            attn = self._attn(i)
            ops = O.backward(attn) + self.accumulate[i] if phase == "bwd" else attn
            prog.comp(name, ops, recompute=again)
            return
        key = self._phase_key(i, m, phase)
        if phase != "bwd":
            prog.comp(f"{name}_qkv", self.pre, recompute=again)
            self._cp_attention(name, self.core, True, again, key)
            prog.comp(f"{name}_out", self.post, recompute=again)
        else:
            prog.comp(f"{name}_out", O.backward(self.post))
            self._cp_attention(name, O.backward(self.core)[::-1], False, False, key)
            prog.comp(f"{name}_qkv", O.backward(self.pre) + self.accumulate[i])

    def _cp_middle(self, name: str, mid: list[O.Op], forward: bool, again: bool, key: int) -> None:
        """What runs between the attention block's two tensor-parallel rings
        (--tp-comm-overlap) under context parallelism: backward, the output projection's
        weight gradient, then the attention core under context parallelism (Megatron-Core
        overlaps the two independently: Transformer Engine's userbuffers for the linear
        layers, its context-parallel communication for the core)."""
        head = [o for o in mid if o.kind != O.ATTENTION]
        if head:
            self.prog.comp(f"{name}_mid", head, recompute=again)
        core = self.core if forward else O.backward(self.core)[::-1]
        self._cp_attention(name, core, forward, again, key)

    def _cp_attention(self, name: str, steps: list[O.Op], forward: bool, again: bool, key: int) -> None:
        """One attention core's kernels ``steps`` under context parallelism, with the
        communication of ``cp_comm_type``."""
        if self.cfg.cp_comm_type == "all_gather":
            self._cp_all_gather(name, steps, forward, again)
        elif self.cfg.cp_comm_type == "a2a":
            self._cp_all_to_all(name, steps, forward, again)
        else:
            self._cp_ring(name, steps, forward, again, key)

    def _cp_ring(self, name: str, steps: list[O.Op], forward: bool, again: bool, key: int) -> None:
        """The context-parallel ring of one attention core (Transformer Engine's KV P2P):
        step j computes with the block received at step j - 1 while the next block is on
        its way; backward blocks carry the keys' and values' gradients too, and a last
        hop returns each gradient block to its owner."""
        C, kv_block = self.C, self.kv_block
        tags = CP_TAG + key * (C + 1)
        self._ring(f"{name}_cp", steps, kv_block if forward else 2 * kv_block, "cp", tags, True, again)
        if not forward:
            self.prog.send(f"{name}_dkv_send", kv_block, "cp_next", tags + C)
            self.prog.pending.append(self.prog.recv(f"{name}_dkv_recv", kv_block, "cp_prev", tags + C))

    def _cp_all_gather(self, name: str, steps: list[O.Op], forward: bool, again: bool) -> None:
        """One attention core over all-gathered keys and values (``cp_comm_type``
        ``all_gather``, Transformer Engine's ``AttnFuncWithCPAndKVAllGather``): the keys,
        then the values all-gathered over the context-parallel ranks, then the kernels,
        nothing overlapped; backward gathers them again and reduce-scatters their
        gradients (keys', then values') after the kernels."""
        model, prog = self.model, self.prog
        k_block = self.kv_block * model.qk_dim / (model.qk_dim + model.v_dim)
        blocks = (("k", k_block), ("v", self.kv_block - k_block))
        for tensor, size in blocks:
            prog.coll(f"{name}_cp_{tensor}_AG", _AG, size, "cp")
        prog.comp(f"{name}_cp", steps, recompute=again)
        if not forward:
            for tensor, size in blocks:
                prog.coll(f"{name}_cp_d{tensor}_RS", _RS, self.C * size, "cp")

    def _cp_all_to_all(self, name: str, steps: list[O.Op], forward: bool, again: bool) -> None:
        """One attention core under ``cp_comm_type`` ``a2a`` (Transformer Engine's
        ``AttnFuncWithCPAndQKVOA2A``, DeepSpeed-Ulysses): forward, the queries, keys and
        values each all-to-all'd over the context-parallel ranks (a rank's s / C tokens
        of every head for the whole sequence of H / C heads), the kernel, the output
        all-to-all'd back; backward, the output gradient in, the kernel, the queries',
        keys' and values' gradients out. Each all-to-all is of the rank's tensor, and
        nothing overlaps them."""
        model, prog = self.model, self.prog
        tokens = self.b * self.s  # this rank's s / C tokens
        heads, kv = model.heads / self.T, model.kv / self.T
        widths = {"q": heads * model.qk_dim, "k": kv * model.qk_dim, "v": kv * model.v_dim}
        qkv = [(tensor, tokens * width * O.BYTES) for tensor, width in widths.items()]
        out = [("out", tokens * heads * model.v_dim * O.BYTES)]
        before, after = (
            (qkv, out) if forward else ([("d" + t, b) for t, b in out], [("d" + t, b) for t, b in qkv])
        )
        for tensor, size in before:
            prog.coll(f"{name}_cp_{tensor}_A2A", _A2A, size, "cp")
        prog.comp(f"{name}_cp", steps, recompute=again)
        for tensor, size in after:
            prog.coll(f"{name}_cp_{tensor}_A2A", _A2A, size, "cp")

    # -- MLP and mixture of experts -------------------------------------------------------
    def _mlp(self, layer: int, m: int, forward: bool, phase: str | None = None) -> None:
        """Layer ``layer``'s MLP (or MoE) block of micro-batch ``m``; ``phase`` (default fwd
        or bwd by ``forward``) recompute for a forward pass run again."""
        phase = phase or ("fwd" if forward else "bwd")
        tag = f"L{layer}_mb{m}_{phase}"
        again = phase == "recompute"
        if self.model.is_moe_layer(layer):
            self._moe(tag, forward, again, layer)
            return
        ops = self.dense_mlp if forward else O.backward(self.dense_mlp)
        if self.overlap:
            self._overlapped(
                f"{tag}_mlp", "mlp", ops, forward, again, 2 * self._phase_key(layer, m, phase) + 1
            )
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

    def _moe(self, tag: str, forward: bool, again: bool, layer: int) -> None:
        """A mixture-of-experts block (node names ``tag``_...) as Megatron-core runs it
        (``token_dispatcher.py``): router and permutation, the dispatch of the tokens to
        their experts' ranks, the experts, the combine that returns their outputs, the
        unpermutation (:func:`.ops.moe_ops`); backward in reverse. The dispatcher
        (:meth:`_moe_dispatch`, :meth:`_moe_combine`) is the all-to-all one or the
        all-gather one; with unbalanced routing or a capacity (``rows_to``) each
        expert-parallel index has its own bytes and expert work."""
        if forward:
            self._moe_front(tag, True, again)
            self._moe_dispatch(tag, True, layer)
            self._moe_experts(tag, True, again, layer)
            self._moe_back(tag, True, again, layer)
        else:
            self._moe_back(tag, False, again, layer)
            self._moe_experts(tag, False, again, layer)
            self._moe_dispatch(tag, False, layer)
            self._moe_front(tag, False, again)

    def _moe_front(self, tag: str, forward: bool, again: bool) -> None:
        """The MoE block's input side: its tensor-parallel edge and the router with the
        permutation (backward in reverse)."""
        if forward:
            self._moe_edge(f"{tag}_moe_in", True, True)
            self.prog.comp(f"{tag}_router", self.router, recompute=again)
        else:
            self.prog.comp(f"{tag}_router", O.backward(self.router))
            self._moe_edge(f"{tag}_moe_in", False, True)

    def _moe_back(self, tag: str, forward: bool, again: bool, layer: int) -> None:
        """The MoE block's output side: the combine, the unpermutation and the
        tensor-parallel edge (backward in reverse)."""
        if forward:
            self._moe_combine(tag, True, layer)
            self.prog.comp(f"{tag}_combine", self.combine, recompute=again)
            self._moe_edge(f"{tag}_moe_out", True, False)
        else:
            self._moe_edge(f"{tag}_moe_out", False, False)
            self.prog.comp(f"{tag}_combine", O.backward(self.combine))
            self._moe_combine(tag, False, layer)

    def _flex_dispatch(self) -> FlexDispatch | None:
        """The token-based dispatch of the flex dispatcher over the expert-parallel ranks
        (None: another dispatcher, or no expert parallelism); the network's first
        dimension is the NVLink domain."""
        cfg = self.cfg
        if cfg.moe_token_dispatcher != "flex" or cfg.ep == 1 or not self.model.experts:
            return None
        stride = 1 if self.folded else self.T * self.C
        domain = cfg.dims[0] if cfg.dims else 0
        backend = cfg.moe_flex_dispatcher_backend
        return FlexDispatch.of(self.model.experts, self.model.top_k, cfg.ep, stride, domain, backend)

    def _flex_a2a(self, name: str, extra_bytes: float = 0.0) -> None:
        """One token-based all-to-all (dispatch or combine; balanced routing makes both
        ways alike): each token's hidden state (and ``extra_bytes``) once to every rank
        that needs it, forwarded within NVLink groups (:class:`.FlexDispatch`); an even
        all-to-all when the whole group shares one NVLink group."""
        flex = self.flex
        assert flex is not None
        rows = self.b * self.s / self.T
        row_bytes = self.model.hidden * O.BYTES + extra_bytes
        sms = self.cfg.moe_flex_sms or FLEX_SMS[self.cfg.moe_flex_dispatcher_backend]
        if flex.groups == 1:
            self.prog.coll(name, _A2A, flex.ep * rows * flex.rank_share * row_bytes, "ep", sms=sms)
            return
        splits = self._flex_splits.get(row_bytes)
        if splits is None:  # one list for every layer's (the nodes share it)
            splits = self._flex_splits[row_bytes] = []
            for q in range(flex.ep):
                sizes = tuple(round(r * row_bytes) for r in flex.rows_to(q, rows))
                splits.append((sizes, sizes))
        self.prog.uneven_all_to_all(name, splits, sms)

    def _moe_edge(self, name: str, forward: bool, at_input: bool) -> None:
        """The block's tensor-parallel communication (:meth:`_tp_comm`); the all-gather
        dispatcher gathers over the tensor- and expert-parallel ranks itself, and folded
        experts (expert-tensor parallelism 1) take each rank's sequence-parallel tokens."""
        if self.cfg.moe_token_dispatcher != "allgather" and not self.folded:
            self._tp_comm(name, forward, at_input)

    def _moe_experts(self, tag: str, forward: bool, again: bool, layer: int, part: str = "") -> None:
        """The experts' kernels: the same on every rank, or each expert-parallel index's
        own (its rows, :meth:`_routed_experts_ops`). Backward, ``part`` "dgrad" keeps all
        but the weight-gradient GEMMs and "wgrad" those alone (``--delay-wgrad-compute``)."""
        name = f"{tag}_experts" + ("_wgrad" if part == "wgrad" else "")
        if layer not in self.rows_to:
            ops = self.experts if forward else _backward_part(self.experts, part)
            self.prog.comp(name, ops, recompute=again and forward)
            return
        per_index = self._routed_experts_ops(layer)
        if not forward:
            per_index = [_backward_part(ops, part) for ops in per_index]
        self.prog.comp_by_ep(name, per_index, recompute=again and forward)

    def _routed_experts_ops(self, layer: int) -> list[list[O.Op]]:
        """Per expert-parallel index ``q``: its experts' kernels on ``ep R[q]`` rows, where
        every rank sends index ``q`` its ``R[q]`` assignment rows (``rows_to``)."""
        experts = self._routed_experts.get(layer)
        if experts is None:
            ep = self.cfg.ep
            experts = self._routed_experts[layer] = [
                O.moe_ops(self.model, self.b, self.s, self.T, self.sp, ep, self.cfg.dropout, ep * r)[1]
                for r in self.rows_to[layer]
            ]
        return experts

    def _moe_dispatch(self, tag: str, forward: bool, layer: int) -> None:
        """Tokens to their experts (forward) and their gradients back (backward).

        All-to-all (``MoEAlltoAllTokenDispatcher``), over the E expert-parallel ranks
        (E > 1): the all-gather of each rank's token count per expert (the all-to-all's
        splits), the all-to-all of the tokens and the one of their FP32 routing
        probabilities; each rank's own bytes to and from each member when ``rows_to``
        has the layer (uneven all-to-alls). All-gather (``MoEAllGatherTokenDispatcher``),
        over the T x E tensor- and expert-parallel ranks: every rank's routing map (one
        byte per token and expert), its probabilities (FP32, per token and expert) and
        its tokens; backward the probabilities' and tokens' gradients reduce-scattered."""
        prog, model = self.prog, self.model
        rows = self.b * self.s / self.T  # this rank's tokens
        if self.cfg.moe_token_dispatcher == "allgather":
            every = rows * self.T * self.cfg.ep  # the gathered tokens
            if forward:
                prog.coll(f"{tag}_map_AG", _AG, rows * model.experts, "tp_ep")
                prog.coll(f"{tag}_probs_AG", _AG, 4 * rows * model.experts, "tp_ep")
                prog.coll(f"{tag}_dispatch_AG", _AG, rows * model.hidden * O.BYTES, "tp_ep")
            else:
                prog.coll(f"{tag}_probs_RS", _RS, 4 * every * model.experts, "tp_ep")
                prog.coll(f"{tag}_dispatch_RS", _RS, every * model.hidden * O.BYTES, "tp_ep")
            return
        if self.cfg.ep == 1:
            return
        if forward:
            prog.coll(f"{tag}_counts_AG", _AG, 8 * model.experts, "ep")
        if self.flex:  # the tokens with their top-k indices (int64) and probabilities (FP32)
            self._flex_a2a(f"{tag}_dispatch_A2A", 12 * model.top_k if forward else 0.0)
            return
        tokens, probs = self._a2a_bytes(layer)
        for name, sizes in (("dispatch", tokens), ("probs", probs))[:: 1 if forward else -1]:
            self._a2a(f"{tag}_{name}_A2A", sizes, toward_experts=forward)

    def _moe_combine(self, tag: str, forward: bool, layer: int) -> None:
        """The experts' outputs back to their tokens' ranks (forward) and their gradients
        to the experts (backward): the all-to-all of the tokens, or under the all-gather
        dispatcher the reduce-scatter of the unpermuted outputs in FP32 (backward: the
        all-gather of their gradients, FP32)."""
        rows = self.b * self.s / self.T
        if self.cfg.moe_token_dispatcher == "allgather":
            every = rows * self.T * self.cfg.ep
            if forward:
                self.prog.coll(f"{tag}_combine_RS", _RS, 4 * every * self.model.hidden, "tp_ep")
            else:
                self.prog.coll(f"{tag}_combine_AG", _AG, 4 * rows * self.model.hidden, "tp_ep")
            return
        if self.flex:
            self._flex_a2a(f"{tag}_combine_A2A")
        elif self.cfg.ep > 1:
            self._a2a(f"{tag}_combine_A2A", self._a2a_bytes(layer)[0], toward_experts=not forward)

    def _a2a_bytes(self, layer: int) -> tuple:
        """(token bytes, probability bytes) of an all-to-all of the layer: one size per
        rank (balanced routing, dropless), or the bytes every rank sends each
        expert-parallel index (``rows_to``)."""
        model = self.model
        if layer not in self.rows_to:
            assigned = self.b * self.s * model.top_k / self.T
            return assigned * model.hidden * O.BYTES, 4 * assigned
        sent = self.rows_to[layer]
        return [round(r * model.hidden * O.BYTES) for r in sent], [round(4 * r) for r in sent]

    def _a2a(self, name: str, sizes, toward_experts: bool) -> None:
        """An all-to-all over the expert-parallel ranks: of ``sizes`` bytes per rank, or,
        ``sizes`` a list, uneven: every rank sends index ``j`` ``sizes[j]`` toward the
        experts (so index ``q`` receives ``sizes[q]`` from each), the other way back."""
        if not isinstance(sizes, list):
            self.prog.coll(name, _A2A, sizes, "ep")
            return
        ep = self.cfg.ep
        splits = [(tuple(sizes), (sizes[q],) * ep) for q in range(ep)]
        if not toward_experts:
            splits = [(recv, send) for send, recv in splits]
        self.prog.uneven_all_to_all(name, splits)

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
                self._tp_amax(name)
                self.prog.coll(f"{name}_AG", _AG, self.act / T, "tp")
            else:
                self.prog.coll(f"{name}_RS", _RS, self.act, "tp")
        elif forward != at_input:  # Megatron's g (forward output) and f (backward input) all-reduces
            self.prog.coll(f"{name}_AR", _AR, self.act, "tp")

    def _tp_amax(self, name: str) -> None:
        """FP8 current scaling under sequence parallelism: the tensor all-gathered in FP8
        over the tensor-parallel ranks (a column-parallel GEMM's input forward, a
        row-parallel GEMM's output gradient backward) needs one scale on all of them, so
        Transformer Engine all-reduces (MAX) its FP32 amax over the group first and waits
        for it (``with_amax_reduction``, ``amax_reduction_group = tp_group`` in
        ``module/linear.py``; ``->wait()`` in ``quantizer.cpp``)."""
        if self.cfg.precision == "fp8" and self.cfg.fp8_recipe == "tensorwise":
            self.prog.coll(f"{name}_amax_AR", _AR, 4, "tp")

    def _column_backward(
        self, name: str, ops: list[O.Op], extra: Sequence[O.Op] = (), bulk: tuple[str, str] | None = None
    ) -> None:
        """The backward of a block's first (column-parallel) GEMM under sequence parallelism,
        ``ops`` = [data gradient, weight gradient, the rest]: Megatron-LM all-gathers the
        block's input again for the weight gradient while the data gradient runs, then
        reduce-scatters the data gradient while the weight gradient runs
        (``LinearWithGradAccumulationAndAsyncCommunication``); under --tp-comm-overlap
        Transformer Engine's bulk overlaps named ``bulk`` (the gather's, the scatter's)
        run them (:meth:`_bulk`). The rest (the layer norm's backward) needs the scattered
        gradient."""
        prog = self.prog
        gather, scatter = bulk or ("", "")
        sms, slowdown = self._bulk(gather)
        gathered = prog.coll(f"{name}_input_AG", _AG, self.act_shard, "tp", False, sms=sms)
        prog.comp(f"{name}_dgrad", ops[:1], slowdown=slowdown)
        sms, slowdown = self._bulk(scatter)
        scattered = prog.coll(f"{name}_in_RS", _RS, self.act, "tp", False, sms=sms)
        prog.pending.append(gathered)
        prog.comp(f"{name}_wgrad", ops[1:2], slowdown=slowdown)
        prog.pending.append(scattered)
        if ops[2:] or extra:
            prog.comp(f"{name}_post", ops[2:] + list(extra))

    def _bulk(self, overlap: str) -> tuple[int, float]:
        """:meth:`_ub_sms` of Transformer Engine's bulk overlap ``overlap``; "": NCCL's own
        kernels (0, 1)."""
        return self._ub_sms(self.ub[overlap]) if overlap else (0, 1.0)

    def _ub_sms(self, ub: GemmOverlap) -> tuple[int, float]:
        """(the collective's SMs, the GEMM's slowdown) of a userbuffers overlap: its kernel's
        SMs beside the GEMM (the contention model slows the GEMM while it runs), or with
        ``set_sm_margin`` the GEMM on the SMs it leaves for its whole run."""
        if ub.sm_margin:
            return RESERVED_SMS, self.cfg.gpu.margin_slowdown(ub.sms)
        return ub.sms, 1.0

    def _sp_backward(self, name: str, ops: list[O.Op], extra: Sequence[O.Op] = ()) -> None:
        """A dense block's backward kernels under sequence parallelism (the output gradient
        already gathered): up to the first GEMM's, then :meth:`_column_backward`."""
        _, last = _gemm_positions(ops, False)
        self.prog.comp(name, ops[:last])
        self._column_backward(name, ops[last:], extra)

    def _overlapped(
        self,
        name: str,
        block: str,
        ops: list[O.Op],
        forward: bool,
        again: bool,
        key: int,
        extra: Sequence[O.Op] = (),
        middle: Callable[[list[O.Op]], None] | None = None,
    ) -> None:
        """A dense ``block``'s (attn or mlp) kernels with its tensor-parallel communication
        overlapped as Transformer Engine's userbuffers run it (:mod:`.userbuffers`):
        forward an all-gather in a ring of T steps (:meth:`_ring`) beside the first GEMM
        and a reduce-scatter beside the last, in a ring or pipelined
        (:meth:`_pipelined_reduce_scatter`); backward a ring all-gather of the output
        gradient beside the first data-gradient GEMM, then :meth:`_column_backward` with
        the block's bulk overlaps. ``extra`` kernels run at the end; ``middle(ops)`` runs
        the kernels between the rings (default: one compute node)."""
        prog, T = self.prog, self.T
        front, back = _UB_GEMMS[block]
        first, last = _gemm_positions(ops, forward)
        if ops[:first]:
            prog.comp(f"{name}_pre", ops[:first], recompute=again)
        steps = ((first, True, front), (last, False, back)) if forward else ((first, True, back),)
        for j, gather, gemm in steps:
            if gather:
                self._tp_amax(name)
            ub = self.ub[f"{gemm}_{'fprop' if forward else 'dgrad'}"]
            prefix = f"{name}_{'ag' if gather else 'rs'}_tp"
            if ub.method == "pipeline":
                self._pipelined_reduce_scatter(prefix, ops[j], ub, again)
            else:
                tags = TP_TAG + (2 * key + (not gather)) * (T + 1)
                blocks = [_row_block(ops[j], T)] * T
                self._ring(prefix, blocks, self.act_shard, "tp", tags, gather, again, self._ub_sms(ub)[1])
            if gather and ops[first + 1 : last]:
                if middle is None:
                    prog.comp(f"{name}_mid", ops[first + 1 : last], recompute=again)
                else:
                    middle(ops[first + 1 : last])
        if not forward:
            self._column_backward(name, ops[last:], extra, (f"{front}_dgrad", f"{front}_wgrad"))
        elif ops[last + 1 :] or extra:
            prog.comp(f"{name}_post", ops[last + 1 :] + list(extra), recompute=again)

    def _pipelined_reduce_scatter(self, prefix: str, op: O.Op, ub: GemmOverlap, again: bool) -> None:
        """GEMM ``op`` and the reduce-scatter of its output as Transformer Engine's
        ``pipeline`` overlap (``split_overlap_rs``): the GEMM in ``ub.splits`` row blocks,
        each block's reduce-scatter a userbuffers kernel on ``ub.sms`` SMs beside the next
        block (with ``set_sm_margin`` the blocks run on the SMs it leaves); what follows
        waits for every scatter."""
        prog, n = self.prog, ub.splits
        block = _row_block(op, n)
        sms, slowdown = self._ub_sms(ub)
        scattered = []
        for j in range(n):
            prog.comp(f"{prefix}{j}", [block], recompute=again, slowdown=slowdown)
            scattered.append(prog.coll(f"{prefix}{j}_RS", _RS, self.act / n, "tp", False, sms=sms))
        prog.pending.extend(h for h in scattered if h is not None)

    def _ring(
        self,
        prefix: str,
        blocks: list[O.Op],
        size: float,
        role: str,
        tags: int,
        gather: bool,
        again: bool,
        slowdown: float = 1.0,
    ) -> None:
        """Kernels ``blocks`` overlapped with a ring of as many steps over the ``role`` group.
        ``gather``: each step computes with what arrived at the step before while it sends
        that on (an all-gather beside the kernels); otherwise each step's result goes on once
        computed, with what came in added (a reduce-scatter). Tags ``tags`` + step; each
        kernel ``slowdown`` times as long (launched on fewer SMs)."""
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
            prog.comp(f"{prefix}{j}", [block], recompute=again, slowdown=slowdown)
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

    def _weights(self, layer: int, m: int, v: int, forward: bool) -> int | None:
        """The gather of ``layer``'s weights that its pass over micro-batch ``m`` (chunk ``v``)
        waits for: every pass under ZeRO 3, the chunk's first forward under
        ``overlap_param_gather`` (started now without interleaving, with the chunk under
        it: :meth:`_start_gathers`); None where there is none."""
        if self.cfg.zero == 3:
            return self._zero3_gather(layer, f"mb{m}_{'fwd' if forward else 'bwd'}")
        if not (self.cfg.overlap_param_gather and forward and m == self.first_forward[v]):
            return None
        if self.V > 1:
            return self._chunk_gathers[v][layer]
        return self._layer_gather(layer)

    def _layer_gather(self, layer: int) -> int | None:
        """The all-gather of ``layer``'s updated weights (dense, then expert), started now."""
        d, e = self.params[layer]
        b, prog = self.cfg.param_gather_bytes, self.prog
        h = prog.param_gather(f"L{layer}_params_AG", d * b / self.dense_dp, "dp")
        return prog.param_gather(f"L{layer}_experts_AG", e * b / self.edp, "edp") or h

    def _start_gathers(self, m: int, v: int) -> int | None:
        """Under ``overlap_param_gather``, what a chunk's first forward pass starts: before
        chunk 0's, the gather of the stage's embedding and output layer (``edge``, its handle
        returned); with interleaving, whole chunks' gathers as Megatron-core's interleaved
        schedule launches them (``param_sync_func``, with ``align_param_gather``, its default):
        chunks 0 and 1 at the step's start, chunk v + 1 as chunk v's first forward starts
        (``forward_step_helper_preprocess``). Without interleaving each layer's gather starts
        as the layer before it starts (the forward pre-hooks; :meth:`_weights`)."""
        if not (self.cfg.overlap_param_gather and m == self.first_forward[v]):
            return None
        edge = None
        if v == 0:
            b = self.cfg.param_gather_bytes
            edge = self.prog.param_gather("edge_params_AG", self.edge * b / self.dense_dp, "dp")
        if self.V > 1:
            for chunk in (v, v + 1):
                if chunk < self.V and chunk not in self._chunk_gathers:
                    # multi-token prediction's layers run after the last chunk's
                    layers = [*self.chunk_layers(chunk), *(self.mtp if chunk == self.V - 1 else ())]
                    self._chunk_gathers[chunk] = {i: self._layer_gather(i) for i in layers}
        return edge

    def _zero3_gather(self, layer: int, phase: str) -> int | None:
        """FSDP: gather a layer's weights; each rank contributes its 1/(D C) (1/(D/E)) shard."""
        d, e = self.params[layer]
        b = self.cfg.param_gather_bytes
        h = self.prog.coll(f"L{layer}_{phase}_params_AG", _AG, d * b / self.dense_dp, "dp", False)
        if e:
            h = self.prog.coll(f"L{layer}_{phase}_experts_AG", _AG, e * b / self.edp, "edp", False) or h
        return h

    # -- after the backward passes -------------------------------------------------------------
    def _tied_embedding_grads(self) -> None:
        """Tied embeddings, or multi-token prediction, with P > 1: the first and last stage
        all-reduce the embedding gradient (Megatron's embedding group)."""
        model = self.model
        shared = model.tie_embeddings or self.cfg.mtp_layers  # multi-token prediction embeds too
        if shared and model.vocab and self.P > 1 and (self.first or self.last):
            size = model.vocab * model.hidden / self.T * self.cfg.grad_bytes
            h = self.prog.grad_coll("embedding_grads_AR", _AR, size, "emb")
            if h is not None:
                self.grads.handles.append(h)

    def _optimizer(self) -> tuple[list[StageNode], float, float]:
        """The optimizer step once every gradient is reduced (on a 1/(D C) shard with ZeRO >= 1,
        whose updated weights ZeRO 1-2 then all-gather); return the nodes and this rank's
        dense and expert gradient bytes."""
        cfg, prog, dense, expert, edp = self.cfg, self.prog, self.dense, self.expert, self.edp
        shard = self.dense_dp if cfg.zero >= 1 else 1
        eshard = edp if cfg.zero >= 1 else 1
        local = dense / shard + expert / eshard
        buffer = dense + expert if cfg.zero < 2 else local  # ZeRO 2-3 keep only their gradient shard
        ops = O.optimizer_ops(local, buffer, cfg.precision, cfg.grad_bytes, cfg.ddp)
        prog.comp("optimizer", ops, *self.grads.handles)
        # each rank updated its 1/(D C) shard: all-gather input = the shard (--overlap-param-gather:
        # gathered in the next forward pass instead, :meth:`_weights`)
        if cfg.zero in (1, 2) and not cfg.overlap_param_gather:
            b = cfg.param_gather_bytes
            prog.coll("params_AG", _AG, dense * b / self.dense_dp, "dp")
            if expert:
                prog.coll("expert_params_AG", _AG, expert * b / edp, "edp")
        dense_bytes = dense * cfg.grad_bytes if self.dense_dp > 1 else 0
        expert_bytes = expert * cfg.grad_bytes if edp > 1 else 0
        return prog.nodes, dense_bytes, expert_bytes
