"""NVIDIA's Megatron-Core MoE report: Qwen3-235B-A22B pre-training throughput on H100, GB200 and GB300.

Source: NVIDIA, "Scalable Training of Mixture-of-Experts Models with Megatron Core",
arXiv 2603.07685 v2 (10 March 2026), Table 11 "Unified throughput benchmarks (per-GPU
figures)" (measured tokens/s/GPU; Megatron-Core v0.16, force-balanced routing, token
dropless) and Table 20 (each run's TP, PP, CP, EP, VPP, MBS, GBS), appendix B.2 (its
dispatcher, recomputation, EP overlap and CUDA graphs). The published step time is
GBS x sequence / (tokens/s/GPU x GPUs).

What the tables do not print is taken as in the Megatron-Bridge rows
(:mod:`megatron_bridge`): the Qwen3-235B recipe's embedding and loss counted in the
pipeline split (94 layers + 2 over PP x VPP chunks), expert-tensor parallelism 1 (the
report's Parallel Folding: experts folded over TP x CP x DP), sequence parallelism and
Transformer Engine's TP communication overlap where TP > 1, BF16 gradient reduction,
Megatron-core's distributed optimizer, MXFP8 at the FP8 tensor-core rate. The systems
and each job's NVLink domain are those of :func:`megatron_bridge.network`.

    .venv/bin/python validation/megatron_moe.py --rows 1-4
"""

from __future__ import annotations

import sys

import megatron_bridge
from megatron_bridge import Row, predict

__all__ = ["LEFT_OUT", "NOT_EXPRESSIBLE", "RECOMPUTE", "ROWS", "SOURCE", "main", "predict"]

SOURCE = (
    "NVIDIA, 'Scalable Training of Mixture-of-Experts Models with Megatron Core', arXiv "
    "2603.07685 v2, Table 11 (tokens/s/GPU) and Table 20 (plans), appendix B.2"
)

#: Appendix B.2: the dispatcher is HybridEP on GB200 / GB300, DeepEP on H100.
HYBRIDEP = "hybridep"
#: Appendix B.2: Qwen3-235B recomputes the MoE activation and the layer norms on GB200 and H100.
RECOMPUTE = ("moe_act", "layernorm")
#: Table 11's Qwen3-235B rows with Table 20's plans (the fields of
#: :class:`megatron_bridge.Row`: GPU, model, GPUs, precision, GBS, MBS, sequence, FSDP, TP,
#: PP, CP, VPP, tokens/s/GPU, Megatron-Core release, EP).
ROWS = (
    Row(
        "GB300",
        "qwen3-235b-a22b",
        256,
        "fp8-mx",
        3072,
        2,
        4096,
        0,
        1,
        4,
        1,
        6,
        6583.0,
        "v0.16",
        ep=64,
        flex=HYBRIDEP,
    ),
    Row(
        "GB200",
        "qwen3-235b-a22b",
        256,
        "fp8-mx",
        3072,
        3,
        4096,
        0,
        1,
        4,
        1,
        6,
        6212.0,
        "v0.16",
        ep=64,
        flex=HYBRIDEP,
        a2a_overlap=True,
    ),
    Row(
        "GB200",
        "qwen3-235b-a22b",
        256,
        "bf16",
        8192,
        1,
        4096,
        0,
        1,
        4,
        1,
        12,
        5100.0,
        "v0.16",
        ep=32,
        recompute_modules=RECOMPUTE,
        flex=HYBRIDEP,
        a2a_overlap=True,
    ),
    Row(
        "H100",
        "qwen3-235b-a22b",
        256,
        "bf16",
        2048,
        1,
        4096,
        0,
        2,
        8,
        1,
        4,
        2132.0,
        "v0.16",
        ep=32,
        recompute_modules=RECOMPUTE,
        flex="deepep",
        a2a_overlap=True,
    ),
    Row(
        "GB300",
        "qwen3-235b-a22b",
        128,
        "fp8-mx",
        1024,
        1,
        131072,
        0,
        4,
        4,
        4,
        12,
        1556.0,
        "v0.16",
        ep=32,
        flex=HYBRIDEP,
    ),
)

#: Table 11's other rows, and why astra cannot run them yet.
NOT_EXPRESSIBLE = (
    (
        "DeepSeek-V3 (4 rows: GB300 and GB200 MXFP8, GB200 BF16, 1,024 H100 FP8 blockwise)",
        "not in the suite yet (astra models their multi-head latent attention and multi-token "
        "prediction; the report does not give the runs' pipeline layouts), and FP8 blockwise "
        "scaling is not modelled",
    ),
)

LEFT_OUT = (
    "Appendix B.2's dispatchers run as astra's flex dispatcher: HybridEP on GB200 / GB300, "
    "DeepEP on H100 (each token once per rank and NVLink group that needs it), their kernels "
    "on Megatron-core's default SMs (16 / 20, slowing the compute beside them); the EP "
    "all-to-all overlapped with the other micro-batch's computation where appendix B.2 has "
    "it on (GB200 and H100: `--moe-a2a-overlap`). Not modelled: CUDA graphs of attention, "
    "router and dispatcher preprocessing."
)


def main(argv: list[str] | None = None) -> int:
    title = "Megatron-Core MoE report"
    return megatron_bridge.main(argv, ROWS, title=title, source=SOURCE, left_out=LEFT_OUT)


if __name__ == "__main__":
    sys.exit(main())
