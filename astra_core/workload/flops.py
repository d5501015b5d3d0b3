"""Model and hardware FLOPs of a generated LLM step, and the utilization they give.

``astra gen llm`` records per step (:mod:`astra_core.workload.generators.llm_writer`,
GlobalMetadata attribute ``astra_llm``) the *model FLOPs* (the forward and
backward pass once: what the model needs) and the *hardware FLOPs*
(activation recomputation included: what the GPUs execute), both counting
attention over the whole score matrix, and the GPUs' peak. Over a simulated
step time they give model FLOPs utilization (MFU, Chowdhery et al., PaLM 2022,
appendix B) and hardware FLOPs utilization (HFU; Korthikanti et al. 2022).
It also records each pipeline stage's peak memory per GPU and the GPU's HBM
(:mod:`astra_core.workload.generators.llm_memory`), carried into the result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["llm_utilization"]


def llm_utilization(graphs: Sequence[Any], step_ns: float) -> dict | None:
    """``{model_flops, hardware_flops, tflops_per_gpu, mfu, hfu}`` of a generated LLM step
    of ``step_ns`` ns run from ``graphs`` (the ranks' RankGraphs) (FLOPs per step;
    TFLOP/s per GPU of model FLOPs; fractions of peak), with ``memory_bytes`` (each
    pipeline stage's peak per GPU) and ``hbm_bytes`` where the traces record them, or
    None when the traces are not ``astra gen llm``'s or the step took no time."""
    raw = graphs[0].metadata.get("astra_llm") if graphs else None
    if not raw or step_ns <= 0:
        return None
    try:
        meta = json.loads(raw)
        model, hardware = float(meta["model_flops"]), float(meta["hardware_flops"])
        peak, npus = float(meta["peak_tflops"]), int(meta["npus"])
    except (TypeError, ValueError, KeyError):
        return None  # traces of an older generator: no FLOP counts
    seconds = step_ns * 1e-9
    per_gpu = model / seconds / npus / 1e12
    out: dict[str, Any] = {
        "model_flops": model,
        "hardware_flops": hardware,
        "tflops_per_gpu": per_gpu,
        "mfu": per_gpu / peak,
        "hfu": hardware / seconds / npus / 1e12 / peak,
    }
    if isinstance(meta.get("memory_bytes"), list) and meta.get("hbm_bytes"):
        out["memory_bytes"] = [int(b) for b in meta["memory_bytes"]]
        out["hbm_bytes"] = int(meta["hbm_bytes"])
    return out
