"""FLOPs and memory traffic of a transformer's operators, per tensor-parallel rank.

Forward costs of one micro-batch of ``b`` sequences of ``s`` tokens on one of
``t`` tensor-parallel ranks (Megatron-LM's column/row-parallel layout,
Shoeybi et al. 2019; Narayanan et al. SC'21, appendix "FLOPs"). A matrix
multiply of ``m x k`` by ``k x n`` costs ``2 m k n`` FLOPs and moves its two
inputs and its output once; element-wise operators (norms, activations) are
memory-bound. Causal attention is counted as FlashAttention computes it, half
of the full ``s x s`` score matrix (Dao, FlashAttention-2, 2023). Backward of
a matrix multiply is two multiplies of the same size (input and weight
gradients): 2x the forward FLOPs and bytes. So forward + backward is
``6 x (matrix parameters) x tokens`` plus attention, the closed form of
Kaplan et al. 2020.

All values are BF16 (2 bytes per element, :data:`BYTES`); ``sp`` (sequence
parallelism, Korthikanti et al. 2022) splits norms and activations between
the ``t`` ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_core.workload.generators.models import ModelConfig

__all__ = ["BYTES", "Op", "attention_ops", "embedding_ops", "head_ops", "mlp_ops", "moe_ops",
           "optimizer_op"]

#: Bytes per element (BF16 activations, weights and gradients).
BYTES = 2


@dataclass(frozen=True)
class Op:
    """One operator: ``flops`` [FLOP] and ``bytes`` [B] of device-memory traffic."""

    name: str
    flops: float
    bytes: float

    def backward(self) -> "Op":
        return Op(self.name + "_bwd", 2 * self.flops, 2 * self.bytes)


def _matmul(name: str, m: float, k: float, n: float) -> Op:
    return Op(name, 2.0 * m * k * n, BYTES * (m * k + k * n + m * n))


def _norm(name: str, tokens: float, hidden: int, t: int, sp: bool) -> Op:
    elems = tokens * hidden / (t if sp else 1)
    return Op(name, 5.0 * elems, BYTES * 2 * elems)


def attention_ops(model: ModelConfig, b: int, s: int, t: int, sp: bool) -> list[Op]:
    """Layer norm, QKV projection, causal attention core, output projection."""
    tokens = b * s
    hd, heads, kv = model.hd, model.heads / t, model.kv / t
    qkv_cols = hd * (heads + 2 * kv)
    core_flops = 2.0 * b * s * s * heads * hd  # QK^T and AV, 2*2*b*s^2*h_d*a halved for causal
    core_bytes = BYTES * tokens * hd * (2 * heads + 2 * kv)  # read Q, K, V; write O (FlashAttention)
    return [
        _norm("ln_attn", tokens, model.hidden, t, sp),
        _matmul("qkv", tokens, model.hidden, qkv_cols),
        Op("attention", core_flops, core_bytes),
        _matmul("attn_out", tokens, heads * hd, model.hidden),
    ]


def mlp_ops(model: ModelConfig, b: int, s: int, t: int, sp: bool, width: int | None = None,
            count: float = 1.0, name: str = "mlp") -> list[Op]:
    """Layer norm and a dense feed-forward block of ``width`` (default ``ffn_hidden``).

    ``count`` scales the matrix work (e.g. several shared experts); GELU has an
    up and a down matrix, SwiGLU a gate, an up and a down matrix.
    """
    tokens = b * s
    f = (width or model.ffn_hidden) / t
    ups = model.mlp_matrices - 1
    up = _matmul(f"{name}_up", tokens, model.hidden, ups * f)
    act = Op(f"{name}_act", 4.0 * tokens * f, BYTES * (ups + 1) * tokens * f)
    down = _matmul(f"{name}_down", tokens, f, model.hidden)
    ops = [Op(o.name, o.flops * count, o.bytes * count) for o in (up, act, down)]
    return [_norm(f"ln_{name}", tokens, model.hidden, t, sp)] + ops


def moe_ops(model: ModelConfig, b: int, s: int, t: int, sp: bool, ep: int) -> tuple[list[Op], list[Op]]:
    """(router ops, expert ops) of a mixture-of-experts layer on one rank.

    Balanced routing: each of the ``ep`` expert-parallel ranks processes as
    many (token, expert) assignments as it sends, ``b s top_k / t``, with its
    ``experts / ep`` local experts' weights; shared experts see every token.
    """
    tokens = b * s
    router = [_norm("ln_moe", tokens, model.hidden, t, sp),
              _matmul("router", tokens / t, model.hidden, model.experts)]
    assigned = tokens * model.top_k / t
    f = model.expert_ffn_hidden
    ups = model.mlp_matrices - 1
    local = model.experts / ep
    weights = BYTES * local * model.mlp_matrices * model.hidden * f
    flops = 2.0 * assigned * model.hidden * f * model.mlp_matrices
    acts = BYTES * assigned * (2 * model.hidden + (ups + 1) * f)
    experts = [Op("experts", flops, weights + acts)]
    if model.shared_experts:
        experts += mlp_ops(model, b, s, t, sp, width=f, count=model.shared_experts, name="shared")[1:]
    return router, experts


def embedding_ops(model: ModelConfig, b: int, s: int, t: int, sp: bool) -> list[Op]:
    """Vocabulary-parallel embedding lookup: read and write one row per token."""
    elems = b * s * model.hidden
    return [Op("embedding", 0.0, BYTES * 2 * elems)]


def head_ops(model: ModelConfig, b: int, s: int, t: int, sp: bool) -> list[Op]:
    """Final norm, output projection (vocabulary split over ``t``) and cross-entropy."""
    tokens = b * s
    logits = tokens * model.vocab / t
    return [_norm("ln_final", tokens, model.hidden, t, sp),
            _matmul("lm_head", tokens, model.hidden, model.vocab / t),
            Op("cross_entropy", 5.0 * logits, BYTES * 2 * logits)]


def optimizer_op(params: float) -> Op:
    """Mixed-precision Adam over ``params`` local parameters: ~18 FLOP and 28 B each
    (read the BF16 gradient, FP32 master weight and two FP32 moments: 14 B; write the
    master weight, the moments and the BF16 weight: 14 B)."""
    return Op("optimizer", 18.0 * params, 28.0 * params)
