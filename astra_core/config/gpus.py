"""GPU presets: the compute model's constants and the NVLink facts NCCL needs, each with its source.

Hopper (H100, H200): kernels measured on one H200 SXM with ``scripts/measure_kernels.py``
(PyTorch 2.11, CUDA 13.0, cuDNN 9.19; the raw figures in ``measured/h200_kernels.json``).
The H100 has the H200's SMs, clocks and 700 W limit, so it takes the compute-bound
measurements as they are and the memory-bound ones as fractions of its own HBM peak:

* GEMMs: a table of cuBLAS BF16 and FP8 products (``measured/h200_gemm.csv``, see
  :mod:`astra_core.workload.generators.gemm_table`) on a grid of shapes and at the
  shapes of the validation suite's Hopper runs, timed at the clocks the part sustains
  under GEMM load (1.3-1.7 GHz at 640-690 W, after 20 s of products): a 16,384^3 BF16
  product ran at 702 TFLOP/s, FP8 at 1,291, against the MAMF figures below (794.5 and
  1,453.4, the best of a shape search), which the table matches at MAMF's kind of shape
  (2,048 x 2,048 x 8,192-16,384: 799-812 TFLOP/s BF16): a large product draws more
  power and runs at a lower clock. A shape measured twice, minutes apart, agreed within
  4 % (standard deviation of the ratio over 229 shapes).
* Element-wise kernels (add, mul, SiLU, row gather, FP8 cast, 2^28 elements): 0.826 of
  HBM peak (geometric mean); layer norm 0.507 forward, 0.517 backward; the fused
  multi-tensor Adam (the ``stream`` kind) 0.696.
* Attention: cuDNN's fused kernel (what Transformer Engine runs on Hopper and
  Megatron-core's default ``attention_backend=auto`` picks) at head dims 64, 128 and 192,
  causal and not, sequences 1K-16K.
* Compute beside communication (``scripts/measure_overlap.py``,
  ``measured/h200_overlap.json``): how much longer a GEMM takes beside a kernel whose
  thread blocks hold 8 to 32 SMs, as NCCL's channels do (``nccl_compute_slowdown``).
  Blackwell parts, not measured, take these factors at the same share of their 148 SMs.

Other parts, from published measurements:

* GEMMs: the *maximum achievable matmul FLOPS* (MAMF) of
  ``mamf-finder.py``, a brute-force shape search over ``torch.matmul``
  (S. Bekman, "Machine Learning Engineering", compute/accelerator/README.md,
  commit 744d01e: A100 SXM BF16 271.2, H100 SXM BF16 794.5 ("H200 is the
  same"), B200 SXM BF16 1745.0, H100 FP8 1402.6, H200 FP8 1453.4, B200 FP8
  3432.5 TFLOP/s; the later revision b9e29720 adds GB200 SXM BF16 1822.0 and
  FP8 3615.6 TFLOP/s of the GB200 NVL72 specification's 2,500 and 5,000).
* HBM: measured streaming bandwidth (BabelStream Triad on A100 SXM4 40 GB,
  1377.4 GB/s, ALCF Polaris guide, argonne-lcf/ALCFBeginnersGuide
  polaris/02_profiling.md; BabelStream 5.0 Triad on A100 SXM4 80 GB,
  1724.8 GB/s, EPCC Tursa benchmark README; device-to-device copy on H100 SXM
  80 GB HBM3, 2903 GB/s, Voltage Park / Georgia Tech H100 benchmark suite).
  No B200 or GB200 HBM measurement was found: they take that H100 fraction of peak.
* Framework kernels (element-wise, softmax, dropout, memory-bound GEMMs) on A100:
  PyTorch's standard attention of GPT-2 medium (sequence 1024, 16 heads of
  64, batch 64) moved 40.3 GB to and from HBM in 41.7 ms forward + backward on
  an A100 40 GB (Dao et al., "FlashAttention", NeurIPS 2022, Figure 2): 0.966
  TB/s, 0.621 of its 1,555 GB/s. Blackwell parts take the same fraction (no
  measurement found).
* Layer norm: the Apex fused layer norm that Megatron-LM copied in 2021
  (megatron/fused_kernels/layer_norm_cuda_kernel.cu) ran at 895.8 GB/s
  forward and 572.2 GB/s backward on GA100 (NVIDIA/apex PR #1037, batch 32 x
  512); A100 presets use these rates, Blackwell the element-wise rate.
* Attention: the fused kernel Megatron-core runs. On A100, FlashAttention-2's
  forward + backward TFLOP/s by sequence length, head dimension and mask, read from
  Dao-AILab/flash-attention assets/flash2_a100_fwd_bwd_benchmark.png (commit
  4f285b35; hidden 2048, batch 16k / seqlen, FLOPs counted as in its benchmark
  script: forward 4 b s^2 h d, halved when causal, backward 2.5x). On Blackwell
  Transformer Engine prefers cuDNN's fused attention
  (``get_attention_backend``: "Disabling FlashAttention to give FusedAttention
  preference on Hopper+", TE v2.9, the release Megatron-Bridge 25.11 pins). Its
  BF16 rates at head dim 128, forward and backward by sequence length, counted the
  same way, from NVIDIA/cudnn-frontend's benchmark results of cuDNN's own graphs (the
  path Transformer Engine takes, not PyTorch's SDPA, which the same files time 25-33 %
  slower): B200 and GB300 with cuDNN 9.13.01 (NGC PyTorch 25.09; the ``bf16`` rows of
  artifacts/sdpa_fp8_benchmark_results_NVIDIA_*.csv, commit bb37575d, from 2,048
  tokens: shorter ones take under 0.15 ms, their launch dominates), GB200 with cuDNN
  9.17 (artifacts/sdpa_bf16_benchmark_results_NVIDIA_GB200.csv, commit d48a60eb);
  causal, 128 query and 8 key/value heads. A sequence past a table's ends takes the
  end value.
* Launch: ``cudaLaunchKernel`` took 3.50 us on average on an A100 node
  (nsys, 501 calls, ALCF Polaris guide above); raw ``cuLaunchKernel`` 3.0 us
  on GB200 (meta-pytorch/tritonbench PR #1017), used for Hopper and Blackwell
  (on the H200's host a PyTorch eager launch cost 9.1 us; a kernel replayed from a
  CUDA graph 0.9 us of device time).
* SMs: 108 (A100), 132 (H100, H200), 148 (B200, Chips and Cheese, "Nvidia's
  B200: Keeping the CUDA Juggernaut Rolling"; GB200 and GB300 the same die).
* GB200 and GB300: the Blackwell GPU of the GB200 / GB300 NVL72 racks, run at
  1,200 / 1,400 W. Peaks per GPU from the racks' specifications divided by 72 and
  by 2 (NVIDIA lists them with sparsity): BF16 2.5, FP8 5 PFLOP/s for both;
  HBM3e 8 TB/s and 186 GB (GB200) or 288 GB (GB300). GB300 has no published
  GEMM measurement and takes GB200's (its 16- and 8-bit tensor cores and clocks
  are GB200's; Bekman's note 24); both take H100's HBM fraction.
* Sustained clocks: the Blackwell GEMM rates above are MAMF's best shape (a small output
  over a long inner dimension), its attention rates cudnn-frontend's 10 iterations with
  random inputs drawn between them; training runs large products and attention back to
  back, drawing enough power that the limit lowers the SM clock (on the H200, 16,384^3 ran
  at 0.88 of MAMF's rate, its best shapes at MAMF's rate). On a B200 at about 1,000 W
  FlashAttention-4 lost 15 % that way (1,450 -> 1,237 TFLOP/s after 70 back-to-back
  calls, SM clock 1,965 -> ~1,580 MHz; flashinfer-ai/flashinfer PR #2899): the B200's
  ``sustained_compute``. GB200 and GB300 (1,200 and 1,400 W) have no such measurement
  and keep their published rates. The Hopper tables were timed under sustained load.

A user file (JSON or YAML, the :class:`GPUSpec` keys;
:func:`astra_core.workload.generators.gpus.load_gpu`) describes another part or
replaces the models with measurements (``gemm_table``, ``attention_tflops``).

NVLink as NCCL sees it. NCCL does not see line rates: its topology search works with the bandwidth
it measured a single NVLink to sustain under its own protocols (``topo.h``:
``SM80_NVLINK_BW`` 20.0, ``SM90_NVLINK_BW`` 20.6, ``SM100_NVLINK_BW`` 40.1
GB/s per link and direction) and with a NIC's port speed (``topo.cc``:
``net.bw = speed_Mbps / 8000`` GB/s). astra takes the line rates from
network.yml, so a user who changes the fabric changes what NCCL finds; the
ratio between NCCL's per-link figure and the link's line rate (the share of
the wire NCCL's copy loops and flags leave for data) is a property of the GPU
generation and comes from here.

Units: GB/s with 1 GB = 1e9 bytes (NCCL's and the vendors' unit).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from astra_core.errors import ConfigError

__all__ = ["GPUS", "NCCL_GPU_NAMES", "GPUSpec", "gpu_model", "nic_gbps"]


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator, its kernel-model constants (:mod:`astra_core.workload.generators.kernels`)
    and its NVLink facts.

    ``peak_tflops``: dense FP16/BF16 tensor-core peak [TFLOP/s]; ``fp8_tflops``:
    dense FP8 peak (0: no FP8); ``memory_gbps``: HBM bandwidth [GB/s, 1e9 B/s];
    ``memory_gb``: capacity [GB]; ``sms``: streaming multiprocessors (0: no wave
    quantization). Efficiencies are fractions of peak reached (0 < e <= 1):
    ``gemm_efficiency`` (``fp8_efficiency``) by the best large 16-bit (FP8) GEMM,
    ``memory_efficiency`` by a streaming kernel, ``elementwise_efficiency`` by
    the framework's element-wise and softmax kernels. ``layernorm_gbps``: a fused
    layer norm's measured (forward, backward) rate [GB/s] (empty: the
    element-wise rate). ``attention_tflops``: measured fused attention
    (FlashAttention, cuDNN) forward + backward throughput, rows ``(causal, head_dim,
    seq_len, TFLOP/s)`` (empty: attention at the GEMM rate); ``attention_fwd_tflops``:
    the forward pass alone, rows of the same shape (empty: the forward + backward rate,
    which is lower: the backward kernel is the slower one). ``window_attention_tflops``:
    measured sliding-window attention, rows ``(window, head_dim, seq_len, forward
    TFLOP/s, backward TFLOP/s)`` counted over the band the window keeps (empty: a
    window runs at ``attention_tflops``' rate for a square of the band's area).
    ``fp8_attention_tflops``: measured FP8 fused attention, the kernel Transformer Engine runs
    for ``fp8_dot_product_attention`` on the part (MXFP8 on Blackwell), rows as
    ``attention_tflops`` (empty: not measured, FP8 attention refused). ``launch_us``: the
    host's cost of one kernel launch [us]. ``mx_block_scaling``: the tensor cores
    apply OCP MX block scales inside the MMA (Blackwell's ``tcgen05.mma`` block-scaled
    kinds, at the FP8 rate: NVIDIA Blackwell architecture technical brief), so MXFP8
    GEMMs run at ``fp8_tflops``. ``grouped_fp8_tflops``: the measured rate of the
    grouped FP8 GEMM of a mixture-of-experts layer's local experts (Transformer
    Engine's, one cuBLAS GEMM per expert over several streams) [TFLOP/s]; such a GEMM
    takes at least its FLOPs at this rate (0: not measured, the GEMM model alone); a
    plan whose experts run one fused grouped kernel instead leaves it out
    (``LLMConfig.moe_grouped_gemm``).
    ``gemm_table``: a CSV of measured GEMMs
    (:mod:`astra_core.workload.generators.gemm_table`) used instead of the GEMM model.
    ``sustained_compute``: the share of its compute-bound rates (the GEMM efficiencies,
    ``gemm_table``, ``grouped_fp8_tflops`` and the attention rows) that the part keeps under
    training's back-to-back load, where its power limit lowers the SM clock; 1 where those
    rates were measured under sustained load already (the memory-bound rates are
    unaffected: the HBM clock does not drop).

    As NCCL sees the part (0: not known, and then the NCCL model cannot run on it):
    ``compcap``, the compute capability x10 (NCCL's ``compCap``); ``nvlinks``, NVLink
    links per GPU; ``nvlink_line_gbps``, one link's line rate per direction [GB/s];
    ``nccl_nvlink_gbps``, what NCCL's topology assumes one link sustains
    (``SM*_NVLINK_BW``); ``nvls``, its HGX/DGX baseboard's NVSwitches reduce and
    multicast (NVLink SHARP, which NCCL uses from SM 90 on, ``NCCL_NVLS_ENABLE``);
    ``nvlink_source``, where those numbers are from. ``nccl_compute_slowdown``: rows
    ``(sms, factor)``, how much longer a GEMM takes beside a communication kernel that
    holds ``sms`` SMs, measured (empty: not measured, no slowdown;
    :mod:`astra_core.system.contention`).
    """

    name: str
    peak_tflops: float
    memory_gbps: float
    memory_gb: float = 80.0
    sms: int = 0
    fp8_tflops: float = 0.0
    gemm_efficiency: float = 1.0
    fp8_efficiency: float = 1.0
    memory_efficiency: float = 1.0
    elementwise_efficiency: float = 1.0
    layernorm_gbps: tuple = ()
    attention_tflops: tuple = ()
    attention_fwd_tflops: tuple = ()
    window_attention_tflops: tuple = ()
    fp8_attention_tflops: tuple = ()
    launch_us: float = 0.0
    mx_block_scaling: bool = False
    grouped_fp8_tflops: float = 0.0
    gemm_table: str | None = None
    sustained_compute: float = 1.0
    source: str = ""
    compcap: int = 0
    nvlinks: int = 0
    nvlink_line_gbps: float = 0.0
    nccl_nvlink_gbps: float = 0.0
    nvls: bool = False
    nvlink_source: str = ""
    nccl_compute_slowdown: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "attention_tflops", tuple(tuple(r) for r in self.attention_tflops))
        object.__setattr__(self, "attention_fwd_tflops", tuple(tuple(r) for r in self.attention_fwd_tflops))
        object.__setattr__(
            self, "window_attention_tflops", tuple(tuple(r) for r in self.window_attention_tflops)
        )
        object.__setattr__(self, "fp8_attention_tflops", tuple(tuple(r) for r in self.fp8_attention_tflops))
        object.__setattr__(self, "layernorm_gbps", tuple(self.layernorm_gbps))
        object.__setattr__(self, "nccl_compute_slowdown", tuple(tuple(r) for r in self.nccl_compute_slowdown))

    def margin_slowdown(self, sms: int) -> float:
        """How much longer a compute-bound kernel takes when launched on the SMs left after
        ``sms`` are reserved for another (Transformer Engine's ``set_sm_margin``): its
        thread blocks spread over ``self.sms - sms`` SMs, ``self.sms / (self.sms - sms)``;
        1 where the SM count is not known."""
        return self.sms / (self.sms - sms) if 0 < sms < self.sms else 1.0

    @property
    def hbm_bytes(self) -> float:
        """HBM capacity [bytes]: ``memory_gb`` read as GiB (HBM stacks come in GiB, and a
        datasheet's 80 GB H100 has 80 GiB of HBM3)."""
        return self.memory_gb * (1 << 30)

    def dense_tflops(self, precision: str) -> float:
        """Dense tensor-core peak [TFLOP/s] of ``precision``'s GEMMs: ``fp8_tflops`` for
        ``fp8``, ``peak_tflops`` for 16-bit."""
        return self.fp8_tflops if precision == "fp8" else self.peak_tflops

    @property
    def nvlink_efficiency(self) -> float:
        """NCCL's sustained share of the NVLink line rate (e.g. 20.6 / 25 on H100)."""
        return self.nccl_nvlink_gbps / self.nvlink_line_gbps

    @property
    def nvlink_gbps(self) -> float:
        """Line rate of all NVLinks of one GPU, one direction (H100: 450 GB/s)."""
        return self.nvlinks * self.nvlink_line_gbps


