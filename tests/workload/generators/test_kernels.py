"""The GPU compute model: kernel times from shapes, against closed forms and published
per-kernel measurements (each with its source)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from astra_core.errors import ConfigError
from astra_core.workload.generators import ops as O
from astra_core.workload.generators.gpus import GPUS, load_gpu
from astra_core.workload.generators.kernels import (
    attention_tflops,
    gemm_ns,
    kernel_ns,
    memory_rate,
    window_tflops,
)
from astra_core.workload.generators.models import ModelConfig

A100 = GPUS["a100"]
A100_40 = GPUS["a100-40gb"]


def best_rate(gpu) -> float:
    """FLOP/ns of the best large GEMM."""
    return gpu.peak_tflops * 1e3 * gpu.gemm_efficiency


def test_one_tile_more_than_the_sms_costs_a_second_wave():
    # 2304 x 1536 outputs in 256 x 128 tiles: 9 x 12 = 108 tiles, one per A100 SM
    k = 8192
    one = gemm_ns(A100, 1, 2304, 1536, k)
    assert one == pytest.approx(2.0 * 256 * 128 * k * 108 / best_rate(A100))
    # one column more: 9 x 13 = 117 tiles (the other orientation needs 18 x 7 = 126): 2 waves
    assert gemm_ns(A100, 1, 2304, 1537, k) == pytest.approx(2 * one)


def test_a_large_gemm_runs_at_the_best_measured_rate():
    # 16384^2 outputs: 64 x 128 = 8192 tiles of 256 x 128 over 108 SMs: 76 waves of 108
    k = 16384
    ns = gemm_ns(A100, 1, 16384, 16384, k)
    assert ns == pytest.approx(76 * 108 * 2.0 * 256 * 128 * k / best_rate(A100))
    assert 2.0 * 16384**3 / ns / 1e3 == pytest.approx(271.2 * 8192 / (76 * 108))  # TFLOP/s


def test_a_thin_gemm_is_bound_by_its_traffic():
    # attention scores: 128 products of (2048 x 64) @ (64 x 2048): 2 B x (2 x 2048 x 64 + 2048^2) each
    traffic = 2.0 * 128 * (2 * 2048 * 64 + 2048 * 2048)
    assert gemm_ns(A100, 128, 2048, 2048, 64) == pytest.approx(traffic / memory_rate(A100, O.ELEMENTWISE))


def test_memory_kernels_run_at_their_measured_rates():
    model = ModelConfig("m", layers=1, hidden=4096, heads=32, ffn_hidden=16384, vocab=0, seq_len=2048)
    norm = O.attention_ops(model, 4, 2048, 1, False)[0]
    elems = 4 * 2048 * 4096
    # Apex layer norm (apex #1037): 895.8 GB/s forward, 572.2 GB/s backward
    assert kernel_ns(A100, norm) == pytest.approx(2 * 2 * elems / 895.8)
    assert kernel_ns(A100, O.backward([norm])[0]) == pytest.approx(3 * 2 * elems / 572.2)
    # on an H100 at the fraction of HBM peak PyTorch's layer norm reached on an H200
    # (2,434.2 of 4,800 GB/s forward, 2,480.4 backward)
    h100 = GPUS["h100"]
    assert kernel_ns(h100, norm) == pytest.approx(2 * 2 * elems / (3350.0 * 2434.2 / 4800), rel=1e-4)
    assert kernel_ns(h100, O.backward([norm])[0]) == pytest.approx(
        3 * 2 * elems / (3350.0 * 2480.4 / 4800), rel=1e-4
    )
    # the fused Adam streams at the BabelStream rate: 28 B per parameter
    adam = [op for op in O.optimizer_ops(1e9, 1e9, "bf16", 4) if op.name == "adam"][0]
    assert kernel_ns(A100, adam) == pytest.approx(28e9 / 1724.8)


@pytest.mark.parametrize(
    ("gpu", "seq", "fwd", "bwd"),
    [("b200", 32768, 1515, 1180), ("gb200", 8192, 1584, 1211), ("gb300", 4096, 1445, 942)],
)
def test_blackwell_attention_is_cudnns_forward_and_backward(gpu, seq, fwd, bwd):
    # cudnn-frontend's causal BF16 rates at head dim 128 of cuDNN's own graphs (B200, GB300:
    # cuDNN 9.13.01, commit bb37575d; GB200: 9.17, d48a60eb): the forward and a backward of
    # 2.5x its FLOPs take 1/fwd + 2.5/bwd, so the pair runs at 3.5 / (1/fwd + 2.5/bwd), at
    # the share of those bursts the part sustains
    sustained = GPUS[gpu].sustained_compute
    assert attention_tflops(GPUS[gpu], True, 128, seq) == pytest.approx(
        sustained * 3.5 / (1 / fwd + 2.5 / bwd)
    )


def _h200_cudnn_causal_128_at_8192() -> dict:
    """The H200's measured cuDNN attention of 16 heads of 128, causal, sequence 8,192."""
    measured = json.loads((Path(GPUS["h100"].gemm_table).parent / "h200_kernels.json").read_text())
    (row,) = [
        r
        for r in measured["attention"]
        if r["backend"] == "cudnn" and r["causal"] and r["head_dim"] == 128 and r["queries"] == 8192
        and r["kv_heads"] == 16
    ]  # fmt: skip
    return row


