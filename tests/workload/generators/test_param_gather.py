"""The distributed optimizer's weight all-gather as Megatron-core runs it:
``--overlap-param-gather`` moves it from after the optimizer step into the next forward
pass (``DistributedDataParallel``'s forward pre-hooks: each chunk's first forward waits for
its layers' gathers, the next layer's started as the current one starts), and
``--fp8-param-gather`` all-gathers per-tensor FP8 weights in 1 byte each (MXFP8 weights in
BF16, ``distrib_optimizer.py``'s ``_copy_main_params_to_param_buffer``)."""

from __future__ import annotations

import dataclasses

import pytest

import astra
from astra_core.errors import ConfigError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.llm_stage import GRADS_STREAM
from astra_core.workload.generators.llm_traces import llm_traces
from astra_core.workload.generators.models import ModelConfig
from tests.system.test_nccl_model import h100_configs

GPT = ModelConfig("g", layers=4, hidden=512, heads=8, ffn_hidden=2048, vocab=1000, seq_len=256)
MOE = ModelConfig(
    "e", layers=4, hidden=512, heads=8, kv_heads=2, ffn_hidden=1024, vocab=1000, mlp="swiglu",
    experts=8, top_k=2, expert_ffn_hidden=256, seq_len=256,
)  # fmt: skip


def plan(model=GPT, **kw) -> LLMConfig:
    options = {"dp": 4, "zero": 1, "microbatches": 4, **kw}
    return LLMConfig(model, GPUS["h100"], **options)


def gathers(nodes) -> dict[str, int]:
    """Each all-gather of weights on a stage: name -> bytes each rank contributes."""
    return {
        n.name: n.size
        for n in nodes
        if n.type == pb.COMM_COLL_NODE
        and n.comm_type == pb.ALL_GATHER
        and ("params_AG" in n.name or "experts_AG" in n.name)
    }


@pytest.mark.parametrize(
    "model, options",
    [
        (GPT, {}),
        (GPT, {"pp": 2, "virtual_stages": 2, "dp": 2}),
        (GPT, {"pp": 2, "virtual_stages": 2, "dp": 2, "mtp_layers": 1}),
        (GPT, {"mtp_layers": 1}),
        (MOE, {"ep": 2}),
        (MOE, {"ep": 4, "moe_a2a_overlap": True}),
    ],
)
def test_the_same_bytes_are_gathered_once_before_the_first_forward(model, options):
    # conservation: the overlapped gathers together move what the gather after the
    # optimizer moved, each layer's once (rounding: one byte per gather)
    after = generate_llm(plan(model, **options))
    during = generate_llm(plan(model, overlap_param_gather=True, **options))
    for stage_after, stage_during in zip(after.stages, during.stages):
        whole, split = gathers(stage_after), gathers(stage_during)
        assert set(whole) <= {"params_AG", "expert_params_AG"}
        assert not set(split) & {"params_AG", "expert_params_AG"}
        assert sum(split.values()) == pytest.approx(sum(whole.values()), abs=len(split))
        names = [n.name for n in stage_during]
        for name in split:  # on the data-parallel group's stream, before the optimizer step
            node = stage_during[names.index(name)]
            assert node.stream == GRADS_STREAM and names.index(name) < names.index("optimizer")


def test_a_layer_waits_for_its_gather_in_its_chunks_first_forward_only():
    cfg = plan(pp=2, virtual_stages=2, dp=2, overlap_param_gather=True)
    nodes = generate_llm(cfg).stages[0]
    names = [n.name for n in nodes]

    def deps(name: str) -> set[str]:
        return {nodes[d].name for d in nodes[names.index(name)].deps}

    # stage 0 holds layers 0 and 2 (chunks 0 and 1); both chunks first run micro-batch 0
    assert "L0_params_AG" in deps("L0_mb0_fwd_attn") and "L2_params_AG" in deps("L2_mb0_fwd_attn")
    # the embedding's gather precedes the embedding, the first layer's its attention
    assert "edge_params_AG" in deps("mb0_embedding")
    # later micro-batches and the backward passes do not wait for a gather
    later = [n for n in nodes if "_mb1_" in n.name or "_bwd" in n.name]
    assert not any(nodes[d].name.endswith("params_AG") for n in later for d in n.deps)


