"""Helpers shared by the benchmark scripts: inputs and measuring a run in a child process."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path


def write_system(path: Path, algorithm: str, dims: int) -> Path:
    """:func:`astra_core.config.system.upstream_system` written to ``path``."""
    from astra_core.config.system import upstream_system

    path.write_text(json.dumps(upstream_system(algorithm, dims)))
    return path


def write_workload(prefix: Path, npus: int, kind: str, size: int = 0) -> None:
    """``prefix.<rank>.et`` for ``npus`` ranks: one collective of ``size`` bytes
    (``kind`` ``all_reduce`` or ``all_to_all``; one file, hard-linked for every
    rank) or ResNet-50 data parallel (``resnet50``: ASTRA-sim 1.0's text workload,
    converted)."""
    if kind == "resnet50":
        from astra_core.workload.converters.text import convert_text

        convert_text(
            Path(__file__).resolve().parents[1] / "tests/data/reference/text/Resnet50_DataParallel.txt",
            npus,
            prefix,
        )
        return
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    comm = pb.ALL_REDUCE if kind == "all_reduce" else pb.ALL_TO_ALL
    node = make_node(0, kind, pb.COMM_COLL_NODE, comm_type=comm, comm_size=size, is_cpu_op=False)
    write_rank_trace(f"{prefix}.0.et", [node])
    for rank in range(1, npus):
        os.link(f"{prefix}.0.et", f"{prefix}.{rank}.et")


def measure(run) -> dict:
    """Call ``run()`` (returning a RunResult) and return wall time, peak RSS and results."""
    started = time.perf_counter()
    result = run()
    wall = time.perf_counter() - started
    out = {"wall_s": wall, "peak_mib": peak_rss_mib(), "step_ns": result.step_ns, "messages": result.messages}
    queues = result.links.max_queue if result.links is not None else None
    if queues is not None:
        out["max_queue"] = max(queues)
    return out


def peak_rss_mib(pid: int | str = "self") -> float:
    """The peak RSS in MiB (Linux VmHWM) of this process or ``pid``. Not ``getrusage``'s
    ru_maxrss alone: a child started by a process that once held more reports the
    parent's peak there."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 if pid == "self" else float("nan")


def child_pids() -> list[int]:
    """Pids of this process's running children (an ns3 worker stays, idle, after its run)."""
    me, pids = str(os.getpid()), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[1] == me:  # after the name: state, ppid
                pids.append(int(stat.parent.name))
        except (OSError, IndexError):
            continue
    return pids


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
    subprocess.run(
        [sys.executable, "-c", "import astra_core.api, astra_analytical"], env=child_env(), check=True
    )


def parse_args(parser: argparse.ArgumentParser, child, nargs: int) -> argparse.Namespace | None:
    """The command line's arguments; or, for the hidden ``--child ARG...`` that
    :func:`in_child` passes (``nargs`` of them), ``child(*ARGS)`` runs here and
    None is returned."""
    parser.add_argument("--child", nargs=nargs, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return None
    return args


def in_child(script: str, args: list[str]) -> dict:
    """Run ``script --child args`` in a fresh interpreter; its last stdout line is JSON."""
    out = subprocess.run(
        [sys.executable, script, "--child", *args],
        capture_output=True,
        text=True,
        check=False,
        env=child_env(),
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr else "child failed")
    return json.loads(out.stdout.strip().splitlines()[-1])
