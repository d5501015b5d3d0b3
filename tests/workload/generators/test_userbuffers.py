"""Transformer Engine's userbuffers under --tp-comm-overlap: its default and configured
methods per GEMM, the SMs they hold, and what a generated step runs with them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from astra_core.cli import main
from astra_core.errors import ConfigError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators import ops as O
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.kernels import kernel_ns
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.llm_traces import llm_traces
from astra_core.workload.generators.models import ModelConfig
from astra_core.workload.generators.userbuffers import GemmOverlap, load_ub_cfg, te_defaults, ub_cfg

DATA = Path(__file__).parents[2] / "data" / "tp_overlap"
H100 = GPUS["h100"]
GPT = ModelConfig("gpt-test", layers=4, hidden=1024, heads=16, ffn_hidden=4096, vocab=51200, seq_len=2048)
T, M = 4, 2
PLAN = LLMConfig(GPT, H100, tp=T, microbatches=M, sequence_parallel=True, tp_comm_overlap=True)


def test_transformer_engine_defaults():
    """``get_default_config``: ring exchange on 1 SM, no margin; pipeline and bulk on 16 SMs
    with the margin since Transformer Engine 2.0 (none in 1.x); 4 pipeline splits."""
    new, old = te_defaults(), te_defaults(margin=False)
    for name in ("qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad"):
        assert new[name] == old[name] == GemmOverlap("ring_exchange", 1, False, 4)
    for name in ("proj_fprop", "fc2_fprop"):
        assert new[name] == GemmOverlap("pipeline", 16, True, 4)
        assert old[name] == GemmOverlap("pipeline", 16, False, 4)
    for name in ("qkv_dgrad", "qkv_wgrad", "fc1_dgrad", "fc1_wgrad"):
        assert new[name] == GemmOverlap("bulk", 16, True, 4) and not old[name].sm_margin


def test_an_entry_updates_the_names_default_key_by_key():
    """``initialize_ub``: ``get_default_config(name)`` then the user's keys, so a forward
    reduce-scatter turned into a ring keeps the pipeline default's 16 SMs and margin."""
    cfg = ub_cfg({"proj_fprop": {"method": "ring_exchange"}, "fc2_fprop": {"num_sm": 8}}, "ub.yaml")
    assert cfg["proj_fprop"] == GemmOverlap("ring_exchange", 16, True, 4)
    assert cfg["fc2_fprop"] == GemmOverlap("pipeline", 8, True, 4)
    assert ub_cfg({"fc2_fprop": {"num_sm": 8}}, "ub.yaml", margin=False)["fc2_fprop"].sm_margin is False


def test_a_nemo_tp_overlap_file_reads_as_transformer_engine_takes_it():
    cfg = load_ub_cfg(DATA / "ub_cfg_h100_h8192_tp4_mbs1_seqlen8192.yaml")
    assert cfg["qkv_wgrad"] == GemmOverlap("bulk", 24, False, 4)
    assert cfg["fc1_dgrad"] == GemmOverlap("bulk", 2, False, 4)
    assert cfg["proj_fprop"] == GemmOverlap("pipeline", 24, True, 4)
    assert cfg["fc2_fprop"] == GemmOverlap("pipeline", 16, True, 4)
    assert cfg["qkv_fprop"] == GemmOverlap("ring_exchange", 1, False, 4)


@pytest.mark.parametrize(
    "entries, message",
    [
        ({"qkv_proj": {"method": "bulk"}}, "unknown overlap 'qkv_proj'"),
        ({"qkv_fprop": {"method": "pipeline"}}, "qkv_fprop.method: 'pipeline' is not modelled"),
        ({"proj_fprop": {"num_sm": 0}}, r"proj_fprop.num_sm: expected an integer >= 1, got 0"),
        ({"fc2_fprop": {"splits": 4}}, "fc2_fprop: unknown key 'splits'"),
        ({"fc1_wgrad": "bulk"}, "fc1_wgrad: expected a mapping"),
    ],
)
def test_bad_entries_are_named(entries, message):
    with pytest.raises(ConfigError, match=message):
        ub_cfg(entries, "ub.yaml")


def test_a_config_needs_the_overlap_and_spare_sms():
    with pytest.raises(ConfigError, match="--tp-comm-overlap-cfg needs --tp-comm-overlap"):
        generate_llm(replace(PLAN, tp_comm_overlap=False, tp_comm_overlap_cfg=te_defaults()))
    greedy = ub_cfg({"qkv_wgrad": {"num_sm": 132}}, "ub.yaml")
    with pytest.raises(ConfigError, match="qkv_wgrad.num_sm 132: the H100 has 132 SMs"):
        generate_llm(replace(PLAN, tp_comm_overlap_cfg=greedy))


