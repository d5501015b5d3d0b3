"""The GPU kernels of a transformer layer, per tensor-parallel rank, with their shapes.

Forward kernels of one micro-batch of ``b`` sequences of ``s`` tokens on one
of ``t`` tensor-parallel ranks, in Megatron-LM's column/row-parallel layout
(Shoeybi et al. 2019; Narayanan et al. SC'21, section 4.2 and appendix). Each
:class:`Op` is one kernel of a kind the compute model times
(:mod:`.kernels`): a matrix multiply (``GEMM``, shape ``(batch, m, n, k)``:
``batch`` products of ``m x k`` by ``k x n``), a FlashAttention kernel
(``ATTENTION``), or a memory-bound kernel (``MEMORY``: norms, activations,
softmax, dropout, residual adds, optimizer step).

``flops`` is the *model* count (2 m n k per product, attention over the whole
``s x s`` score matrix as the paper's formula and PaLM's MFU count it); what a
kernel really executes (a causal FlashAttention skips the masked blocks) is
the compute model's business. The backward pass of a GEMM is two GEMMs of the
same FLOPs (input gradient ``m x n`` by ``n x k``, weight gradient ``k x m`` by
``m x n``), so forward + backward is ``6 x (matrix parameters) x tokens``
plus attention (Kaplan et al. 2020).

Attention comes in two implementations:

* ``flash``: one fused kernel forward, one backward (Dao, FlashAttention-2,
  2023): reads Q, K, V and writes O, never the score matrix.
* ``unfused``: Megatron-LM's path of 2021: a batched GEMM for ``Q K^T`` over
  the full ``s x s`` matrix, its fused ``scaled_upper_triang_masked_softmax``
  (which reads the lower triangle and writes whole rows:
  megatron/fused_kernels/scaled_upper_triang_masked_softmax.h), attention
  dropout (PyTorch's fused dropout writes the output and a one-byte mask), a
  batched GEMM for ``P V`` and the copy that makes the context contiguous.

Activations are 16-bit (2 bytes per element, :data:`BYTES`). ``sp``
(sequence parallelism, Korthikanti et al. 2022) splits norms, dropouts and
residual adds between the ``t`` ranks. Megatron's fused kernels (bias + GeLU,
bias + dropout + add) are one kernel each.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from astra_core.workload.generators.models import ModelConfig

__all__ = [
    "ATTENTION",
    "BYTES",
    "CROSS_ENTROPY_BYTES",
    "ELEMENTWISE",
    "GEMM",
    "KERNELS",
    "LAYERNORM",
    "LAYERNORM_BWD",
    "MEMORY",
    "Op",
    "STREAM",
    "attention_core_ops",
    "attention_ops",
    "backward",
    "DDP_IMPLS",
    "FP8_GEMMS",
    "context_parallel_all_gather_ops",
    "context_parallel_attention_ops",
    "ddp_bucket_copy_op",
    "embedding_ops",
    "fp8_attention",
    "fp8_cast_op",
    "fp8_kernels",
    "gemm_op",
    "grad_accumulation_op",
    "head_ops",
    "kernel_precision",
    "mlp_ops",
    "mtp_input_ops",
    "moe_ops",
    "norm_op",
    "optimizer_ops",
    "training_pass",
]

#: Bytes per element of activations, weights and gradients (FP16/BF16).
BYTES = 2
GEMM, ATTENTION, MEMORY = "gemm", "attention", "memory"
#: Memory-bound kernel implementations, each timed at its own measured rate (:mod:`.kernels`):
#: framework element-wise and softmax kernels, a fused layer norm forward / backward, and
#: multi-tensor streaming kernels (the fused optimizer).
ELEMENTWISE, LAYERNORM, LAYERNORM_BWD, STREAM = "elementwise", "layernorm", "layernorm_bwd", "stream"
KERNELS = (ELEMENTWISE, LAYERNORM, LAYERNORM_BWD, STREAM)


@dataclass(frozen=True)
class Op:
    """One GPU kernel: ``flops`` (model count) [FLOP], ``bytes`` [B] of device-memory traffic.

    ``shape``: for ``GEMM`` ``(batch, m, n, k)``; for ``ATTENTION``
    ``(batch x heads, queries, keys, head_dim, causal, backward)``. ``bwd_bytes``: the
    traffic of a ``MEMORY`` kernel's backward kernel (None: twice the forward).
    ``kernel``: which measured rate times a ``MEMORY`` kernel (:data:`KERNELS`).
    """

    name: str
    flops: float
    bytes: float
    kind: str = MEMORY
    shape: tuple = ()
    bwd_bytes: float | None = None
    kernel: str = ELEMENTWISE


def gemm_op(name: str, m: float, n: float, k: float, batch: float = 1) -> Op:
    """A GEMM kernel of ``batch`` products ``(m x k) @ (k x n)`` of 16-bit operands: its
    model FLOPs and the traffic of reading both inputs and writing the output once."""
    return Op(name, 2.0 * batch * m * n * k, BYTES * batch * (m * k + k * n + m * n), GEMM, (batch, m, n, k))


def _memory(
    name: str, elems: float, fwd: float, bwd: float, flops_per_elem: float = 1.0, kernel: str = ELEMENTWISE
) -> Op:
    """A memory-bound kernel over ``elems`` elements moving ``fwd`` / ``bwd`` bytes per element."""
    return Op(name, flops_per_elem * elems, fwd * elems, MEMORY, (), bwd * elems, kernel)


def backward(ops: list[Op]) -> list[Op]:
    """The backward kernels of ``ops``, in the reverse order.

    A GEMM ``(B, m, n, k)`` gives its input gradient ``(B, m, k, n)`` and its
    weight gradient ``(B, k, n, m)``; FlashAttention its backward kernel
    (2x the model FLOPs); a memory-bound kernel one kernel of ``bwd_bytes``.
    """
    out = []
    for op in reversed(ops):
        if op.kind == GEMM:
            batch, m, n, k = op.shape
            out += [gemm_op(op.name + "_dgrad", m, k, n, batch), gemm_op(op.name + "_wgrad", k, n, m, batch)]
        elif op.kind == ATTENTION:
            out.append(Op(op.name + "_bwd", 2 * op.flops, 2 * op.bytes, ATTENTION, (*op.shape[:5], True)))
        else:
            out.append(
                Op(
                    op.name + "_bwd",
                    2 * op.flops,
                    op.bwd_bytes if op.bwd_bytes is not None else 2 * op.bytes,
                    MEMORY,
                    kernel=LAYERNORM_BWD if op.kernel == LAYERNORM else op.kernel,
                )
            )
    return out


def norm_op(name: str, tokens: float, hidden: int, t: int, sp: bool) -> Op:
    """Layer norm: forward reads x and writes y; backward reads dy and x and writes dx."""
    return _memory(name, tokens * hidden / (t if sp else 1), 2 * BYTES, 3 * BYTES, 5.0, LAYERNORM)


def _residual(name: str, tokens: float, hidden: int, t: int, sp: bool, dropout: bool) -> Op:
    """Megatron's fused bias + dropout + residual add: forward reads x and the residual and
    writes the sum (and a one-byte dropout mask); backward reads dy (and the mask) and
    writes dx, then reduces dx for the bias gradient (without dropout dx is dy: one read)."""
    fwd, bwd = (3 * BYTES + 1, 3 * BYTES + 1) if dropout else (3 * BYTES, BYTES)
    return _memory(name, tokens * hidden / (t if sp else 1), fwd, bwd)


def attention_core_ops(
    model: ModelConfig,
    b: int,
    s: int,
    t: int,
    attention: str = "flash",
    dropout: bool = False,
    causal: bool = True,
    window: int = 0,
) -> list[Op]:
    """The attention core of one rank's ``heads / t`` heads (see the module docstring),
    causal unless ``causal`` is False (an encoder's, or a benchmark's without a mask).

    Model FLOPs: ``2 b s^2 (heads / t) (qk + v)`` (``Q K^T`` and ``P V``; qk = v =
    head_dim but under MLA, :attr:`~.models.ModelConfig.qk_dim`). A sliding ``window``
    (keys before each query, shorter than ``s``; FlashAttention only) makes each
    query meet ``window`` keys: ``2 b s window (heads / t) (qk + v)``, all of it
    executed (a band of the score matrix, no masked half), in a kernel called
    ``attention_window``. The kernel's rate is FlashAttention's at head dimension
    ``(qk + v) / 2``."""
    heads, kv, qk, v = model.heads / t, model.kv / t, model.qk_dim, model.v_dim
    tokens = b * s
    keys, causal = (window, False) if 0 < window < s else (s, causal)
    if attention == "flash":
        return [
            Op(
                "attention_window" if keys < s else "attention",
                2.0 * b * s * keys * heads * (qk + v),
                BYTES * tokens * (qk * (heads + kv) + v * (kv + heads)),
                ATTENTION,
                (b * heads, s, keys, (qk + v) / 2, causal, False),
            )
        ]
    scores = b * heads * s * s  # elements of the score matrix
    lower = (s + 1) / (2 * s) if causal else 1.0  # share of it the softmax reads
    ops = [
        gemm_op("attention_scores", s, s, qk, b * heads),
        _memory("attention_softmax", scores, BYTES * lower + BYTES, 2 * BYTES * lower + BYTES, 4.0),
    ]
    if dropout:
        ops.append(_memory("attention_dropout", scores, 2 * BYTES + 1, 2 * BYTES + 1))
    return ops + [
        gemm_op("attention_values", s, v, s, b * heads),
        _memory("attention_context_copy", tokens * heads * v, 2 * BYTES, 2 * BYTES, 0.0),
    ]


def context_parallel_attention_ops(model: ModelConfig, b: int, s: int, t: int, cp: int) -> list[Op]:
    """The FlashAttention kernels of one rank of a ``cp``-rank context-parallel ring, step by step.

    Megatron-Core with Transformer Engine (``AttnFuncWithCPAndKVP2P``) cuts the
    sequence into ``2 cp`` chunks and gives rank ``c`` chunks ``c`` and
    ``2 cp - 1 - c``, so every rank has the same causal work. Step 0 runs its
    queries against its own keys (causal, ``s / cp`` square); each of the
    ``cp - 1`` later steps against another rank's keys, of which the mask
    leaves half (``s / cp`` queries by ``s / 2cp`` keys, no mask). Model FLOPs
    count each block as the whole-matrix count does (twice what it executes):
    ``2 b s^2 (heads / t) (qk + v) / cp`` in all (:func:`attention_core_ops`).
    """
    heads, kv, qk, v = model.heads / t, model.kv / t, model.qk_dim, model.v_dim
    dim = (qk + v) / 2  # FlashAttention's rate at the mean of the query-key and value widths
    q = s // cp
    ops = [
        Op(
            "attention_cp0",
            2.0 * b * q * q * heads * (qk + v),
            BYTES * b * q * (qk * (heads + kv) + v * (kv + heads)),
            ATTENTION,
            (b * heads, q, q, dim, True, False),
        )
    ]
    half = q // 2
    for step in range(1, cp):
        ops.append(
            Op(
                f"attention_cp{step}",
                2 * 2.0 * b * q * half * heads * (qk + v),
                BYTES * b * ((qk + v) * heads * q + (qk + v) * kv * half),
                ATTENTION,
                (b * heads, q, half, dim, False, False),
            )
        )
    return ops


def context_parallel_all_gather_ops(model: ModelConfig, b: int, s: int, t: int, cp: int) -> list[Op]:
    """The FlashAttention kernels of one rank of ``cp``-rank context parallelism over
    all-gathered keys and values (Transformer Engine's ``AttnFuncWithCPAndKVAllGather``,
    ``cp_comm_type="all_gather"``; the Llama 3 paper's context parallelism).

    The sequence is cut into ``2 cp`` chunks of ``h = s / 2cp`` tokens as for the ring;
    rank ``c`` runs its chunks ``c`` and ``2 cp - 1 - c`` as queries against the keys up
    to and including their own chunk: ``c`` and ``2 cp - 1 - c`` whole ``h x h`` blocks
    and two causal diagonal blocks, ``2 cp - 1`` whole blocks on every rank. So two
    kernels: the two diagonals (causal, ``h`` square) and the whole blocks as ``h``
    queries by ``(2 cp - 1) h`` keys. They execute the ring's work
    (:func:`context_parallel_attention_ops`); model FLOPs count twice it, as there."""
    heads, kv, qk, v = model.heads / t, model.kv / t, model.qk_dim, model.v_dim
    dim = (qk + v) / 2  # FlashAttention's rate at the mean of the query-key and value widths
    h = s // (2 * cp)
    keys = (2 * cp - 1) * h
    return [
        Op(
            "attention_ag_diagonal",
            2 * 2.0 * b * h * h * heads * (qk + v),
            BYTES * 2 * b * h * (qk * (heads + kv) + v * (kv + heads)),
            ATTENTION,
            (2 * b * heads, h, h, dim, True, False),
        ),
        Op(
            "attention_ag_blocks",
            2 * 2.0 * b * h * keys * heads * (qk + v),
            BYTES * b * ((qk + v) * heads * h + (qk + v) * kv * keys),
            ATTENTION,
            (b * heads, h, keys, dim, False, False),
        ),
    ]


def attention_ops(
    model: ModelConfig,
    b: int,
    s: int,
    t: int,
    sp: bool,
    attention: str = "flash",
    dropout: bool = False,
    window: int = 0,
) -> list[Op]:
    """Layer norm, QKV projection (MLA: :func:`_latent_projection_ops`), attention core
    (sliding ``window``: see :func:`attention_core_ops`), output projection, residual add."""
    tokens = b * s
    heads, kv, hd = model.heads / t, model.kv / t, model.hd
    projections = (
        _latent_projection_ops(model, tokens, t)
        if model.mla
        else [gemm_op("qkv", tokens, hd * (heads + 2 * kv), model.hidden)]
    )
    return [
        norm_op("ln_attn", tokens, model.hidden, t, sp),
        *projections,
        *attention_core_ops(model, b, s, t, attention, dropout, window=window),
        gemm_op("attn_out", tokens, model.hidden, heads * model.v_dim),
        _residual("attn_residual", tokens, model.hidden, t, sp, dropout),
    ]


def _latent_projection_ops(model: ModelConfig, tokens: float, t: int) -> list[Op]:
    """Multi-head latent attention's projections of one rank (Megatron-core's
    ``MLASelfAttention``): the query and key-value down projections, whole on every
    tensor-parallel rank over all ``tokens``, each latent's RMS norm, and the up
    projections of the rank's ``heads / t`` heads (queries to ``qk_dim``, keys to
    ``head_dim`` beside the shared RoPE key, values to ``v_head_dim``)."""
    heads, h = model.heads / t, model.hidden
    kv_rank, rope = model.kv_lora_rank, model.rope_head_dim
    if model.q_lora_rank:
        q = [
            gemm_op("q_down", tokens, model.q_lora_rank, h),
            norm_op("q_norm", tokens, model.q_lora_rank, 1, False),
            gemm_op("q_up", tokens, heads * model.qk_dim, model.q_lora_rank),
        ]
    else:
        q = [gemm_op("q_up", tokens, heads * model.qk_dim, h)]
    return q + [
        gemm_op("kv_down", tokens, kv_rank + rope, h),
        norm_op("kv_norm", tokens, kv_rank, 1, False),
        gemm_op("kv_up", tokens, heads * (model.hd + model.v_dim), kv_rank),
    ]


def _activation(name: str, tokens: float, f: float, gated: bool) -> Op:
    """GeLU (with Megatron's fused bias) reads and writes ``f`` elements per token and backward
    reads dy and x and writes dx; SwiGLU reads the gate and up halves (``2 f``) and writes ``f``,
    backward reads dy and both halves and writes both gradients."""
    if gated:
        return _memory(name, tokens * f, 3 * BYTES, 5 * BYTES, 4.0)
    return _memory(name, tokens * f, 2 * BYTES, 3 * BYTES, 4.0)


def mlp_ops(
    model: ModelConfig,
    b: int,
    s: int,
    t: int,
    sp: bool,
    width: int | None = None,
    count: int = 1,
    name: str = "mlp",
    dropout: bool = False,
) -> list[Op]:
    """Layer norm, a dense feed-forward block of ``width`` (default ``ffn_hidden``), residual add.

    ``count`` blocks side by side (several shared experts) run as batched GEMMs.
    GeLU has an up and a down matrix, SwiGLU a gate, an up and a down matrix.
    """
    tokens = b * s
    f = (width or model.ffn_hidden) / t
    ups = model.mlp_matrices - 1
    up = gemm_op(f"{name}_up", tokens, ups * f, model.hidden, count)
    act = _activation(f"{name}_act", tokens * count, f, ups == 2)
    down = gemm_op(f"{name}_down", tokens, model.hidden, f, count)
    return [
        norm_op(f"ln_{name}", tokens, model.hidden, t, sp),
        up,
        act,
        down,
        _residual(f"{name}_residual", tokens, model.hidden, t, sp, dropout),
    ]


def moe_ops(
    model: ModelConfig,
    b: int,
    s: int,
    t: int,
    sp: bool,
    ep: int,
    dropout: bool = False,
    received: float | None = None,
    token_rows: float | None = None,
) -> tuple[list[Op], list[Op], list[Op]]:
    """(kernels before the dispatch, between dispatch and combine, after the combine) of a
    mixture-of-experts layer on one rank, as Megatron-core's all-to-all token dispatcher
    runs them (``MoEAlltoAllTokenDispatcher`` in ``transformer/moe/token_dispatcher.py``,
    its permutations fused: ``moe_permute_fusion``).

    Balanced routing: each of the ``ep`` expert-parallel ranks processes as many
    (token, expert) assignments as it sends, ``A = b s top_k / t``, spread evenly over
    its ``experts / ep`` local experts (grouped GEMMs, one per expert); shared experts
    see every token. Around the experts, per ``H``-wide row of 2 bytes:

    * permutation 1 gathers each token once per chosen expert (read and write ``A``
      rows; backward scatters them back, adding: read ``A``, write ``b s / t``);
    * with several local experts, permutation 2 sorts the received rows by expert and
      its inverse restores their order after the experts (read and write ``A`` rows,
      each way);
    * the unpermutation weights each expert's output by its routing probability and adds
      a token's ``top_k`` rows (read ``A``, write ``b s / t``; backward reads the output
      gradient and the expert outputs and writes ``A`` rows).

    ``received``: the assignments this rank's experts process when routing is not
    balanced (:mod:`.routing`), spread evenly over its local experts; what it sends
    stays ``A``.

    ``token_rows``: a token-based dispatcher (DeepEP, HybridEP: :mod:`.token_dispatch`)
    that delivers this many distinct (token, rank) rows ``R``. It needs neither
    permutation 1 nor the unpermutation, its combine adding a token's outputs; the
    experts' side permutes the ``R`` rows into their ``A`` assignments and back,
    weighting each by its probability (Megatron-core's ``MoEFlexTokenDispatcher``).
    """
    tokens = b * s
    rows = tokens / t  # this rank's tokens (1/t of them under sequence parallelism)
    assigned = rows * model.top_k if received is None else received
    h, k = model.hidden, model.top_k
    local = model.experts / ep
    router = [norm_op("ln_moe", tokens, h, t, sp), gemm_op("router", rows, model.experts, h)]
    per_expert = assigned / local
    f = model.expert_ffn_hidden
    ups = model.mlp_matrices - 1
    experts = [
        gemm_op("experts_up", per_expert, ups * f, h, local),
        _activation("experts_act", assigned, f, ups == 2),
        gemm_op("experts_down", per_expert, h, f, local),
    ]
    if token_rows is not None:  # the experts' side expands the delivered rows and folds them back
        permute, unpermute = _token_permutations(token_rows, assigned / token_rows, h)
        experts, after = [permute, *experts, unpermute], []
    else:  # permutation 1 before the dispatch, the unpermutation after the combine
        permute, unpermute = _token_permutations(rows, k, h)
        router.append(permute)
        if local > 1:
            sort = _memory("moe_sort", assigned * h, 2 * BYTES, 2 * BYTES, 0.0)
            experts = [sort, *experts, replace(sort, name="moe_unsort")]
        after = [unpermute]
    if model.shared_experts:
        after += mlp_ops(model, b, s, t, sp, width=f, count=model.shared_experts, name="shared")[1:4]
    return router, experts, after + [_residual("moe_residual", tokens, h, t, sp, dropout)]


def _token_permutations(rows: float, copies: float, h: float) -> tuple[Op, Op]:
    """The permutation that copies each of ``rows`` H-wide rows once per assignment
    (``copies`` each: read and write the copies; backward adds them back into the rows)
    and the unpermutation that weights each copy by its routing probability and adds a
    row's copies (read the copies, write the rows; backward reads the output gradient
    and the copies and writes the copies' gradients)."""
    permute = _memory("moe_permute", rows * h, 2 * BYTES * copies, BYTES * (copies + 1), 0.0)
    unpermute = _memory("moe_unpermute", rows * h, BYTES * (copies + 1), BYTES * (2 * copies + 1), copies)
    return permute, unpermute


def embedding_ops(model: ModelConfig, b: int, s: int, t: int, sp: bool) -> list[Op]:
    """Vocabulary-parallel embedding lookup: read and write one row per token (backward:
    read the gradient, accumulate into the rows)."""
    return [_memory("embedding", b * s * model.hidden, 2 * BYTES, 2 * BYTES, 0.0)]


def mtp_input_ops(model: ModelConfig, b: int, s: int, t: int, sp: bool) -> list[Op]:
    """A multi-token-prediction depth's input (Megatron-core's
    ``MultiTokenPredictionLayer``, DeepSeek-V3's MTP module): the embedding of the
    tokens one further ahead, the RMS norms of that embedding and of the hidden states,
    and the projection of their concatenation (``2 h`` to ``h``, split over ``t``)."""
    tokens = b * s
    return [
        *embedding_ops(model, b, s, t, sp),
        norm_op("mtp_enorm", tokens, model.hidden, t, sp),
        norm_op("mtp_hnorm", tokens, model.hidden, t, sp),
        gemm_op("mtp_proj", tokens, model.hidden / t, 2 * model.hidden),
    ]


#: Bytes per logit of Megatron-LM's vocabulary-parallel cross-entropy on FP32 logits
#: (``vocab_parallel_cross_entropy(output.float(), labels)``, megatron/model/gpt_model.py of
#: 2021 and megatron/core/tensor_parallel/cross_entropy.py since, without
#: ``--fp16-lm-cross-entropy`` or ``--cross-entropy-loss-fusion``), kernel by kernel.
#: Forward: ``.float()`` (2 + 4), the row max (4), subtracting it (4 + 4), ``exp`` in place
#: (4 + 4), the row sum (4), dividing by it to keep the softmax for backward (4 + 4): 38.
#: Backward: multiplying the softmax by the loss gradient in place (4 + 4) and the cast
#: back to 16 bits (4 + 2): 14.
CROSS_ENTROPY_BYTES = (38.0, 14.0)


def head_ops(model: ModelConfig, b: int, s: int, t: int, sp: bool) -> list[Op]:
    """Final norm, output projection (vocabulary split over ``t``) and Megatron-LM's
    cross-entropy on the FP32 logits (:data:`CROSS_ENTROPY_BYTES`)."""
    tokens = b * s
    logits = tokens * model.vocab / t
    return [
        norm_op("ln_final", tokens, model.hidden, t, sp),
        gemm_op("lm_head", tokens, model.vocab / t, model.hidden),
        _memory("cross_entropy", logits, *CROSS_ENTROPY_BYTES, 5.0),
    ]


#: The GEMMs Transformer Engine runs in FP8 under Megatron-core's ``--fp8-format``: the
#: transformer layers' linear layers (TE modules). The embedding, the output layer
#: (``tensor_parallel.ColumnParallelLinear``), the MoE router and attention's own
#: products stay BF16.
FP8_GEMMS = frozenset(
    {"qkv", "q_down", "q_up", "kv_down", "kv_up", "attn_out"}
    | {"mlp_up", "mlp_down", "shared_up", "shared_down", "experts_up", "experts_down"}
)
#: The grouped GEMMs of a mixture-of-experts layer's local experts.
EXPERT_GEMMS = frozenset({"experts_up", "experts_down"})
#: FP8 GEMMs whose activation operand the kernel before them writes in FP8 already:
#: LayerNormLinear's and LayerNormMLP's fused norm (qkv, fc1, and MLA's up projections
#: after their latents' norms: Megatron-core's MLA spec with ``qk_layernorm``) and
#: activation (fc2).
_FP8_FROM_PRODUCER = frozenset({"qkv", "q_up", "kv_up", "mlp_up", "mlp_down"})
#: ... and whose output gradient the kernel before them does: fc1's, from the fused
#: dGELU/dSwiGLU + cast-transpose of LayerNormMLP's backward.
_FP8_GRAD_FROM_PRODUCER = frozenset({"mlp_up"})
#: The forward GEMMs of :data:`_FP8_FROM_PRODUCER` whose producer is a layer norm.
_FP8_AFTER_NORM = frozenset({"qkv", "q_up", "kv_up", "mlp_up"})


#: Bytes per element of an MXFP8 cast: read BF16, write the row-wise and column-wise
#: FP8 copies with one E8M0 scale byte per 32 elements each (:func:`fp8_cast_op`).
MX_CAST_BYTES = 2.0 + 2 * (1.0 + 1.0 / 32)


def _gemm_pass(name: str) -> tuple[str, str]:
    """(the forward GEMM's name, the pass: "" forward, "dgrad" or "wgrad")."""
    for suffix in ("_dgrad", "_wgrad"):
        if name.endswith(suffix):
            return name[: -len(suffix)], suffix[1:]
    return name, ""


def is_expert_gemm(name: str) -> bool:
    """Whether the GEMM called ``name`` (any pass) is one of :data:`EXPERT_GEMMS`."""
    return _gemm_pass(name)[0] in EXPERT_GEMMS


def training_pass(name: str) -> str:
    """The training pass of the GEMM called ``name``: ``fprop``, ``dgrad`` or ``wgrad``."""
    return _gemm_pass(name)[1] or "fprop"


def kernel_precision(op: Op, precision: str) -> str:
    """The precision ``op`` runs at in a run of ``precision``: under FP8 only the
    :data:`FP8_GEMMS` (and their gradients) are FP8 GEMMs and the attention kernels
    :func:`fp8_attention` made FP8; everything else BF16."""
    if precision != "fp8":
        return precision
    if op.kind == ATTENTION:
        return "fp8" if op.name.startswith(FP8_ATTENTION) else "bf16"
    return "fp8" if op.kind == GEMM and _gemm_pass(op.name)[0] in FP8_GEMMS else "bf16"


#: The name of an FP8 attention kernel (its backward's: ``attention_fp8_bwd``).
FP8_ATTENTION = "attention_fp8"


def fp8_attention(ops: list[Op], model: ModelConfig, b: int, s: int, t: int) -> list[Op]:
    """``ops`` (an attention block or core of ``b`` sequences of ``s`` tokens on one of
    ``t`` tensor-parallel ranks) under Transformer Engine's FP8 dot-product attention
    (``fp8_dot_product_attention``; MXFP8 under the MXFP8 recipe, TE PR #2719): each
    full-attention kernel is :data:`FP8_ATTENTION`, timed at the part's FP8 attention
    rate, and first a kernel casts its queries, keys and values to MXFP8 (read 2 B, write
    the row-wise and column-wise copies, :data:`MX_CAST_BYTES` per element); backward it
    casts the output gradient alike (``bwd_bytes``); the output stays BF16. A
    sliding-window kernel keeps BF16 (no FP8 window rate measured)."""
    heads, kv = model.heads / t, model.kv / t
    qkv = b * s * (model.qk_dim * (heads + kv) + model.v_dim * kv)
    out = b * s * model.v_dim * heads
    cast = _memory(f"{FP8_ATTENTION}_cast", qkv, MX_CAST_BYTES, MX_CAST_BYTES * out / qkv, 0.0)
    result = []
    for op in ops:
        if op.kind == ATTENTION and op.name == "attention":
            result += [cast, replace(op, name=FP8_ATTENTION)]
        else:
            result.append(op)
    return result


def fp8_cast_op(op: Op, recipe: str = "delayed") -> list[Op]:
    """Transformer Engine's kernels that quantize an FP8 GEMM's operand, in order (none
    for a GEMM that is not FP8, or for a weight-gradient GEMM).

    The forward GEMM's activation ``(m x k)`` and the data-gradient GEMM's output
    gradient ``(m x k)`` of its shape are cast to FP8 together with their transpose
    for the weight gradient (``fp8_cast_transpose_fused``: read 2 B, write 1 + 1 B per
    element). The weight-gradient GEMM reads those transposes and casts nothing.

    * ``delayed`` (TE's ``DelayedScaling``): the scale is known before the tensor is;
      where the kernel before already wrote FP8 (:data:`_FP8_FROM_PRODUCER`,
      :data:`_FP8_GRAD_FROM_PRODUCER`) only the transpose remains (read 1, write 1).
    * ``tensorwise`` (TE's ``Float8CurrentScaling``, Megatron-core's ``--fp8-recipe
      tensorwise``): ``Float8CurrentScalingQuantizer::quantize_impl`` (TE
      ``pytorch/csrc/quantizer.cpp``) first computes the tensor's amax
      (``nvte_compute_amax``: read 2 B per element), then the scale from it
      (``nvte_compute_scale_from_amax``: one thread reads the FP32 amax and writes the
      FP32 scale, 8 B, a kernel launch), then casts with the
      transpose (read 2, write 1 + 1 B). A fused norm or activation before the GEMM
      computes the amax as it writes, but writes its output in BF16 (2 B, 1 more than
      FP8), which the cast then reads: 1 + 4 B per element, no amax pass.
    * ``mxfp8`` (TE's ``MXFP8BlockScaling``, Megatron-core's ``--fp8-recipe mxfp8``,
      Blackwell): each block of 32 elements carries its own power-of-two scale (OCP
      Microscaling Formats v1.0: one E8M0 byte per block), computed in the cast, so no
      amax pass and no scale kernel: one kernel reads 2 B and writes the row-wise and
      the column-wise copy with their scales, 2 x (1 + 1/32) B per element. A layer
      norm before the GEMM is not fused with an MXFP8 cast (TE's
      ``pytorch/csrc/extensions/normalization.cpp`` forces the unfused kernel unless
      ``NVTE_NORM_FWD_USE_CUDNN`` is set): it writes BF16, 1 B more, and the cast follows.
      The gated activation before fc2 and its backward before fc1's data gradient write
      MXFP8 themselves (TE's ``cast_gated`` kernels): no cast kernel.
    """
    if op.kind != GEMM:
        return []
    base, kind = _gemm_pass(op.name)
    if base not in FP8_GEMMS or kind == "wgrad":
        return []
    batch, m, _, k = op.shape
    elems = batch * m * k
    fused = base in (_FP8_GRAD_FROM_PRODUCER if kind else _FP8_FROM_PRODUCER)
    if recipe == "delayed":
        return [_memory(f"{op.name}_fp8_cast", elems, 2.0 if fused else 4.0, 0.0, 1.0)]
    if recipe == "mxfp8":
        if not kind and base in _FP8_AFTER_NORM:
            return [_memory(f"{op.name}_fp8_cast", elems, 1.0 + MX_CAST_BYTES, 0.0, 1.0)]
        return [] if fused else [_memory(f"{op.name}_fp8_cast", elems, MX_CAST_BYTES, 0.0, 1.0)]
    amax = [] if fused else [_memory(f"{op.name}_fp8_amax", elems, 2.0, 0.0, 1.0)]
    scale = _memory(f"{op.name}_fp8_scale", 1, 8.0, 0.0, 1.0)
    return [*amax, scale, _memory(f"{op.name}_fp8_cast", elems, 5.0 if fused else 4.0, 0.0, 1.0)]


def fp8_kernels(ops: list[Op], recipe: str = "delayed") -> list[Op]:
    """``ops`` with the FP8 quantization of each FP8 GEMM (:func:`fp8_cast_op`) in front of it."""
    out = []
    for op in ops:
        out += fp8_cast_op(op, recipe)
        out.append(op)
    return out


#: Megatron-LM's data-parallel implementations: its own (a contiguous gradient buffer,
#: the ``local`` DDP of 2021 and Megatron-core's DDP since) and PyTorch's
#: DistributedDataParallel (``--DDP-impl torch`` of 2021).
DDP_IMPLS = ("megatron", "torch")


def optimizer_ops(
    shard_params: float, buffer_params: float, precision: str, grad_bytes: int, ddp: str = "megatron"
) -> list[Op]:
    """Megatron-LM's mixed-precision optimizer step, kernel by kernel, over this rank's
    ``shard_params`` parameters (all of its parameters; a 1/D shard with the distributed
    optimizer) and its gradient buffer of ``buffer_params`` elements of ``grad_bytes`` B.

    The order of ``MixedPrecisionOptimizer.step`` (megatron/core/optimizer/optimizer.py;
    ``Float16OptimizerWithFloat16Params.step`` of 2021, megatron/optimizer/optimizer.py),
    bytes per parameter:

    * PyTorch DDP only: its reducer copies each reduced bucket back into the
      gradient (``copy_bucket_to_grad``, torch/csrc/distributed/c10d/reducer.cpp): 2 x grad.
    * ``main_grad_copy``: ``_copy_model_grads_to_main_grads`` makes FP32 main gradients
      with ``.float()``, a copy when the gradients are 16-bit (grad + 4), none when
      the buffer is FP32 already.
    * ``unscale``: FP16 only (BF16 and FP8 run without a loss scaler):
      ``torch._amp_foreach_non_finite_check_and_unscale_`` divides by the loss
      scale and checks for inf/NaN (4 + 4).
    * ``grad_norm``: ``clip_grad_norm_fp32`` takes the gradients' L2 norm
      (apex ``multi_tensor_l2norm``, 4); the rescale runs only when the norm
      passes the clip value and is not counted.
    * ``adam``: apex / Transformer Engine ``FusedAdam`` on FP32 master weights,
      gradients and both moments (read 16, write 12; ~18 FLOP).
    * ``param_copy``: ``_copy_main_params_to_model_params`` writes the 16-bit
      model weights (``multi_tensor_scale``, 4 + 2).
    * ``zero_grad_buffer``: Megatron's DDP clears its whole gradient buffer for the
      next step (``zero_grad_buffer``, a memset: grad); PyTorch DDP sets the
      gradients to None instead.

    The found-inf flag's and the norm's 4-byte all-reduces over the model-parallel
    group and their host synchronisation are latency only (tens of us a step) and
    are left out. Every kernel but the copies runs at the multi-tensor streaming rate;
    ``.float()`` and the bucket copy are framework element-wise kernels. Under FP8,
    Transformer Engine casts the updated weights to FP8 with their transpose once a step,
    on the first micro-batch (``is_first_microbatch``; read 2, write 1 + 1), counted here.
    Raises ValueError for an unknown ``ddp``.
    """
    if ddp not in DDP_IMPLS:
        raise ValueError(f"ddp must be one of {DDP_IMPLS}, got {ddp!r}")
    ops = []
    if ddp == "torch":
        ops.append(_memory("ddp_bucket_copy_out", buffer_params, 2.0 * grad_bytes, 0.0, 0.0))
    if grad_bytes < 4:
        ops.append(_memory("main_grad_copy", shard_params, grad_bytes + 4.0, 0.0, 0.0))
    if precision == "fp16":
        ops.append(_memory("unscale", shard_params, 8.0, 0.0, 2.0, STREAM))
    ops += [
        _memory("grad_norm", shard_params, 4.0, 0.0, 2.0, STREAM),
        _memory("adam", shard_params, 28.0, 0.0, 18.0, STREAM),
        _memory("param_copy", shard_params, 6.0, 0.0, 0.0, STREAM),
    ]
    if ddp == "megatron":
        ops.append(_memory("zero_grad_buffer", buffer_params, float(grad_bytes), 0.0, 0.0, STREAM))
    if precision == "fp8":
        ops.append(_memory("fp8_weight_cast", buffer_params, 4.0, 0.0, 1.0))
    return ops


def grad_accumulation_op(params: float, buffer_bytes: int = 4) -> Op:
    """One micro-batch's 16-bit weight gradients added into where they accumulate:
    Megatron-LM's local DDP buffer (``param.main_grad.add_(param.grad)``,
    megatron/model/distributed.py) of ``buffer_bytes`` per element (FP32 for BF16, the
    parameters' FP16 for FP16), or, under PyTorch DDP, the parameter's ``.grad``
    from the second micro-batch on (autograd's AccumulateGrad, in place, 2 B): read
    the gradient and the buffer, write the buffer."""
    return _memory("grad_accumulation", params, BYTES + 2.0 * buffer_bytes, 0.0)


def ddp_bucket_copy_op(params: float, grad_bytes: int = BYTES) -> Op:
    """PyTorch DDP's reducer copying a ready gradient into its bucket, divided by the
    group size on the way (``copy_grad_to_bucket``: ``at::mul_out``, reducer.cpp), on
    the last micro-batch's backward pass: read and write ``grad_bytes`` per element."""
    return _memory("ddp_bucket_copy", params, 2.0 * grad_bytes, 0.0, 1.0)