def test_hopper_attention_is_the_measured_cudnn_rate():
    """cuDNN 9.19 on an H200 (astra_core/config/measured/h200_kernels.json): one forward +
    backward of 16 heads over 16,384 tokens at sequence 8,192, causal, head dim 128 took
    the time of 553 TFLOP/s counted as FlashAttention's benchmark counts them."""
    row = _h200_cudnn_causal_128_at_8192()
    work = 3.5 * 4.0 * row["batch"] * 16 * 8192**2 * 128 * 0.5  # forward + 2.5x backward FLOPs
    rate = work / (row["fwd_bwd_us"] * 1e-6) / 1e12
    for gpu in ("h100", "h200"):
        assert attention_tflops(GPUS[gpu], True, 128, 8192) == pytest.approx(rate, rel=0.002)
    # between two measured lengths: linear in log(length); head dim 64 has its own curve
    h100 = GPUS["h100"]
    assert attention_tflops(h100, True, 128, math.sqrt(8192 * 16384)) == pytest.approx((553 + 599) / 2)
    assert attention_tflops(h100, True, 64, 8192) == pytest.approx(415)


def test_forward_attention_is_the_measured_forward_pass():
    """The forward pass alone runs at its own measured rate: on Hopper the H200's cuDNN
    ``fwd_us`` (causal, head dim 128, sequence 8,192), on Blackwell cudnn-frontend's forward
    column; a part without forward rows (A100) takes its forward + backward rate."""
    row = _h200_cudnn_causal_128_at_8192()
    rate = 4.0 * row["batch"] * 16 * 8192**2 * 128 * 0.5 / (row["fwd_us"] * 1e-6) / 1e12
    assert attention_tflops(GPUS["h100"], True, 128, 8192, forward=True) == pytest.approx(rate, rel=0.002)
    assert attention_tflops(GPUS["b200"], True, 128, 32768, forward=True) == pytest.approx(1237 / 1450 * 1515)
    assert attention_tflops(GPUS["gb200"], True, 128, 8192, forward=True) == 1584
    assert attention_tflops(A100, True, 128, 2048, forward=True) == 155


def test_a_tiny_kernel_costs_its_launch():
    assert kernel_ns(A100, O.grad_accumulation_op(1000)) == A100.launch_us * 1e3


def test_flash_attention_throughput_between_measured_lengths():
    # FlashAttention-2 A100 benchmark, causal, head dim 128: 133 TFLOP/s at 1k, 155 at 2k
    assert attention_tflops(A100, True, 128, 2048) == 155
    assert attention_tflops(A100, True, 128, math.sqrt(1024 * 2048)) == pytest.approx(144)
    assert attention_tflops(A100, True, 128, 65536) == 189  # the longest measured length
    # the causal kernel executes half the score matrix: fwd + bwd = 3.5 x 2 b h s^2 d at that rate
    model = ModelConfig("m", layers=1, hidden=2048, heads=16, ffn_hidden=8192, vocab=0, seq_len=2048)
    fwd = O.attention_core_ops(model, 8, 2048, 1)
    bwd = O.backward(fwd)
    work = 4.0 * 8 * 16 * 2048**2 * 128 * 0.5
    total = kernel_ns(A100, fwd[0]) + kernel_ns(A100, bwd[0])
    assert total == pytest.approx(3.5 * work / (155 * 1e3))


