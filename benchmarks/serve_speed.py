"""Serving speed: 100,000 requests on a 64-GPU deployment, colocated on ``analytical`` and
disaggregated with its KV transfers on ``flow``.

Llama 3 70B in BF16 on 8 H100 servers (NVLink 450 GB/s inside, one 400 Gb/s port per GPU
between them), Azure 2023 conversation lengths, Poisson arrivals: eight TP 8 replicas at 80
requests per second; or four TP 8 prefill and four TP 8 decode replicas at 60 per second,
least-loaded routing. Each case runs in a fresh interpreter; the table gives its wall time,
CPU time and peak RSS with what it simulated.

    python benchmarks/serve_speed.py [--only colocated|disaggregated]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

from common import in_child, parse_args, peak_rss_mib, warm_up

CLUSTER = {
    "topology": ["Switch", "Switch"],
    "npus_count": [8, 8],
    "bandwidth": [419.09, 46.57],
    "latency": [936.25, 1350],
}
CASES = {
    "colocated": {"tp": 8, "replicas": 8, "requests": {"count": 100_000, "rate": 80.0, "lengths": "azure-conv-2023"}},
    "disaggregated": {
        "prefill": {"tp": 8, "replicas": 4}, "decode": {"tp": 8, "replicas": 4}, "backend": "flow",
        "router": "least-loaded", "requests": {"count": 100_000, "rate": 60.0, "lengths": "azure-conv-2023"},
    },
}  # fmt: skip


def child(name: str) -> None:
    import astra

    spec = {"model": "llama3-70b", "gpu": "H100", "network": CLUSTER, **CASES[name]}
    started, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    summary = astra.simulate_serving(spec).summary()
    used = resource.getrusage(resource.RUSAGE_SELF)
    out = {
        "wall_s": time.perf_counter() - started,
        "cpu_s": used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime,
        "peak_mib": peak_rss_mib(),
        "requests": summary["requests"],
        "served_per_s": summary["request_throughput"],
        "ttft_p50_ms": summary["ttft"]["median_ms"],
        "tpot_p50_ms": summary["tpot"]["median_ms"],
    }
    print(json.dumps(out))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(CASES))
    args = parse_args(parser, child, 1)
    if args is None:
        return 0
    warm_up()
    print("| case | wall s | CPU s | peak MiB | requests | served /s | TTFT p50 ms | TPOT p50 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name in [args.only] if args.only else list(CASES):
        r = in_child(__file__, [name])
        print(
            f"| {name} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['peak_mib']:.0f} | {r['requests']:,} | "
            f"{r['served_per_s']:.2f} | {r['ttft_p50_ms']:.1f} | {r['tpot_p50_ms']:.1f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
