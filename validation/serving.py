"""Serving: astra serve against vLLM's latency benchmark, NIM's concurrency sweep and GPUStack's vLLM bursts.

Source: vLLM's nightly performance benchmark on Buildkite (builds and benchmark in
``validation/data/vllm_latency.json``): ``benchmark_latency.py`` runs one batch of 8
prompts of 32 tokens, 128 output tokens each, through the ``LLM`` class with dummy
weights, Llama 3.1 8B at TP 1, Llama 3 70B at TP 4 and Mixtral 8x7B at TP 2 (a mixture
of experts), on H200, H100 and A100 GPUs, and reports the batch's end-to-end latency.
astra serves the same 8 requests arriving together on one replica (the engine's
defaults for the GPU, the replica's GPUs on NVLink at the preset's bandwidth and the
per-link latency of upstream ASTRA-sim's validated HGX-H100 network) and reports the
last request's end-to-end latency: one step prefilling the 256 prompt tokens, 127 steps
decoding 8 tokens each.

NVIDIA NIM's published concurrency sweep (``validation/data/nim_llama33_70b.json``):
Llama 3.3 70B in FP8 on 2 H100 at TP 2, requests of 5,000 prompt and 500 output tokens
from a client that keeps 1 to 250 in flight. astra runs the same closed loop with vLLM's
scheduler under TensorRT-LLM's default capacity policy (NIM's H100 FP8 profiles run
TensorRT-LLM: ``GUARANTEED_NO_EVICT``, each request's prompt and output held from its
admission, nothing preempted), an FP8 KV cache, 10 x concurrency requests of which the
first 2 x concurrency warm up, and reports the steady state's mean TTFT and ITL.

GPUStack's performance lab (``validation/data/gpustack_vllm.json``): vLLM 0.11.0 with its
defaults on one replica (Qwen3 14B and 32B on one GPU, Qwen3 235B-A22B at TP 8, and in
FP8 at TP 4; DeepSeek-R1-0528, FP8, at TP 8 on H200), every request sent at once (``vllm bench serve`` at the default rate, the
random dataset's fixed lengths: 32,000/100, 4,000/200, 2,000/100 and 128/4 tokens).
astra serves the same requests arriving together and reports median and p99 TTFT and
TPOT.

    .venv/bin/python validation/serving.py [--markdown docs/validation-serving.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from astra_core.errors import AstraError  # noqa: E402
from astra_core.serve.deployment import Deployment, engine_defaults  # noqa: E402
from astra_core.serve.engine import serve_requests  # noqa: E402
from astra_core.serve.requests import Request  # noqa: E402
from astra_core.topology.generators import NVLINK_LATENCY_NS  # noqa: E402
from astra_core.workload.generators.gpus import load_gpu  # noqa: E402
from astra_core.workload.generators.models import load_model  # noqa: E402

DATA = Path(__file__).with_name("data") / "vllm_latency.json"
NIM = Path(__file__).with_name("data") / "nim_llama33_70b.json"
BURST = Path(__file__).with_name("data") / "gpustack_vllm.json"
GIB_PER_GB = 1e9 / 2**30


def _nvlink(gpu, tp: int) -> dict:
    """The network.yml of ``tp`` GPUs on one NVSwitch at the preset's NVLink bandwidth and
    upstream's validated HGX-H100 per-link latency."""
    return {
        "topology": ["Switch"], "npus_count": [tp], "bandwidth": [gpu.nvlink_gbps * GIB_PER_GB],
        "latency": [NVLINK_LATENCY_NS],
    }  # fmt: skip


def _deployment(model: str, gpu_name: str, tp: int, **kw) -> Deployment:
    """The deployment on ``tp`` GPUs with vLLM's engine defaults for the GPU."""
    gpu = load_gpu(gpu_name)
    tokens, seqs = engine_defaults(gpu)
    return Deployment(load_model(model), gpu, tp=tp, max_num_batched_tokens=tokens, max_num_seqs=seqs, **kw)


def predict(row: dict, data: dict) -> dict:
    """astra's figures for one row: the batch's latency and its steps [ms]."""
    d = _deployment(row["model"], row["gpu"], row["tp"])
    batch = [Request(i, 0, data["input_len"], data["output_len"]) for i in range(data["batch"])]
    result = serve_requests(d, batch, network=_nvlink(d.gpu, d.tp) if d.tp > 1 else None)
    steps = result.steps.duration_ns.to_numpy() / 1e6
    return {
        "latency_ms": float(result.requests.e2e_ns.max()) / 1e6,
        "prefill_ms": steps[0],
        "decode_ms": steps[1:].mean(),
    }


def predict_concurrency(row: dict, data: dict) -> dict:
    """astra's steady state at one concurrency of the NIM sweep: mean TTFT and ITL [ms],
    output tokens/s."""
    c = row["concurrency"]
    d = _deployment(
        data["model"], data["gpu"], data["tp"], precision=data["precision"], kv_bytes=1, no_evict=True
    )
    requests = [Request(i, 0, data["input_len"], data["output_len"]) for i in range(max(40, 10 * c))]
    s = serve_requests(d, requests, network=_nvlink(d.gpu, d.tp), concurrency=c).summary(
        warmup=max(10, 2 * c)
    )
    return {
        "ttft_ms": s["ttft"]["mean_ms"],
        "itl_ms": s["itl"]["mean_ms"],
        "tokens_per_s": s["output_token_throughput"],
    }


