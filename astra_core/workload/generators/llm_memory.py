"""Peak device memory of each pipeline stage of an ``astra gen llm`` step, per rank.

What PyTorch's caching allocator holds at the step's peak (``torch.cuda.max_memory_allocated``,
what Megatron-LM logs as ``mem-max-allocated-bytes``), in bytes, per rank of stage ``p``:

**Model state** (Megatron-core's mixed-precision Adam, its distributed-optimizer guide,
``docs/source/api-guide/dist_optimizer.md``: 18 bytes per parameter for BF16 with FP32
gradients, 6 + 12/d with the distributed optimizer; 20 and 4 + 16/d for FP16; ZeRO's
stages, Rajbhandari et al. SC'20, section 5):

* weights: 2 bytes per parameter (16-bit), plus Transformer Engine's cached FP8 copy of
  each linear weight and its transpose under FP8 (1 + 1 bytes; MXFP8 adds a scale per
  32 elements to each), sharded over d with ZeRO 3; with ``fp8_param_gather`` the linear
  weights are FP8 tensors alone, without the 16-bit copy (Megatron-core's
  ``fp8_param_gather``: "keep the compute param in fp8");
* gradients: the gradient buffer's bytes per element (:attr:`.llm.LLMConfig.grad_bytes`:
  FP32 for BF16, 16-bit for FP16 or ``--grad-reduce-in-bf16``), sharded with ZeRO 2-3;
* optimizer: FP32 master weights and Adam's two moments (12 bytes), plus an FP32 copy of
  the gradients where the buffer is 16-bit (4), sharded with ZeRO 1-3 (Megatron-core's
  distributed optimizer is ZeRO 1).

d is the data-parallel group the state is sharded over: D x C ranks for dense parameters,
the expert-data-parallel ranks for routed experts (:mod:`.layout`).

**Activations**: the tensors each layer saves for its backward pass, per micro-batch
(:func:`layer_activation_bytes`: Korthikanti et al., "Reducing Activation Recomputation in
Large Transformer Models", MLSys 2023, section 4, counted tensor by tensor for GQA, SwiGLU,
FlashAttention, MoE, MLA and FP8 as Megatron-core with Transformer Engine saves them),
plus the embedding's and the loss's (:func:`edge_activation_bytes`), summed over the model
chunks whose forward pass has run and backward has not, at the worst point of the stage's
own pipeline schedule (:mod:`.pipeline`: 1F1B holds P - p micro-batches on stage p; the
interleaved schedule ``2 (P - p - 1) + (V - 1) P + 1`` chunks).

**Transient**: the largest short-lived buffers beside that peak: one layer's backward
working set (its gathered input and the gradients of its widest tensors; under full
recomputation the recomputed layer's activations), the loss's 16-bit logits beside their
FP32 copy on the last stage, and ZeRO 3's gathered weights of two layers (the layer and the
one prefetched).

**Workspaces**: the cuBLAS workspaces PyTorch's allocator holds: PyTorch's own, one per
stream (``aten/src/ATen/cuda/CublasHandlePool.cpp``: 32 MiB on compute capability 9.0,
2 x 4 MiB + 8 x 16 KiB elsewhere), Transformer Engine's (``get_cublas_workspace_size_bytes``:
32 MiB from compute capability 9.0, 4 MiB before) and, for MoE's grouped GEMMs, its four
multi-stream ones (``get_num_cublas_streams``).

Not counted: CUDA context and NCCL's buffers (outside PyTorch's allocator), the allocator's fragmentation, and tensors smaller than one per token
(norm statistics, routing indices, RNG states).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from astra_core.errors import ConfigError
from astra_core.workload.generators.layout import experts_folded
from astra_core.workload.generators.llm_params import (
    StageParams,
    dense_data_parallel,
    expert_data_parallel,
    stage_params,
)
from astra_core.workload.generators.pipeline import stage_passes

if TYPE_CHECKING:
    from astra_core.workload.generators.llm import LLMConfig

__all__ = [
    "StageMemory",
    "check_memory",
    "edge_activation_bytes",
    "layer_activation_bytes",
    "memory_line",
    "stage_memory",
    "workspace_bytes",
]

GiB = float(1 << 30)
MiB = float(1 << 20)
KiB = 1024.0
#: Adam's FP32 master weights and its two moments [bytes per parameter] (Megatron-core
#: distributed-optimizer guide; ZeRO paper section 3.1: "K = 12").
ADAM_STATE_BYTES = 12
#: Token ids are int64 (PyTorch's default index dtype) [bytes per token].
TOKEN_ID_BYTES = 8
#: The vocabulary-parallel cross entropy keeps its softmax in FP32 for the backward pass
#: (Megatron-core ``tensor_parallel/cross_entropy.py``: the logits cast to float, exp in place).
LOGIT_BYTES = 4


@dataclass(frozen=True)
class StageMemory:
    """One rank's peak memory on pipeline stage ``stage`` [bytes] (module docstring).

    ``in_flight``: the model chunks (micro-batch x chunk) whose activations are held at
    the peak; ``activations_bytes``: those chunks' saved tensors together."""

    stage: int
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    transient_bytes: float
    in_flight: int
    workspace_bytes: float = 0.0

    @property
    def state_bytes(self) -> float:
        """Weights, gradients and optimizer states: held the whole step."""
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    @property
    def peak_bytes(self) -> float:
        """Everything the allocator holds at the peak."""
        return self.state_bytes + self.workspace_bytes + self.activations_bytes + self.transient_bytes

    def as_dict(self) -> dict:
        return {**asdict(self), "peak_bytes": self.peak_bytes}


