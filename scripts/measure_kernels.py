"""Measure the kernel times the compute model needs on one GPU, with PyTorch.

Run on the GPU to be described (it needs only PyTorch)::

    python scripts/measure_kernels.py --shapes shapes.json --out kernels.json

and it writes one JSON object: the part and software it ran on, then one list per
kind of kernel, each entry a shape and its measured time:

* ``gemm``: cuBLAS products, BF16 through ``torch.matmul`` in the layout of each
  training pass (forward ``x W^T``, data gradient ``dy W``, weight gradient
  ``dy^T x``), FP8 (E4M3, per-tensor scales) through ``torch._scaled_mm`` in the
  one layout Hopper's FP8 tensor cores take (Transformer Engine transposes its
  operands into it), with fast accumulation in the forward pass and split
  accumulation in the gradients, as Transformer Engine runs them; on a grid of
  shapes and on the ``--shapes`` file's ``(batch, m, n, k, precision, pass)``
  rows. Batched products run ``torch.bmm``.
* ``grouped``: ``torch._grouped_mm`` (BF16) for the ``--shapes`` batched rows.
* ``attention``: ``scaled_dot_product_attention`` forward and backward through
  the cuDNN and the FlashAttention back ends.
* ``memory``: element-wise, norm, softmax, cast, reduction, gather and fused
  Adam kernels, with the bytes each moves.
* ``launch``: the host's cost of one eager launch and the device's time per
  kernel of a CUDA graph of tiny kernels.

Kernel times are device times from CUDA events: small kernels are replayed from
a CUDA graph so the host's launch cost does not enter them. Each kind of kernel
stops at ``--budget-s`` seconds of its own; a time-out leaves the file holding
what was measured so far.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

#: Grid values of m, n and k: powers of two, and 1.5x steps from 3,072 (hidden sizes).
GRID = (128, 256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768)
#: The largest grid product [FLOP], about 50 ms at BF16 on an H200.
MAX_GRID_FLOP = 2.0 * 16384**3 * 4


class Budget:
    """Seconds left for one kind of kernel."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def over(self) -> bool:
        return time.monotonic() > self.end


def events():
    """A pair of timing CUDA events."""
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def per_call_ms(fn, reps: int) -> float:
    """Mean device time [ms] of ``reps`` calls of ``fn`` issued back to back."""
    start, end = events()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


def eager_ms(fn, min_ms: float = 20.0, max_reps: int = 50) -> float:
    """Mean device time [ms] of ``fn`` run back to back (for kernels of 100 us or more)."""
    fn()
    torch.cuda.synchronize()
    first = per_call_ms(fn, 1)
    return per_call_ms(fn, max(3, min(max_reps, int(min_ms / max(first, 1e-3)))))


def graph_ms(fn, min_ms: float = 20.0, max_reps: int = 400) -> float:
    """Mean device time [ms] of ``fn`` replayed from a CUDA graph of many calls (no host
    launch gaps); eager timing where capture fails."""
    first = eager_ms(fn, min_ms=2.0, max_reps=5)
    reps = max(3, min(max_reps, int(min_ms / max(first, 1e-3))))
    if first > 1.0:
        return eager_ms(fn, min_ms, max_reps)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for _ in range(reps):
                fn()
    except RuntimeError:
        return eager_ms(fn, min_ms, max_reps)
    graph.replay()
    torch.cuda.synchronize()
    start, end = events()
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


