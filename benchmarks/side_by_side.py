"""astra against upstream ASTRA-sim where rank symmetry cannot help.

Every case simulates every rank (``symmetry=False``) on the same inputs in both
simulators, each in a fresh process: astra's CPU time (user + system, the
whole process: interpreter start, imports, reading, simulating), wall time and
peak RSS (VmHWM), upstream's CPU time and peak RSS (``wait4``), and whether
every rank's finish time is the same. Cases:

* ``ar-1024``: all-reduce 1 GiB on 1024 NPUs, [Ring 8, FullyConnected 8,
  Switch 16] at 200/100/50 GB/s, 100/500/1000 ns; ring on every dimension;
  congestion-unaware;
* ``ar-dbt-1024``: the same with double binary trees on every dimension;
* ``a2a-aware-256``: direct all-to-all 64 MiB on a 256-NPU Switch (50 GB/s,
  500 ns), congestion-aware (upstream's aware model takes one dimension);
* ``ar-aware-256``: ring all-reduce 64 MiB on the same, congestion-aware;
* ``resnet50-1024``: ResNet-50 data parallel (ASTRA-sim 1.0's text workload,
  converted) on the 1024-NPU network of ``ar-1024``.

``--upstream DIR`` names the folder with upstream's
``AstraSim_Analytical_Congestion_Unaware`` and ``..._Aware`` binaries (default:
``$ASTRA_UPSTREAM_BIN``); without it only astra runs and upstream's figures
are the ones measured below. Upstream: commit 518bd51, built with its
``build/astra_analytical/build.sh`` (Release, -O3), on this project's machine
kind (2 cores); ``--memory`` gives no_memory_expansion.

    python benchmarks/side_by_side.py [--only NAME] [--upstream DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import tempfile
import time
from pathlib import Path

from common import in_child, parse_args, peak_rss_mib, warm_up, write_system, write_workload

ROOT = Path(__file__).resolve().parents[1]
NO_MEMORY = ROOT / "tests/data/reference/memory/no_memory_expansion.json"
THREE_DIMS = (
    "topology: [ Ring, FullyConnected, Switch ]\nnpus_count: [ 8, 8, 16 ]\n"
    "bandwidth: [ 200.0, 100.0, 50.0 ]\nlatency: [ 100.0, 500.0, 1000.0 ]\n"
)
SWITCH_256 = "topology: [ Switch ]\nnpus_count: [ 256 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"

# name -> (network.yml, algorithm, dims, workload, bytes, backend)
CASES = {
    "ar-1024": (THREE_DIMS, "ring", 3, "all_reduce", 1 << 30, "analytical"),
    "ar-dbt-1024": (THREE_DIMS, "doubleBinaryTree", 3, "all_reduce", 1 << 30, "analytical"),
    "a2a-aware-256": (SWITCH_256, "direct", 1, "all_to_all", 64 << 20, "analytical-congestion"),
    "ar-aware-256": (SWITCH_256, "ring", 1, "all_reduce", 64 << 20, "analytical-congestion"),
    "resnet50-1024": (THREE_DIMS, "ring", 3, "resnet50", 0, "analytical"),
}
BINARIES = {
    "analytical": "AstraSim_Analytical_Congestion_Unaware",
    "analytical-congestion": "AstraSim_Analytical_Congestion_Aware",
}
_FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")


def write_inputs(name: str, folder: Path) -> tuple[Path, Path, Path]:
    """(trace prefix, system.json, network.yml) of a case."""
    network_text, algorithm, dims, kind, size, _ = CASES[name]
    network = folder / "network.yml"
    network.write_text(network_text)
    system = write_system(folder / "system.json", algorithm, dims)
    if algorithm == "doubleBinaryTree":  # upstream has no tree all-gather or reduce-scatter
        spec = json.loads(system.read_text())
        for key in ("all-gather", "reduce-scatter", "all-to-all"):
            spec[f"{key}-implementation"] = ["ring"] * dims
        system.write_text(json.dumps(spec))
    prefix = folder / "trace"
    write_workload(prefix, 1024 if dims == 3 else 256, kind, size)
    return prefix, system, network


def child(prefix: str, system: str, network: str, backend: str) -> None:
    """Simulate every rank; print CPU and wall seconds, peak MiB and finish times."""
    from astra_core.api import simulate

    started = time.perf_counter()
    result = simulate(prefix, system, network, memory=str(NO_MEMORY), backend=backend, symmetry=False)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "simulate_s": time.perf_counter() - started,
                "peak_mib": peak_rss_mib(),
                "finish_ns": [int(r.finish_ns) for r in result.ranks],
            }
        )
    )


def run_astra(prefix: Path, system: Path, network: Path, backend: str) -> dict:
    started = time.perf_counter()
    measured = in_child(__file__, [str(prefix), str(system), str(network), backend])
    measured["wall_s"] = time.perf_counter() - started
    return measured


def run_upstream(binary: Path, prefix: Path, system: Path, network: Path, folder: Path) -> dict:
    """Upstream's CPU seconds, wall seconds, peak MiB and per-rank finish times."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [
                str(binary),
                f"--workload-configuration={prefix}",
                f"--system-configuration={system}",
                f"--network-configuration={network}",
                f"--remote-memory-configuration={NO_MEMORY}",
                f"--logging-folder={folder / 'upstream-log'}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=folder,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        text = log.read()
    if proc.returncode != 0:
        raise RuntimeError(f"upstream exited {proc.returncode}: {text.strip().splitlines()[-1:]}")
    finish = {int(r): int(c) for r, c in _FINISHED.findall(text)}
    return {
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "wall_s": time.perf_counter() - started,
        "peak_mib": usage.ru_maxrss / 1024,
        "finish_ns": [finish[r] for r in sorted(finish)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(CASES))
    parser.add_argument(
        "--upstream",
        default=os.environ.get("ASTRA_UPSTREAM_BIN"),
        help="folder of upstream's analytical binaries",
    )
    args = parse_args(parser, child, 4)
    if args is None:
        return
    warm_up()
    print(
        "| case | astra CPU s | astra wall s | astra MiB | upstream CPU s | upstream MiB "
        "| CPU ratio | memory ratio | same finish times |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for name in [args.only] if args.only else list(CASES):
        backend = CASES[name][5]
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            prefix, system, network = write_inputs(name, folder)
            ours = run_astra(prefix, system, network, backend)
            theirs = None
            if args.upstream:
                theirs = run_upstream(
                    Path(args.upstream) / BINARIES[backend], prefix, system, network, folder
                )
        cells = [f"{ours['cpu_s']:.2f}", f"{ours['wall_s']:.2f}", f"{ours['peak_mib']:.0f}"]
        if theirs:
            cells += [
                f"{theirs['cpu_s']:.2f}",
                f"{theirs['peak_mib']:.0f}",
                f"{ours['cpu_s'] / theirs['cpu_s']:.2f}x",
                f"{ours['peak_mib'] / theirs['peak_mib']:.2f}x",
                "yes" if ours["finish_ns"] == theirs["finish_ns"] else "NO",
            ]
        else:
            cells += ["-"] * 5
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
