"""ResNet-50 data parallel on 1024 NPUs, against upstream ASTRA-sim's 30.5 s.

Converts ``tests/data/reference/text/Resnet50_DataParallel.txt`` (ASTRA-sim 1.0
text workload) to 1024 Chakra traces, then simulates one step on the
analytical backend over [Ring 8, FullyConnected 8, Switch 16] (200/100/50 GB/s,
100/500/1000 ns), ring on every dimension, the reference text-converter system
settings (LIFO, localBWAware, 4 splits). Upstream ASTRA-sim takes 30.5 s.

    python benchmarks/resnet50_1024.py [--npus 1024] [--no-symmetry]

Prints the conversion time, the simulation wall time and the step time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import write_system

TEXT = Path(__file__).resolve().parents[1] / "tests/data/reference/text/Resnet50_DataParallel.txt"
SHAPES = {1024: [8, 8, 16], 128: [8, 4, 4], 64: [4, 4, 4]}
UPSTREAM_S = 30.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--npus", type=int, default=1024, choices=sorted(SHAPES))
    parser.add_argument("--no-symmetry", action="store_true", help="simulate every rank")
    args = parser.parse_args()
    from astra_core.api import simulate
    from astra_core.workload.converters.text import convert_text

    dims = SHAPES[args.npus]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        network = folder / "network.yml"
        network.write_text(
            "topology: [ Ring, FullyConnected, Switch ]\n"
            f"npus_count: [ {', '.join(map(str, dims))} ]\n"
            "bandwidth: [ 200.0, 100.0, 50.0 ]\nlatency: [ 100.0, 500.0, 1000.0 ]\n"
        )
        system = write_system(folder / "system.json", "ring", 3)
        started = time.perf_counter()
        convert_text(TEXT, args.npus, folder / "resnet50")
        converted = time.perf_counter()
        result = simulate(
            folder / "resnet50", system, network, backend="analytical", symmetry=not args.no_symmetry
        )
        done = time.perf_counter()
    rank0 = result.ranks[0]
    print(
        f"ResNet-50 DP on {args.npus} NPUs {dims}: convert {converted - started:.2f} s, "
        f"simulate {done - converted:.2f} s (upstream {UPSTREAM_S} s at 1024 NPUs), "
        f"step {result.step_ns / 1e6:.3f} ms, rank 0 compute {rank0.compute_ns / 1e6:.3f} ms, "
        f"exposed comm {rank0.exposed_comm_ns / 1e6:.3f} ms, rank symmetry used: "
        f"{getattr(result, 'symmetric', False)}"
    )


if __name__ == "__main__":
    main()
