"""Multi-head latent attention (DeepSeek-V2/V3) in the LLM generator: the preset's
parameter counts against DeepSeek's published totals, and the projections and the
attention core against closed forms derived here from the layer's shape."""

from __future__ import annotations

from dataclasses import replace

import pytest

from astra_core.errors import ConfigError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators import ops as O
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.models import MODELS, ModelConfig, check_model

MLA = ModelConfig(
    "mla-test", layers=2, hidden=256, heads=8, head_dim=32, ffn_hidden=512, vocab=0, mlp="swiglu",
    seq_len=512, q_lora_rank=96, kv_lora_rank=64, rope_head_dim=16, v_head_dim=24,
)  # fmt: skip


def test_deepseek_v3_has_its_published_parameter_counts():
    # DeepSeek-V3 Technical Report (2024), abstract: 671B parameters, 37B activated per
    # token (the multi-token-prediction module's 14B not included)
    model = MODELS["deepseek-v3"]
    assert model.params() == pytest.approx(671e9, rel=0.002)
    assert model.active_params() == pytest.approx(37e9, rel=0.02)
    # one layer's MLA: W_DQ, W_UQ (with the RoPE part), W_DKV + W_KR, W_UK and W_UV, W_O,
    # and the two latent norms
    h, heads = 7168, 128
    mla = h * 1536 + 1536 * heads * 192 + h * (512 + 64) + 512 * heads * 256 + heads * 128 * h + 1536 + 512
    assert model.attention_params() == mla


def test_latent_down_projections_are_whole_on_every_tensor_parallel_rank():
    tokens = 2 * 512
    h, q_rank, kv_rank, rope = MLA.hidden, 96, 64, 16
    one = {o.name: o for o in O.attention_ops(MLA, 2, 512, 1, False)}
    four = {o.name: o for o in O.attention_ops(MLA, 2, 512, 4, False)}
    assert one["q_down"].flops == four["q_down"].flops == 2 * tokens * h * q_rank
    assert one["kv_down"].flops == four["kv_down"].flops == 2 * tokens * h * (kv_rank + rope)
    # the up projections and the output projection split by heads
    assert one["q_up"].flops == 2 * tokens * q_rank * 8 * (32 + 16)
    assert one["kv_up"].flops == 2 * tokens * kv_rank * 8 * (32 + 24)
    assert one["attn_out"].flops == 2 * tokens * 8 * 24 * h
    for name in ("q_up", "kv_up", "attn_out"):
        assert four[name].flops == one[name].flops / 4
    whole = h * q_rank + q_rank + h * (kv_rank + rope) + kv_rank
    assert MLA.attention_params_on(4) == whole + (MLA.attention_params() - whole) / 4


def test_the_core_multiplies_query_key_and_value_widths():
    # Q K^T over the 48-wide query/key heads, P V over the 24-wide value heads
    (core,) = O.attention_core_ops(MLA, 2, 512, 2, causal=True)
    assert core.flops == 2 * 2 * 512 * 512 * 4 * (48 + 24)
    # FlashAttention's rate is read at the mean width
    assert core.shape == (2 * 4, 512, 512, 36, True, False)


def test_context_parallel_mla_keeps_the_model_flops_and_rings_its_keys_and_values():
    gpu = GPUS["h100"]
    plain = generate_llm(LLMConfig(MLA, gpu, dp=4, microbatches=2))
    split = generate_llm(LLMConfig(MLA, gpu, dp=2, cp=2, microbatches=4))
    assert sum(split.model_flops.values()) == pytest.approx(sum(plain.model_flops.values()), rel=1e-12)
    # a ring step carries this rank's up-projected keys (48 wide) and values (24 wide)
    sends = {n.size for n in split.stages[0] if n.type == pb.COMM_SEND_NODE and n.role == "cp_next"}
    block = 1 * 256 * 8 * (48 + 24) * 2
    assert block in sends


def test_latent_attention_needs_its_value_width_and_a_kv_head_per_query_head():
    with pytest.raises(ConfigError, match="m.json: kv_lora_rank: multi-head latent attention needs"):
        check_model(ModelConfig("m", 2, 256, 8, 512, 0, head_dim=32, kv_lora_rank=64), "m.json")
    with pytest.raises(ConfigError, match="kv_lora_rank"):
        check_model(
            ModelConfig("m", 2, 256, 8, 512, 0, head_dim=32, kv_heads=2, kv_lora_rank=64, v_head_dim=32),
            "m.json",
        )


