"""Helpers shared by the benchmark scripts: inputs and measuring a run in a child process."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path


def write_system(path: Path, algorithm: str, dims: int) -> Path:
    """An upstream-style system.json: LIFO, localBWAware, 4 chunks, one active chunk."""
    path.write_text(json.dumps({
        "scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4, "collective-optimization": "localBWAware",
        "local-mem-bw": 1600,
        **{f"{c}-implementation": [algorithm] * dims
           for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")},
    }))
    return path


def measure(run) -> dict:
    """Call ``run()`` (returning a RunResult) and return wall time, peak RSS and results."""
    started = time.perf_counter()
    result = run()
    wall = time.perf_counter() - started
    out = {"wall_s": wall, "peak_mib": peak_rss_mib(),
           "step_ns": result.step_ns, "messages": result.messages}
    queues = getattr(result.network, "max_queue", None)
    if queues is not None:
        out["max_queue"] = max(queues)
    return out


def peak_rss_mib() -> float:
    """This process's peak RSS in MiB (Linux VmHWM). Not ``getrusage``'s ru_maxrss
    alone: a child started by a process that once held more reports the parent's
    peak there."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_env() -> dict:
    """The environment of an installed program: Python may cache bytecode.

    (This sandbox sets PYTHONDONTWRITEBYTECODE, which would make every run
    recompile astra's sources; a pip-installed package ships compiled files.)
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def warm_up() -> None:
    """Import astra once in a child so the bytecode cache is filled before timing."""
    subprocess.run([sys.executable, "-c", "import astra_core.api, astra_analytical.network"],
                   env=child_env(), check=True)


def in_child(script: str, args: list[str]) -> dict:
    """Run ``script --child args`` in a fresh interpreter; its last stdout line is JSON."""
    out = subprocess.run([sys.executable, script, "--child", *args], capture_output=True,
                         text=True, check=False, env=child_env())
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr else "child failed")
    return json.loads(out.stdout.strip().splitlines()[-1])