def workspace_bytes(cfg: LLMConfig) -> float:
    """cuBLAS workspaces in PyTorch's allocator [bytes] (module docstring): PyTorch's on the
    compute stream, Transformer Engine's, and its four grouped-GEMM ones under MoE."""
    compcap = cfg.gpu.compcap
    torch_ws = 32 * MiB if compcap == 90 else 8 * MiB + 128 * KiB
    te_ws = 32 * MiB if compcap >= 90 else 4 * MiB
    return torch_ws + te_ws * (5 if cfg.model.experts else 1)


def _fp8_bytes(cfg: LLMConfig) -> float:
    """Bytes per element of an FP8 tensor under the plan's recipe: one, and under MXFP8 one
    E8M0 scale per 32 elements (OCP Microscaling Formats v1.0)."""
    return 1 + 1 / 32 if cfg.fp8_recipe == "mxfp8" else 1.0


def _fp8_weight_bytes(cfg: LLMConfig) -> float:
    """Bytes per linear-layer parameter of Transformer Engine's cached FP8 weights: the
    weight and its transpose (Hopper's FP8 GEMMs take one layout)."""
    return 2 * _fp8_bytes(cfg) if cfg.precision == "fp8" else 0.0


def _linear_params(cfg: LLMConfig, sp: StageParams) -> tuple[float, float]:
    """(dense, expert) parameters of the stage's linear layers: all but norms, routers and
    the embedding and output layer (which Transformer Engine keeps in 16 bits)."""
    model = cfg.model
    dense = sum(d for d, _ in sp.params.values())
    for i in sp.params:
        dense -= model.norm_params() + (model.hidden * model.experts if model.is_moe_layer(i) else 0)
    return dense, sp.expert


def _state_bytes(cfg: LLMConfig, sp: StageParams) -> tuple[float, float, float, float]:
    """(weights, gradients, optimizer, ZeRO-3 gather) bytes of stage ``sp`` on one rank."""
    shard = {"dense": dense_data_parallel(cfg), "expert": expert_data_parallel(cfg)}
    params = {"dense": sp.dense, "expert": sp.expert}
    fp8 = _fp8_weight_bytes(cfg)
    linear = dict(zip(("dense", "expert"), _linear_params(cfg, sp), strict=True))
    grad = cfg.grad_bytes
    master = ADAM_STATE_BYTES + (4 if grad == 2 else 0)
    weights = grads = optimizer = 0.0
    for kind, n in params.items():
        d = max(shard[kind], 1)
        sixteen_bit = n - linear[kind] if cfg.fp8_param_gather else n
        weights += (2 * sixteen_bit + fp8 * linear[kind]) / (d if cfg.zero >= 3 else 1)
        grads += grad * n / (d if cfg.zero >= 2 else 1)
        optimizer += master * n / (d if cfg.zero >= 1 else 1)
    gather = 0.0
    if cfg.zero >= 3 and sp.params:  # the layer being run and the one prefetched, whole
        widest = max(d + e for d, e in sp.params.values())
        # gathered 16-bit unless FP8 weights are gathered in FP8 (:attr:`.llm.LLMConfig.param_gather_bytes`)
        gather = 2 * ((0 if cfg.param_gather_bytes == 1 else 2) + fp8) * widest
    return weights, grads, optimizer, gather


