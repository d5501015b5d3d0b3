"""validation/suite.py and validation/megatron_bridge.py: the rows that run in seconds.

Published figures: NVIDIA Megatron-Bridge performance summary, 25.11 NeMo container
(docs/performance-summary.md, commit 00b7660b): Llama 3 8B in FP8 (current scaling) on
one DGX H100, 14,451 tokens/s/GPU, and on 8 GPUs of a GB300 NVL72, 37,556
tokens/s/GPU (GBS 128, sequence 8,192)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from .conftest import validation_script


@pytest.fixture(scope="module")
def bridge():
    with validation_script("megatron_bridge") as module:
        yield module


@pytest.mark.parametrize(("row", "within"), [(1, 0.12), (11, 0.10)])
def test_llama3_8b_on_eight_gpus(bridge, row, within):
    """The H100 row runs Megatron FSDP, whose FP8 weights are gathered in 1 byte each; its
    prediction is 11.4 % fast (docs/validation-suite.md), the GB300 row's 2 %."""
    chosen = bridge.ROWS[row - 1]
    # the published step: 128 sequences x 8,192 tokens over 8 GPUs at the measured rate
    assert chosen.published_step_s == pytest.approx(128 * 8192 / (8 * chosen.tokens_per_gpu_s))
    seconds = bridge.predict(chosen)
    assert abs(chosen.published_step_s / seconds - 1) < within


def test_the_suite_page_gives_bias_worst_and_per_group_means(bridge):
    with validation_script("suite") as suite:
        chosen = [c for c in suite.cases(("megatron-bridge",)) if c.gpus == 8][:2]
        assert [c.gpu for c in chosen] == ["H100", "B200"]
        # two made-up predictions, one 10 % fast and one 20 % slow: bias -5 %, worst -20 %
        results = {
            chosen[0]: (chosen[0].published_step_s / 1.10, 1.0, 0.5, None),
            chosen[1]: (chosen[1].published_step_s / 0.80, 1.0, 0.5, None),
        }
        page = suite.render(chosen, results)
    assert "mean signed error (bias): -5.0%" in page
    assert "worst: -20.0%" in page
    assert "Per GPU generation: H100 10.0% (1), B200 20.0% (1)" in page
    assert "DeepSeek-V3" in page  # the runs the suite does not run are listed with why


def test_an_nvl72_job_shares_the_nvlink_domain_of_its_slurm_segment(bridge):
    # the launcher's --segment: every tray up to 18, else the largest divisor of the tray
    # count up to 18 (4 GPUs a tray); DGX nodes are 8-GPU domains
    row = bridge.ROWS[0]
    domain = lambda gpu, gpus: bridge.nvlink_domain(replace(row, gpu=gpu, gpus=gpus))  # noqa: E731
    assert [domain("GB200", n) for n in (8, 64, 72, 256, 288)] == [8, 64, 72, 64, 72]
    assert [domain("H100", n) for n in (8, 1024)] == [8, 8]
    network = bridge.network(replace(row, gpu="GB300", gpus=256))
    assert [d.npus for d in network.dims] == [64, 4]


def test_the_moe_report_rows_make_their_global_batch():
    # Megatron-Core MoE report, Table 11 / Table 20: Qwen3-235B on 256 GB300, MXFP8,
    # TP 1 PP 4 EP 64 VPP 6 MBS 2 GBS 3072 at 6,583 tokens/s/GPU
    with validation_script("megatron_moe") as moe:
        row = moe.ROWS[0]
        assert (row.gpu, row.gpus, row.tp, row.pp, row.ep, row.vp) == ("GB300", 256, 1, 4, 64, 6)
        assert row.published_step_s == pytest.approx(3072 * 4096 / (6583 * 256))
        for row in moe.ROWS:
            plan = row.plan()
            assert plan.dp * plan.tp * plan.pp * plan.cp == row.gpus
            assert row.gbs % (plan.dp * row.mbs) == 0  # whole micro-batches per data-parallel rank
            assert (94 + 2) % (row.pp * row.vp) == 0  # layers, embedding and loss over the chunks


