"""Peak memory of simulating one long rank trace (streamed traces).

Writes one rank's trace of ``--nodes`` ET nodes shaped like a PyTorch-converted
training step (not timed): GPU compute kernels in one chain (each depends on
the one before; every 8th also on a CPU launch op with a ctrl dependency),
with an all-reduce after every 64 kernels, names from a set of 40 operators,
``num_ops``, ``tensor_size`` and the kernel's measured duration. Then one fresh
Python process simulates it on 8 NPUs (every rank reads the same file) and
reports its wall time and peak RSS (its own VmHWM).

    python benchmarks/trace_memory.py [--nodes 1000000] [--no-stream] [--compact] [--npus 8]

Target: a 1,000,000-node rank in at most 300 MB. ``--compact`` writes
the smallest such rank instead, 1,000,000 compute nodes in one chain (a name and
a duration each: 18.7 MB, under the 32 MiB size at which files always stream;
read whole it would take 1 GB), with ``--npus 2``: at most 300 MB whatever the file's size.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from common import in_child, parse_args, peak_rss_mib, write_system

OPERATORS = [
    f"aten::{op}"
    for op in (
        "mm",
        "addmm",
        "bmm",
        "linear",
        "conv2d",
        "relu",
        "gelu",
        "softmax",
        "layer_norm",
        "add",
        "mul",
        "div",
        "sub",
        "matmul",
        "embedding",
        "dropout",
        "transpose",
        "view",
        "copy_",
        "cat",
        "sum",
        "mean",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "pow",
        "tanh",
        "sigmoid",
        "baddbmm",
        "native_layer_norm",
        "scaled_dot_product_attention",
        "flash_attention",
        "index_select",
        "gather",
        "scatter",
        "masked_fill",
        "where",
        "clone",
        "zeros",
    )
]


def write_trace(path: Path, nodes: int, compact: bool = False) -> int:
    """One rank's trace of ``nodes`` ET nodes (module docstring); returns its size in bytes."""
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    def chain():
        for i in range(nodes):
            yield make_node(i, f"k{i % 40}", pb.COMP_NODE, data_deps=(i - 1,) if i else (), duration_micros=1)

    def generate():
        previous = None
        for i in range(nodes):
            deps = () if previous is None else (previous,)
            if i % 65 == 64:
                node = make_node(
                    i,
                    "nccl:all_reduce",
                    pb.COMM_COLL_NODE,
                    data_deps=deps,
                    comm_type=pb.ALL_REDUCE,
                    comm_size=1 << 20,
                    is_cpu_op=False,
                )
            elif i % 8 == 1:
                node = make_node(
                    i, "cudaLaunchKernel", pb.COMP_NODE, data_deps=deps, duration_micros=2, is_cpu_op=True
                )
            else:
                ctrl = (i - 1,) if i % 8 == 2 else ()
                node = make_node(
                    i,
                    OPERATORS[i % len(OPERATORS)],
                    pb.COMP_NODE,
                    data_deps=() if ctrl else deps,
                    ctrl_deps=ctrl,
                    duration_micros=5 + i % 17,
                    num_ops=(i % 97) * 1_000_000,
                    tensor_size=(i % 31) * 4096,
                    is_cpu_op=False,
                )
            previous = i
            yield node

    write_rank_trace(path, chain() if compact else generate())
    return path.stat().st_size


def child(prefix: str, system: str, network: str, stream: str) -> None:
    from astra_core.api import simulate
    from astra_core.workload import streaming

    if stream == "off":  # every file read whole, as before streaming
        streaming.STREAM_MIN_BYTES = 1 << 62
        streaming.MAX_DECODED_NODES = 1 << 62

    started = time.perf_counter()
    result = simulate(prefix, system, network, backend="analytical")
    print(
        json.dumps(
            {"wall_s": time.perf_counter() - started, "step_ns": result.step_ns, "peak_mib": peak_rss_mib()}
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--no-stream", action="store_true", help="read the trace whole")
    parser.add_argument("--compact", action="store_true", help="compute nodes in one chain, nothing else")
    parser.add_argument("--npus", type=int, default=8)
    args = parse_args(parser, child, 4)
    if args is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        size = write_trace(folder / "step.0.et", args.nodes, args.compact)
        for rank in range(1, args.npus):
            (folder / f"step.{rank}.et").symlink_to(folder / "step.0.et")
        network = folder / "network.yml"
        network.write_text(
            f"topology: [ Ring ]\nnpus_count: [ {args.npus} ]\nbandwidth: [ 100.0 ]\nlatency: [ 500.0 ]\n"
        )
        system = write_system(folder / "system.json", "ring", 1)
        started = time.perf_counter()
        m = in_child(
            __file__, [str(folder / "step"), str(system), str(network), "off" if args.no_stream else "on"]
        )
        process_s = time.perf_counter() - started
    print(
        f"{args.nodes:,} nodes per rank ({size / 2**20:.1f} MiB file): process {process_s:.1f} s "
        f"(simulate {m['wall_s']:.1f} s), peak {m['peak_mib']:.0f} MiB, "
        f"step {m['step_ns'] / 1e6:.3f} ms (target: 300 MB = {300e6 / 2**20:.0f} MiB)"
    )


if __name__ == "__main__":
    main()
