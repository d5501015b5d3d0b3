"""The time of one engine step of a replica: a forward pass over the step's tokens.

vLLM's v1 engine runs every scheduled request of a step in one forward pass: their new
tokens (whole or chunked prompts, one token per decoding request) flattened into one
batch of ``T`` tokens through every linear layer, attention per request over its own
KV cache, and the logits of the requests that sample a token this step. Its time, on
one of the replica's ``tp`` GPUs, from the same kernel model as a training step
(:mod:`astra_core.workload.generators.kernels`):

* **linear layers and the kernels between them**: the forward kernels of a Megatron-LM
  layer at ``T`` tokens (:func:`~astra_core.workload.generators.ops.attention_ops` without
  the attention core, :func:`~astra_core.workload.generators.ops.mlp_ops`), each layer's
  GEMMs timed by the measured table or the GEMM model and bounded below by reading the
  weights; a mixture-of-experts layer runs its router and each expert that receives a
  token (``E (1 - (1 - k/E)^T)`` of the ``E`` experts on average when each token picks
  ``k`` at random; vLLM's fused MoE kernel skips experts without tokens), each expert's
  weights split over the GPUs (vLLM's default), or under expert parallelism
  (``--enable-expert-parallel`` without data parallelism) each GPU holding ``1/tp`` of
  the experts whole and computing their share of every token's assignments, the outputs
  summed by the same all-reduce; with data-parallel attention (``dp`` engines of one
  GPU each stepping together) :meth:`StepClock.group_step_ns`;
* **attention**: a prompt chunk of ``q`` tokens after ``c`` cached ones executes
  ``4 q (c + (q + 1) / 2) (heads / tp) d`` FLOPs (causal) at the measured forward rate
  of the fused kernel (:func:`~astra_core.workload.generators.kernels.attention_tflops`
  with ``forward``) for a square of the same area; a decoding request reads its
  whole KV cache once, at the streaming rate (``memory_rate(gpu, STREAM)``); layers
  with a sliding window see at most the window (a chunk of one token counts as a read);
* **logits and sampling**: the final norm over ``T``, the output projection of the
  ``S`` sampling requests' last tokens (vocabulary split over ``tp``) and the sampler's
  passes over their FP32 logits (:data:`SAMPLER_BYTES`);
* **collectives**: two all-reduces of ``T x hidden`` 16-bit values per layer and the
  all-gather of the ``S x vocab`` logits over the tensor-parallel group, each timed by
  :class:`~astra_core.serve.collectives.CollectiveClock` on the deployment's network.

Every kernel costs at least :data:`GRAPH_KERNEL_NS`: vLLM replays the forward pass as
CUDA graphs (``torch.compile`` with piecewise graphs, v1's default), where one kernel's
launch costs what the H200 measured per kernel of a replayed graph
(``measured/h200_kernels.json``, ``launch.graph_kernel_us``). The host's scheduling
time per step is not counted.

The step's work is a :class:`StepWork`; :meth:`StepClock.step_ns` is its time [ns].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from astra_core.serve.collectives import CollectiveClock
from astra_core.serve.deployment import Deployment, kv_bytes_per_token
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators import ops as O
from astra_core.workload.generators.kernels import (
    attention_tflops,
    kernel_ns,
    memory_rate,
    without_grouped_rate,
)

__all__ = ["GRAPH_KERNEL_NS", "SAMPLER_BYTES", "StepClock", "StepWork"]

#: One kernel's launch inside a replayed CUDA graph [ns]: 0.893 us per kernel on an H200
#: (``measured/h200_kernels.json``, ``launch.graph_kernel_us``).
GRAPH_KERNEL_NS = 893.0
#: Bytes per logit of the sampler: the cast of the 16-bit logits to FP32 (2 + 4), the
#: softmax over them (4 + 4) and the draw reading the probabilities (4).
SAMPLER_BYTES = 18.0


@dataclass
class StepWork:
    """One step's work on a replica: ``chunks``, the prompt chunks ``(new tokens,
    tokens cached before them)`` of requests still in their prompt; ``decodes``: requests
    decoding one token; ``decode_context``: the tokens their KV caches hold together
    (each request's cached tokens, the new one included); ``samples``: requests that
    sample a token this step (decoders and prompts whose last chunk this is)."""

    chunks: list[tuple[int, int]] = field(default_factory=list)
    decodes: int = 0
    decode_context: int = 0
    samples: int = 0

    @property
    def tokens(self) -> int:
        return sum(q for q, _ in self.chunks) + self.decodes


class StepClock:
    """Step times of ``deployment``'s replicas, tensor-parallel collectives timed by
    ``collectives`` (None: one GPU per engine, no collective) and, with data-parallel
    attention (``dp`` > 1), the MoE layers' dispatch and combine over the data-parallel
    group by ``dp_collectives``."""

    def __init__(
        self, deployment: Deployment, collectives: CollectiveClock | None = None,
        dp_collectives: CollectiveClock | None = None,
    ):  # fmt: skip
        self.d = deployment
        self.collectives = collectives
        self.dp_collectives = dp_collectives
        self._layers: dict[int, float] = {}  # by tokens
        self._logits: dict[int, float] = {}  # by sampling requests
        self._moe: dict[int, float] = {}  # one MoE layer's experts, by tokens
        m, t = deployment.model, deployment.tp
        self._heads = m.heads / t
        self._head_dim = (m.qk_dim + m.v_dim) / 2
        self._decode_rate = memory_rate(deployment.gpu, O.STREAM)
        # vLLM runs a mixture-of-experts layer's experts in its own fused MoE kernel, not
        # Transformer Engine's grouped GEMM whose rate ``grouped_fp8_tflops`` measures
        self._gpu = without_grouped_rate(deployment.gpu)
        self._kv_per_layer = kv_bytes_per_token(deployment) / m.layers  # one token, one layer
        self._moe_layers = sum(1 for layer in range(m.layers) if m.is_moe_layer(layer))
        windows: dict[int, int] = {}
        for layer in range(m.layers):
            windows[m.window(layer)] = windows.get(m.window(layer), 0) + 1
        self._windows = sorted(windows.items())

    def step_ns(self, work: StepWork) -> float:
        """Time [ns] of one step doing ``work`` (module docstring)."""
        tokens = work.tokens
        if tokens == 0:
            return 0.0
        if tokens not in self._layers:
            self._layers[tokens] = self._layers_ns(tokens)
        if work.samples not in self._logits:
            self._logits[work.samples] = self._logits_ns(work.samples)
        return self._layers[tokens] + self._attention_ns(work) + self._logits[work.samples]

    def group_step_ns(self, works: list[StepWork]) -> float:
        """Time [ns] of one step of a data-parallel group: its ``dp`` engines, each doing its
        ``works[i]`` (none: a dummy pass), step together. Each MoE layer gathers every
        engine's tokens (hidden states and router logits) to every GPU, runs the GPU's
        experts on the assignments routed to them, and reduce-scatters the outputs back
        (vLLM 0.11's default ``allgather_reducescatter`` dispatch); the rest of the step is
        the slowest engine's."""
        if len(works) == 1:
            return self.step_ns(works[0])
        tokens = [w.tokens for w in works]
        total = sum(tokens)
        if total == 0:
            return 0.0
        slowest = max(self.step_ns(w) if w.tokens else 0.0 for w in works)
        m = self.d.model
        moe = self._moe_ns(total)
        if self.dp_collectives is not None:
            moe += self.dp_collectives.time_ns(pb.ALL_GATHER, total * (m.hidden + m.experts) * O.BYTES)
            moe += self.dp_collectives.time_ns(pb.REDUCE_SCATTER, total * m.hidden * O.BYTES)
        return slowest + self._moe_layers * moe

    def _kernel(self, op: O.Op) -> float:
        return max(kernel_ns(self._gpu, op, O.kernel_precision(op, self.d.precision)), GRAPH_KERNEL_NS)

    def _layers_ns(self, tokens: int) -> float:
        """Every layer's kernels but attention's core, and its two all-reduces, at ``tokens``."""
        m, t = self.d.model, self.d.tp
        around = [op for op in O.attention_ops(m, 1, tokens, t, False) if op.kind != O.ATTENTION]
        attention = sum(self._kernel(op) for op in around)
        dense = (
            sum(self._kernel(op) for op in O.mlp_ops(m, 1, tokens, t, False))
            if m.dense_layers or not m.experts
            else 0.0
        )
        moe = self._moe_ns(tokens) if m.experts and self.d.dp == 1 else 0.0  # dp > 1: group_step_ns
        total = m.layers * attention + (m.layers - self._moe_layers) * dense + self._moe_layers * moe
        total += self._kernel(O.embedding_ops(m, 1, tokens, t, False)[0])
        total += self._kernel(O.norm_op("ln_final", tokens, m.hidden, t, False))
        if self.collectives is not None:
            total += 2 * m.layers * self.collectives.time_ns(pb.ALL_REDUCE, tokens * m.hidden * O.BYTES)
        return total

    def _moe_ns(self, tokens: int) -> float:
        if tokens not in self._moe:
            self._moe[tokens] = sum(self._kernel(op) for op in self.moe_ops(tokens))
        return self._moe[tokens]

    def moe_ops(self, tokens: int) -> list[O.Op]:
        """One MoE layer's norm, router, experts that receive tokens, and residual add: all
        experts at ``1/tp`` of their width, or under expert parallelism ``1/tp`` of the
        experts whole, receiving ``1/tp`` of the assignments."""
        m, t = self.d.model, self.d.tp
        share = 1.0 / (t * self.d.dp) if self.d.expert_parallel else 1.0
        touched = share * m.experts * (1.0 - (1.0 - m.top_k / m.experts) ** tokens)
        rows = share * tokens * m.top_k
        f, ups = m.expert_ffn_hidden / (1 if self.d.expert_parallel else t), m.mlp_matrices - 1
        h = m.hidden
        ops = [
            O.norm_op("ln_moe", tokens, h, t, False),
            O.gemm_op("router", tokens, m.experts, h),
            O.gemm_op("experts_up", rows / touched, ups * f, h, touched),
            O.Op("experts_act", 4.0 * rows * f, 3 * O.BYTES * rows * f, O.MEMORY),
            O.gemm_op("experts_down", rows / touched, h, f, touched),
            O.Op("moe_combine", rows * h, O.BYTES * (rows + tokens) * h, O.MEMORY),
        ]
        if m.shared_experts:
            ops += O.mlp_ops(
                m, 1, tokens, t, False, width=m.expert_ffn_hidden, count=m.shared_experts, name="shared"
            )[1:4]
        return ops

    def _attention_ns(self, work: StepWork) -> float:
        """Every layer's attention core for the step's prompt chunks and decoders."""
        gpu, heads, d = self.d.gpu, self._heads, self._head_dim
        total = 0.0
        for window, layers in self._windows:
            compute, context = 0.0, work.decode_context
            for q, cached in work.chunks:
                if q == 1:  # one query (a prompt's last token after a remote prefill): a read
                    context += cached + 1
                    continue
                keys = cached + (q + 1) / 2
                if window:
                    keys = min(keys, window)
                flops = 4.0 * q * keys * heads * d
                rate = attention_tflops(gpu, True, d, math.sqrt(q * (cached + q)), forward=True) * 1e3
                compute += flops / rate
            if window:
                context = min(context, (work.decodes + sum(1 for q, _ in work.chunks if q == 1)) * window)
            reads = context * self._kv_per_layer / self._decode_rate
            kernels = (1 if work.chunks else 0) + (1 if work.decodes else 0)
            total += layers * max(compute + reads, kernels * GRAPH_KERNEL_NS)
        return total

    def _logits_ns(self, samples: int) -> float:
        """Output projection and sampler of ``samples`` rows, and the logits' all-gather."""
        m, t = self.d.model, self.d.tp
        if not samples:
            return 0.0
        total = self._kernel(O.gemm_op("lm_head", samples, m.vocab / t, m.hidden))
        total += self._kernel(
            O.Op("sampler", 5.0 * samples * m.vocab, SAMPLER_BYTES * samples * m.vocab, O.MEMORY)
        )
        if self.collectives is not None:
            total += self.collectives.time_ns(pb.ALL_GATHER, samples * m.vocab * O.BYTES)
        return total