@pytest.mark.parametrize("dropout, fwd_ms, bwd_ms", [(False, 4.28, 8.86), (True, 6.56, 10.80)])
def test_megatron_attention_matches_its_measured_time(dropout, fwd_ms, bwd_ms):
    """Megatron-LM's unfused attention on an A100 40 GB, batch 16, 8 heads of 64, sequence
    2048, no mask: Dao et al., FlashAttention (NeurIPS 2022), appendix E, tables 15-20
    (forward / backward ms with dropout 0.1, and without). The model's framework-kernel
    rate comes from a different measurement (the paper's figure 2)."""
    model = ModelConfig("m", layers=1, hidden=512, heads=8, ffn_hidden=2048, vocab=0, seq_len=2048)
    fwd = O.attention_core_ops(model, 16, 2048, 1, "unfused", dropout, causal=False)
    predicted_fwd = sum(kernel_ns(A100_40, o, "fp16") for o in fwd) / 1e6
    predicted_bwd = sum(kernel_ns(A100_40, o, "fp16") for o in O.backward(fwd)) / 1e6
    assert predicted_fwd + predicted_bwd == pytest.approx(fwd_ms + bwd_ms, rel=0.15)
    assert predicted_fwd == pytest.approx(fwd_ms, rel=0.15)
    assert predicted_bwd == pytest.approx(bwd_ms, rel=0.2)


def test_a_measured_gemm_table_replaces_the_model(tmp_path):
    table = tmp_path / "gemms.csv"
    table.write_text("m,n,k,time_us,batch\n4096,4096,4096,600,1\n1024,1024,1024,40,2\n")
    spec = tmp_path / "gpu.json"
    spec.write_text(
        json.dumps({"name": "mine", "peak_tflops": 312, "memory_gbps": 2039, "gemm_table": "gemms.csv"})
    )
    gpu = load_gpu(spec)
    gemm = O.Op("g", 0, 0, O.GEMM, (3, 4096, 4096, 4096))
    assert kernel_ns(gpu, gemm) == pytest.approx(3 * 600e3)  # a measured shape, per product
    # another shape at the rate of the nearest measured one (by |log| distance): 1024^3 at
    # 2 x 1024^3 / 20 us per product
    other = O.Op("g", 0, 0, O.GEMM, (1, 1024, 1024, 2048))
    assert kernel_ns(gpu, other) == pytest.approx(2.0 * 1024 * 1024 * 2048 / (2.0 * 1024**3 / 20e3))


@pytest.mark.parametrize(
    "content, message",
    [
        ("m,n,time_us\n1,2,3\n", "missing column"),
        ("m,n,k,time_us\n1,2,x,3\n", "row 2: m, n, k, batch and time_us must be numbers"),
        ("m,n,k,time_us\n1,2,3,0\n", "row 2: .* must be positive"),
        ("m,n,k,time_us\n", "has no rows"),
    ],
)
def test_bad_gemm_tables_are_one_line(tmp_path, content, message):
    (tmp_path / "t.csv").write_text(content)
    spec = tmp_path / "gpu.json"
    spec.write_text(json.dumps({"name": "x", "peak_tflops": 1, "memory_gbps": 1, "gemm_table": "t.csv"}))
    with pytest.raises(ConfigError, match=message):
        load_gpu(spec)


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"layernorm_gbps": [100]}, "layernorm_gbps: expected"),
        ({"elementwise_efficiency": 1.5}, "elementwise_efficiency: a fraction, must be <= 1"),
        ({"sustained_compute": 1.2}, "sustained_compute: a fraction, must be <= 1"),
        ({"sustained_compute": 0}, "sustained_compute: must be a positive number"),
        ({"attention_tflops": [[True, 64, 2048]]}, "attention_tflops: expected rows"),
        ({"sms": 1.5}, "sms: must be an integer"),
        (
            {"nvlinks": 18},
            "nvlinks: a GPU file holds the compute model.s keys; the NCCL model takes its GPU by name",
        ),
    ],
)
def test_bad_gpu_files_are_one_line(tmp_path, extra, message):
    spec = tmp_path / "gpu.json"
    spec.write_text(json.dumps({"name": "x", "peak_tflops": 100, "memory_gbps": 1000, **extra}))
    with pytest.raises(ConfigError, match=message):
        load_gpu(spec)