class Pools:
    """Random operands on the GPU: two BF16 buffers of ``elements``, their FP8 copies, an output."""

    def __init__(self, elements: int):
        gen = torch.Generator(device="cuda").manual_seed(0)
        self.bf16 = [
            torch.randn(elements, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(2)
        ]
        self.out = torch.empty(elements, device="cuda", dtype=torch.bfloat16)
        self.fp8 = [p.to(torch.float8_e4m3fn) for p in self.bf16]
        self.one = torch.ones((), device="cuda", dtype=torch.float32)

    def take(self, which: int, rows: int, cols: int, fp8: bool = False) -> torch.Tensor:
        pool = (self.fp8 if fp8 else self.bf16)[which]
        return pool[: rows * cols].view(rows, cols)


def gemm_call(pools: Pools, batch: int, m: int, n: int, k: int, precision: str, pass_: str):
    """A closure that runs ``batch`` products ``(m x k) @ (k x n)`` as the pass lays them out."""
    if precision == "fp8":  # one product per expert, as Transformer Engine's grouped FP8 linear
        fast = pass_ == "fprop"
        pairs = [
            (
                pools.fp8[0][i * m * k : (i + 1) * m * k].view(m, k),
                pools.fp8[1][i * n * k : (i + 1) * n * k].view(n, k).t(),
            )
            for i in range(batch)
        ]

        def run():
            for a, b in pairs:
                torch._scaled_mm(a, b, pools.one, pools.one, out_dtype=torch.bfloat16, use_fast_accum=fast)

        return run
    if batch > 1:
        a = pools.bf16[0][: batch * m * k].view(batch, m, k)
        b = pools.bf16[1][: batch * n * k].view(batch, n, k).transpose(1, 2)
        out = pools.out[: batch * m * n].view(batch, m, n)
        return lambda: torch.bmm(a, b, out=out)
    out = pools.out[: m * n].view(m, n)
    if pass_ == "fprop":  # x (m x k) times W^T, W stored (n x k)
        a, b = pools.take(0, m, k), pools.take(1, n, k).t()
    elif pass_ == "dgrad":  # dy (m x k) times W, stored (k x n)
        a, b = pools.take(0, m, k), pools.take(1, k, n)
    else:  # dy^T x: both operands stored token-major (k rows)
        a, b = pools.take(0, k, m).t(), pools.take(1, k, n)
    return lambda: torch.matmul(a, b, out=out)


def warm_up(pools: Pools, seconds: float) -> None:
    """Run large BF16 products for ``seconds``, so the part reaches the clocks and power it
    sustains in training before anything is timed."""
    call = gemm_call(pools, 1, 8192, 8192, 8192, "bf16", "fprop")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(20):
            call()
        torch.cuda.synchronize()


def measure_gemms(pools: Pools, shapes: list, budget: Budget, out: list) -> None:
    for batch, m, n, k, precision, pass_ in shapes:
        if budget.over():
            out.append({"stopped": "budget"})
            return
        try:
            ms = graph_ms(gemm_call(pools, batch, m, n, k, precision, pass_), min_ms=5.0)
        except (RuntimeError, ValueError) as exc:
            out.append(
                {"shape": [batch, m, n, k], "precision": precision, "pass": pass_, "error": str(exc)[:200]}
            )
            continue
        tflops = 2.0 * batch * m * n * k / (ms * 1e-3) / 1e12
        out.append(
            {
                "shape": [batch, m, n, k],
                "precision": precision,
                "pass": pass_,
                "us": ms * 1e3,
                "tflops": tflops,
            }
        )


def grid_shapes() -> list:
    """Every grid shape in BF16 (the forward layout: the gradients' layouts run within 1 %
    of it on an H200) and FP8 (fast and split accumulation, 3-5 % apart), shape by shape,
    so a budget cut keeps whole shapes."""
    variants = (("bf16", "fprop"), ("fp8", "fprop"), ("fp8", "dgrad"))
    return [
        (1, m, n, k, precision, pass_)
        for m in GRID
        for n in GRID
        for k in GRID
        if 2.0 * m * n * k <= MAX_GRID_FLOP
        for precision, pass_ in variants
    ]


def measure_grouped(pools: Pools, shapes: list, budget: Budget, out: list) -> None:
    grouped = getattr(torch, "_grouped_mm", None)
    for batch, m, n, k, precision, _ in shapes:
        if batch == 1 or precision != "bf16" or grouped is None or budget.over():
            continue
        a = pools.bf16[0][: batch * m * k].view(batch * m, k)
        b = pools.bf16[1][: batch * n * k].view(batch, n, k).transpose(1, 2)
        offs = torch.arange(1, batch + 1, device="cuda", dtype=torch.int32) * m
        for layout, operand in (("column", b), ("row", b.contiguous())):
            try:
                ms = graph_ms(
                    lambda a=a, b=operand, offs=offs: grouped(a, b, offs=offs, out_dtype=torch.bfloat16)
                )
                tflops = 2.0 * batch * m * n * k / ms / 1e9
                out.append({"shape": [batch, m, n, k], "b_layout": layout, "us": ms * 1e3, "tflops": tflops})
            except (RuntimeError, TypeError, ValueError) as exc:
                out.append({"shape": [batch, m, n, k], "b_layout": layout, "error": str(exc)[:200]})


def attention_cases() -> list:
    """(batch, query heads, kv heads, queries, keys, head dim, causal)."""
    cases = []
    for d in (64, 128, 192):
        for s in (1024, 2048, 4096, 8192, 16384):
            b = max(1, 16384 // s)
            cases.append((b, 16, 16, s, s, d, True))
            cases.append((b, 16, 2, s, s, d, True))
            cases.append((b, 16, 16, s, s, d, False))
    for s in (4096, 8192):  # context-parallel steps: half the keys, no mask
        cases.append((1, 16, 2, s, s // 2, 128, False))
    return cases


def attention_row(backend, b: int, hq: int, hkv: int, sq: int, sk: int, d: int, causal: bool) -> dict:
    """Forward and forward + backward time [us] of one attention call on ``backend``."""
    from torch.nn.attention import sdpa_kernel

    def tensor(heads: int, length: int, grad: bool = True) -> torch.Tensor:
        return torch.randn(b, heads, length, d, device="cuda", dtype=torch.bfloat16, requires_grad=grad)

    q, k, v, grad = tensor(hq, sq), tensor(hkv, sk), tensor(hkv, sk), tensor(hq, sq, False)

    def fwd():
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hkv != hq)

    with torch.no_grad():
        row = {"fwd_us": eager_ms(fwd) * 1e3}
    row["fwd_bwd_us"] = eager_ms(lambda: torch.autograd.grad(fwd(), (q, k, v), grad)) * 1e3
    return row


def measure_attention(budget: Budget, out: list) -> None:
    from torch.nn.attention import SDPBackend

    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
    for b, hq, hkv, sq, sk, d, causal in attention_cases():
        for name, backend in backends.items():
            if budget.over():
                out.append({"stopped": "budget"})
                return
            row = {"backend": name, "batch": b, "heads": hq, "kv_heads": hkv, "queries": sq, "keys": sk}
            row.update({"head_dim": d, "causal": causal})
            try:
                row.update(attention_row(backend, b, hq, hkv, sq, sk, d, causal))
            except (RuntimeError, ValueError) as exc:
                row["error"] = str(exc)[:200]
            out.append(row)
            torch.cuda.empty_cache()


def memory_cases(elements: int) -> list:
    """(name, bytes per element, the closure) for tensors of ``elements`` elements."""
    dev = "cuda"
    a = torch.randn(elements, device=dev, dtype=torch.bfloat16)
    b = torch.randn(elements, device=dev, dtype=torch.bfloat16)
    c = torch.empty_like(a)
    hidden = 8192
    x = a.view(-1, hidden)
    w = torch.ones(hidden, device=dev, dtype=torch.bfloat16)
    bias = torch.zeros(hidden, device=dev, dtype=torch.bfloat16)
    xg = x.detach().clone().requires_grad_(True)
    wg = w.clone().requires_grad_(True)
    dy = b.view(-1, hidden)
    ln_out = F.layer_norm(xg, (hidden,), wg, bias)
    rms_out = F.rms_norm(xg, (hidden,), wg)
    f8 = torch.empty(elements, device=dev, dtype=torch.float8_e4m3fn)
    rows = x.shape[0]
    idx = torch.randint(0, rows, (rows,), device=dev)
    logits = torch.randn(max(1, elements // 2 // 131072), 131072, device=dev, dtype=torch.float32)
    return [
        ("copy", 4, lambda: c.copy_(a)),
        ("add", 6, lambda: torch.add(a, b, out=c)),
        ("silu", 4, lambda: torch.nn.functional.silu(a, inplace=False)),
        ("mul", 6, lambda: torch.mul(a, b, out=c)),
        ("layer_norm_fwd", 4, lambda: F.layer_norm(x, (hidden,), w, bias)),
        ("layer_norm_bwd", 6, lambda: torch.autograd.grad(ln_out, (xg,), dy, retain_graph=True)),
        ("rms_norm_fwd", 4, lambda: F.rms_norm(x, (hidden,), w)),
        ("rms_norm_bwd", 6, lambda: torch.autograd.grad(rms_out, (xg,), dy, retain_graph=True)),
        ("cast_fp8", 3, lambda: f8.copy_(a)),
        ("amax", 2, lambda: torch.amax(a)),
        ("gather_rows", 4, lambda: torch.index_select(x, 0, idx)),
        ("softmax_fp32", 4 * 2 * logits.numel() / elements, lambda: torch.softmax(logits, dim=-1)),
    ]


def measure_memory(budget: Budget, out: list) -> None:
    for elements in (1 << 22, 1 << 25, 1 << 28):
        for name, per_elem, fn in memory_cases(elements):
            if budget.over():
                out.append({"stopped": "budget"})
                return
            try:
                ms = graph_ms(fn) if name not in ("layer_norm_bwd", "rms_norm_bwd") else eager_ms(fn)
                row = {"kernel": name, "elements": elements, "bytes": per_elem * elements, "us": ms * 1e3}
                row["gbps"] = per_elem * elements / (ms * 1e-3) / 1e9
            except (RuntimeError, ValueError) as exc:
                row = {"kernel": name, "elements": elements, "error": str(exc)[:200]}
            out.append(row)
        torch.cuda.empty_cache()
    # fused Adam over FP32 master weights: read and write the parameter and both moments,
    # read the gradient: 28 bytes per parameter
    params = [torch.randn(1 << 24, device="cuda", requires_grad=True) for _ in range(4)]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.Adam(params, lr=1e-4, fused=True)
    opt.step()
    ms = eager_ms(opt.step)
    n = sum(p.numel() for p in params)
    out.append(
        {"kernel": "adam_fused", "elements": n, "bytes": 28 * n, "us": ms * 1e3, "gbps": 28 * n / ms / 1e6}
    )


def measure_launch(out: dict) -> None:
    x = torch.zeros(1, device="cuda")
    for _ in range(1000):
        x.add_(1)
    torch.cuda.synchronize()
    count = 20000
    start = time.perf_counter()
    for _ in range(count):
        x.add_(1)
    host = (time.perf_counter() - start) / count
    torch.cuda.synchronize()
    out["eager_host_us"] = host * 1e6
    out["graph_kernel_us"] = graph_ms(lambda: x.add_(1), min_ms=5.0, max_reps=2000) * 1e3


def smi() -> str:
    fields = "name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu"
    try:
        return subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi: {exc}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", help="JSON list of [batch, m, n, k, precision, pass] rows")
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget-s", type=float, default=60.0, help="seconds per kind of kernel")
    parser.add_argument("--only", default="launch,memory,gemm,grouped,attention")
    parser.add_argument(
        "--warm-up-s", type=float, default=20.0, help="seconds of GEMMs before the GEMMs are timed"
    )
    args = parser.parse_args(argv)
    shapes = []
    if args.shapes:
        with open(args.shapes) as f:
            shapes = [tuple(r) for r in json.load(f)]
    props = torch.cuda.get_device_properties(0)
    result: dict = {
        "device": props.name,
        "sms": props.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "smi_before": smi(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True

    def save() -> None:
        with open(args.out + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(args.out + ".tmp", args.out)
        counts = {key: len(value) for key, value in result.items() if isinstance(value, list)}
        print(time.strftime("%H:%M:%S"), "saved", counts, flush=True)

    only = set(args.only.split(","))
    if "launch" in only:
        result["launch"] = {}
        measure_launch(result["launch"])
        save()
    if "memory" in only:
        result["memory"] = []
        measure_memory(Budget(args.budget_s), result["memory"])
        save()
    if "gemm" in only or "grouped" in only:
        largest = max([b * max(m * k, n * k, m * n) for b, m, n, k, _, _ in shapes] + [max(GRID) ** 2])
        pools = Pools(largest)
        if "gemm" in only:
            warm_up(pools, args.warm_up_s)
            result["smi_after_warm_up"] = smi()
            result["gemm"] = []
            measure_gemms(pools, shapes, Budget(args.budget_s), result["gemm"])
            result["smi_after_suite_gemms"] = smi()
            save()
            measure_gemms(pools, grid_shapes(), Budget(4 * args.budget_s), result["gemm"])
            result["smi_after_gemms"] = smi()
            save()
        if "grouped" in only:
            result["grouped"] = []
            measure_grouped(pools, shapes, Budget(args.budget_s / 4), result["grouped"])
            save()
        del pools
        torch.cuda.empty_cache()
    if "attention" in only:
        result["attention"] = []
        measure_attention(Budget(args.budget_s), result["attention"])
        save()
    print(json.dumps({k: v for k, v in result.items() if not isinstance(v, list)}, indent=1))
    for kind in ("memory", "gemm", "grouped", "attention"):
        rows = result.get(kind, [])
        errors = [r for r in rows if "error" in r]
        print(kind, len(rows), "rows,", len(errors), "errors", errors[:2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
