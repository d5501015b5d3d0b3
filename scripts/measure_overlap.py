"""Measure how a GEMM slows beside communication-like kernels on one GPU, with PyTorch and CuPy.

    python scripts/measure_overlap.py --out overlap.json

Communication libraries run their transfers as kernels on the GPU's SMs (NCCL one
thread block per channel; Transformer Engine's userbuffers reserve SMs for their
reduce kernels), beside the training step's compute. This measures what that costs a
GEMM on the part at hand, three ways:

* ``resident``: a copy loop of ``C`` thread blocks of 512 threads on a second stream,
  each holding a whole SM (200 KiB of shared memory), runs through the GEMMs: the
  GEMM's time per product beside it, and the copy's bandwidth beside and alone.
* ``shared``: the same with no shared memory, so the GEMM's blocks may share SMs with it.
* ``paused``: the resident copy with a pause after each thread's 16 bytes, moving tens of
  GB/s (a transfer over a network) rather than an HBM-bound stream.
* ``carveout``: cuBLAS told to leave ``C`` SMs free
  (``torch._C._set_sm_carveout_experimental``), nothing beside it.

and, for a grouped linear layer (one GEMM per expert, as Transformer Engine runs a
mixture-of-experts layer), the time of ``B`` products on one stream against the same
spread round-robin over 4 streams.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
from measure_kernels import events, per_call_ms  # this folder's (the script runs from it)

COPY_SOURCE = r"""
extern "C" __global__ void copy_loop(const float4* __restrict__ src, float4* __restrict__ dst,
                                     long long n, int rounds, unsigned pause_ns) {
    extern __shared__ float4 hold[];  // reserves the SM, unused
    long long stride = (long long)gridDim.x * blockDim.x;
    for (int r = 0; r < rounds; ++r) {
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
            dst[i] = src[i];
            if (pause_ns) __nanosleep(pause_ns);  // a slower transfer on the same SMs
        }
    }
    if (n < 0) hold[threadIdx.x] = dst[0];
}
"""
SHAPES = (
    (8192, 8192, 8192, "bf16"),
    (4096, 4096, 4096, "bf16"),
    (8192, 28672, 4096, "fp8"),
    (2048, 4096, 4096, "bf16"),
)
BLOCKS = (8, 16, 24, 32, 64)
#: Pauses [ns] after each 16-byte copy of a thread: transfers at NCCL's rates over a network
#: (tens of GB/s) on the same SMs.
PAUSES = (500, 2000, 8000)
HOLD_BYTES = 200 * 1024


def gemm(m: int, n: int, k: int, precision: str):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    if precision == "fp8":
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t()
        one = torch.ones((), device="cuda")
        return lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16, use_fast_accum=True)
    bt = b.t()
    return lambda: torch.matmul(a, bt)


class Copy:
    """The copy loop over a 2 GiB buffer (far past L2), launched on its own stream."""

    def __init__(self):
        import cupy

        self.cupy = cupy
        self.kernel = cupy.RawKernel(COPY_SOURCE, "copy_loop")
        self.kernel.max_dynamic_shared_size_bytes = HOLD_BYTES
        self.n = (1 << 31) // 16  # float4 elements
        self.src = cupy.ones(self.n * 4, dtype=cupy.float32)
        self.dst = cupy.empty_like(self.src)
        self.stream = torch.cuda.Stream()

    def elements(self, pause_ns: int) -> int:
        """float4 elements a round copies: 32 MiB of them when paused (a slow round)."""
        return self.n if not pause_ns else (1 << 25) // 16

    def launch(self, blocks: int, rounds: int, hold: bool, pause_ns: int = 0) -> None:
        with self.cupy.cuda.ExternalStream(self.stream.cuda_stream):
            args = (self.src, self.dst, self.cupy.int64(self.elements(pause_ns)), self.cupy.int32(rounds))
            self.kernel(
                (blocks,),
                (512,),
                (*args, self.cupy.uint32(pause_ns)),
                shared_mem=HOLD_BYTES if hold else 0,
            )

    def alone_ms(self, blocks: int, hold: bool, pause_ns: int = 0) -> float:
        start, end = events()
        start.record(self.stream)
        self.launch(blocks, 1, hold, pause_ns)
        end.record(self.stream)
        end.synchronize()
        return start.elapsed_time(end)


def beside(copy: Copy, fn, blocks: int, hold: bool, alone_gemm_ms: float, pause_ns: int = 0) -> dict:
    """The GEMM's time per call while the copy runs (the copy sized to outlast them)."""
    one_round = copy.alone_ms(blocks, hold, pause_ns)
    reps = max(5, int(200.0 / alone_gemm_ms))
    rounds = max(2, int(3.0 * reps * alone_gemm_ms / one_round) + 2)
    start, end = events()
    start.record(copy.stream)
    copy.launch(blocks, rounds, hold, pause_ns)
    end.record(copy.stream)
    time.sleep(0.002)  # let the copy's blocks take their SMs first
    ms = per_call_ms(fn, reps)
    end.synchronize()
    copy_ms = start.elapsed_time(end)
    moved = 2 * copy.elements(pause_ns) * 16  # bytes a round reads and writes
    return {
        "blocks": blocks,
        "hold_sm": hold,
        "pause_ns": pause_ns,
        "gemm_ms": ms,
        "slowdown": ms / alone_gemm_ms,
        "copy_gbps_alone": moved / one_round / 1e6,
        "copy_gbps_beside": moved * rounds / copy_ms / 1e6,
        "copy_outlasted_gemms": copy_ms > reps * ms,
    }