_SEQ = (512, 1024, 2048, 4096, 8192, 16384)


def _fa_rows(causal: bool, head_dim: int, tflops: tuple, scale: float = 1.0) -> tuple:
    """Rows of a FlashAttention-2 benchmark curve over :data:`_SEQ` (None: label not legible)."""
    return tuple((causal, head_dim, s, t * scale) for s, t in zip(_SEQ, tflops) if t is not None)


#: FlashAttention-2 forward + backward TFLOP/s (see the module docstring).
_FA2_A100 = (
    _fa_rows(True, 64, (88, 119, 140, 156, 165, 171))
    + _fa_rows(True, 128, (99, 133, 155, 173, 182, 189))
    + _fa_rows(False, 64, (132, None, 162, 171, 175, 176))
    + _fa_rows(False, 128, (None, 173, 187, 196, 201, 203))
)


def _cudnn_rows(causal: bool, head_dim: int, points: tuple, forward: bool = False) -> tuple:
    """Rows of a cuDNN SDPA benchmark: ``points`` (seq_len, forward, backward TFLOP/s),
    each counted as FlashAttention's benchmark counts (backward 2.5x forward's FLOPs),
    combined into one forward + backward rate: ``3.5 / (1 / fwd + 2.5 / bwd)``; with
    ``forward``, the forward rate alone."""
    return tuple((causal, head_dim, s, f if forward else 3.5 / (1.0 / f + 2.5 / b)) for s, f, b in points)