def test_fp8_up_projections_take_their_norms_fp8_output():
    # Megatron-core's MLA spec (qk_layernorm): the up projections are Transformer Engine
    # LayerNormLinear modules whose fused norm writes FP8; the down projections TE Linear
    names = [o.name for o in O.fp8_kernels(O.attention_ops(MLA, 1, 512, 2, True), "tensorwise")]
    assert "q_down_fp8_amax" in names and "kv_down_fp8_amax" in names
    assert "q_up_fp8_amax" not in names and "kv_up_fp8_amax" not in names
    assert {"q_up_fp8_cast", "kv_up_fp8_cast"} <= set(names)
    # and the whole step generates with TP communication overlap and context parallelism
    cfg = LLMConfig(
        MLA, GPUS["h100"], dp=2, tp=2, cp=2, microbatches=2, sequence_parallel=True,
        tp_comm_overlap=True, precision="fp8", fp8_recipe="tensorwise",
    )  # fmt: skip
    wl = generate_llm(cfg)
    assert sum(wl.flops.values()) >= sum(wl.model_flops.values()) > 0


DENSE = ModelConfig(
    "mtp-test", layers=4, hidden=256, heads=8, ffn_hidden=512, vocab=1024, mlp="swiglu", seq_len=256
)


def test_multi_token_prediction_adds_a_layer_a_projection_and_a_loss_on_the_last_stage():
    gpu, M = GPUS["h100"], 3
    base = generate_llm(LLMConfig(DENSE, gpu, pp=2, microbatches=M))
    mtp = generate_llm(LLMConfig(DENSE, gpu, pp=2, microbatches=M, mtp_layers=1))
    b, s = 1, DENSE.seq_len
    depth = (
        O.mtp_input_ops(DENSE, b, s, 1, False)
        + O.attention_ops(DENSE, b, s, 1, False)
        + O.mlp_ops(DENSE, b, s, 1, False)
        + O.head_ops(DENSE, b, s, 1, False)
    )
    per_mb = sum(o.flops for o in depth) + sum(o.flops for o in O.backward(depth))
    # the projection: 2 (b s) (2h) h forward
    assert [o.flops for o in depth if o.name == "mtp_proj"] == [2 * s * 2 * 256 * 256]
    assert mtp.model_flops[1] - base.model_flops[1] == pytest.approx(M * per_mb, rel=1e-12)
    assert mtp.model_flops[0] == base.model_flops[0]
    # the last stage keeps a copy of the embedding: both stages all-reduce its gradient
    for stage in mtp.stages:
        (ar,) = [n for n in stage if n.name == "embedding_grads_AR"]
        assert ar.size == 1024 * 256 * 4  # FP32 gradients
    assert not any(n.name == "embedding_grads_AR" for n in base.stages[1])


def test_multi_token_prediction_needs_a_vocabulary():
    with pytest.raises(
        ConfigError, match="--mtp-num-layers 1: needs 0 or more, and a model with a vocabulary"
    ):
        generate_llm(LLMConfig(MLA, GPUS["h100"], microbatches=1, mtp_layers=1))


def test_recomputing_the_up_projections_runs_them_and_their_norms_again():
    gpu, M = GPUS["h100"], 2
    base = LLMConfig(MLA, gpu, microbatches=M)
    again = LLMConfig(MLA, gpu, microbatches=M, recompute="selective", recompute_modules=("mla_up_proj",))
    up = [
        o for o in O.attention_ops(MLA, 1, 512, 1, False) if o.name in ("q_norm", "q_up", "kv_norm", "kv_up")
    ]
    assert len(up) == 4
    extra = generate_llm(again).flops[0] - generate_llm(base).flops[0]
    assert extra == pytest.approx(M * MLA.layers * sum(o.flops for o in up), rel=1e-12)
    with pytest.raises(ConfigError, match="mla_up_proj: mtp-test has no multi-head latent attention"):
        generate_llm(
            LLMConfig(DENSE, gpu, microbatches=1, recompute="selective", recompute_modules=("mla_up_proj",))
        )


def test_a_pipeline_layout_places_the_mtp_layer_before_the_loss():
    # the DeepSeek-V3 recipe's layout for PP 4 x VP 4 (recipes/deepseek/deepseek_v3.py)
    # puts one layer and the MTP layer before the loss on the last virtual stage
    from astra_core.workload.generators.pipeline import parse_layout

    layout = "Etttt|" + "tttt|" * 14 + "tmL"
    assert parse_layout(layout, 4, 61, mtp=1) == [4] * 15 + [1]
    with pytest.raises(ValueError, match="come right before the loss"):
        parse_layout("Etttt|" + "tttt|" * 14 + "mtL", 4, 61, mtp=1)
    cfg = LLMConfig(DENSE, GPUS["h100"], pp=2, virtual_stages=2, microbatches=4, mtp_layers=1)
    wl = generate_llm(replace(cfg, pipeline_layout="Et|t|t|tmL"))
    assert any(n.name.startswith("mb0_mtp4_") for n in wl.stages[1])