def measure_contention(out: dict) -> None:
    copy = Copy()
    out["shapes"] = []
    for m, n, k, precision in SHAPES:
        fn = gemm(m, n, k, precision)
        for _ in range(3):
            fn()
        alone = per_call_ms(fn, max(5, int(100.0 / max(per_call_ms(fn, 3), 1e-3))))
        row: dict = {
            "shape": [m, n, k],
            "precision": precision,
            "alone_ms": alone,
            "beside": [],
            "carveout": [],
        }
        for blocks in BLOCKS:
            for hold in (True, False):
                try:
                    row["beside"].append(beside(copy, fn, blocks, hold, alone))
                except Exception as exc:  # noqa: BLE001 - a failed case is recorded, the others run
                    row["beside"].append({"blocks": blocks, "hold_sm": hold, "error": repr(exc)[:300]})
            for pause_ns in PAUSES if precision == "fp8" or m == n == k == 8192 else ():
                try:
                    row["beside"].append(beside(copy, fn, blocks, True, alone, pause_ns))
                except Exception as exc:  # noqa: BLE001
                    row["beside"].append({"blocks": blocks, "pause_ns": pause_ns, "error": repr(exc)[:300]})
            try:
                torch._C._set_sm_carveout_experimental(blocks)
                fn()
                ms = per_call_ms(fn, max(5, int(100.0 / alone)))
                row["carveout"].append({"sms": blocks, "gemm_ms": ms, "slowdown": ms / alone})
            except Exception as exc:  # noqa: BLE001
                row["carveout"].append({"sms": blocks, "error": repr(exc)[:300]})
            finally:
                _no_carveout()
        out["shapes"].append(row)
        print(time.strftime("%H:%M:%S"), row["shape"], precision, "alone", round(alone, 3), flush=True)


def _no_carveout() -> None:
    try:
        torch._C._set_sm_carveout_experimental(None)
    except (RuntimeError, TypeError):
        torch._C._set_sm_carveout_experimental(0)


def _serial(calls: list):
    def run() -> None:
        for call in calls:
            call()

    return run


def _spread(calls: list, streams: list):
    """``calls`` round-robin over ``streams``, joined back to the current stream."""

    def run() -> None:
        main = torch.cuda.current_stream()
        for stream in streams:
            stream.wait_stream(main)
        for i, call in enumerate(calls):
            with torch.cuda.stream(streams[i % len(streams)]):
                call()
        for stream in streams:
            main.wait_stream(stream)

    return run


def measure_grouped(out: list) -> None:
    streams = [torch.cuda.Stream() for _ in range(4)]
    for tokens, n, k, precision in ((512, 1536, 2048, "fp8"), (1024, 1536, 2048, "fp8"), (2048, 1536, 2048, "fp8"),
                                    (512, 1536, 2048, "bf16"), (2048, 1536, 2048, "bf16"), (1024, 5760, 2880, "bf16"),
                                    (512, 2048, 768, "bf16"), (512, 2048, 768, "fp8")):  # fmt: skip
        calls = [gemm(tokens, n, k, precision) for _ in range(16)]
        serial, spread = _serial(calls), _spread(calls, streams)
        for fn in (serial, spread):
            fn()
        torch.cuda.synchronize()
        row = {"experts": 16, "tokens": tokens, "n": n, "k": k, "precision": precision}
        row["serial_us"] = per_call_ms(serial, 50) * 1e3
        row["four_streams_us"] = per_call_ms(spread, 50) * 1e3
        out.append(row)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    result: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    result["date"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())

    def save() -> None:
        with open(args.out + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
        os.replace(args.out + ".tmp", args.out)

    for name, fn, holder in (("contention", measure_contention, {}), ("grouped", measure_grouped, [])):
        result[name] = holder
        try:
            fn(holder)
        except Exception as exc:  # noqa: BLE001 - the other measurement still runs
            result[name + "_error"] = repr(exc)[:500]
        save()
    print(json.dumps(result, indent=1)[:6000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