def _window_rows(window: int, head_dim: int, points: tuple) -> tuple:
    """Rows of a sliding-window attention benchmark (``GPUSpec.window_attention_tflops``):
    ``points`` (seq_len, forward, backward TFLOP/s) of one window and head dimension."""
    return tuple((window, head_dim, s, f, b) for s, f, b in points)


#: Measured on one H200 SXM (``measured/h200_kernels.json``, ``scripts/measure_kernels.py``:
#: PyTorch 2.11, CUDA 13.0, cuDNN 9.19, 2026-11-30). Hopper parts share these (the H100 has the
#: H200's SMs and clocks; memory-bound rates are fractions of each part's HBM peak).
_H200_GBPS = 4800.0
#: cuBLAS GEMMs, BF16 and FP8, on a grid of shapes (128 to 32,768 on each axis) and at the
#: shapes of the validation suite's Hopper runs, timed after 20 s of GEMMs (sustained clocks).
_HOPPER_GEMMS = str(Path(__file__).with_name("measured") / "h200_gemm.csv")
#: PyTorch's element-wise kernels (add, mul, SiLU, row gather, FP8 cast) over 2^28 elements:
#: geometric mean 3,965 GB/s.
_HOPPER_ELEMENTWISE = 3965.0 / _H200_GBPS
#: PyTorch's fused layer norm forward / backward over 2^28 elements (rows of 8,192): 2,434.2
#: and 2,480.4 GB/s.
_HOPPER_LAYERNORM = (2434.2 / _H200_GBPS, 2480.4 / _H200_GBPS)
#: PyTorch's fused (multi-tensor) Adam over 2^26 FP32 parameters, 28 bytes each: 3,339.9 GB/s.
_HOPPER_STREAM = 3339.9 / _H200_GBPS
#: A GEMM beside a kernel of 512-thread blocks that each hold an SM and copy about 20 GB/s
#: (NCCL's rate per channel inside an NVLink node: ring bus bandwidth of ~360 GB/s over 16-24
#: channels; at 2 GB/s per block the slowdowns were 0-6 points lower, so the
#: rate assumed hardly matters): the time with 8, 16, 24 and 32 such
#: blocks over the time alone, the mean of an 8,192^3 BF16 and an 8,192 x 28,672 x 4,096 FP8
#: product (``measured/h200_overlap.json``, ``pause_ns`` 500: 1.147 / 1.086, 1.246 / 1.202,
#: 1.234 / 1.191, 1.365 / 1.340).
_HOPPER_COMM_SLOWDOWN = ((8, 1.117), (16, 1.224), (24, 1.213), (32, 1.353))
#: Blackwell's 148 SMs (B200, GB200, GB300; no measurement): H200's factors at the same share
#: of the SMs held, k of 148 read at k x 132 / 148 of its 132 (linear between its rows).
_BLACKWELL_COMM_SLOWDOWN = ((8, 1.104), (16, 1.201), (24, 1.217), (32, 1.292), (36, 1.353))
#: cuDNN fused attention (Transformer Engine's FusedAttention, what Megatron-core runs on
#: Hopper) through ``scaled_dot_product_attention``, BF16, 16 heads, 16,384 tokens per call,
#: forward + backward TFLOP/s counted as FlashAttention's benchmark counts them.
#: NVIDIA/cudnn-frontend's published H200 rates (cuDNN 9.1, head dim 128) are 7-15 % lower.
_CUDNN_HOPPER = tuple(
    (causal, dim, seq, tflops)
    for causal, dim, curve in (
        (True, 64, (255, 323, 379, 415, 448)),
        (False, 64, (360, 421, 452, 468, 479)),
        (True, 128, (338, 438, 511, 553, 599)),
        (False, 128, (485, 558, 596, 614, 601)),
        (True, 192, (259, 330, 374, 406, 379)),
        (False, 192, (315, 369, 416, 425, 365)),
    )
    for seq, tflops in zip((1024, 2048, 4096, 8192, 16384), curve)
)
#: The same kernels' forward pass alone (``fwd_us`` of the same measurements), TFLOP/s.
_CUDNN_HOPPER_FWD = tuple(
    (causal, dim, seq, tflops)
    for causal, dim, curve in (
        (True, 64, (322, 374, 413, 440, 450)),
        (False, 64, (428, 459, 475, 486, 495)),
        (True, 128, (450, 528, 586, 616, 644)),
        (False, 128, (625, 666, 678, 691, 694)),
        (True, 192, (493, 577, 625, 654, 677)),
        (False, 192, (632, 679, 708, 710, 723)),
    )
    for seq, tflops in zip((1024, 2048, 4096, 8192, 16384), curve)
)
#: cuDNN's own graphs (the frontend, as Transformer Engine calls them), BF16, cuDNN 9.13.01 in
#: NGC PyTorch 25.09: the ``bf16`` rows of benchmark/sdpa_benchmark_training/artifacts/
#: sdpa_fp8_benchmark_results_NVIDIA_B200.csv and ..._GB300.csv (commit bb37575d), from 2,048.
_B200_SDPA = (
    ((2048, 908, 545), (4096, 1141, 833), (8192, 1384, 995), (16384, 1475, 1152), (32768, 1515, 1180),
     (65536, 1494, 1236), (131072, 1422, 1128))
)  # fmt: skip
_CUDNN_B200 = _cudnn_rows(True, 128, _B200_SDPA)
_CUDNN_B200_FWD = _cudnn_rows(True, 128, _B200_SDPA, forward=True)
_GB200_SDPA = (
    ((512, 408, 329), (1024, 733, 527), (2048, 1069, 655), (4096, 1386, 1054), (8192, 1584, 1211),
     (16384, 1668, 1304), (32768, 1681, 1348), (65536, 1573, 1229), (131072, 1467, 1188))
)  # fmt: skip
_CUDNN_GB200 = _cudnn_rows(True, 128, _GB200_SDPA)
_CUDNN_GB200_FWD = _cudnn_rows(True, 128, _GB200_SDPA, forward=True)
_GB300_SDPA = (
    ((2048, 1000, 545), (4096, 1445, 942), (8192, 1716, 1150), (16384, 1836, 1291), (32768, 1884, 1350),
     (65536, 1832, 1399), (131072, 1740, 1347))
)  # fmt: skip
#: GPT-OSS's sliding-window attention (window 128, head dim 64, 128 heads, batch 2, BF16,
#: cuDNN 9.22): (window, head dim, sequence, forward, backward TFLOP/s) over the band, from
#: NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/gpt_oss/{gb200,gb300}/
#: (commit 3929da2e, 2026-04-24). Its forward at 32,768 tokens (104 / 108) is as measured.
_GB200_WINDOW = _window_rows(
    128, 64, ((2048, 153, 176), (4096, 161, 182), (8192, 165, 187), (16384, 167, 188), (32768, 104, 186))
)
_GB300_WINDOW = _window_rows(
    128, 64, ((2048, 160, 184), (4096, 167, 191), (8192, 172, 198), (16384, 173, 200), (32768, 108, 199))
)
#: cuDNN's MXFP8 attention (Transformer Engine's FP8 dot-product attention under the MXFP8
#: recipe, TE PR #2719), Llama 3.1's heads (64 query, 8 key/value, head dim 128), causal,
#: batch 2, non-deterministic backward, cuDNN 9.22: (seq_len, forward, backward TFLOP/s),
#: NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/llama3.1/{gb200,gb300}/
#: (commit 3929da2e, 2026-04-24), the ``mxfp8`` ``top_left`` rows.
_GB200_MXFP8_SDPA = ((2048, 1330, 745), (4096, 1685, 1054), (8192, 1902, 1287), (16384, 1999, 1436), (32768, 2046, 1425))  # fmt: skip
_GB300_MXFP8_SDPA = ((2048, 1751, 811), (4096, 2272, 1143), (8192, 2570, 1404), (16384, 2727, 1563), (32768, 2785, 1590))  # fmt: skip
_CUDNN_GB300 = _cudnn_rows(True, 128, _GB300_SDPA)
_CUDNN_GB300_FWD = _cudnn_rows(True, 128, _GB300_SDPA, forward=True)
#: B200 under back-to-back tensor-core load: FlashAttention-4 BF16 (batch 4, 8,192 tokens, 16
#: heads of 128) timed 100 times in a row ran at 1,450 TFLOP/s at its best (iterations 10-19)
#: and 1,237 once throttled (iterations 70-79), its SM clock down from 1,965 to about 1,580 MHz
#: at about 1,000 W (flashinfer-ai/flashinfer PR #2899, 2026-03-26). B200's GEMM (MAMF's best
#: shape) and attention (cudnn-frontend: 10 calls, random inputs drawn between) rates are not
#: held that long or at that power.
_B200_SUSTAINED = 1237.0 / 1450.0
_MAMF = "MAMF (Bekman, ml-engineering 744d01e)"
_MAMF_GB200 = "MAMF (Bekman, ml-engineering b9e29720) GB200 BF16 1822.0, FP8 3615.6 TFLOPS"
#: Transformer Engine's MXFP8 grouped GEMM (multi-stream cuBLAS) on a GB200, DeepSeek-V3's
#: expert shape K 7,168, N 2,048, L2 flushed [TFLOP/s] (NVIDIA/Megatron-LM
#: docs/discussions/deepseek-v3-gb200-optimization/deepseek-v3-gb200-optimization.md,
#: commit 1d9edcf8, section 1, item 3).
_GROUPED_MXFP8_GB200 = 2672.0
_GROUPED_GB200 = "TE grouped MXFP8 GEMM 2,672 TFLOPS (Megatron-LM's DeepSeek-V3 GB200 guide)"
#: Framework kernels' fraction of HBM peak: 40.3 GB in 41.7 ms on an A100 40 GB (1,555 GB/s).
_ELEMENTWISE = 40.3 / 41.7e-3 / 1555.0
#: Apex fused layer norm forward, backward [GB/s] on GA100 (NVIDIA/apex PR #1037).
_APEX_LAYERNORM = (895.8, 572.2)
_KERNELS = (
    "framework kernels at 0.621 of HBM peak (FlashAttention, Figure 2); Apex layer norm "
    "895.8 / 572.2 GB/s (apex #1037)"
)