def test_the_deepseek_rows_use_the_recipes_layout_with_its_mtp_layer(bridge):
    # recipes/deepseek/deepseek_v3.py: PP 4 x VP 4 and PP 16 x VP 1 share one layout of 16
    # virtual stages, the last one layer, the MTP layer and the loss (26.08: the same map)
    from astra_core.workload.generators.pipeline import parse_layout

    rows = [row for row in bridge.ROWS if row.model == "deepseek-v3"]
    assert [(row.gpu, row.pp, row.vp, row.release) for row in rows] == [
        ("GB200", 4, 4, "25.11"),
        ("B200", 16, 1, "25.11"),
        ("GB200", 4, 4, "26.08"),
    ]
    for row in rows:
        plan = row.plan()
        assert (plan.mtp_layers, plan.recompute_modules) == (1, ("mla_up_proj",))
        # 26.08's recipes run the fused grouped MLP, the older ones TE's GroupedLinear
        assert plan.moe_grouped_gemm == ("fused" if row.release == "26.08" else "multi_stream")
        assert parse_layout(plan.pipeline_layout, row.pp, 61, 1) == [4] * 15 + [1]


def test_each_source_names_an_nccl_release_that_astra_models_and_its_container_could_hold(bridge):
    # a container cannot hold an NCCL released after its base image: Megatron-Bridge
    # 25.11 builds on pytorch:25.09, 26.02 on pytorch:25.11, Nemotron-4's recipe runs
    # nemo:24.09, Llama 3's NCCLX forked NCCL before July 2024; NCCL 2.29.2 (one send
    # channel per 14 GB/s of NIC) came out on 2026-01-07, so every named release gives a
    # peer across nodes NCCL 2.20-2.28's 2 channels
    from astra_core.config.nccl import nccl_release
    from astra_core.system.collectives.nccl.tuning import constants_for

    with validation_script("h100_scale") as h100:
        named = [r for r in (*bridge.NCCL_RELEASES.values(), *h100.NCCL_RELEASES.values()) if r]
    assert len(named) == 5
    for release in named:
        assert nccl_release(release)[0] == release  # modelled as such, not rounded down
        assert constants_for(release).p2p_net_channels == "ranks"
    assert bridge.nccl_system("H100", named[0]).nccl.version == named[0]


def test_megatron_lms_flop_count_gives_the_published_tflops_per_token():
    # Megatron-Bridge 25.11 (docs/performance-summary.md, commit 00b7660b) prints both
    # tokens/s/GPU and model TFLOP/s/GPU: DeepSeek-V3 on 256 GB300, BF16 3,848 and 961,
    # MXFP8 4,357 and 1,088 (FLOPs per token within their rounding of the count without
    # the MTP layer); on 256 B200, MXFP8 2,139 and 557 (with it)
    from astra_core.workload.generators.models import MODELS

    with validation_script("mcore_deepseek") as guide:
        count = lambda mtp: guide.megatron_flops_per_token(MODELS["deepseek-v3"], 4096, mtp)  # noqa: E731
        assert count(0) == pytest.approx(961e12 / 3848, rel=6e-4)
        assert count(0) == pytest.approx(1088e12 / 4357, rel=6e-4)
        assert count(1) == pytest.approx(557e12 / 2139, rel=2e-3)
        with pytest.raises(ValueError, match="latent attention"):
            guide.megatron_flops_per_token(MODELS["llama3-8b"], 8192)


def test_the_gb200_guides_runs_keep_its_layout_and_nvlink_domain():
    # the reproduce guide: TP 1, PP 8 x VPP 4, EP 32, "Et|(tt|)*30L", every 32 GPUs one
    # NVLink domain; 970.01 TFLOP/s per GPU is 2,048 x 4,096 tokens in 8.44 s on 256 GPUs
    from astra_core.workload.generators.pipeline import parse_layout

    with validation_script("mcore_deepseek") as guide:
        baseline, best = guide.ROWS
        assert best.published_step_s == pytest.approx(2048 * 4096 * 2.49812e11 / (970.01e12 * 256), rel=1e-5)
        assert baseline.published_step_s / best.published_step_s == pytest.approx(970.01 / 494.46)
        for row in guide.ROWS:
            plan = row.plan()
            assert parse_layout(plan.pipeline_layout, 8, 61) == [1] + [2] * 30 + [0]
            assert [d.npus for d in guide.megatron_bridge.network(row).dims] == [32, 8]
        assert (baseline.flex, best.flex) == (None, "hybridep")