def _dims(cfg: LLMConfig) -> tuple[float, float, float, float]:
    """(tokens per micro-batch on one rank, T, the split of norm/residual tensors, bytes per
    element of a saved GEMM input)."""
    tokens = cfg.micro_batch * cfg.sequence_length / cfg.cp
    split = cfg.tp if cfg.sequence_parallel else 1
    gemm_in = _fp8_bytes(cfg) if cfg.precision == "fp8" else 2.0
    return tokens, float(cfg.tp), float(split), gemm_in


def _recomputed(cfg: LLMConfig, module: str) -> bool:
    return cfg.recompute == "selective" and module in cfg.recompute_modules


def _attention_bytes(cfg: LLMConfig) -> float:
    """The attention block's saved tensors for one micro-batch on one rank [bytes]."""
    m = cfg.model
    tok, t, split, gin = _dims(cfg)
    h, a, kv, qk, vd = m.hidden, m.heads, m.kv, m.qk_dim, m.v_dim
    total = 2 * tok * h / split  # the norm's input (the residual stream)
    total += gin * tok * h / split  # the norm's output: the QKV GEMM's input (sequence-parallel shard)
    if m.mla:  # latent projections (whole on every rank) and their norms' inputs and outputs
        latents = (m.q_lora_rank or 0) + m.kv_lora_rank + m.rope_head_dim
        total += tok * latents * (2 + gin)
        heads_k, heads_v = a, a
    else:
        heads_k, heads_v = kv, kv
    up_proj = m.mla and _recomputed(cfg, "mla_up_proj")
    if not up_proj:
        total += 2 * tok * (a * qk + heads_k * qk + heads_v * vd) / t  # Q, K, V
    total += gin * tok * a * vd / t  # the output projection's input
    if not _recomputed(cfg, "core_attn"):
        if cfg.attention == "unfused":  # the s x s score tensors (Korthikanti: 5 a s^2 b)
            keys = cfg.sequence_length / cfg.cp
            per_score = 2 + (1 + 2 if cfg.dropout else 0)  # softmax out, dropout mask and out
            total += per_score * tok * a / t * keys
        else:
            total += 4 * tok * a / t  # FlashAttention's FP32 log-sum-exp
            if gin != 2:  # the 16-bit output besides the projection's FP8 copy
                total += 2 * tok * a * vd / t
    if cfg.dropout:
        total += tok * h / split  # the residual dropout's 1-byte mask
    return total


def _mlp_bytes(cfg: LLMConfig, width: float, tokens: float, t: float) -> float:
    """A (SwiGLU or GELU) MLP of ``width`` on ``tokens`` rows, split ``t`` ways: the
    first GEMM's output (the activation's input) and the activation's output (the second
    GEMM's input)."""
    _, _, _, gin = _dims(cfg)
    gates = 2 if cfg.model.mlp == "swiglu" else 1
    return 2 * tokens * gates * width / t + gin * tokens * width / t


def _dense_mlp_bytes(cfg: LLMConfig) -> float:
    """The dense MLP block's saved tensors for one micro-batch on one rank [bytes]."""
    tok, t, split, gin = _dims(cfg)
    h = cfg.model.hidden
    total = 2 * tok * h / split  # the norm's input
    if not _recomputed(cfg, "mlp"):
        total += gin * tok * h / split + _mlp_bytes(cfg, cfg.model.ffn_hidden, tok, t)
        if cfg.dropout:
            total += tok * h / split
    return total