#: NVLink 3 and 4 run 25 GB/s per link and direction (50 GB/s bidirectional); NVLink 5
#: runs 50 GB/s per link and direction (NVIDIA NVLink page: A100 600 GB/s total over 12
#: links, H100 900 GB/s over 18, B200 1.8 TB/s over 18). NCCL's per-link figures are
#: topo.h's SM80/SM90/SM100_NVLINK_BW.
_NVLINK3: dict[str, Any] = dict(
    compcap=80,
    nvlinks=12,
    nvlink_line_gbps=25.0,
    nccl_nvlink_gbps=20.0,
    nvls=False,
    nvlink_source="NVIDIA A100 datasheet (NVLink 3: 12 links, 600 GB/s); NCCL topo.h SM80_NVLINK_BW",
)
_NVLINK4: dict[str, Any] = dict(
    compcap=90, nvlinks=18, nvlink_line_gbps=25.0, nccl_nvlink_gbps=20.6, nvls=True
)
_NVLINK5: dict[str, Any] = dict(
    compcap=100, nvlinks=18, nvlink_line_gbps=50.0, nccl_nvlink_gbps=40.1, nvls=True
)
_NVL72 = "(NVLink 5: 1.8 TB/s per GPU, 72 GPUs on NVLink switch trays); NCCL topo.h SM100_NVLINK_BW"

