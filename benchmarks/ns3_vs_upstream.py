"""The ns3 backend against upstream ASTRA-sim's ns-3 backend on the same 8-NPU cases.

Upstream's ns-3 example network: 8 hosts on one switch, 400 Gbps and 500 ns
per link (``scratch/topology/8_nodes_1_switch_topology.txt`` of
astra-network-ns3), 1000-byte payloads (``PACKET_PAYLOAD_SIZE 1000``), PFC
on and ``CC_MODE 12`` in its ``config.txt``, which no congestion control
handles: line rate. astra runs the same with ``cc = "none"`` and
``payload_bytes = 1000``. Workloads: a 64 MiB all-reduce and a 64 MiB
all-to-all on the 8 NPUs (``astra gen micro``), ring on one dimension with
4 chunks (upstream's ``Ring_4chunks.json``). Each run is a fresh process
(``astra run``); the table gives wall and CPU seconds, peak RSS and the
step time.

``--upstream SCRIPT`` runs a local build of upstream too: ``SCRIPT ar|a2a``
must run one case on the same inputs and print upstream's output, its last
line ``WALL_S USER_S SYS_S MAXRSS_KB`` (as ``/usr/bin/time -f "%e %U %S
%M"``). Without it, upstream's figures measured on this machine kind are
shown (astra-sim 518bd51 with astra-network-ns3 f764bed, ns-3.42, release
build, 2026-11-25; three runs each).

    python benchmarks/ns3_vs_upstream.py [--upstream SCRIPT] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from astra_core.config.system import upstream_system

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY = "9 1 8\n8\n" + "".join(f"8 {h} 400Gbps 0.0005ms 0\n" for h in range(8))
CONFIG = 'cc = "none"\npayload_bytes = 1000\n'
SYSTEM = upstream_system("ring", 1)  # boost-mode off, its default
CASES = {"ar": "all-reduce", "a2a": "all-to-all"}
#: Upstream's wall s (three runs), user+sys CPU s, peak MiB and step (ns), measured here.
MEASURED = {
    "ar": ((29.77, 29.92, 30.13), 29.87, 76.0, 2_805_024),
    "a2a": ((59.37, 61.29, 59.90), 59.82, 76.2, 5_389_928),
}
_FINISHED = re.compile(r"sys\[\d+\] finished, (\d+) cycles")


def astra_case(name: str, folder: Path) -> dict:
    """Run one case with ``astra run`` in a fresh process; wall/CPU s, MiB, step ns."""
    prefix = folder / name
    subprocess.run(
        [
            sys.executable,
            "-m",
            "astra_core.cli",
            "gen",
            "micro",
            "--collective",
            CASES[name],
            "--size",
            "64MiB",
            "--npus",
            "8",
            "--output",
            str(prefix),
        ],
        check=True,
        capture_output=True,
    )
    out = folder / f"{name}.json"
    cmd = [
        sys.executable,
        "-c",
        "from astra_core.cli import main; main()",
        "run",
        "--workload",
        str(prefix),
        "--system",
        str(folder / "system.json"),
        "--topology",
        str(folder / "topology.txt"),
        "--backend",
        "ns3",
        "--backend-config",
        str(folder / "ns3.toml"),
        "--json",
        str(out),
    ]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = __import__("os").wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        raise RuntimeError(f"astra run failed: {proc.stderr.read().decode()[-500:]}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_mib": usage.ru_maxrss / 1024,
        "step_ns": json.loads(out.read_text())["step_ns"],
    }


def upstream_case(script: str, name: str) -> dict:
    text = subprocess.run([script, name], capture_output=True, text=True, check=True).stdout
    wall, user, sys_s, rss = text.strip().splitlines()[-1].split()
    return {
        "wall_s": float(wall),
        "cpu_s": float(user) + float(sys_s),
        "peak_mib": float(rss) / 1024,
        "step_ns": max(int(c) for c in _FINISHED.findall(text)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", help="script running upstream's ns-3 backend on a case")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "topology.txt").write_text(TOPOLOGY)
        (folder / "ns3.toml").write_text(CONFIG)
        (folder / "system.json").write_text(json.dumps(SYSTEM))
        print(
            "| case | astra wall s | astra CPU s | astra MiB | upstream wall s | upstream CPU s "
            "| upstream MiB | wall ratio | astra step µs | upstream step µs | step difference |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name in CASES:
            ours = min((astra_case(name, folder) for _ in range(args.repeat)), key=lambda r: r["wall_s"])
            if args.upstream:
                theirs = upstream_case(args.upstream, name)
            else:
                walls, cpu, mib, step = MEASURED[name]
                theirs = {"wall_s": sorted(walls)[1], "cpu_s": cpu, "peak_mib": mib, "step_ns": step}
            print(
                f"| {name} | {ours['wall_s']:.2f} | {ours['cpu_s']:.2f} | {ours['peak_mib']:.0f} | "
                f"{theirs['wall_s']:.2f} | {theirs['cpu_s']:.2f} | {theirs['peak_mib']:.0f} | "
                f"{ours['wall_s'] / theirs['wall_s']:.3f} | {ours['step_ns'] / 1e3:,.1f} | "
                f"{theirs['step_ns'] / 1e3:,.1f} | "
                f"{ours['step_ns'] / theirs['step_ns'] - 1:+.1%} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
