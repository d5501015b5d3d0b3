"""What a message and a packet-hop cost the ns3 backend: the speeds ``astra run --estimate``
projects with (astra_ns3.work).

Each case runs in a fresh process on ``ns3`` with its default config but
packet by packet (``fast_forward = false``; ``--fast-forward`` keeps it on),
after a warm-up run that loads the model, and is estimated first (``astra.estimate``:
messages and packet-hops, no packets). The wall time of the run's simulation
(``simulate()``, inputs loaded) is fitted as ``messages x message_s +
packet_hops / rate`` by least squares over the cases:

* ``llm-tiny-64``: the 16-GPU (TP 8 x DP 2) Llama-shaped step of a tiny model
  (32 layers, hidden 128) at sequence length 64: 144 k messages of a few packets,
  so nearly all of its time is per message;
* ``llm-tiny-512``: the same at sequence length 512, more packets per message;
* ``allreduce-64mib``: upstream's 64 MiB ring all-reduce on 8 NPUs of one switch
  (448 messages of 2 MiB): nearly all of its time is per packet.

Also prints each run's peak resident memory (the caller and the ns-3 worker).

    python benchmarks/ns3_message_cost.py [--only CASE] [--fast-forward]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "tests" / "data" / "reference"
SYSTEM = REPO / "examples" / "validation" / "hgx_h100_4nodes" / "system.json"
TINY = {
    "name": "tiny",
    "layers": 32,
    "hidden": 128,
    "heads": 8,
    "kv_heads": 8,
    "ffn_hidden": 448,
    "vocab": 1024,
    "seq_len": 64,
    "mlp": "swiglu",
}
NETWORK = (
    "topology: [Switch, Switch]\nnpus_count: [8, 2]\nbandwidth: [419.095, 46.566]\nlatency: [300, 1350]\n"
)
CASES = ("llm-tiny-64", "llm-tiny-512", "allreduce-64mib")


def inputs(case: str, folder: Path) -> dict:
    """The simulate() arguments of ``case`` (workload written under ``folder``)."""
    if case == "allreduce-64mib":
        return {
            "workload": str(REFERENCE / "workload/micro/ALL_REDUCE_8npus_64MB/ALL_REDUCE"),
            "system": str(REFERENCE / "system/ring_1d.json"),
            "network": str(REFERENCE / "network/sw8.yml"),
        }
    seq = case.rsplit("-", 1)[1]
    model = folder / "tiny.json"
    model.write_text(json.dumps(TINY))
    network = folder / "network.yml"
    network.write_text(NETWORK)
    prefix = folder / f"tiny{seq}" / "w"
    gen = ["gen", "llm", "--model", str(model), "--tp", "8", "--dp", "2", "--micro-batch", "1"]
    gen += ["--global-batch", "8", "--seq-len", seq, "--sequence-parallel", "--zero", "1"]
    gen += ["--gpu", "H100", "--dims", "8x2", "--output", str(prefix)]
    subprocess.run([sys.executable, "-m", "astra_core.cli", *gen], check=True, capture_output=True)
    return {"workload": str(prefix), "system": str(SYSTEM), "network": str(network)}


def child(case: str, fast_forward: bool) -> None:
    """One case in this process: prints a JSON row."""
    from astra_core.api import estimate, simulate
    from astra_ns3 import process

    warm = {
        "workload": REFERENCE / "workload/micro/ALL_REDUCE_8npus_1MB/ALL_REDUCE",
        "system": REFERENCE / "system/ring_1d.json",
        "network": REFERENCE / "network/sw8.yml",
    }
    simulate(**warm, backend="ns3")  # loads (or compiles) the model in a worker
    with tempfile.TemporaryDirectory() as tmp:
        args = inputs(case, Path(tmp))
        config = {"fast_forward": fast_forward}
        est = estimate(**args, backend="ns3", backend_config=config)
        started = time.perf_counter()
        result = simulate(**args, backend="ns3", backend_config=config)
        wall = time.perf_counter() - started
    stats = result.counters
    process.close_idle()  # the worker ends: its peak memory is counted in RUSAGE_CHILDREN
    row = {
        "case": case,
        "messages": est.messages,
        "estimated_packet_hops": est.work,
        "packet_hops": stats["packet_hops"],
        "wall_s": wall,
        "caller_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worker_peak_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }
    print(json.dumps(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=CASES)
    parser.add_argument("--fast-forward", action="store_true", help="keep ns3's fast-forward on")
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.fast_forward)
        return
    rows = []
    for case in [args.only] if args.only else CASES:
        out = subprocess.run(
            [sys.executable, __file__, "--child", case, *(["--fast-forward"] if args.fast_forward else [])],
            check=True,
            capture_output=True,
            text=True,
        )
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(
            f"{case:<16} {row['messages']:>8,} messages  {row['packet_hops'] / 1e6:7.2f} M packet-hops "
            f"(estimated {row['estimated_packet_hops'] / 1e6:.2f} M)  wall {row['wall_s']:6.2f} s  "
            f"peak {row['caller_peak_mib']:.0f} MiB caller, {row['worker_peak_mib']:.0f} MiB worker",
            flush=True,
        )
    if len(rows) >= 2:
        import numpy as np

        a = np.array([[r["messages"], r["packet_hops"]] for r in rows], dtype=float)
        b = np.array([r["wall_s"] for r in rows])
        (per_message, per_hop), *_ = np.linalg.lstsq(a, b, rcond=None)
        print(
            f"fit: {per_message * 1e6:.1f} µs per message + {per_hop * 1e6:.2f} µs per packet-hop "
            f"({1 / per_hop / 1e6:.2f} M packet-hops/s)"
        )


if __name__ == "__main__":
    main()
