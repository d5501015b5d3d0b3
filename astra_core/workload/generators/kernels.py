"""Kernel times of the GPU compute model: a kernel's time from its kind and shape.

Every :class:`~.ops.Op` is one kernel; its time is its execution time, but
at least the host's cost of launching it (``launch_us``):

* **GEMM** ``(batch, m, n, k)``: cuBLAS splits the ``m x n`` output into
  thread-block tiles and runs them in *waves* of one tile per SM (NVIDIA,
  "Matrix Multiplication Background User's Guide": tile and wave
  quantization). The largest tile of :data:`TILES` that still gives every SM a
  tile is used (the smallest if none does); a wave takes the time of one
  tile's ``2 tile_m tile_n k`` FLOPs at the per-SM share of the best large-GEMM
  throughput (``peak x gemm_efficiency``, measured by maximum-achievable-matmul
  benchmarks; FP8 GEMMs ``fp8_tflops x fp8_efficiency``). The result is bounded
  below by its memory traffic at the element-wise rate (below). A table of measured GEMMs
  (:mod:`.gemm_table`; the Hopper presets ship one measured on an H200) replaces this
  model for the precisions it holds, still bounded below by the traffic on the part at
  hand (a table measured on an H200 times an H100's memory-bound products at the H100's
  rate). An FP8 expert GEMM of a mixture-of-experts layer (the local experts' grouped
  GEMM) takes at least its FLOPs at the grouped rate measured on the part
  (``grouped_fp8_tflops``), where there is one.
* **ATTENTION** (FlashAttention-2, Dao 2023): the FLOPs the kernel executes,
  counted as FlashAttention's benchmark counts them (forward two ``s x s x d``
  products per head, half of them for a causal mask; backward 2.5x the
  forward, it recomputes the scores), at the forward + backward throughput
  that benchmark measured for the sequence length, head dimension and mask
  (``attention_tflops``); a sliding window's band at the rate measured for that window
  where the part has one (``window_attention_tflops``); an FP8 attention kernel
  (:func:`.ops.fp8_attention`) at the part's measured FP8 rate (``fp8_attention_tflops``).
* **MEMORY**: bytes moved at the rate measured for the kind of kernel
  (:data:`~.ops.KERNELS`): framework element-wise and softmax kernels at
  ``memory_gbps x elementwise_efficiency``, a fused layer norm at its
  measured ``layernorm_gbps`` (forward, backward; none: element-wise), and
  multi-tensor streaming kernels (the fused optimizer) at
  ``memory_gbps x memory_efficiency``, what a streaming benchmark reaches.

A GEMM's memory floor, and FlashAttention's, use the element-wise rate: a
GEMM bound by its traffic (attention's score products, ``k`` = head
dimension) streams the way the framework's other kernels do.

Every compute-bound rate above (GEMM efficiencies, GEMM table, grouped rate, attention
rows) is taken at the part's ``sustained_compute`` share: a benchmark's best shape or few
calls run at clocks that training's back-to-back large kernels lower to what the power
limit allows. Memory-bound rates are not: the HBM clock does not drop.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import cast

from astra_core.workload.generators.gemm_table import load_gemm_table
from astra_core.workload.generators.ops import (
    ATTENTION,
    ELEMENTWISE,
    GEMM,
    LAYERNORM,
    LAYERNORM_BWD,
    STREAM,
    Op,
    is_expert_gemm,
    training_pass,
)

__all__ = [
    "PRECISIONS",
    "TILES",
    "attention_tflops",
    "gemm_ns",
    "kernel_ns",
    "memory_rate",
    "window_tflops",
    "without_grouped_rate",
]

#: Thread-block output tiles (rows x columns) of cuBLAS's tensor-core GEMMs, by size, most
#: efficient first (NVIDIA, "Matrix Multiplication Background User's Guide", section 2.3
#: "Typical Tile Dimensions In cuBLAS": 256x128 and 128x256, 128x128, 256x64 and 64x256,
#: 128x64 and 64x128, 64x64); smaller tiles fill more SMs.
TILES = (((256, 128), (128, 256)), ((128, 128),), ((256, 64), (64, 256)), ((128, 64), (64, 128)), ((64, 64),))
#: Training precisions: 16-bit tensor-core GEMMs, or FP8 GEMMs (Hopper and later).
PRECISIONS = ("fp16", "bf16", "fp8")


def _tensor_flops_per_ns(gpu, precision: str) -> float:
    """Best GEMM throughput [FLOP/ns] in ``precision`` the part sustains."""
    if precision == "fp8":
        rate = gpu.fp8_tflops * gpu.fp8_efficiency
    else:
        rate = gpu.peak_tflops * gpu.gemm_efficiency
    return rate * 1e3 * gpu.sustained_compute  # TFLOP/s = 1e3 FLOP/ns


def gemm_ns(gpu, batch: float, m: float, n: float, k: float, precision: str = "bf16") -> float:
    """Execution time [ns] of ``batch`` products ``(m x k) @ (k x n)`` (no launch overhead).

    Tile and wave quantization over ``gpu.sms`` SMs (``sms`` 0: none), bounded below by
    the traffic of reading both inputs and writing the output once.
    """
    rate = _tensor_flops_per_ns(gpu, precision)
    batch = math.ceil(batch - 1e-9)
    if gpu.sms:
        for size in TILES:
            # the orientation of this tile size with the fewest tiles
            tiles, tile_m, tile_n = min(
                (batch * math.ceil(m / tm) * math.ceil(n / tn), tm, tn) for tm, tn in size
            )
            if tiles >= gpu.sms:
                break
        waves = math.ceil(tiles / gpu.sms)
        compute = waves * gpu.sms * 2.0 * tile_m * tile_n * k / rate
    else:
        compute = 2.0 * batch * m * n * k / rate
    return max(compute, _gemm_traffic_ns(gpu, batch, m, n, k, precision))


def _gemm_traffic_ns(gpu, batch: float, m: float, n: float, k: float, precision: str) -> float:
    """Time [ns] to read both inputs and write the output once at the element-wise rate."""
    element = 1 if precision == "fp8" else 2
    return element * batch * (m * k + k * n + m * n) / memory_rate(gpu, ELEMENTWISE)


def _gemm_op_ns(gpu, op: Op, precision: str) -> float:
    """A GEMM kernel's time: measured (``gpu.gemm_table``, in the op's training pass), but
    no less than its traffic on this part, else the GEMM model; an FP8 expert GEMM no
    less than its FLOPs at the part's measured grouped rate (``grouped_fp8_tflops``)."""
    batch, m, n, k = cast("tuple[float, float, float, float]", op.shape)
    measured = None
    if gpu.gemm_table is not None:
        measured = load_gemm_table(gpu.gemm_table).time_ns(batch, m, n, k, precision, training_pass(op.name))
    if measured is not None:
        ns = max(measured / gpu.sustained_compute, _gemm_traffic_ns(gpu, batch, m, n, k, precision))
    else:
        ns = gemm_ns(gpu, batch, m, n, k, precision)
    if precision == "fp8" and gpu.grouped_fp8_tflops and is_expert_gemm(op.name):
        ns = max(ns, op.flops / (gpu.grouped_fp8_tflops * 1e3 * gpu.sustained_compute))
    return ns


