"""NVIDIA Megatron-Bridge's published pre-training throughput (NeMo 25.11, 26.02 and 26.08 containers).

Sources: NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary.md`` (commit 00b7660b),
section "25.11 NeMo Container", tables "System: DGX-GB300", "DGX-GB200", "DGX-B200" and
"DGX-H100";
``docs/performance-summary-archive.md`` (commit 0a25f911), section "26.02 NeMo
Container", the DGX-H100 rows of its Llama 3 tables that change the plan (global batch
256 and 1,536); and ``docs/performance-summary.md`` (commit 4ab94dfa), section "26.08
NeMo Container", its MXFP8 MoE rows on GB200 and GB300 with the recipes of
``src/megatron/bridge/perf_recipes`` (commit 067f987d). Dense Llama 3 and
mixture-of-experts Qwen3 / GPT-OSS / DeepSeek-V3 rows, on DGX H100, DGX B200 and the
GB200 / GB300 NVL72 racks; a figure in parentheses (FP8-MX) is its own
row. Per run: the GPUs, precision, global batch (GBS), micro-batch (MBS),
sequence length, FSDP, TP, PP, CP, VP, EP and the measured tokens per second per GPU.
The published step time is GBS x sequence / (tokens/s/GPU x GPUs).

What the tables do not print comes from the recipes they name
(``scripts/performance/configs/llama/llama3_llm_pretrain.py`` and
``llama31_llm_pretrain.py``, commit 0013c9a8; Qwen3 and GPT-OSS from
``configs/qwen`` and ``configs/gpt_oss`` and ``recipes/qwen/qwen3_moe.py`` at commit
00b7660b): BF16 gradient reduction
(``grad_reduce_in_fp32 = False``), Transformer Engine's userbuffers TP communication
overlap where TP > 1 (``userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192``,
``userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192``, the B200 ones), the Llama
3.1 405B recipe's embedding and loss counted in the pipeline split, sequence
parallelism with TP, the MoE recipes' expert-tensor parallelism 1 (experts folded over
TP: ``expert_tensor_parallel_size``), Megatron-core's distributed optimizer (FSDP = 1: Megatron FSDP,
astra's ZeRO 3) with its weight all-gather overlapped with the next forward pass where DP > 1
(``training/comm_overlap.py``, ``_get_optimizer_overlap_cfgs``) and FP8 weights gathered
in FP8 (the precision configs' ``fp8_param_gather``), fused attention (cuDNN), no recomputation but the GPT-OSS recipes' recomputed
layer norms and expert activations and the DeepSeek-V3 recipe's MLA up projections
(``recompute_modules``); DeepSeek-V3's multi-token prediction and pipeline layout.

Systems: DGX H100 (8 H100 SXM on NVSwitch, NVLink4 450 GB/s per GPU and direction;
8 ConnectX-7 400 Gb/s ports per node: DGX H100 datasheet), DGX B200 (8 B200 on
NVSwitch, NVLink5 900 GB/s per GPU and direction; 8 ConnectX-7 400 Gb/s: DGX B200
datasheet) and GB200 / GB300 NVL72 racks (compute trays of 4 GPUs, NVLink5 900 GB/s per
GPU to the rack's NVLink switches, one ConnectX-7 400 Gb/s or ConnectX-8 800 Gb/s port
per GPU; the racks' specifications), one port per GPU on a non-blocking fabric, the NCCL
model of the release the container could hold (:data:`NCCL_RELEASES`); a job's NVLink
domain is its Slurm segment (:func:`nvlink_domain`).

    .venv/bin/python validation/megatron_bridge.py --rows 1-5
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace

from summary import emit, gpu_servers, nccl_system, parse_rows, simulate_plan

from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig
from astra_core.workload.generators.models import MODELS
from astra_core.workload.generators.userbuffers import ub_cfg

SOURCE = (
    "NVIDIA Megatron-Bridge performance summary, 25.11 NeMo container "
    "(NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md, commit 00b7660b), 26.02 "
    "(docs/performance-summary-archive.md, commit 0a25f911) and 26.08 (docs/performance-summary.md, "
    "commit 4ab94dfa); recipes scripts/performance/configs/llama/llama3_llm_pretrain.py and "
    "llama31_llm_pretrain.py (commit 0013c9a8), 26.08's src/megatron/bridge/perf_recipes "
    "(commit 067f987d)"
)
#: NVLink per GPU and direction and the NIC per GPU (GB/s), and GPUs per node, per system
#: (DGX H100 / B200 datasheets; GB200 / GB300 NVL72 specifications: compute trays of 4
#: GPUs with 4 ConnectX-7 400 Gb/s or ConnectX-8 800 Gb/s ports).
SYSTEMS = {
    "H100": (450.0, 50.0, 8),
    "B200": (900.0, 50.0, 8),
    "GB200": (900.0, 50.0, 4),
    "GB300": (900.0, 100.0, 4),
}
#: Recipes that count the embedding and the loss as layers in the pipeline split
#: (llama31_llm_pretrain.py; recipes/qwen/qwen3_moe.py ``qwen3_235b_a22b_pretrain_config``).
EDGES_IN_PIPELINE_SPLIT = ("llama3-405b", "qwen3-235b-a22b")
#: The GPT-OSS recipes' ``recompute_modules`` on H100, B200 and GB200
#: (configs/gpt_oss/gpt_oss_workload_base_configs.py, commit 00b7660b; GB300: none).
GPT_OSS_RECOMPUTE = ("layernorm", "moe_act")
#: The DeepSeek-V3 recipe's pipeline layout for PP 4 x VP 4 and PP 16 x VP 1, the same
#: list (recipes/deepseek/deepseek_v3.py ``layout_map``, commit 00b7660b): the embedding
#: and 4 layers, 14 virtual stages of 4, and the last layer with the MTP layer and the loss.
DEEPSEEK_LAYOUT = "Etttt|" + "tttt|" * 14 + "tmL"
#: Compute trays of a GB200 / GB300 NVL72 rack (72 GPUs / 4).
RACK_TRAYS = 18

#: Megatron-Bridge's userbuffers tables that the dense recipes pass to Transformer Engine
#: (``src/megatron/bridge/training/comm_overlap.py``, commit 00b7660b, unchanged at 0a25f911
#: and 067f987d; Transformer Engine's ``ub_cfgs`` keys, :mod:`astra_core.workload.generators.userbuffers`):
#: in FP8 each forward reduce-scatter a ring exchange that leaves one SM free, the backward's
#: bulk overlaps on a few SMs beside the GEMMs.
_BULK = ("qkv_dgrad", "qkv_wgrad", "fc1_dgrad", "fc1_wgrad")
_FP8_RINGS = {
    g: {"method": "ring_exchange", "num_sm": 1, "set_sm_margin": True} for g in ("proj_fprop", "fc2_fprop")
}
UB_H100_70B = "userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192"
UB_H100_405B = "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192"
UB_B200_405B = "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192"
UB_TABLES = {
    name: {
        **_FP8_RINGS,
        **{g: {"method": "bulk", "num_sm": n, "set_sm_margin": False} for g, n in zip(_BULK, sms)},
    }
    for name, sms in (
        (UB_H100_70B, (4, 24, 2, 4)),
        (UB_H100_405B, (2, 24, 2, 2)),
        (UB_B200_405B, (8, 32, 2, 8)),
    )
}
#: The NCCL release each container ran, as far as public facts bound it. The containers'
#: NCCL is not published; Megatron-Bridge builds on NGC's PyTorch container
#: (``docker/Dockerfile.ci``: ``pytorch:25.09-py3`` at v0.2.0, the 25.11 release;
#: ``pytorch:25.11-py3`` at v0.3.0, 26.02), and a container cannot hold an NCCL released
#: after it (PyPI nvidia-nccl-cu12: 2.28.3 on 2025-09-06, 2.28.9 on 2025-11-18, 2.29.2 on
#: 2026-01-07). So each takes the newest release its base could hold. Below 2.29 NCCL gives
#: a peer across nodes 2 channels, from 2.29 one per 14 GB/s of NIC (:mod:`~astra_core.
#: system.collectives.nccl.p2p`), which sets the pipeline's send rate. Releases not named
#: here take the newest modelled; a run on NGC's PyTorch 25.09 container itself holds what
#: the 25.11 release does.
NCCL_RELEASES = {"25.11": "2.28.3", "26.02": "2.28.9", "pytorch 25.09": "2.28.3"}


@dataclass(frozen=True)
class Row:
    """One published run (the table's columns) and its measured tokens/s/GPU."""

    gpu: str
    model: str
    gpus: int
    precision: str
    gbs: int
    mbs: int
    seq: int
    fsdp: int
    tp: int
    pp: int
    cp: int
    vp: int
    tokens_per_gpu_s: float
    release: str = "25.11"
    ep: int = 1
    tp_overlap: bool | None = None  # the recipe's tp_comm_overlap (None: on wherever TP > 1)
    recompute_modules: tuple[str, ...] = ()  # the recipe's recompute_modules (selective)
    layout: str | None = None  # the recipe's pipeline_model_parallel_layout
    mtp: int = 0  # the recipe's mtp_num_layers
    flex: str | None = None  # the recipe's moe_flex_dispatcher_backend (None: all-to-all dispatcher)
    segment: int | None = None  # GPUs per NVLink domain the source asks Slurm for (None: the launcher's)
    grouped: str = "multi_stream"  # the experts' GEMM kernel (LLMConfig.moe_grouped_gemm)
    a2a_overlap: bool = False  # the recipe's moe_a2a_overlap / overlap_moe_expert_parallel_comm
    flex_sms: int | None = None  # SMs of the flex dispatcher's kernels (None: Megatron-core's default)
    ub: str | None = None  # the recipe's userbuffers table (UB_TABLES; None: Transformer Engine's defaults)
    fp8_dpa: bool = False  # the recipe's fp8_dot_product_attention

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)

    @property
    def name(self) -> str:
        return f"{self.model}, {self.gpus:,} {self.gpu}, {self.precision.upper()}, GBS {self.gbs} ({self.release})"

    @property
    def moe(self) -> bool:
        return MODELS[self.model].experts > 0

    @property
    def published_step_s(self) -> float:
        return self.gbs * self.seq / (self.tokens_per_gpu_s * self.gpus)

    def plan(self) -> LLMConfig:
        """The run's plan for astra's generator (module docstring)."""
        model = MODELS[self.model]
        domain = nvlink_domain(self)
        return LLMConfig(
            model=model,
            gpu=GPUS[self.gpu.lower()],
            dp=self.dp,
            tp=self.tp,
            pp=self.pp,
            cp=self.cp,
            micro_batch=self.mbs,
            global_batch=self.gbs,
            seq_len=self.seq,
            dims=[domain, self.gpus // domain] if self.gpus > domain else [domain],
            virtual_stages=self.vp,
            ep=self.ep,
            etp=1 if self.moe else None,  # the MoE recipes' expert_tensor_parallel_size
            account_for_embedding=self.model in EDGES_IN_PIPELINE_SPLIT and self.layout is None,
            account_for_loss=self.model in EDGES_IN_PIPELINE_SPLIT and self.layout is None,
            sequence_parallel=self.tp > 1,
            tp_comm_overlap=self.tp > 1 if self.tp_overlap is None else self.tp_overlap,
            tp_comm_overlap_cfg=ub_cfg(UB_TABLES[self.ub], self.ub) if self.ub else None,
            zero=3 if self.fsdp else 1,
            # Megatron-Bridge's comm_overlap (_get_optimizer_overlap_cfgs): the weights'
            # all-gather overlapped where DP > 1; its precision configs gather FP8 weights
            overlap_param_gather=not self.fsdp and self.dp > 1,
            fp8_param_gather=self.precision.startswith("fp8"),
            pipeline_layout=self.layout,
            mtp_layers=self.mtp,
            moe_token_dispatcher="flex" if self.flex else "alltoall",
            moe_flex_dispatcher_backend=self.flex or "deepep",
            moe_grouped_gemm=self.grouped,
            moe_a2a_overlap=self.a2a_overlap,
            moe_flex_sms=self.flex_sms,
            recompute="selective" if self.recompute_modules else "none",
            recompute_modules=self.recompute_modules or ("core_attn",),
            grad_reduce_in_bf16=True,
            precision="fp8" if self.precision.startswith("fp8") else self.precision,
            # FP8-CS: Transformer Engine's current scaling; FP8-MX: its MXFP8 block scaling
            fp8_recipe="mxfp8" if self.precision == "fp8-mx" else "tensorwise",
            fp8_attention=self.fp8_dpa,
        )


_ROWS = (
    # DGX-H100
    Row("H100", "llama3-8b", 8, "fp8-cs", 128, 1, 8192, 1, 1, 1, 1, 1, 14451.0),
    Row("H100", "llama3-70b", 64, "fp8-cs", 128, 1, 8192, 0, 4, 8, 1, 5, 1602.0, ub=UB_H100_70B),
    Row("H100", "llama3-405b", 1024, "fp8-cs", 512, 1, 8192, 0, 8, 8, 2, 8, 292.0, ub=UB_H100_405B),
    # DGX-B200
    Row("B200", "llama3-8b", 8, "fp8-cs", 128, 2, 8192, 0, 1, 1, 1, 1, 30624.0),
    Row("B200", "llama3-405b", 128, "fp8-cs", 64, 1, 8192, 0, 4, 8, 2, 8, 661.0, ub=UB_B200_405B),
    # 26.02, DGX-H100: the same plans at larger global batches
    Row("H100", "llama3-70b", 64, "fp8-cs", 256, 1, 8192, 0, 4, 8, 1, 5, 1621.0, "26.02", ub=UB_H100_70B),
    Row("H100", "llama3-405b", 1024, "fp8-cs", 1536, 1, 8192, 0, 8, 8, 2, 8, 311.0, "26.02", ub=UB_H100_405B),
    # DGX-GB200 and DGX-GB300 (NVL72)
    Row("GB200", "llama3-8b", 8, "fp8-cs", 128, 2, 8192, 0, 1, 1, 1, 1, 31508.0),
    Row("GB200", "llama3-70b", 64, "fp8-cs", 256, 2, 8192, 1, 1, 1, 1, 1, 4312.0),
    Row("GB200", "llama3-405b", 256, "fp8-cs", 1536, 1, 8192, 0, 4, 16, 1, 4, 813.0, ub=UB_B200_405B),
    Row("GB300", "llama3-8b", 8, "fp8-cs", 128, 2, 8192, 0, 1, 1, 1, 1, 37556.0),
    Row("GB300", "llama3-70b", 64, "fp8-cs", 256, 2, 8192, 1, 1, 1, 1, 1, 4520.0),
    Row("GB300", "llama3-405b", 256, "fp8-cs", 1536, 1, 8192, 0, 2, 8, 2, 4, 999.0, ub=UB_B200_405B),
    # FP8-MX: the tables' figures in parentheses, the same plans in MXFP8
    Row("B200", "llama3-8b", 8, "fp8-mx", 128, 2, 8192, 0, 1, 1, 1, 1, 29521.0),
    Row("B200", "llama3-405b", 128, "fp8-mx", 64, 1, 8192, 0, 4, 8, 2, 8, 624.0, ub=UB_B200_405B),
    Row("GB200", "llama3-8b", 8, "fp8-mx", 128, 2, 8192, 0, 1, 1, 1, 1, 29789.0),
    Row("GB300", "llama3-8b", 8, "fp8-mx", 128, 2, 8192, 0, 1, 1, 1, 1, 36108.0),
    # mixture of experts (force-balanced routing, token-dropless)
    # the table prints MBS 4 with 2 gradient-accumulation steps, which do not make GBS 512
    # on DP 16; the recipe it names runs MBS 1 (GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_BASE_CONFIG,
    # commit 00b7660b), as the 26.02 table's H100 run does (5,993 tokens/s/GPU)
    Row(
        "H100",
        "gpt-oss-120b",
        64,
        "bf16",
        512,
        1,
        4096,
        0,
        1,
        4,
        1,
        1,
        5630.0,
        ep=8,
        recompute_modules=GPT_OSS_RECOMPUTE,
    ),
    Row("H100", "qwen3-30b-a3b", 16, "fp8-cs", 512, 2, 4096, 0, 1, 2, 1, 24, 5275.0, ep=8, a2a_overlap=True),
    # the table prints EP 8, but the recipe it names runs EP 64
    # (configs/gpt_oss/gpt_oss_workload_base_configs.py, commit 00b7660b:
    # GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_BASE_CONFIG), and the 26.02 table's EP 64 run
    # measures 8,047 tokens/s/GPU, its 26.02.01 EP 8 run 13,722
    # (docs/performance-summary-archive.md, commit 067f987d): the plan is the recipe's
    Row(
        "B200",
        "gpt-oss-120b",
        64,
        "bf16",
        512,
        4,
        4096,
        0,
        1,
        1,
        1,
        1,
        8213.0,
        ep=64,
        recompute_modules=GPT_OSS_RECOMPUTE,
    ),
    Row(
        "GB200",
        "gpt-oss-120b",
        64,
        "bf16",
        1280,
        1,
        8192,
        0,
        1,
        1,
        1,
        1,
        15876.0,
        ep=64,
        recompute_modules=GPT_OSS_RECOMPUTE,
    ),
    Row(
        "GB200", "qwen3-235b-a22b", 256, "bf16", 8192, 1, 4096, 0, 1, 8, 1, 3, 4916.0, ep=32, flex="hybridep"
    ),
    Row("GB300", "gpt-oss-120b", 64, "bf16", 1280, 2, 8192, 0, 1, 1, 1, 1, 18347.0, ep=64),
    Row(
        "GB300", "qwen3-235b-a22b", 256, "bf16", 8192, 2, 4096, 0, 1, 4, 1, 12, 6131.0, ep=16, flex="hybridep"
    ),
    Row("B200", "qwen3-30b-a3b", 8, "fp8-mx", 512, 1, 4096, 0, 1, 1, 1, 1, 9299.0, ep=8),
    Row("B200", "qwen3-235b-a22b", 64, "fp8-mx", 1024, 1, 4096, 0, 1, 8, 1, 2, 3269.0, ep=8, a2a_overlap=True),
    # the table's row lacks its GBS cell: 2,048 from its recipe
    # (QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_BASE_CONFIG; qwen3_llm_pretrain.py's
    # H100 function: tp_comm_overlap False); EP 32 folded over TP 2 x DP 16
    Row(
        "H100",
        "qwen3-235b-a22b",
        256,
        "fp8-cs",
        2048,
        1,
        4096,
        0,
        2,
        8,
        1,
        4,
        1575.0,
        ep=32,
        tp_overlap=False,
        a2a_overlap=True,
    ),
    Row("GB200", "qwen3-30b-a3b", 8, "fp8-mx", 512, 4, 4096, 0, 1, 1, 1, 1, 23766.0, ep=8, flex="hybridep"),
    Row("GB300", "qwen3-30b-a3b", 8, "fp8-mx", 512, 4, 4096, 0, 1, 1, 1, 1, 28934.0, ep=8, flex="hybridep"),
    # DeepSeek-V3 with the recipe's multi-token prediction (mtp_num_layers 1), pipeline
    # layout and recompute_modules (configs/deepseek/deepseek_workload_base_configs.py:
    # mla_up_proj on GB200 and B200). Open question: the table's own TFLOP/s over tokens/s
    # is 2.604e11 FLOPs per token on B200, Megatron-LM's count with the MTP layer
    # (2.600e11, mcore_deepseek.megatron_flops_per_token), but 2.491e11 to 2.497e11 on
    # GB200 and GB300, the count without it (2.498e11): those runs may have run without it
    Row(
        "GB200",
        "deepseek-v3",
        256,
        "bf16",
        4096,
        1,
        4096,
        0,
        1,
        4,
        1,
        4,
        3139.0,
        ep=64,
        recompute_modules=("mla_up_proj",),
        layout=DEEPSEEK_LAYOUT,
        mtp=1,
        flex="hybridep",
    ),
    Row(
        "B200",
        "deepseek-v3",
        256,
        "fp8-mx",
        2048,
        1,
        4096,
        0,
        1,
        16,
        1,
        1,
        2139.0,
        ep=8,
        recompute_modules=("mla_up_proj",),
        layout=DEEPSEEK_LAYOUT,
        mtp=1,
    ),
    # 26.08 (docs/performance-summary.md, commit 4ab94dfa): the MoE rows on GB200 / GB300
    # in MXFP8 with the recipes of src/megatron/bridge/perf_recipes (commit 067f987d):
    # HybridEP, the fused grouped MLP (NVTE_CUTEDSL_FUSED_GROUPED_MLP), no recomputation
    # but DeepSeek-V3's MLA up projections on GB200, DeepSeek-V3's (4, 4) layout with its
    # MTP layer (the table's TFLOP/s over tokens/s, 2.598e11 per token, is the count with it);
    # the Qwen3 and GPT-OSS recipes' FP8 dot-product attention (qwen/common.py,
    # gpt_oss/common.py: fp8_dot_product_attention = True)
    Row("GB200", "qwen3-30b-a3b", 8, "fp8-mx", 512, 4, 4096, 0, 1, 1, 1, 1, 39936.0, "26.08", ep=8, flex="hybridep",
        grouped="fused", a2a_overlap=True, fp8_dpa=True),
    Row("GB300", "qwen3-30b-a3b", 8, "fp8-mx", 512, 8, 4096, 0, 1, 1, 1, 1, 44544.0, "26.08", ep=8, flex="hybridep",
        grouped="fused", a2a_overlap=True, fp8_dpa=True),
    Row("GB200", "gpt-oss-120b", 64, "fp8-mx", 1280, 4, 4096, 0, 1, 1, 1, 1, 28672.0, "26.08", ep=64,
        flex="hybridep", grouped="fused", a2a_overlap=True, fp8_dpa=True),
    Row("GB300", "gpt-oss-120b", 64, "fp8-mx", 1280, 4, 4096, 0, 1, 1, 1, 1, 33024.0, "26.08", ep=16,
        flex="hybridep", grouped="fused", a2a_overlap=True, fp8_dpa=True),
    Row("GB200", "qwen3-235b-a22b", 256, "fp8-mx", 8192, 1, 4096, 0, 1, 8, 1, 3, 7280.0, "26.08", ep=32,
        flex="hybridep", grouped="fused", a2a_overlap=True, fp8_dpa=True),
    Row("GB300", "qwen3-235b-a22b", 256, "fp8-mx", 8192, 2, 4096, 0, 1, 4, 1, 12, 8816.0, "26.08", ep=32,
        flex="hybridep", grouped="fused", a2a_overlap=True, fp8_dpa=True),
    Row("GB200", "deepseek-v3", 256, "fp8-mx", 4096, 1, 4096, 0, 1, 4, 1, 4, 4912.0, "26.08", ep=64,
        recompute_modules=("mla_up_proj",), layout=DEEPSEEK_LAYOUT, mtp=1, flex="hybridep", grouped="fused", a2a_overlap=True),
)  # fmt: skip
#: The performance scripts give HybridEP 32 SMs (scripts/performance/utils/overrides.py,
#: commit 00b7660b; perf_recipes/_common.py, commit 067f987d: ``moe_hybridep_num_sms = 32``).
HYBRIDEP_SMS = 32
ROWS = tuple(replace(r, flex_sms=HYBRIDEP_SMS) if r.flex == "hybridep" else r for r in _ROWS)

#: The table's other rows, and why astra cannot run them yet.
NOT_EXPRESSIBLE = (
    (
        "DeepSeek-V3 (3 rows: DGX-GB300 BF16 and FP8-MX, DGX-GB200 FP8-MX)",
        "their plans (GB300: PP 2 x VP 4, GB200 FP8-MX: PP 8 x VP 4) are not the recipe's "
        "(PP 4 x VP 4, EP 64), and the recipe has no pipeline layout for them: 61 layers do "
        "not split evenly over 8 or 32 virtual stages",
    ),
    (
        "26.08: DeepSeek-V3 on 256 GB300 (PP 2 x VP 8)",
        "the recipe's layout map (recipes/deepseek/h100/deepseek_v3.py, commit 067f987d) has no "
        "(2, 8) entry, and 61 layers with the MTP layer do not split evenly over 16 virtual stages",
    ),
    (
        "26.08: DeepSeek-V4 Flash, Nemotron 3 Nano / Lightning / Super / Ultra",
        "astra does not model their architectures (DeepSeek-V4's sparse attention, Nemotron 3's "
        "Mamba layers)",
    ),
)

LEFT_OUT = (
    "FP8-CS runs Transformer Engine's current scaling (`--fp8-recipe tensorwise`), FP8-MX its "
    "MXFP8 block scaling (`--fp8-recipe mxfp8`, at the FP8 tensor-core rate). MoE rows run "
    "the recipe's dispatcher with force-balanced routing: Megatron-core's all-to-all one, "
    "or HybridEP where the recipe names it (`moe_flex_dispatcher_backend`: Qwen3 and "
    "DeepSeek-V3 on GB200 / GB300), HybridEP's kernels on the scripts' 32 SMs. The rows whose "
    "recipes set `moe_a2a_overlap` / `overlap_moe_expert_parallel_comm` (25.11: the H100 and "
    "B200 Qwen3 rows; 26.08: all) run Megatron-core's combined 1F1B with delayed weight "
    "gradients (`--moe-a2a-overlap`). Not modelled: CUDA "
    "graphs (kernel launches are counted); the recipes' activation offloading to the Grace "
    "CPU (GB200 / GB300 70B and 405B: `cpu_offloading_num_layers`); the "
    "dispatcher's host synchronisation for its all-to-all splits; the padding of "
    "the vocabulary to a multiple of 128 x TP; the transfer rate of the userbuffers kernels "
    "that the recipes' TP-overlap tables put on 2 to 32 SMs (timed at the NCCL model's rate, "
    "their SMs slowing the GEMM beside them). The 26.08 rows run the experts as one fused "
    "grouped kernel (`--moe-grouped-gemm fused`) and the Qwen3 and GPT-OSS ones their "
    "recipes' MXFP8 attention (`--fp8-attention`, GPT-OSS's sliding-window layers at BF16 "
    "rates); not modelled there: whole-iteration CUDA graphs, the paged stash's expert-rank "
    "capacity factor of 1.5."
)


def nvlink_domain(row: Row) -> int:
    """GPUs that share one NVLink domain. DGX: a node of 8. NVL72: the recipes' launcher
    (``scripts/performance/utils/executors.py``, commit 00b7660b) asks Slurm for a
    ``--segment`` of every node when there are at most 18, else of the largest divisor of
    the node count up to 18, so that a segment's trays sit in one rack's NVLink domain. A
    row that names its segment (``Row.segment``) takes that."""
    if row.segment:
        return row.segment
    per_node = SYSTEMS[row.gpu][2]
    if per_node == 8:
        return min(8, row.gpus)
    nodes = row.gpus // per_node
    segment = nodes if nodes <= RACK_TRAYS else max(d for d in range(1, RACK_TRAYS + 1) if nodes % d == 0)
    return per_node * segment


def network(row: Row):
    nvlink, nic, _ = SYSTEMS[row.gpu]
    domain = nvlink_domain(row)
    return gpu_servers(row.gpus // domain, nvlink, nic, domain)


def predict(row: Row) -> float:
    """Step time [s] of one row."""
    system = nccl_system(row.gpu, NCCL_RELEASES.get(row.release))
    return simulate_plan(row.plan(), system, network(row)).step_ns * 1e-9


def report(
    rows: list[Row], title: str = "Megatron-Bridge", source: str = SOURCE, left_out: str = LEFT_OUT
) -> str:
    """A markdown table of ``rows``: plan, predicted and published step time, error."""
    lines = [
        f"# {title}: predicted vs published step time",
        "",
        f"Published: {source}.",
        "",
        "| run | TP | PP | CP | VP | EP | DP | GBS | MBS | astra step s | published step s | error |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        seconds = predict(row)
        err = row.published_step_s / seconds - 1
        lines.append(
            f"| {row.name} | {row.tp} | {row.pp} | {row.cp} | {row.vp} | {row.ep} | {row.dp} | {row.gbs} "
            f"| {row.mbs} | {seconds:.3f} | {row.published_step_s:.3f} | {err:+.1%} |"
        )
    return "\n".join([*lines, "", left_out])


def main(argv: list[str] | None = None, rows: tuple = ROWS, **titled) -> int:
    """``--rows`` of ``rows`` (default: this source's), reported by :func:`report`."""
    parser = argparse.ArgumentParser(description=titled.get("title", __doc__.splitlines()[0]))
    parser.add_argument("--rows", default="1-5", help="rows, e.g. 1-5 or 1,3")
    parser.add_argument("--markdown", help="also write the report to this file")
    args = parser.parse_args(argv)
    return emit(report(parse_rows(args.rows, rows), **titled), args.markdown)


if __name__ == "__main__":
    sys.exit(main())