def _stage(cfg: LLMConfig):
    wl = generate_llm(cfg)
    return wl, wl.stages[0]


def test_pipelined_reduce_scatters_split_the_gemm_and_its_scatter():
    """proj_fprop and fc2_fprop pipelined in 4 splits: per block and micro-batch 4 GEMM
    blocks of a quarter of the rows, each followed by the reduce-scatter of its quarter
    of the output; with the margin each block runs on the H100's 132 - 16 SMs (132 / 116
    times as long) and its scatter holds SMs the GEMM left free (``comm_sms`` 0)."""
    wl, nodes = _stage(PLAN)
    scatters = [n for n in nodes if n.type == pb.COMM_COLL_NODE and "_rs_tp" in n.name]
    assert len(scatters) == M * GPT.layers * 2 * 4
    act = GPT.seq_len * GPT.hidden * 2  # the block's output before the scatter [B]
    assert all(n.size == act // 4 and n.sms < 0 for n in scatters)
    mlp = O.mlp_ops(GPT, 1, GPT.seq_len, T, True)
    fc2 = next(o for o in mlp if o.name == "mlp_down")
    batch, rows, cols, k = fc2.shape
    block = O.Op(fc2.name, fc2.flops / 4, fc2.bytes / 4, O.GEMM, (batch, rows / 4, cols, k))
    blocks = [n for n in nodes if n.type == pb.COMP_NODE and "_fwd_mlp_rs_tp" in n.name]
    assert len(blocks) == M * GPT.layers * 4
    f = 132 / 116
    assert H100.sms == 132 and H100.margin_slowdown(16) == pytest.approx(f)
    assert all(n.duration_ns == pytest.approx(kernel_ns(H100, block) * f, rel=1e-12) for n in blocks)
    # Transformer Engine 1.x: no margin, the GEMM at full speed, the scatter holding 16 SMs
    _, old = _stage(replace(PLAN, tp_comm_overlap_cfg=te_defaults(margin=False)))
    old_blocks = [n for n in old if n.type == pb.COMP_NODE and "_fwd_mlp_rs_tp" in n.name]
    assert all(n.duration_ns == pytest.approx(kernel_ns(H100, block), rel=1e-12) for n in old_blocks)
    assert {n.sms for n in old if n.type == pb.COMM_COLL_NODE and "_rs_tp" in n.name} == {16}
    assert wl.flops[0] == pytest.approx(
        generate_llm(replace(PLAN, tp_comm_overlap=False)).flops[0], rel=1e-12
    )


def test_bulk_overlaps_hold_their_configured_sms():
    """The NeMo file's bulk overlaps (no margin): each block's input all-gather beside the
    data-gradient GEMM holds qkv_dgrad's / fc1_dgrad's SMs (4 / 2), the gradient's
    reduce-scatter beside the weight-gradient GEMM qkv_wgrad's / fc1_wgrad's (24 / 4);
    written as ``comm_sms``."""
    cfg = replace(PLAN, tp_comm_overlap_cfg=load_ub_cfg(DATA / "ub_cfg_h100_h8192_tp4_mbs1_seqlen8192.yaml"))
    _, nodes = _stage(cfg)
    expected = {"attn_input_AG": 4, "attn_in_RS": 24, "mlp_input_AG": 2, "mlp_in_RS": 4}
    seen = {}
    for n in nodes:
        for suffix in expected:
            if n.type == pb.COMM_COLL_NODE and n.name.endswith(suffix):
                seen.setdefault(suffix, set()).add(n.sms)
    assert seen == {k: {v} for k, v in expected.items()}
    traces, _ = llm_traces(generate_llm(cfg))
    written = {}
    for n in traces[0].nodes:
        for suffix in expected:
            if n.name.endswith(suffix):
                written.setdefault(suffix, set()).add(n.attrs.get("comm_sms"))
    assert written == seen


def test_the_cli_reads_a_tp_overlap_file(tmp_path):
    args = ["gen", "llm", "--model", "llama3-8b", "--tp", "2", "--sequence-parallel", "--tp-comm-overlap"]
    args += ["--microbatches", "1", "--gpu", "H100", "--ignore-memory", "--output", str(tmp_path / "l")]
    out = CliRunner().invoke(
        main, [*args, "--tp-comm-overlap-cfg", str(DATA / "ub_cfg_h100_h8192_tp4_mbs1_seqlen8192.yaml")]
    )
    assert out.exit_code == 0, out.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("proj_fprop: {method: bulk}\n")
    out = CliRunner().invoke(main, [*args, "--tp-comm-overlap-cfg", str(bad)])
    lines = [ln for ln in out.output.splitlines() if ln.startswith("error:")]
    assert out.exit_code == 1 and len(lines) == 1 and "bad.yaml: proj_fprop.method: 'bulk'" in lines[0], (
        out.output
    )
