"""validation/serving.py: astra serve against vLLM's published latency benchmark."""

from __future__ import annotations

import json

import pytest

from astra_core.serve.deployment import Deployment, weight_bytes
from astra_core.workload.generators.gpus import load_gpu
from astra_core.workload.generators.models import load_model

from .conftest import validation_script


@pytest.fixture(scope="module")
def serving():
    with validation_script("serving") as module:
        yield module


def test_every_latency_benchmark_row_within_its_present_band(serving):
    """vLLM's nightly latency tests (a batch of 8 x 32 prompt tokens, 128 out) on H200, H100
    and A100, dense and mixture of experts: astra lands within 40 % of every row today (the
    page says by how much and why); no decode step reads the weights faster than HBM's peak."""
    data = json.loads(serving.DATA.read_text())
    assert len(data["rows"]) == 9 and {r["gpu"] for r in data["rows"]} == {"H200", "H100", "A100"}
    for row in data["rows"]:
        predicted = serving.predict(row, data)
        assert abs(predicted["latency_ms"] / row["mean_ms"] - 1) <= 0.40, row["test"]
        gpu = load_gpu(row["gpu"])
        floor_ms = (
            weight_bytes(Deployment(load_model(row["model"]), gpu, tp=row["tp"])) / gpu.memory_gbps / 1e6
        )
        if row["model"] != "mixtral-8x7b":  # a dense model reads every weight each step
            assert predicted["decode_ms"] >= floor_ms, row["test"]


@pytest.mark.parametrize("concurrency", [25, 50])
def test_nims_concurrency_sweep_below_its_knee(serving, concurrency):
    """NIM 1.8.0, Llama 3.3 70B FP8 on 2 H100 at TP 2, 5,000 in / 500 out, a closed loop of
    25 and 50 requests in flight (steady state): mean TTFT and ITL within 10 %."""
    nim = json.loads(serving.NIM.read_text())
    (row,) = [r for r in nim["rows"] if r["concurrency"] == concurrency]
    predicted = serving.predict_concurrency(row, nim)
    assert abs(predicted["ttft_ms"] / row["ttft_ms"] - 1) <= 0.10
    assert abs(predicted["itl_ms"] / row["itl_ms"] - 1) <= 0.10


def test_gpustack_bursts_the_gpu_bound_rows_within_their_present_bands(serving):
    """GPUStack's vLLM 0.11 bursts: Qwen3 14B on one H100 with 100 prompts of 32,000 tokens
    (prefill-bound: within 10 % on median and p99 TTFT and TPOT today) and Qwen3 235B-A22B
    at TP 8 with 500 of 2,000 (within 15 %); the short-prompt rows, which the API server
    paces, are the page's to report."""
    data = json.loads(serving.BURST.read_text())
    bands = {("qwen3-14b", "H100", 32000): 0.10, ("qwen3-235b-a22b", "H100", 2000): 0.15}
    rows = [
        r
        for r in data["rows"]
        if (r["model"], r["gpu"], r["input_len"]) in bands and r["precision"] == "bf16"
    ]
    assert len(rows) == 2
    for row in rows:
        predicted = serving.predict_burst(row)
        band = bands[(row["model"], row["gpu"], row["input_len"])]
        for metric, key in (("ttft_ms", "ttft"), ("tpot_ms", "tpot")):
            for q in ("median", "p99"):
                assert abs(predicted[f"{key}_{q}"] / row[metric][q] - 1) <= band, (row["model"], key, q)


def test_gpustack_burst_refuses_a_request_its_kv_cache_cannot_hold(serving):
    """Qwen3 32B on one H100: astra's KV cache (what is left of 72 GiB after 61 GiB of
    weights, the activation peak and memory outside PyTorch's allocator) holds fewer than
    32,100 tokens, so the 32,000-token row is refused in one line naming the request."""
    data = json.loads(serving.BURST.read_text())
    (row,) = [
        r
        for r in data["rows"]
        if r["model"] == "qwen3-32b" and r["gpu"] == "H100" and r["input_len"] == 32000
    ]
    reason = serving.predict_burst(row)
    assert isinstance(reason, str) and "request 0 needs 2,007 KV blocks" in reason
