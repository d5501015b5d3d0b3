"""Mixture-of-experts layers as Megatron-core's all-to-all token dispatcher runs them: the
permutations around the experts and the collectives over the expert-parallel ranks,
against sizes derived here from the layer's shape."""

from __future__ import annotations

from dataclasses import replace

import pytest

from astra_core.errors import ConfigError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators import ops as O
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.models import ModelConfig

MOE = ModelConfig(
    "moe-test", layers=2, hidden=256, heads=4, ffn_hidden=512, vocab=0, mlp="swiglu",
    experts=8, top_k=2, expert_ffn_hidden=128,
)  # fmt: skip
B, S = 2, 512


def test_permutations_move_each_routed_row():
    h, k, rows = MOE.hidden, MOE.top_k, B * S
    router, experts, combine = O.moe_ops(MOE, B, S, 1, False, ep=4)
    permute = router[-1]
    # permutation 1: each token read and written once per chosen expert (2-byte rows)
    assert (permute.name, permute.bytes) == ("moe_permute", 2 * 2 * k * rows * h)
    # backward scatters the k rows of a token back into one
    (permute_bwd,) = O.backward([permute])
    assert permute_bwd.bytes == 2 * (k + 1) * rows * h
    # two local experts: the received rows are sorted by expert and restored after
    assert [experts[0].name, experts[-1].name] == ["moe_sort", "moe_unsort"]
    assert experts[0].bytes == experts[-1].bytes == 2 * 2 * k * rows * h
    # unpermutation: read the k weighted rows of a token, write its sum
    assert (combine[0].name, combine[0].bytes) == ("moe_unpermute", 2 * (k + 1) * rows * h)
    # one local expert per rank: nothing to sort
    _, alone, _ = O.moe_ops(MOE, B, S, 1, False, ep=8)
    assert not any(o.name.startswith("moe_") for o in alone)


def test_each_moe_layer_counts_dispatches_and_combines_over_the_expert_ranks():
    cfg = LLMConfig(MOE, GPUS["h100"], dp=4, ep=4, microbatches=1, micro_batch=B, seq_len=S)
    nodes = generate_llm(cfg).stages[0]
    layer = [
        n for n in nodes if n.name.startswith("L0_mb0_") and n.type == pb.COMM_COLL_NODE and n.role == "ep"
    ]
    assigned = B * S * MOE.top_k
    forward = [(n.name.rsplit("_", 2)[-2:], n.comm_type, n.size) for n in layer if "_fwd_" in n.name]
    assert forward == [
        (["counts", "AG"], pb.ALL_GATHER, 8 * MOE.experts),  # int64 tokens per expert
        (["dispatch", "A2A"], pb.ALL_TO_ALL, assigned * MOE.hidden * 2),
        (["probs", "A2A"], pb.ALL_TO_ALL, assigned * 4),  # FP32 routing probabilities
        (["combine", "A2A"], pb.ALL_TO_ALL, assigned * MOE.hidden * 2),
    ]
    backward = [n.name.rsplit("_", 2)[-2] for n in layer if "_bwd_" in n.name]
    assert backward == ["combine", "probs", "dispatch"]  # the counts are the forward's


def test_recompute_modules_run_the_norm_and_the_experts_activation_again():
    # --recompute-modules layernorm,moe_act: per MoE layer and micro-batch, the norm before
    # the block and the experts' SwiGLU run forward once more before the backward
    base = LLMConfig(MOE, GPUS["h100"], dp=4, ep=4, microbatches=3, micro_batch=B, seq_len=S)
    again = replace(base, recompute="selective", recompute_modules=("layernorm", "moe_act"))
    h, k, f, rows = MOE.hidden, MOE.top_k, MOE.expert_ffn_hidden, B * S
    router, experts, _ = O.moe_ops(MOE, B, S, 1, False, ep=4)
    (norm,) = [o for o in router if o.name == "ln_moe"]
    (act,) = [o for o in experts if o.name == "experts_act"]
    # the norm reads and writes each token's h values (2 bytes each)
    assert norm.bytes == 2 * 2 * rows * h
    # the activation reads the k routed rows' 2f gate and up values and writes f (2 bytes)
    assert act.bytes == 2 * 3 * f * k * rows
    nodes0 = generate_llm(base).stages[0]
    nodes1 = generate_llm(again).stages[0]
    extra = [n for n in nodes1 if n.name.endswith("_recompute_moe")]
    assert len(extra) == 3 * MOE.layers
    assert sum(n.nbytes for n in extra) == 3 * MOE.layers * (norm.bytes + act.bytes)
    assert all(n.recompute for n in extra)  # hardware work, not model FLOPs
    assert len(nodes1) - len(nodes0) == len(extra)


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"recompute_modules": ("moe",)}, "'moe' is not one the generator runs"),
        ({"recompute": "none", "recompute_modules": ("moe_act",)}, "needs --recompute selective"),
    ],
)
def test_recompute_modules_need_what_megatron_needs(kw, message):
    cfg = LLMConfig(MOE, GPUS["h100"], dp=4, ep=4, microbatches=1, recompute="selective")
    with pytest.raises(ConfigError, match=message):
        generate_llm(replace(cfg, **kw))


def test_multi_stream_fp8_expert_gemms_run_at_most_at_the_grouped_rate():
    # 4 expert-parallel ranks each process A = B S k rows (balanced); its expert GEMMs per
    # layer: forward 2 A h 2f (gated fc1) + 2 A f h, backward twice that, all FP8
    gb200 = GPUS["gb200"]

    def compute_ns(rate: float, grouped: str = "multi_stream") -> float:
        gpu = replace(gb200, grouped_fp8_tflops=rate)
        cfg = LLMConfig(MOE, gpu, dp=4, ep=4, microbatches=1, micro_batch=B, seq_len=S, precision="fp8",
                        fp8_recipe="mxfp8", moe_grouped_gemm=grouped)  # fmt: skip
        return sum(n.duration_ns for n in generate_llm(cfg).stages[0] if n.type == pb.COMP_NODE)

    rows = B * S * MOE.top_k
    flops = MOE.layers * 3 * 6 * rows * MOE.hidden * MOE.expert_ffn_hidden
    # at 1 and 2 TFLOP/s (1e3 FLOP/ns) the floor holds every expert GEMM
    assert compute_ns(1.0) - compute_ns(2.0) == pytest.approx(flops / 1e3 - flops / 2e3, rel=1e-6)
    # one fused grouped kernel (or no measured rate) keeps the GEMM model
    assert compute_ns(1.0, "fused") == pytest.approx(compute_ns(0.0))
    with pytest.raises(ConfigError, match="--moe-grouped-gemm: expected one of multi_stream, fused"):
        generate_llm(LLMConfig(MOE, gb200, dp=4, ep=4, moe_grouped_gemm="cutlass"))