def _moe_bytes(cfg: LLMConfig) -> float:
    """The MoE block's saved tensors for one micro-batch on one rank [bytes]: the norm,
    the router's scores, the permuted rows through the experts (balanced routing; padded
    to capacity where asked) with their routing probabilities, the shared experts.

    The experts apply the probabilities in their activation (a weighted SwiGLU) and the
    unpermute is a plain scatter, so the experts' outputs are not kept (Megatron-core's
    memory-efficient token permutation, 2025: ``experts.py`` passes ``permuted_probs`` to
    ``weighted_bias_swiglu_impl``)."""
    m = cfg.model
    tok, t, split, gin = _dims(cfg)
    h = m.hidden
    total = 2 * tok * h / split
    if not _recomputed(cfg, "layernorm"):
        total += 2 * tok * h / split  # the norm's output: the router's and dispatcher's input
    routed = tok / t  # tokens each rank routes (its sequence-parallel share)
    total += 6 * routed * m.experts  # the gate's 16-bit logits and FP32 scores
    padded = cfg.moe_capacity_factor if cfg.moe_pad_to_capacity and cfg.moe_capacity_factor else 1.0
    rows = routed * m.top_k * padded
    folded = experts_folded(cfg.etp, cfg.tp, cfg.cp)
    etp = 1.0 if folded else t
    gathered = rows * etp  # with expert-tensor parallelism the rows are gathered over T
    total += gin * gathered * h  # the experts' first GEMM input
    gates = 2 if m.mlp == "swiglu" else 1
    total += 2 * gathered * gates * m.expert_ffn_hidden / etp
    if not _recomputed(cfg, "moe_act"):
        total += gin * gathered * m.expert_ffn_hidden / etp
    total += 4 * gathered  # the rows' FP32 routing probabilities, which the activation applies
    if m.shared_experts:
        total += _mlp_bytes(cfg, m.shared_experts * m.expert_ffn_hidden, tok, t)
    if cfg.dropout:
        total += tok * h / split
    return total


def layer_activation_bytes(cfg: LLMConfig, layer: int) -> float:
    """Bytes layer ``layer`` saves for its backward pass, one micro-batch, one rank.

    With ``recompute`` ``full`` only the layer's input (Megatron-LM's uniform method, one
    layer per checkpoint); else the attention block's and the MLP's or MoE block's
    tensors, less the modules recomputed under ``selective``. For GPT-3's layer (MHA, GELU
    with 4h, dropout, 16-bit) this is Korthikanti et al.'s 34 s b h / t with sequence
    parallelism and s b h (10 + 24 / t) without (their Table 2, selective recomputation).
    """
    tok, _, split, _ = _dims(cfg)
    if cfg.recompute == "full":
        return 2 * tok * cfg.model.hidden / split
    return _block_bytes(cfg, layer)


def edge_activation_bytes(cfg: LLMConfig, first: bool, last: bool) -> float:
    """The embedding's (``first``: token ids, the dropout mask) and the output layer's and
    loss's (``last``: the final norm's input and output, the FP32 softmax over this
    rank's vocabulary share) saved tensors for one micro-batch on one rank [bytes]."""
    tok, t, split, _ = _dims(cfg)
    m, total = cfg.model, 0.0
    if first and m.vocab:
        total += TOKEN_ID_BYTES * tok + (tok * m.hidden / split if cfg.dropout else 0.0)
    if last and m.vocab:
        heads = 1 + cfg.mtp_layers
        total += heads * (4 * tok * m.hidden / split + LOGIT_BYTES * tok * m.vocab / t)
    return total


def _block_bytes(cfg: LLMConfig, layer: int) -> float:
    """A layer's saved tensors without recomputation (what its recomputation rebuilds)."""
    return _attention_bytes(cfg) + (
        _moe_bytes(cfg) if cfg.model.is_moe_layer(layer) else _dense_mlp_bytes(cfg)
    )


def _transient_bytes(cfg: LLMConfig, sp: StageParams, last: bool) -> float:
    """The largest short-lived buffer beside the activations' peak (module docstring): a
    layer's backward holds its all-gathered input (sequence parallelism), its data gradient
    before the reduce-scatter and the gradient of the stream, and the gradients of its
    MLP's (or experts') first GEMM output and activation output."""
    m = cfg.model
    tok, t, split, _ = _dims(cfg)
    gates = 3 if m.mlp == "swiglu" else 2
    working = 2 * tok * m.hidden / split + (4 * tok * m.hidden if split > 1 else 0.0)
    # the widest MLP: a dense one's tokens x FFN / T, or the experts' routed rows x their width
    # (over expert-tensor parallelism the rows are gathered T ways and the width split T ways)
    widths = [
        tok * m.ffn_hidden / t if not m.is_moe_layer(i) else tok / t * m.top_k * m.expert_ffn_hidden
        for i in sp.params
    ]
    working += 2 * gates * max(widths, default=0.0)
    if cfg.recompute == "full" and sp.params:
        working += max(_block_bytes(cfg, i) for i in sp.params)
    loss = 2 * tok * m.vocab / t if last and m.vocab else 0.0  # 16-bit logits beside the FP32 ones
    return max(working, loss)