def test_interleaved_chunks_gather_as_megatron_cores_schedule_launches_them():
    # param_sync_func with align_param_gather: chunks 0 and 1 at the step's start, chunk
    # v + 1 as chunk v's first forward starts
    cfg = plan(dataclasses.replace(GPT, layers=6), pp=2, virtual_stages=3, dp=2, overlap_param_gather=True)
    nodes = generate_llm(cfg).stages[0]  # layers 0, 2 and 4, one per chunk
    names = [n.name for n in nodes]

    def parents(name: str) -> set[str]:
        return {nodes[d].name for d in nodes[names.index(name)].deps}

    # the first two chunks' gathers wait for no compute, one after the other on their stream
    assert parents("edge_params_AG") == set()
    assert parents("L0_params_AG") == {"edge_params_AG"} and parents("L2_params_AG") == {"L0_params_AG"}
    # chunk 2's starts after the compute before chunk 1's first forward (micro-batch 0)
    first_of_chunk_1 = names.index("L2_mb0_fwd_attn")
    assert names.index("L4_params_AG") < first_of_chunk_1
    assert any(nodes[d].type == pb.COMP_NODE for d in nodes[names.index("L4_params_AG")].deps)
    assert "L4_params_AG" in parents("L4_mb0_fwd_attn")


def test_fp8_weights_are_gathered_in_one_byte_under_per_tensor_scaling():
    base = {"precision": "fp8", "fp8_recipe": "tensorwise"}
    bf16 = sum(gathers(generate_llm(plan(**base)).stages[0]).values())
    fp8 = sum(gathers(generate_llm(plan(fp8_param_gather=True, **base)).stages[0]).values())
    assert fp8 == pytest.approx(bf16 / 2, abs=1)
    # FSDP's per-layer gathers too
    fsdp = {**base, "zero": 3}
    assert sum(
        gathers(generate_llm(plan(fp8_param_gather=True, **fsdp)).stages[0]).values()
    ) == pytest.approx(sum(gathers(generate_llm(plan(**fsdp)).stages[0]).values()) / 2, abs=8)
    # MXFP8 weights are gathered in BF16 and quantized after
    mx = LLMConfig(GPT, GPUS["b200"], dp=4, zero=1, microbatches=4, precision="fp8", fp8_recipe="mxfp8")
    assert gathers(generate_llm(dataclasses.replace(mx, fp8_param_gather=True)).stages[0]) == gathers(
        generate_llm(mx).stages[0]
    )


def test_overlapping_the_gather_saves_at_most_its_own_time():
    network, system = h100_configs(4)

    def run(cfg):
        traces, groups = llm_traces(generate_llm(cfg))
        return astra.simulate(traces, system, network, comm_groups=groups or None)

    serial, overlapped = run(plan()), run(plan(overlap_param_gather=True))
    gather = next(
        c.finish_ns - c.start_ns for c in serial.collectives if c.rank == 0 and c.node.name == "params_AG"
    )
    assert gather > 0
    # the step no longer ends with the gather, and cannot save more than the gather took
    assert serial.step_ns - gather <= overlapped.step_ns < serial.step_ns


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"zero": 0, "overlap_param_gather": True},
            "--overlap-param-gather: .* needs --zero 1 or 2, got --zero 0",
        ),
        ({"zero": 3, "overlap_param_gather": True}, "needs --zero 1 or 2, got --zero 3"),
        ({"fp8_param_gather": True}, "--fp8-param-gather: .* needs --precision fp8"),
        ({"zero": 0, "precision": "fp8", "fp8_param_gather": True}, "and --zero 1, 2 or 3"),
    ],
)
def test_the_options_name_what_they_need(options, message):
    with pytest.raises(ConfigError, match=message):
        generate_llm(plan(**options))
