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


def test_gpustack_bursts_within_their_present_bands(serving):
    """GPUStack's vLLM 0.11 bursts: Qwen3 32B on one A100 with 500 prompts of 4,000 tokens
    (median and p99 TTFT and TPOT within 10 % today) and Qwen3 235B-A22B at TP 8 on H100
    with 100 of 32,000 (TTFT within 10 %, TPOT within 20 %); the other rows are the page's
    to report."""
    data = json.loads(serving.BURST.read_text())
    bands = {("qwen3-32b", "A100", 4000): (0.10, 0.10), ("qwen3-235b-a22b", "H100", 32000): (0.10, 0.20)}
    rows = [
        r
        for r in data["rows"]
        if (r["model"], r["gpu"], r["input_len"]) in bands and r["precision"] == "bf16"
    ]
    assert len(rows) == 2
    for row in rows:
        predicted = serving.predict_burst(row)
        for (metric, key), band in zip(
            (("ttft_ms", "ttft"), ("tpot_ms", "tpot")), bands[(row["model"], row["gpu"], row["input_len"])]
        ):
            for q in ("median", "p99"):
                assert abs(predicted[f"{key}_{q}"] / row[metric][q] - 1) <= band, (row["model"], key, q)


def test_resuming_preempted_requests_from_cached_blocks_brings_a_burst_closer(serving):
    """Qwen3 235B-A22B at TP 8, 100 prompts of 32,000 tokens at once: the run preempts, and
    with prefix caching (vLLM's default) a preempted request resumes from its blocks still
    cached; without that reuse astra's run lasts far longer than the measured 141.6 s."""
    data = json.loads(serving.BURST.read_text())
    (row,) = [
        r for r in data["rows"]
        if r["model"] == "qwen3-235b-a22b" and r["precision"] == "bf16" and r["gpu"] == "H100" and r["input_len"] == 32000
    ]  # fmt: skip
    cached = serving.predict_burst(row)["duration_s"]
    recomputed = serving.predict_burst({**row, "prefix_caching": False})["duration_s"]
    assert abs(cached / row["duration_s"] - 1) < 0.5 * abs(recomputed / row["duration_s"] - 1)