def without_grouped_rate(gpu):
    """``gpu`` without its measured grouped FP8 GEMM rate: expert GEMMs that run in another
    kernel than Transformer Engine's multi-stream grouped GEMM take the GEMM model."""
    return replace(gpu, grouped_fp8_tflops=0.0) if gpu.grouped_fp8_tflops else gpu


def memory_rate(gpu, kernel: str) -> float:
    """Bytes per ns a memory-bound kernel of kind ``kernel`` (:data:`~.ops.KERNELS`) moves."""
    if kernel == STREAM:
        return gpu.memory_gbps * gpu.memory_efficiency  # GB/s = 1 B/ns
    if kernel in (LAYERNORM, LAYERNORM_BWD) and gpu.layernorm_gbps:
        return gpu.layernorm_gbps[kernel == LAYERNORM_BWD]
    return gpu.memory_gbps * gpu.elementwise_efficiency


def attention_tflops(
    gpu, causal: bool, head_dim: float, seq: float, forward: bool = False, fp8: bool = False
) -> float:
    """FlashAttention forward + backward throughput [TFLOP/s] from ``gpu.attention_tflops``
    (``forward``: the forward pass alone, from ``gpu.attention_fwd_tflops`` where the part
    has them, else the forward + backward rate; ``fp8``: FP8 attention's,
    ``gpu.fp8_attention_tflops``).

    The rows of the same mask and the nearest head dimension (by ratio), linear in
    log(seq_len) between measured lengths, the end values beyond them; without
    rows, the GEMM rate; either at the part's ``sustained_compute`` share.
    """
    table = (
        (fp8 and gpu.fp8_attention_tflops) or (forward and gpu.attention_fwd_tflops) or gpu.attention_tflops
    )
    rows = [r for r in table if r[0] == causal] or list(table)
    if not rows:
        return _tensor_flops_per_ns(gpu, "bf16") / 1e3  # FLOP/ns = 1e-3 TFLOP/s
    return _log_interpolated(_nearest_dim_curve(rows, head_dim, 3), seq) * gpu.sustained_compute


