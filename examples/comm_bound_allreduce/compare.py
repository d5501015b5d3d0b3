"""Run the communication-bound example on a few backends and compare them in one line.

One ring all-reduce of 64 MiB over the 16 NPUs of a k = 4 fat-tree (100 Gbps,
1 µs links; ``fabric.txt``), 4 chunks (``system.json``). The step is almost all
communication, so the network model decides it: see README.md for why
``analytical`` gives about 3.3x ``flow``'s (and ``ns3``'s) time.

    python examples/comm_bound_allreduce/compare.py [--backends analytical,flow]

The default backends take about a second each; ``ns3`` about 20 s and
``garnetlike`` about 2 minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import astra
from astra_core.errors import AstraError

HERE = Path(__file__).resolve().parent
#: The example's inputs, as ``astra.simulate`` keywords.
INPUTS = {
    "workload": str(HERE / "workload" / "allreduce_64MiB"),
    "system": str(HERE / "system.json"),
    "topology": str(HERE / "fabric.txt"),
}
DEFAULT_BACKENDS = ("analytical", "analytical-congestion", "flow")


def step_ns(backend: str) -> float:
    """The example's step time on ``backend`` (ns). Raises AstraError."""
    return astra.simulate(**INPUTS, backend=backend).step_ns


def comparison(steps: dict[str, float]) -> str:
    """One line: each backend's step in ms, then the slowest over the fastest."""
    times = ", ".join(f"{name} {ns / 1e6:.3f} ms" for name, ns in steps.items())
    slow = max(steps, key=steps.__getitem__)
    fast = min(steps, key=steps.__getitem__)
    ratio = f"{slow} / {fast} = {steps[slow] / steps[fast]:.2f}x" if slow != fast else "all equal"
    return (
        f"64 MiB all-reduce, 16 NPUs, k = 4 fat-tree: {times} ({ratio}; "
        "why: examples/comm_bound_allreduce/README.md)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backends", default=",".join(DEFAULT_BACKENDS), help="comma-separated backend names"
    )
    args = parser.parse_args(argv)
    try:
        steps = {name: step_ns(name) for name in args.backends.split(",") if name}
    except AstraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(comparison(steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
