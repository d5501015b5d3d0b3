"""Record one DDP training step of a small transformer with torch.distributed (gloo, CPU).

    python record_ddp.py OUT_DIR WORLD_SIZE PORT RANK     (one process per rank)

Each rank writes ``OUT_DIR/et.<rank>.json`` (execution trace),
``OUT_DIR/kineto.<rank>.json`` (Kineto trace) and ``OUT_DIR/meta.<rank>.json``:
the wall time of the recorded step [s] (measured around the profiled step),
the median unprofiled step [s], the median time of a 4-byte and a 4 MiB
all-reduce on this loopback setup [s], and the model's gradient bytes.
Used by test_pytorch.py; runs in a few seconds on 2 CPU cores.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile

LARGE = 4 << 20  # bytes of the large loopback all-reduce


def _median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        dist.barrier()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(rank: int, world: int, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, batch_first=True)
    model = nn.parallel.DistributedDataParallel(
        nn.TransformerEncoder(layer, num_layers=1), bucket_cap_mb=0.25
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32, 128)

    def step():
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    for _ in range(3):
        step()
    unprofiled = _median_time(step, 5)
    small, large = torch.zeros(1), torch.zeros(LARGE // 4)
    ar_small = _median_time(lambda: dist.all_reduce(small), 20)
    ar_large = _median_time(lambda: dist.all_reduce(large), 10)
    et = ExecutionTraceObserver()
    et.register_callback(os.path.join(out, f"et.{rank}.json"))
    with profile(activities=[ProfilerActivity.CPU], execution_trace_observer=et) as prof:
        dist.barrier()
        start = time.perf_counter()
        step()
        wall = time.perf_counter() - start
    prof.export_chrome_trace(os.path.join(out, f"kineto.{rank}.json"))
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    with open(os.path.join(out, f"meta.{rank}.json"), "w") as f:
        json.dump(
            {
                "step_s": wall,
                "unprofiled_step_s": unprofiled,
                "allreduce_small_s": ar_small,
                "allreduce_large_s": ar_large,
                "allreduce_large_bytes": LARGE,
                "grad_bytes": grad_bytes,
                "world_size": world,
            },
            f,
        )
    dist.destroy_process_group()


def main() -> None:
    out, world, port, rank = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = port
    run(rank, world, out)


if __name__ == "__main__":
    main()
