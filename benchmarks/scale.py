"""Speed at scale: astra's wall time and peak memory against upstream ASTRA-sim.

Each case's inputs are written first (not timed); then one fresh Python process
reads the traces and configs, simulates, and exits. The wall time is that whole
process, start-up included, measured from outside; peak memory is its maximum
RSS. As for any installed program, Python's bytecode cache is filled by one
untimed warm-up import first. Cases (network [Ring, FullyConnected, Switch], 200/100/50 GB/s, 100/500/1000
ns, ring on every dimension, analytical backend):

* all-reduce 1 GiB on 1024 NPUs [8, 8, 16]       upstream 0.3-0.9 s
* all-reduce 1 GiB on 4096 NPUs [16, 16, 16]     upstream 4-9 s
* ResNet-50 data parallel on 1024 NPUs [8, 8, 16] upstream 30.5 s, 300 MB
* all-reduce 512 MiB on 4096 NPUs [16, 16, 16]
* all-to-all 256 MiB on 1024 NPUs [8, 8, 16]

    python benchmarks/scale.py [--only NAME] [--no-symmetry] [--verify]

``--verify`` also runs every case with rank symmetry off and checks that the
per-rank finish times are equal (slow: the full runs take minutes).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from common import in_child, measure, parse_args, warm_up, write_system, write_workload

NETWORKS = {
    1024: [8, 8, 16],
    4096: [16, 16, 16],
}
# name -> (npus, workload kind, bytes, upstream seconds (low, high) or None, upstream MB)
CASES = {
    "allreduce-1GiB-1024": (1024, "all_reduce", 1 << 30, (0.3, 0.9), None),
    "allreduce-1GiB-4096": (4096, "all_reduce", 1 << 30, (4.0, 9.0), None),
    "resnet50-dp-1024": (1024, "resnet50", 0, (30.5, 30.5), 300),
    "allreduce-512MiB-4096": (4096, "all_reduce", 512 << 20, None, None),
    "alltoall-256MiB-1024": (1024, "all_to_all", 256 << 20, None, None),
}


def write_network(path: Path, sizes: list[int]) -> Path:
    path.write_text(
        "topology: [ Ring, FullyConnected, Switch ]\n"
        f"npus_count: [ {', '.join(map(str, sizes))} ]\n"
        "bandwidth: [ 200.0, 100.0, 50.0 ]\nlatency: [ 100.0, 500.0, 1000.0 ]\n"
    )
    return path


def write_inputs(name: str, folder: Path) -> tuple[str, Path, Path]:
    npus, kind, size, _, _ = CASES[name]
    network = write_network(folder / "network.yml", NETWORKS[npus])
    system = write_system(folder / "system.json", "ring", 3)
    prefix = folder / "trace"
    write_workload(prefix, npus, kind, size)
    return str(prefix), system, network


def run_case(prefix: str, system: str, network: str, symmetry: str) -> None:
    """Child process: simulate once, print measurements and per-rank finish times."""
    from astra_core.api import simulate

    out = {}
    result_box = []

    def run():
        result_box.append(simulate(prefix, system, network, backend="analytical", symmetry=symmetry == "on"))
        return result_box[0]

    out.update(measure(run))
    out["finish_ns"] = [r.finish_ns for r in result_box[0].ranks]
    out["symmetric"] = result_box[0].symmetric
    print(json.dumps(out))


def timed_child(prefix, system, network, symmetry: bool) -> dict:
    started = time.perf_counter()
    m = in_child(__file__, [prefix, str(system), str(network), "on" if symmetry else "off"])
    m["process_s"] = time.perf_counter() - started
    return m


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(CASES))
    parser.add_argument("--no-symmetry", action="store_true")
    parser.add_argument("--verify", action="store_true")
    args = parse_args(parser, run_case, 4)
    if args is None:
        return
    warm_up()
    for name in [args.only] if args.only else list(CASES):
        npus, _, _, upstream, upstream_mb = CASES[name]
        with tempfile.TemporaryDirectory() as tmp:
            try:
                prefix, system, network = write_inputs(name, Path(tmp))
            except ImportError as exc:
                print(f"{name}: skipped ({exc})")
                continue
            m = timed_child(prefix, system, network, not args.no_symmetry)
            line = (
                f"{name}: wall {m['process_s']:.2f} s (simulate {m['wall_s']:.2f} s), "
                f"peak {m['peak_mib']:.0f} MiB, step {m['step_ns'] / 1e6:.3f} ms, "
                f"symmetric {m['symmetric']}"
            )
            if upstream:
                line += (
                    f"; upstream {upstream[0]:g}-{upstream[1]:g} s: ratio "
                    f"{m['process_s'] / upstream[0]:.2f}-{m['process_s'] / upstream[1]:.2f}"
                )
            if upstream_mb:
                line += f", memory ratio {m['peak_mib'] * 1.048576 / upstream_mb:.2f}"
            print(line, flush=True)
            if args.verify:
                full = timed_child(prefix, system, network, False)
                same = full["finish_ns"] == m["finish_ns"]
                print(
                    f"  full run: {full['process_s']:.1f} s, per-rank finish times "
                    f"{'equal' if same else 'DIFFER'}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