_H100_SPEC = GPUSpec(
    "H100",
    989.0,
    3350.0,
    80.0,
    sms=132,
    fp8_tflops=1979.0,
    gemm_efficiency=794.5 / 989.0,
    fp8_efficiency=1402.6 / 1979.0,
    memory_efficiency=_HOPPER_STREAM,
    elementwise_efficiency=_HOPPER_ELEMENTWISE,
    layernorm_gbps=tuple(round(f * 3350.0, 1) for f in _HOPPER_LAYERNORM),
    attention_tflops=_CUDNN_HOPPER,
    attention_fwd_tflops=_CUDNN_HOPPER_FWD,
    launch_us=3.0,
    gemm_table=_HOPPER_GEMMS,
    source="NVIDIA H100 datasheet (SXM): BF16 989 / FP8 1,979 TFLOPS dense, HBM3 3.35 TB/s; "
    f"{_MAMF} BF16 794.5, FP8 1402.6 TFLOPS; GEMMs, attention, element-wise, layer-norm and "
    "Adam kernels measured on an H200 (measured/h200_kernels.json); cuLaunchKernel 3.0 us "
    "(tritonbench #1017)",
    **_NVLINK4,
    nvlink_source="NVIDIA H100 datasheet (NVLink 4: 18 links, 900 GB/s); NCCL topo.h SM90_NVLINK_BW",
    nccl_compute_slowdown=_HOPPER_COMM_SLOWDOWN,
)