def test_an_fp8_expert_gemm_runs_at_most_at_the_measured_grouped_rate():
    # Megatron-LM's DeepSeek-V3 GB200 guide: Transformer Engine's grouped MXFP8 GEMM reaches
    # 2,672 TFLOP/s at K 7,168, N 2,048; 8 local experts of 4,096 rows each
    gb200 = GPUS["gb200"]
    up = O.gemm_op("experts_up_dgrad", 4096, 2048, 7168, 8)
    flops = 2.0 * 8 * 4096 * 2048 * 7168
    assert kernel_ns(gb200, up, "fp8") == pytest.approx(flops / 2672e3)
    # the same shape as a dense GEMM, or in BF16, keeps the GEMM model (3,615.6 TFLOP/s FP8)
    dense = O.gemm_op("mlp_up", 4096, 2048, 7168, 8)
    assert kernel_ns(gb200, dense, "fp8") == pytest.approx(gemm_ns(gb200, 8, 4096, 2048, 7168, "fp8"))
    assert flops / kernel_ns(gb200, dense, "fp8") / 1e3 == pytest.approx(3615.6, rel=0.02)  # waves
    assert kernel_ns(gb200, up, "bf16") == pytest.approx(gemm_ns(gb200, 8, 4096, 2048, 7168, "bf16"))
    # a part without the measurement (B200) keeps the model; GB300 takes GB200's
    assert GPUS["b200"].grouped_fp8_tflops == 0 and GPUS["gb300"].grouped_fp8_tflops == 2672.0


def test_a_gpu_file_may_give_a_grouped_fp8_rate(tmp_path):
    spec = tmp_path / "gpu.json"
    spec.write_text(
        json.dumps({"name": "x", "peak_tflops": 100, "memory_gbps": 1000, "grouped_fp8_tflops": 150})
    )
    assert load_gpu(spec).grouped_fp8_tflops == 150
    spec.write_text(
        json.dumps({"name": "x", "peak_tflops": 100, "memory_gbps": 1000, "grouped_fp8_tflops": -1})
    )
    with pytest.raises(ConfigError, match="grouped_fp8_tflops"):
        load_gpu(spec)


def test_a_gpu_files_window_rows_are_checked(tmp_path):
    spec = tmp_path / "gpu.json"
    base = {"name": "x", "peak_tflops": 100, "memory_gbps": 1000}
    spec.write_text(json.dumps({**base, "window_attention_tflops": [[128, 64, 4096, 150, 170]]}))
    assert load_gpu(spec).window_attention_tflops == ((128, 64, 4096, 150, 170),)
    spec.write_text(json.dumps({**base, "window_attention_tflops": [[128, 64, 4096, 150]]}))
    with pytest.raises(ConfigError, match="window_attention_tflops: expected rows"):
        load_gpu(spec)


def test_sustained_compute_slows_every_compute_bound_rate_and_no_memory_bound_one():
    # A part that keeps 0.8 of its burst rates: compute-bound kernels take 1 / 0.8 as long,
    # memory-bound ones (the HBM clock does not drop) as long as before.
    gb200 = GPUS["gb200"]
    hot = replace(gb200, sustained_compute=0.8)
    big = O.gemm_op("mlp_up", 16384, 16384, 16384)
    expert = O.gemm_op("experts_up_dgrad", 4096, 2048, 7168, 8)
    for op, precision in ((big, "bf16"), (big, "fp8"), (expert, "fp8")):
        assert kernel_ns(hot, op, precision) == pytest.approx(kernel_ns(gb200, op, precision) / 0.8)
    for forward in (True, False):
        burst = attention_tflops(gb200, True, 128, 8192, forward=forward)
        assert attention_tflops(hot, True, 128, 8192, forward=forward) == pytest.approx(0.8 * burst)
    assert window_tflops(hot, 128, 64, 4096, True) == pytest.approx(
        0.8 * window_tflops(gb200, 128, 64, 4096, True)
    )
    # a measured GEMM table (the H100 preset's, timed at sustained clocks) scales alike
    h100 = GPUS["h100"]
    table_op = O.gemm_op("mlp_up", 8192, 28672, 8192)
    assert kernel_ns(replace(h100, sustained_compute=0.8), table_op, "fp8") == pytest.approx(
        kernel_ns(h100, table_op, "fp8") / 0.8
    )
    # a layer norm streams at the same rate
    norm = O.norm_op("norm", 8192, 4096, 1, False)
    assert kernel_ns(hot, norm) == kernel_ns(gb200, norm)


def test_b200_keeps_the_throttled_share_of_its_burst_rates():
    # flashinfer-ai/flashinfer PR #2899: FlashAttention-4 on a B200, 1,450 TFLOP/s at its best,
    # 1,237 once the power limit has lowered the SM clock; MAMF's B200 FP8 GEMM 3,432.5 TFLOP/s
    b200 = GPUS["b200"]
    assert b200.sustained_compute == pytest.approx(1237 / 1450)
    op = O.gemm_op("mlp_up", 16384, 16384, 16384)
    assert op.flops / kernel_ns(b200, op, "fp8") / 1e3 == pytest.approx(3432.5 * 1237 / 1450, rel=0.02)