def _attention_ns(gpu, op: Op, fp8: bool = False) -> float:
    """A block of ``queries x keys`` runs at the measured rate of a square of the same
    area (FlashAttention's benchmark sweeps equal query and key lengths), FP8 attention
    at the part's FP8 rate; a sliding window's band at the part's measured window rate
    where it has one."""
    heads, queries, keys, hd, causal, bwd = op.shape
    work = 4.0 * heads * queries * keys * hd * (0.5 if causal else 1.0) * (2.5 if bwd else 1.0)
    rate = window_tflops(gpu, keys, hd, queries, bwd) if op.name.startswith("attention_window") else None
    if rate is None:
        rate = attention_tflops(gpu, causal, hd, math.sqrt(queries * keys), fp8=fp8)
    return max(work / (rate * 1e3), op.bytes / memory_rate(gpu, ELEMENTWISE))


def window_tflops(gpu, window: float, head_dim: float, seq: float, backward: bool) -> float | None:
    """Measured sliding-window attention throughput [TFLOP/s over the band] of ``window``
    keys per query (``gpu.window_attention_tflops``): the rows of that window and the
    nearest head dimension, forward or backward, linear in log(seq_len) between measured
    lengths, the end values beyond them, at the part's ``sustained_compute`` share; None
    without rows for the window."""
    rows = [r for r in gpu.window_attention_tflops if r[0] == window]
    if not rows:
        return None
    return (
        _log_interpolated(_nearest_dim_curve(rows, head_dim, 4 if backward else 3), seq)
        * gpu.sustained_compute
    )


def _nearest_dim_curve(rows, head_dim: float, column: int) -> list:
    """``(seq_len, rows' column)`` points, sorted, of the rows (``(_, head_dim, seq_len, ...)``)
    whose head dimension is nearest ``head_dim`` by ratio."""
    dim = min({r[1] for r in rows}, key=lambda d: abs(math.log(d / head_dim)))
    return sorted((r[2], r[column]) for r in rows if r[1] == dim)


def _log_interpolated(curve: list, x: float) -> float:
    """``curve`` (sorted ``(x, y)`` points) at ``x``: linear in log(x) between points, the
    end values beyond them."""
    if x <= curve[0][0]:
        return curve[0][1]
    for (x0, y0), (x1, y1) in zip(curve, curve[1:]):
        if x <= x1:
            return y0 + math.log(x / x0) / math.log(x1 / x0) * (y1 - y0)
    return curve[-1][1]


def kernel_ns(gpu, op: Op, precision: str = "bf16") -> float:
    """Time [ns] of one kernel on ``gpu`` (a :class:`~astra_core.config.gpus.GPUSpec`).

    At least ``gpu.launch_us``: the host issues kernels one launch at a time while
    the GPU runs them back to back, so launches hide behind longer kernels.
    """
    if op.kind == GEMM:
        ns = _gemm_op_ns(gpu, op, precision)
    elif op.kind == ATTENTION:
        ns = _attention_ns(gpu, op, precision == "fp8")
    else:
        ns = op.bytes / memory_rate(gpu, op.kernel)
    return max(ns, gpu.launch_us * 1e3)
