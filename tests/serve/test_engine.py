"""A serving run end to end: a lone request's latencies in closed form, routing, the
summary's figures, and bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from astra_core.errors import ConfigError
from astra_core.serve.deployment import Deployment, kv_blocks
from astra_core.serve.engine import serve_requests
from astra_core.serve.requests import Request, generate_requests
from astra_core.serve.step_time import StepClock, StepWork
from astra_core.workload.generators.gpus import load_gpu
from astra_core.workload.generators.models import load_model

H100 = load_gpu("H100")
LLAMA8B = load_model("llama3-8b")


def test_a_lone_request_waits_for_nothing():
    d = Deployment(LLAMA8B, H100, max_num_batched_tokens=1024)
    result = serve_requests(d, [Request(0, 5_000, 1500, 4)])
    clock = StepClock(d)
    # the prompt in chunks of 1024 and 476 (the second samples), then 3 decode steps
    chunks = [round(clock.step_ns(StepWork(chunks=[(1024, 0)], samples=0)))]
    chunks.append(round(clock.step_ns(StepWork(chunks=[(476, 1024)], samples=1))))
    decodes = [
        round(clock.step_ns(StepWork(decodes=1, decode_context=1500 + i, samples=1))) for i in range(1, 4)
    ]
    row = result.requests.iloc[0]
    assert row.queue_ns == 0
    assert row.ttft_ns == sum(chunks)
    assert row.e2e_ns == sum(chunks) + sum(decodes)
    assert row.tpot_ns == pytest.approx(sum(decodes) / 3)
    summary = result.summary()
    assert summary["itl"]["median_ms"] == pytest.approx(decodes[1] / 1e6)
    assert summary["duration_s"] == pytest.approx(row.e2e_ns / 1e9)


def test_every_token_is_produced_and_every_block_returned():
    d = Deployment(LLAMA8B, H100, replicas=3, max_num_seqs=64)
    requests = generate_requests(600, 40.0, "azure-conv-2023", seed=2)
    result = serve_requests(d, requests)
    frame = result.requests
    assert len(frame) == 600 and (frame.e2e_ns >= frame.ttft_ns).all() and (frame.ttft_ns > 0).all()
    assert frame.replica.tolist() == [i % 3 for i in range(600)]  # round-robin
    steps = result.steps
    # tokens the steps computed: every prompt, every output token but the last, and recomputation
    assert steps.tokens.sum() >= frame.prompt_tokens.sum() + (frame.output_tokens - 1).sum()
    assert sum(result.itl_histogram.values()) == (frame.output_tokens - 1).sum()
    summary = result.summary(slo_ms={"ttft": 1e9})
    assert summary["goodput"] == pytest.approx(summary["request_throughput"])
    assert summary["output_token_throughput"] == pytest.approx(
        frame.output_tokens.sum() / summary["duration_s"]
    )


def test_a_small_kv_cache_preempts_and_still_finishes_everything():
    d = Deployment(LLAMA8B, H100, gpu_memory_utilization=0.242)
    blocks = kv_blocks(d)
    assert blocks < 2000
    requests = generate_requests(300, 100.0, (600, 300), seed=4)
    result = serve_requests(d, requests)
    assert result.summary()["preemptions"] > 0
    assert result.steps.kv_blocks_used.max() <= blocks
    assert not math.isnan(result.summary()["tpot"]["p99_ms"])


def test_the_least_loaded_router_sends_a_request_to_an_idle_replica():
    d = Deployment(LLAMA8B, H100, replicas=2)
    # a long request on replica 0; a short one goes to replica 1, the next (while both
    # hold one) to the lowest index, the last (after the short one finished) to replica 1
    requests = [
        Request(0, 0, 4000, 500),
        Request(1, 1000, 10, 2),
        Request(2, 2000, 10, 2),
        Request(3, 10**9, 10, 2),
    ]
    result = serve_requests(d, requests, router="least-loaded")
    assert result.requests.replica.tolist() == [0, 1, 0, 1]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"router": "random"}, "router: unknown router 'random'; known: round-robin, least-loaded"),
        ({"requests": [Request(0, 0, 10**6, 10)]}, "requests: request 0 needs 62,501 KV blocks"),
        (
            {"deployment": Deployment(LLAMA8B, H100, max_num_batched_tokens=512, max_num_seqs=1024)},
            "max_num_batched_tokens \\(512\\) must be at least",
        ),
        ({"deployment": Deployment(LLAMA8B, H100, tp=2)}, "TP 2 needs a network"),
    ],
)
def test_bad_runs_are_one_line_errors(kwargs, message):
    args = {"deployment": Deployment(LLAMA8B, H100), "requests": [Request(0, 0, 10, 10)], **kwargs}
    with pytest.raises(ConfigError, match=message):
        serve_requests(args.pop("deployment"), args.pop("requests"), **args)


def test_a_client_that_keeps_one_request_in_flight_sends_each_when_the_last_finishes():
    d = Deployment(LLAMA8B, H100)
    requests = generate_requests(6, None, (700, 5), seed=0)
    result = serve_requests(d, requests, concurrency=1)
    frame = result.requests
    sent, ends = frame.arrival_ns.tolist(), (frame.arrival_ns + frame.e2e_ns).tolist()
    assert sent[0] == 0 and sent[1:] == ends[:-1]  # back to back
    alone = serve_requests(d, [Request(0, 0, 700, 5)]).requests.iloc[0]
    assert frame.ttft_ns.tolist() == [alone.ttft_ns] * 6 and frame.e2e_ns.tolist() == [alone.e2e_ns] * 6


def test_a_concurrency_limit_holds_the_requests_in_flight_to_it():
    d = Deployment(LLAMA8B, H100, replicas=2)
    requests = generate_requests(300, 200.0, "azure-conv-2023", seed=5)
    frame = serve_requests(d, requests, concurrency=16).requests
    starts, ends = frame.arrival_ns.to_numpy(), (frame.arrival_ns + frame.e2e_ns).to_numpy()
    events = sorted([(t, 1) for t in starts] + [(t, -1) for t in ends], key=lambda e: (e[0], e[1]))
    in_flight = peak = 0
    for _, change in events:
        in_flight += change
        peak = max(peak, in_flight)
    assert peak == 16
    assert (frame.arrival_ns.to_numpy() >= np.array([r.arrival_ns for r in requests])).all()


def test_requests_that_arrive_together_start_in_one_step():
    # vLLM's benchmark_latency: a batch of 8 prompts of 32 tokens, 128 tokens out each:
    # one step prefills all eight (and samples their first tokens), 127 decode them
    result = serve_requests(Deployment(LLAMA8B, H100), [Request(i, 0, 32, 128) for i in range(8)])
    assert len(result.steps) == 128
    assert result.steps.tokens.tolist() == [256] + [8] * 127
    assert result.requests.ttft_ns.nunique() == 1


def test_a_warm_up_leaves_out_the_first_requests_and_what_came_before_the_next():
    requests = generate_requests(10, None, (600, 20), seed=0)
    result = serve_requests(Deployment(LLAMA8B, H100), requests, concurrency=2)
    whole, steady = result.summary(), result.summary(warmup=4)
    sent = sorted(result.requests.arrival_ns)
    kept = result.requests[result.requests.arrival_ns >= sent[4]]
    assert steady["requests"] == 6 and whole["requests"] == 10
    assert steady["ttft"]["mean_ms"] == pytest.approx(kept.ttft_ns.mean() / 1e6)
    itl = result.itl[result.itl.end_ns >= sent[4]]
    assert steady["itl"]["mean_ms"] == pytest.approx((itl.gap_ns * itl.tokens).sum() / itl.tokens.sum() / 1e6)
    assert steady["duration_s"] == pytest.approx(((kept.arrival_ns + kept.e2e_ns).max() - sent[4]) / 1e9)
    with pytest.raises(ConfigError, match="requests: warmup: 10 of 10 requests leaves none to measure"):
        result.summary(warmup=10)