_GB200_SPEC = GPUSpec(
    "GB200",
    2500.0,
    8000.0,
    186.0,
    sms=148,
    fp8_tflops=5000.0,
    gemm_efficiency=1822.0 / 2500.0,
    fp8_efficiency=3615.6 / 5000.0,
    memory_efficiency=2903.0 / 3350.0,
    elementwise_efficiency=_ELEMENTWISE,
    attention_tflops=_CUDNN_GB200,
    attention_fwd_tflops=_CUDNN_GB200_FWD,
    window_attention_tflops=_GB200_WINDOW,
    fp8_attention_tflops=_cudnn_rows(True, 128, _GB200_MXFP8_SDPA),
    launch_us=3.0,
    mx_block_scaling=True,
    grouped_fp8_tflops=_GROUPED_MXFP8_GB200,
    nccl_compute_slowdown=_BLACKWELL_COMM_SLOWDOWN,
    source="NVIDIA GB200 NVL72 specification / 72 / 2 (sparsity): BF16 2.5 / FP8 5 PFLOPS dense "
    f"per GPU, HBM3e 8 TB/s, 13.4 TB / 72 = 186 GB; {_MAMF_GB200}; {_GROUPED_GB200}; cuDNN 9.17 "
    "attention (cudnn-frontend); H100's HBM efficiency; A100's framework-kernel fraction",
    **_NVLINK5,
    nvlink_source=f"NVIDIA GB200 NVL72 specification {_NVL72}",
)

