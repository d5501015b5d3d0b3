"""Megatron-Core's DeepSeek-V3 on 256 GB200 (MXFP8): its published baseline and optimised runs.

Sources: NVIDIA/Megatron-LM ``docs/discussions/deepseek-v3-gb200-optimization/``:
``deepseek-v3-gb200-optimization.md`` (commit 1d9edcf8), section 1 "Baseline" (the first
run's plan) and section 3 "Summary and Outlook" (measured TFLOP/s per GPU of each step of
the optimisation), and ``deepseek-v3-gb200-reproduce-guide.md`` (commit 32ea0afd), the
launch script of the last run. Both runs: 256 GB200 of NVL72 racks, TP 1, PP 8 with 4
virtual stages each, EP 32 (expert-tensor parallelism 1), CP 1, micro-batch 1, global
batch 2,048 of 4,096 tokens, MXFP8 (``--fp8-recipe mxfp8``), the pipeline layout
``Et|(tt|)*30L`` (the embedding with one layer, 30 virtual stages of two, the loss alone; no
multi-token prediction), force-balanced routing, every 32 GPUs in one NVLink domain (the
guide's "every 32 GB200 GPUs (8 nodes) are in the same NVL domain"), the distributed
optimizer with overlapped gradient reduction, BF16 gradient reduction as the other
Megatron-core rows. The baseline ("494.46"): the all-to-all token dispatcher (NCCL),
recomputed dense MLPs and MLA up projections (``--recompute-modules mlp up_proj``). The
last run ("970.01"): HybridEP (``--moe-flex-dispatcher-backend hybridep``), recomputed
dense MLPs and expert activations (``--recompute-modules moe_act mlp``), CUDA graphs of
attention, router and dispatcher preprocessing.

The guide publishes TFLOP/s per GPU by Megatron-LM's count
(:func:`megatron_flops_per_token`); the published step time is that count over GBS x
sequence tokens divided by (TFLOP/s per GPU x GPUs). The container is NGC's PyTorch
25.09 (the reproduce guide's Dockerfile), so NCCL as the Megatron-Bridge 25.11 rows.

    .venv/bin/python validation/mcore_deepseek.py --rows 1-2
"""

from __future__ import annotations

import sys

import megatron_bridge
from megatron_bridge import Row, predict

from astra_core.workload.generators.models import MODELS, ModelConfig

__all__ = [
    "LABELS",
    "LEFT_OUT",
    "NOT_EXPRESSIBLE",
    "ROWS",
    "SOURCE",
    "main",
    "megatron_flops_per_token",
    "predict",
]

SOURCE = (
    "NVIDIA/Megatron-LM docs/discussions/deepseek-v3-gb200-optimization: "
    "'Optimizing DeepSeek-V3 Training Performance on NVIDIA GB200 NVL72' (commit 1d9edcf8), "
    "sections 1 and 3, and its reproduce guide (commit 32ea0afd); TFLOP/s by Megatron-LM's "
    "num_floating_point_operations (megatron/training/training.py, commit 001b00c2)"
)
#: The reproduce guide's ``--make-vocab-size-divisible-by 3232``: DeepSeek-V3's 129,280
#: tokens are 40 x 3,232, so the padded vocabulary is the model's own.
VOCAB_MULTIPLE = 3232


def megatron_flops_per_token(model: ModelConfig, seq: int, mtp: int = 0) -> float:
    """FLOPs of one token's forward and backward pass [FLOP] as Megatron-LM counts them for
    multi-head latent attention and mixture-of-experts models (``num_floating_point_operations``,
    ``transformer_flops``: 3 passes x 2 FLOPs per multiply-add over every GEMM, causal
    attention as half the score and value products, MTP layers as layers of the last
    layer's kind plus their norms and projection, the logits once per MTP layer and once).

    Raises ValueError for a model without multi-head latent attention (the only branch
    this count needs)."""
    if not model.kv_lora_rank:
        raise ValueError(f"{model.name}: Megatron-LM's MLA count needs multi-head latent attention")
    h, heads = model.hidden, model.heads
    qk, rope, v = model.hd, model.rope_head_dim, model.v_head_dim
    q_term = (
        model.q_lora_rank * (h + heads * (qk + rope) + 1) if model.q_lora_rank else h * heads * (qk + rope)
    )
    attention = 6 * (
        q_term
        + model.kv_lora_rank * (h + heads * (qk + v) + 1)
        + h * rope
        + heads * v * h
        + seq * heads * (qk + rope) / 2
        + seq * heads * v / 2
    )
    moe_layers = model.layers - model.dense_layers + mtp  # the last layer is an MoE one
    shared = model.shared_experts * model.expert_ffn_hidden
    mlp = (
        6
        * h
        * 3
        * (
            model.ffn_hidden * model.dense_layers
            + (model.expert_ffn_hidden * model.top_k + shared) * moe_layers
        )
    )
    vocab = -(-model.vocab // VOCAB_MULTIPLE) * VOCAB_MULTIPLE
    return mlp + attention * (model.layers + mtp) + 6 * mtp * (3 * h + 2 * h * h) + 6 * h * vocab * (mtp + 1)


def _row(tflops: float, recompute: tuple[str, ...], flex: str | None) -> Row:
    """A run of the guide's plan at ``tflops`` TFLOP/s per GPU (Megatron-LM's count)."""
    tokens_per_gpu_s = tflops * 1e12 / megatron_flops_per_token(MODELS["deepseek-v3"], 4096)
    return Row(
        "GB200",
        "deepseek-v3",
        256,
        "fp8-mx",
        2048,
        1,
        4096,
        0,
        1,
        8,
        1,
        4,
        tokens_per_gpu_s,
        "pytorch 25.09",
        ep=32,
        recompute_modules=recompute,
        layout="Et|(tt|)*30L",
        flex=flex,
        segment=32,
        flex_sms=32 if flex else None,  # the launch script's --moe-hybridep-num-sms 32
    )


#: Section 1's baseline and section 3's last run.
ROWS = (
    _row(494.46, ("mlp", "mla_up_proj"), None),
    _row(970.01, ("moe_act", "mlp"), "hybridep"),
)
#: The suite's names of :data:`ROWS`.
LABELS = ("deepseek-v3, all-to-all baseline", "deepseek-v3, HybridEP, CUDA graphs")

#: The guide's runs astra does not express.
NOT_EXPRESSIBLE = (
    (
        "DeepSeek-V3 (11 rows of section 3 between the baseline and the last run)",
        "each adds to its predecessor what astra does not model (kernel fusions, CUDA "
        "graphs, the host's CPU binding, DeepEP's tuning) or a dispatcher and recomputation "
        "that the two ends already cover; the suite runs the two ends",
    ),
)

LEFT_OUT = (
    "Not modelled: the host's cost of launching kernels beyond one launch per kernel (the "
    "guide's section 2: the baseline is bound by the CPU's kernel launches, 72 kernels in "
    "the router alone); CUDA graphs; the "
    "dispatcher's host synchronisation for its token counts; both runs' FP8 parameter "
    "all-gather (`--fp8-param-gather`) and BF16 optimizer states (`--exp-avg-dtype bf16`), "
    "which astra runs in BF16 and FP32."
)


def main(argv: list[str] | None = None) -> int:
    title = "Megatron-Core DeepSeek-V3 on GB200"
    return megatron_bridge.main(argv, ROWS, title=title, source=SOURCE, left_out=LEFT_OUT)


if __name__ == "__main__":
    sys.exit(main())