def _chunk_bytes(cfg: LLMConfig, sp: StageParams, p: int) -> list[float]:
    """Saved bytes of one micro-batch through each model chunk of stage ``p``."""
    last_chunk = cfg.virtual_stages - 1
    return [
        sum(layer_activation_bytes(cfg, i) for i in chunk)
        + edge_activation_bytes(cfg, p == 0 and v == 0, p == cfg.pp - 1 and v == last_chunk)
        + (sum(layer_activation_bytes(cfg, i) for i in sp.mtp) if v == last_chunk else 0.0)
        for v, chunk in enumerate(sp.chunks)
    ]


def _peak_in_flight(cfg: LLMConfig, p: int, microbatches: int, chunk_bytes: list[float]) -> tuple[float, int]:
    """(bytes, chunks) of the activations held at the worst point of stage ``p``'s schedule."""
    order = stage_passes(cfg.schedule, cfg.pp, p, microbatches, cfg.virtual_stages)
    held, count, peak, peak_count = 0.0, 0, 0.0, 0
    for kind, _, chunk in order:
        if kind == "F":
            held, count = held + chunk_bytes[chunk], count + 1
            if held > peak:
                peak, peak_count = held, count
        else:
            held, count = held - chunk_bytes[chunk], count - 1
    return peak, peak_count


def stage_memory(cfg: LLMConfig, microbatches: int) -> list[StageMemory]:
    """Each pipeline stage's peak memory on one of its ranks (module docstring)."""
    out = []
    for p in range(cfg.pp):
        sp = stage_params(cfg, p)
        weights, grads, optimizer, gather = _state_bytes(cfg, sp)
        activations, in_flight = _peak_in_flight(cfg, p, microbatches, _chunk_bytes(cfg, sp, p))
        transient = _transient_bytes(cfg, sp, p == cfg.pp - 1) + gather
        out.append(
            StageMemory(p, weights, grads, optimizer, activations, transient, in_flight, workspace_bytes(cfg))
        )
    return out


def check_memory(cfg: LLMConfig, stages: list[StageMemory]) -> None:
    """Raise ConfigError (one line, naming the stage and the figures) if a stage's peak
    passes the GPU's HBM (:attr:`~astra_core.config.gpus.GPUSpec.hbm_bytes`)."""
    worst = max(stages, key=lambda s: s.peak_bytes)
    if worst.peak_bytes > cfg.gpu.hbm_bytes:
        raise ConfigError(
            f"the plan needs {worst.peak_bytes / GiB:.1f} GiB per GPU on pipeline stage {worst.stage} "
            f"(weights {worst.weights_bytes / GiB:.1f}, gradients {worst.gradients_bytes / GiB:.1f}, "
            f"optimizer {worst.optimizer_bytes / GiB:.1f}, activations {worst.activations_bytes / GiB:.1f} "
            f"of {worst.in_flight} chunks in flight, transient {worst.transient_bytes / GiB:.1f}); "
            f"a {cfg.gpu.name} has {cfg.gpu.memory_gb:g} GiB (--ignore-memory generates it anyway)"
        )


def memory_line(peaks_bytes: list[float], hbm_bytes: float) -> str:
    """One line for a step's peak memory per GPU [bytes in, GiB out]: the stage that needs
    most (and least, when pipelined) against the GPU's HBM."""
    top = max(range(len(peaks_bytes)), key=lambda p: peaks_bytes[p])
    text = f"peak memory per GPU: {peaks_bytes[top] / GiB:.1f} GiB"
    if len(peaks_bytes) > 1:
        low = min(range(len(peaks_bytes)), key=lambda p: peaks_bytes[p])
        text += f" (pipeline stage {top}; stage {low}: {peaks_bytes[low] / GiB:.1f} GiB)"
    return text + f" of {hbm_bytes / GiB:.0f} GiB HBM"