GPUS: dict[str, GPUSpec] = {
    g.name.lower(): g
    for g in (
        GPUSpec(
            "A100",
            312.0,
            2039.0,
            80.0,
            sms=108,
            gemm_efficiency=271.2 / 312.0,
            memory_efficiency=1724.8 / 2039.0,
            elementwise_efficiency=_ELEMENTWISE,
            layernorm_gbps=_APEX_LAYERNORM,
            attention_tflops=_FA2_A100,
            launch_us=3.5,
            source="NVIDIA A100 datasheet (SXM 80GB): BF16 312 TFLOPS dense, HBM2e 2,039 GB/s; "
            f"{_MAMF} 271.2 TFLOPS; BabelStream Triad 1724.8 GB/s (EPCC Tursa); {_KERNELS}; "
            "FA2 A100 benchmark; cudaLaunchKernel 3.50 us (ALCF Polaris)",
            **_NVLINK3,
        ),
        GPUSpec(
            "A100-40GB",
            312.0,
            1555.0,
            40.0,
            sms=108,
            gemm_efficiency=271.2 / 312.0,
            memory_efficiency=1377.4 / 1555.0,
            elementwise_efficiency=_ELEMENTWISE,
            layernorm_gbps=_APEX_LAYERNORM,
            attention_tflops=_FA2_A100,
            launch_us=3.5,
            source="NVIDIA A100 datasheet (SXM 40GB): BF16 312 TFLOPS dense, HBM2 1,555 GB/s; "
            f"{_MAMF} 271.2 TFLOPS (A100 SXM); BabelStream Triad 1377.4 GB/s (ALCF Polaris); "
            f"{_KERNELS}; FA2 A100 benchmark; cudaLaunchKernel 3.50 us (ALCF Polaris)",
            **_NVLINK3,
        ),
        _H100_SPEC,
        # the H100 with HBM3e: the same SMs and clocks, so its GEMM, FlashAttention and
        # kernel-efficiency measurements
        replace(
            _H100_SPEC,
            name="H200",
            memory_gbps=_H200_GBPS,
            memory_gb=141.0,
            fp8_efficiency=1453.4 / 1979.0,
            layernorm_gbps=tuple(round(f * _H200_GBPS, 1) for f in _HOPPER_LAYERNORM),
            source="NVIDIA H200 datasheet (SXM): BF16 989 / FP8 1,979 TFLOPS dense, HBM3e 4.8 TB/s, "
            f"141 GB; {_MAMF} BF16 as H100, FP8 1453.4 TFLOPS; GEMMs, attention, element-wise, "
            "layer-norm and Adam kernels measured on an H200 (measured/h200_kernels.json)",
            nvlink_source="NVIDIA H200 datasheet (NVLink 4: 18 links, 900 GB/s); NCCL topo.h SM90_NVLINK_BW",
        ),
        GPUSpec(
            "B200",
            2250.0,
            8000.0,
            180.0,
            sms=148,
            fp8_tflops=4500.0,
            gemm_efficiency=1745.0 / 2250.0,
            fp8_efficiency=3432.5 / 4500.0,
            memory_efficiency=2903.0 / 3350.0,
            elementwise_efficiency=_ELEMENTWISE,
            attention_tflops=_CUDNN_B200,
            attention_fwd_tflops=_CUDNN_B200_FWD,
            launch_us=3.0,
            mx_block_scaling=True,
            sustained_compute=_B200_SUSTAINED,
            nccl_compute_slowdown=_BLACKWELL_COMM_SLOWDOWN,
            source="NVIDIA DGX B200 datasheet: BF16 2.25 / FP8 4.5 PFLOPS dense per GPU, HBM3e 8 TB/s; "
            f"{_MAMF} BF16 1745.0, FP8 3432.5 TFLOPS; cuDNN 9.13 attention (cudnn-frontend graphs); "
            "sustained at 1,237 / 1,450 of them (flashinfer #2899); H100's HBM efficiency; "
            "A100's framework-kernel fraction",
            **_NVLINK5,
            nvlink_source="NVIDIA B200 / HGX B200 datasheet (NVLink 5: 18 links, 1.8 TB/s); "
            "NCCL topo.h SM100_NVLINK_BW",
        ),
        _GB200_SPEC,
        # the Blackwell Ultra GPU of the GB300 NVL72: GB200's 16- and 8-bit tensor-core rates,
        # more HBM
        replace(
            _GB200_SPEC,
            name="GB300",
            memory_gb=288.0,
            attention_tflops=_CUDNN_GB300,
            attention_fwd_tflops=_CUDNN_GB300_FWD,
            window_attention_tflops=_GB300_WINDOW,
            fp8_attention_tflops=_cudnn_rows(True, 128, _GB300_MXFP8_SDPA),
            source="NVIDIA GB300 NVL72 specification / 72 / 2 (sparsity): BF16 2.5 / FP8 5 PFLOPS dense "
            f"per GPU, HBM3e 8 TB/s, 288 GB; GB200's {_MAMF_GB200} and {_GROUPED_GB200} (no GB300 "
            "measurement); H100's "
            "HBM efficiency; its cuDNN attention (cudnn-frontend); A100's framework-kernel fraction",
            compcap=103,
            nvlink_source=f"NVIDIA GB300 NVL72 specification {_NVL72}",
        ),
    )
}


#: The presets the NCCL model knows (those with NVLink facts), by name.
NCCL_GPU_NAMES = tuple(g.name for g in GPUS.values() if g.nvlinks)


def gpu_model(name: str, source: str = "system.json") -> GPUSpec:
    """The preset called ``name`` (case-insensitive) that says how NCCL sees it; ConfigError
    naming ``source`` and the known names otherwise."""
    for model in GPUS.values():
        if model.name.lower() == str(name).lower() and model.nvlinks:
            return model
    raise ConfigError(f"{source}: nccl.gpu: unknown GPU {name!r}; known: {', '.join(NCCL_GPU_NAMES)}")


def nic_gbps(port_gbit: float) -> float:
    """NCCL's bandwidth of a NIC port of ``port_gbit`` Gb/s, in GB/s (``speed / 8000``
    with the speed in Mb/s, topo.cc): 400 Gb/s NDR -> 50 GB/s."""
    return port_gbit / 8.0