def predict_burst(row: dict) -> dict | str:
    """astra's figures for one GPUStack row: median and p99 TTFT and TPOT [ms] and the
    run's duration [s]; the one-line reason where astra cannot serve it. A row may set
    ``max_num_batched_tokens`` or ``prefix_caching`` (vLLM's defaults otherwise)."""
    d = _deployment(row["model"], row["gpu"], row["tp"], precision=row["precision"])
    if "max_num_batched_tokens" in row:
        d = replace(d, max_num_batched_tokens=row["max_num_batched_tokens"])
    if "prefix_caching" in row:
        d = replace(d, prefix_caching=row["prefix_caching"])
    n = row["requests"]
    requests = [Request(i, 0, row["input_len"], row["output_len"]) for i in range(n)]
    try:
        result = serve_requests(
            d, requests, network=_nvlink(d.gpu, d.tp) if d.tp > 1 else None, concurrency=n
        )
    except AstraError as exc:
        return str(exc)
    s = result.summary()
    return {
        "ttft_median": s["ttft"]["median_ms"],
        "ttft_p99": s["ttft"]["p99_ms"],
        "tpot_median": s["tpot"]["median_ms"],
        "tpot_p99": s["tpot"]["p99_ms"],
        "duration_s": s["duration_s"],
    }


def burst_report(data: dict) -> list[str]:
    lines = [
        "",
        "## vLLM 0.11 under a burst of requests (GPUStack's performance lab)",
        "",
        data["what"] + ". Source: " + data["source"] + ". astra: the same requests arriving together on one "
        "replica with vLLM's engine defaults (the optimized FP8 rows: 16,384 batched tokens, as their command "
        "says), every request generating its full output; DeepSeek-R1-0528 as the deepseek-v3 preset (the same "
        "architecture, its multi-token prediction module unused). Error = predicted / measured - 1; *generated*: the "
        "share of the requested output tokens the measured run generated.",
        "",
        "| model | GPU | TP | in/out | requests | generated | duration s | astra | TTFT p50 s | astra "
        "| TTFT p99 s | astra | TPOT p50 ms | astra | TPOT p99 ms | astra |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    errors, misses = [], []
    for row in data["rows"]:
        p = predict_burst(row)
        head = (
            f"| {row['model']} {row['precision'].upper()} | {row['gpu']} | {row['tp']} | "
            f"{row['input_len']:,}/{row['output_len']} | {row['requests']:,} | "
            f"{row['total_generated_tokens'] / (row['requests'] * row['output_len']):.0%} | {row['duration_s']:,.1f} |"
        )
        if isinstance(p, str):
            misses.append(f"{row['model']} on {row['gpu']} at {row['input_len']:,} tokens: {p}")
            lines.append(head + " cannot serve it |" + " |" * 8)
            continue
        cells = [f" {p['duration_s']:,.1f} ({p['duration_s'] / row['duration_s'] - 1:+.0%}) |"]
        for metric, key, scale in (("ttft_ms", "ttft", 1e-3), ("tpot_ms", "tpot", 1.0)):
            for q in ("median", "p99"):
                measured, predicted = row[metric][q], p[f"{key}_{q}"]
                errors.append(predicted / measured - 1)
                cells.append(f" {measured * scale:,.1f} | {predicted * scale:,.1f} ({errors[-1]:+.0%}) |")
        lines.append(head + "".join(cells))
    within = sum(abs(e) <= 0.10 for e in errors)
    rows_within = sum(all(abs(e) <= 0.10 for e in errors[i : i + 4]) for i in range(0, len(errors), 4))
    lines += [
        "",
        f"{within} of {len(errors)} figures within 10 %; {rows_within} of {len(data['rows'])} rows with all four "
        "within 10 %.",
    ]
    lines += [f"- astra refuses {m}" for m in misses]
    return lines + ["", *BURST_READING]


#: What the measured rows themselves show (independent of astra's figures), and what astra
#: does not model; facts first, inferences marked as such.
BURST_READING = [
    "What the measured rows show:",
    "",
    "- **Short prompts are not GPU-bound.** 984 to 1,000 requests of 128 tokens take 6.1 to 49.6 s and "
    "their median TTFT is 63 to 90 % of the run: the requests reach the engine over most of the "
    "run. Inference: the client and vLLM's API server (chat template, tokenization, one HTTP "
    "stream per request) set the pace; astra models neither, so it is fast on every TTFT there.",
    "- **One H100 is 1.8x one A100 from 2,000 to 32,000 prompt tokens.** Qwen3 14B: 1.87x at 32,000, "
    "1.79x at 4,000, 1.78x at 2,000, closer to the HBM ratio (3.35 / 2.04 TB/s = 1.64) than to "
    "the BF16 peak ratio (989 / 312 = 3.17) even where prefill dominates. astra's ratio runs from "
    "2.25x to 2.68x: its single-GPU H100 figures are 32 to 56 % fast from 2,000 to 32,000 tokens "
    "(Qwen3 14B and 32B), which needs kernel measurements of vLLM's prefill and paged decode to settle.",
    "- **Preempted requests resume from their cached blocks.** A 32,000-token prompt needs 2,007 "
    "blocks, so these bursts preempt often; with prefix caching (vLLM's default) a preempted "
    "request finds its blocks that later allocations have not taken. astra models that reuse; "
    "for Qwen3 235B-A22B at TP 8 with 32,000-token prompts it takes 152.7 s against the measured "
    "141.6 s, and 257 s with prefix caching off (every preempted request recomputing its prompt).",
    "- **Qwen3 32B on one GPU cannot have run exactly as printed.** vLLM 0.11 refuses to start "
    "when its KV cache cannot hold one request of the model's maximum length (40,960 tokens for "
    "Qwen3 32B: 10 GiB). An 80 GB H100 reports 79.22 GiB (vLLM PR #10511's log), so the "
    "engine may use 71.29 GiB; less 61.0 GiB of weights that leaves 0.27 GiB for the profiling "
    "pass, under the 0.78 GiB the MLP's gate and up projection output alone for 8,192 tokens. "
    "The rows are kept as published; astra (80 GiB, the activation peak and 0.16 GiB outside "
    "PyTorch's allocator) leaves the KV cache 9.4 GiB and holds one 32,000-token request at a "
    "time.",
]


def concurrency_report(nim: dict) -> list[str]:
    lines = [
        "",
        "## NIM's concurrency sweep",
        "",
        nim["what"] + ". Source: " + nim["source"] + ". astra: vLLM's scheduler and engine defaults under "
        "TensorRT-LLM's default capacity policy (GUARANTEED_NO_EVICT: a request is admitted with the blocks for "
        "its whole prompt and output, and never preempted), an FP8 KV cache, 10 x concurrency requests in a closed loop, the first 2 x concurrency left out (warm-up); "
        "means over the rest. Error = predicted / measured - 1.",
        "",
        "| concurrency | TTFT ms | astra | error | ITL ms | astra | error | tokens/s | astra |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    errors = []
    for row in nim["rows"]:
        p = predict_concurrency(row, nim)
        e_ttft, e_itl = p["ttft_ms"] / row["ttft_ms"] - 1, p["itl_ms"] / row["itl_ms"] - 1
        errors += [e_ttft, e_itl]
        lines.append(
            f"| {row['concurrency']} | {row['ttft_ms']:,.1f} | {p['ttft_ms']:,.1f} | {e_ttft:+.1%} | "
            f"{row['itl_ms']:.2f} | {p['itl_ms']:.2f} | {e_itl:+.1%} | {row['tokens_per_s']:,.0f} | "
            f"{p['tokens_per_s']:,.0f} |"
        )
    within = sum(abs(e) <= 0.10 for e in errors)
    lines += ["", f"{within} of {len(errors)} means within 10 %."]
    return lines


def report(data: dict) -> str:
    lines = [
        "# Serving: astra serve against vLLM's latency benchmark, NIM's concurrency sweep and GPUStack's vLLM bursts",
        "",
        "## vLLM's latency benchmark",
        "",
        "Generated by `validation/serving.py` from `validation/data/vllm_latency.json`. "
        + data["what"]
        + ". Sources: "
        + "; ".join(f"{gpu}: {src}" for gpu, src in data["sources"].items())
        + ". astra serves the same 8 requests arriving together on one replica with vLLM's engine "
        "defaults; *measured step* is the measured latency over the 128 steps (one prefill, 127 "
        "decodes), for comparison with astra's decode step. Error = predicted / measured - 1.",
        "",
        "| test | GPU | measured ms | astra ms | error | measured step ms | astra prefill ms | astra decode step ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    errors = []
    for row in data["rows"]:
        p = predict(row, data)
        error = p["latency_ms"] / row["mean_ms"] - 1
        errors.append(error)
        lines.append(
            f"| {row['test']} | {row['gpu']} | {row['mean_ms']:,.1f} | {p['latency_ms']:,.1f} | {error:+.1%} | "
            f"{row['mean_ms'] / data['output_len']:.2f} | {p['prefill_ms']:.2f} | {p['decode_ms']:.2f} |"
        )
    within = sum(abs(e) <= 0.10 for e in errors)
    lines += [
        "",
        f"{within} of {len(errors)} within 10 %; errors from {min(errors):+.1%} to {max(errors):+.1%}.",
    ]
    lines += concurrency_report(json.loads(NIM.read_text()))
    lines += burst_report(json.loads(BURST.read_text()))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", help="write the page here")
    args = parser.parse_args(argv)
    text = report(json.loads(DATA.read_text()))
    if args.markdown:
        Path(args.markdown).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
