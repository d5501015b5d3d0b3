"""The speed guard: every headline benchmark, compared with its last accepted figure.

Each case runs in a fresh process (its peak RSS is its own) and reports the CPU
time of its simulation (this process and the children it waited for, such as the
ns3 backend's worker or a cluster's alone-runs), its wall time, its peak RSS and
its result (the simulated step). The cases are those the README and the docs
quote: the general path (every rank simulated, as upstream does) at 1,024 and 256 NPUs, the flow backend's 1,024-host all-to-all
(one chunk, and four chunks on the 432-host fat-tree, where flows of later chunks
start at every delivery), its 4,096-GPU rail ring, a Llama-3-8B step on ns3, 16
jobs on one cluster, the symmetric 8,192-GPU Llama 3 405B step and two validation
rows (generated, then simulated from memory), and a 512-GPU step simulated from the
trace files ``astra gen llm`` writes.

``benchmarks/results/speed_record.json`` holds the last accepted figures and their
commit. This machine's speed drifts by up to 1.6x within an hour (a shared 2-core
machine: the same code measured 12.8 s and 19.3 s of CPU on the rail ring), so
``make bench`` runs ``--against recorded``: each case here and at the record's commit
(checked out in a temporary worktree, run on this environment), alternately, and
fails (exit 1) when here takes more than ``--band`` (default 1.35) times the CPU time
or peak RSS there, or gives another result (a model change is accepted on purpose,
with ``--accept``). ``--against REV`` pairs with any revision; without ``--against``
the run is compared with the record's absolute figures (same machine, quiet hour).
``--accept`` stores the run as the new record; ``docs/speed.md`` is generated from
the record (``--markdown docs/speed.md``), never typed by hand.

    python benchmarks/guard.py [--only CASE[,CASE]] [--band 1.35] [--accept]
        [--against REV|recorded] [--repeats N] [--markdown docs/speed.md]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from common import child_env, child_pids, peak_rss_mib

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "benchmarks" / "results" / "speed_record.json"
BACKEND_DIRS = ("analytical", "flow", "garnetlike", "ns3")


@dataclass(frozen=True)
class Case:
    """A headline benchmark: what it runs, and ``prepare(folder)``, which writes its
    inputs under ``folder`` and returns the run (a function giving the step in ns)."""

    title: str
    prepare: Callable[[Path], Callable[[], float]]


def _general(name: str) -> Callable[[Path], Callable[[], float]]:
    def prepare(folder: Path) -> Callable[[], float]:
        from side_by_side import CASES as SIDE_BY_SIDE
        from side_by_side import NO_MEMORY, write_inputs

        prefix, system, network = write_inputs(name, folder)
        backend = SIDE_BY_SIDE[name][-1]
        return _simulate(
            prefix, system, network=network, memory=str(NO_MEMORY), backend=backend, symmetry=False
        )

    return prepare


def _flow_a2a(k: int, splits: int) -> Callable[[Path], Callable[[], float]]:
    def prepare(folder: Path) -> Callable[[], float]:
        from flow_scale import fat_tree_all_to_all

        prefix, system, topology, npus = fat_tree_all_to_all(folder, k, splits)
        return _simulate(prefix, system, topology=topology, dims=[npus], backend="flow")

    return prepare


def _flow_rail_ring(folder: Path) -> Callable[[], float]:
    from flow_scale import write_inputs

    prefix, system, topology, dims = write_inputs("rail-ring", folder)
    return _simulate(
        prefix, system, topology=topology, dims=[int(d) for d in dims.split("x")], backend="flow"
    )


def _simulate(prefix, system, **options) -> Callable[[], float]:
    from astra_core.api import simulate

    return lambda: float(simulate(str(prefix), str(system), **options).step_ns)


def _ns3_llm(folder: Path) -> Callable[[], float]:
    from ns3_llm import SYSTEM, write_inputs

    prefix, network = write_inputs("128", folder)
    return _simulate(prefix, SYSTEM, network=network, backend="ns3")


def _cluster(folder: Path) -> Callable[[], float]:
    import yaml
    from cluster_scale import prepare

    spec = prepare(folder, 16)
    spec.write_text(yaml.safe_dump({**yaml.safe_load(spec.read_text()), "backend": "analytical-congestion"}))

    def run() -> float:
        import astra

        result = astra.simulate_cluster(spec, processes=1, cache=False)
        return float(sum(sum(job.iteration_ns) for job in result.jobs))

    return run


def _files_llama(folder: Path) -> Callable[[], float]:
    """Llama 3 70B in FP8 on 512 H100s (TP 8, CP 2, PP 4 x 5 virtual stages, DP 8, 32
    micro-batches), written by ``astra gen llm``'s writer (no ``--dims``: every
    collective names its group) and simulated from the files: the reader's templates
    (ranks equal but for their peers and group names)."""
    import json

    from astra_core.config.system import nccl_system
    from astra_core.workload.generators.gpus import GPUS
    from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm
    from astra_core.workload.generators.models import MODELS

    cfg = LLMConfig(
        MODELS["llama3-70b"], GPUS["h100"], dp=8, tp=8, pp=4, cp=2, virtual_stages=5, global_batch=256,
        seq_len=8192, precision="fp8",
    )  # fmt: skip
    write_llm(generate_llm(cfg), folder / "t")
    (folder / "system.json").write_text(json.dumps(nccl_system("H100")))
    (folder / "network.yml").write_text(
        "topology: [Switch, Switch]\nnpus_count: [8, 64]\nbandwidth: [419.09, 46.57]\nlatency: [936.25, 1350]\n"
    )
    return _simulate(folder / "t", folder / "system.json", network=str(folder / "network.yml"))


#: The environment variable that gives a child the checkout it runs (absent: this one).
_TREE = "ASTRA_GUARD_TREE"


def _row(module: str, index: int) -> Callable[[Path], Callable[[], float]]:
    def prepare(folder: Path) -> Callable[[], float]:
        # the scripts (not a package) of the revision whose astra runs: its rows and its API
        sys.path.insert(0, str(Path(os.environ.get(_TREE, ROOT)) / "validation"))
        rows = __import__(module)
        row = rows.ROWS[index]
        predict = rows.predict
        return lambda: float(predict(row)[0] if module == "megatron" else predict(row)) * 1e9

    return prepare


CASES: dict[str, Case] = {
    "general-ar-1024": Case(
        "1 GiB ring all-reduce, 1,024 NPUs, every rank simulated, analytical", _general("ar-1024")
    ),
    "general-resnet50-1024": Case(
        "ResNet-50 data parallel, 1,024 NPUs, every rank simulated", _general("resnet50-1024")
    ),
    "general-a2a-aware-256": Case(
        "64 MiB all-to-all, 256 NPUs, every rank simulated, analytical-congestion", _general("a2a-aware-256")
    ),
    "flow-a2a-1024": Case("all-to-all 256 KiB, k=16 fat-tree (1,024 hosts), 1 chunk, flow", _flow_a2a(16, 1)),
    "flow-a2a-128-chunks": Case(
        "all-to-all 256 KiB, k=8 fat-tree (128 hosts), 4 chunks, flow", _flow_a2a(8, 4)
    ),
    "flow-a2a-432-chunks": Case(
        "all-to-all 256 KiB, k=12 fat-tree (432 hosts), 4 chunks, flow", _flow_a2a(12, 4)
    ),
    "flow-rail-ring-4096": Case("ring all-reduce 1 GiB, rail-optimized 4,096 GPUs, flow", _flow_rail_ring),
    "ns3-llm-128": Case("Llama-3-8B step, 128 GPUs (TP 8, DP 16), ns3 with fast-forward", _ns3_llm),
    "cluster-16-jobs": Case("16 jobs of 64 GPUs on 1,024 GPUs, analytical-congestion", _cluster),
    "llama3-405b-8192": Case(
        "Llama 3 405B step, 8,192 H100s (validation row, symmetric)", _row("h100_scale", 0)
    ),
    "nemotron4-340b-1024-fp8": Case(
        "Nemotron-4 340B FP8 step, 1,024 H100s (validation row)", _row("h100_scale", 5)
    ),
    "sc21-gpt-39b": Case("GPT 39.1B step, 512 A100s (SC'21 Table 1 row)", _row("megatron", 4)),
    "files-llama3-70b-512": Case(
        "Llama 3 70B FP8 step, 512 H100s, simulated from its written traces", _files_llama
    ),
}


def _cpu_s() -> float:
    """CPU seconds of this process, of the children it waited for, and of those still
    running (the ns3 backend keeps its worker for the next run)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    tick = os.sysconf("SC_CLK_TCK")
    for pid in child_pids():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def _peak_mib() -> float:
    """The largest peak RSS of this process and its children, running or waited for."""
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return max([peak_rss_mib(), reaped] + [peak_rss_mib(pid) for pid in child_pids()])


def child(name: str, repeat: int = 1) -> None:
    """Child process: prepare case ``name``, run it ``repeat`` times (the guard's own
    test makes a case that much slower this way), print one JSON line."""
    import astra

    with tempfile.TemporaryDirectory() as tmp:
        run = CASES[name].prepare(Path(tmp))
        astra.simulate  # noqa: B018 (astra's names load on first use: not in the timing)
        cpu, wall = _cpu_s(), time.perf_counter()
        for _ in range(repeat):
            step_ns = run()
        out = {"cpu_s": _cpu_s() - cpu, "wall_s": time.perf_counter() - wall, "peak_mib": _peak_mib()}
    print(json.dumps({**out, "step_ns": step_ns}))


def _env(revision_root: Path | None) -> dict:
    """A child's environment: with ``revision_root``, its packages first on the path."""
    env = child_env()
    env.setdefault("PYTHONWARNINGS", "ignore")
    if revision_root is not None:
        roots = [revision_root] + [revision_root / "backends" / b for b in BACKEND_DIRS]
        env["PYTHONPATH"] = os.pathsep.join(map(str, roots))
        env[_TREE] = str(revision_root)
    return env


def _warm_up(revision_root: Path | None) -> None:
    """Run the smallest case once, untimed, on ``revision_root``'s sources (here: None):
    a fresh checkout's first run builds or fills caches (the kernel, Python's bytecode)
    that would count in a case's CPU time or peak RSS."""
    measure_case("general-ar-1024", revision_root)


def measure_case(
    name: str, revision_root: Path | None = None, repeat: int = 1, timeout_s: float = 1800.0
) -> dict:
    """Case ``name`` in a fresh interpreter: its JSON line; with ``revision_root``, on
    the astra checked out there (its packages first on the path). Raises RuntimeError
    (the child's last error line) when the case fails."""
    env = _env(revision_root)
    out = subprocess.run(
        [sys.executable, __file__, "--child", name, "--repeat", str(repeat)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout_s,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{name}: " + (out.stderr.strip().splitlines() or ["child failed"])[-1])
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(record: dict, measured: dict, band: float) -> list[str]:
    """One line per regression of ``measured`` (case -> figures) against ``record``'s
    cases: CPU time or peak RSS above ``band`` times the record, or another result. A
    case without a record is not a regression."""
    problems = []
    for name, now in measured.items():
        then = record.get("cases", {}).get(name)
        if then is None:
            continue
        for key, unit in (("cpu_s", "s of CPU"), ("peak_mib", "MiB peak")):
            if now[key] > band * then[key]:
                problems.append(
                    f"{name}: {now[key]:.1f} {unit}, {now[key] / then[key]:.2f}x the record's {then[key]:.1f}"
                )
        if abs(now["step_ns"] - then["step_ns"]) > 1e-9 * abs(then["step_ns"]):
            problems.append(f"{name}: step {now['step_ns']:.3f} ns, the record has {then['step_ns']:.3f} ns")
    return problems


def paired(names: list[str], revision: str, repeats: int) -> tuple[dict[str, dict], dict[str, dict]]:
    """Each case at ``revision`` and here, alternately, ``repeats`` times: (figures there,
    figures here) per case, each figure the median of its runs."""

    def median(runs: list[dict]) -> dict:
        return {key: sorted(r[key] for r in runs)[len(runs) // 2] for key in runs[0]}

    there: dict[str, dict] = {}
    here: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree), revision],
            check=True,
        )
        try:
            for root in (tree, None):  # each side's kernel built (or found) before any timing
                _warm_up(root)
            for name in names:
                runs = [(measure_case(name, tree), measure_case(name)) for _ in range(repeats)]
                there[name] = then = median([a for a, _ in runs])
                here[name] = now = median([b for _, b in runs])
                print(f"{name}: {now['cpu_s']:.1f} s of CPU here, {then['cpu_s']:.1f} s at {revision}: "
                      f"{now['cpu_s'] / then['cpu_s']:.2f}x; peak {now['peak_mib']:.0f} / {then['peak_mib']:.0f} MiB"
                      + ("" if now["step_ns"] == then["step_ns"] else "; the step differs"), flush=True)  # fmt: skip
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    return there, here


def render(record: dict) -> str:
    """The docs page of ``record`` (docs/speed.md)."""
    lines = [
        "# Speed: the headline benchmarks",
        "",
        "Generated by `python benchmarks/guard.py --markdown docs/speed.md` from the last accepted",
        f"record (`benchmarks/results/speed_record.json`): commit {record['commit']}, {record['date']},",
        f"{record['machine']}. `make bench` runs every case here and at that commit, side by",
        "side, and fails when one takes more CPU time or memory than the band allows there, or",
        "gives another result (module docstring of `benchmarks/guard.py`); CPU time counts the",
        "simulation's process and the processes it starts (the ns3 worker, a cluster's runs),",
        "not the writing of its inputs. The result is",
        "the simulated step (for the cluster, the sum of every job's iterations).",
        "",
        "| case | what | CPU s | wall s | peak MiB | result |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, m in record["cases"].items():
        title = CASES[name].title if name in CASES else ""
        lines.append(
            f"| {name} | {title} | {m['cpu_s']:.1f} | {m['wall_s']:.1f} | {m['peak_mib']:.0f} | "
            f"{m['step_ns'] / 1e3:,.3f} µs |"
        )
    return "\n".join(lines) + "\n"


def machine() -> str:
    """The CPU model and count and the memory of this machine, in words."""
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        "unknown CPU",
    )
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({model}), {mem_gib:.0f} GiB"


def _commit() -> str:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD"], check=False).returncode
    return out.stdout.strip() + ("+changes" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated cases (default: all): " + ", ".join(CASES))
    parser.add_argument(
        "--band", type=float, default=1.35, help="allowed ratio to the record (CPU time, peak RSS)"
    )
    parser.add_argument("--accept", action="store_true", help="store this run as the record")
    parser.add_argument(
        "--against",
        metavar="REV",
        help="pair every case with git revision REV instead ('recorded': the record's commit)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs of each side with --against (median)")
    parser.add_argument("--markdown", type=Path, help="write the record's page here and stop")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.repeat)
        return 0
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {"cases": {}}
    if args.markdown:
        args.markdown.write_text(render(record))
        return 0
    names = args.only.split(",") if args.only else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"--only: no case {unknown[0]!r}; the cases: {', '.join(CASES)}")
    if args.against:
        revision = record["commit"].split("+")[0] if args.against == "recorded" else args.against
        there, here = paired(names, revision, args.repeats)
        return _verdict(compare({"cases": there}, here, args.band))
    measured = {}
    for name in names:
        measured[name] = m = measure_case(name)
        then = record["cases"].get(name)
        vs = f", {m['cpu_s'] / then['cpu_s']:.2f}x the record" if then else ", no record"
        print(f"{name}: {m['cpu_s']:.1f} s of CPU, {m['wall_s']:.1f} s wall, {m['peak_mib']:.0f} MiB, "
              f"step {m['step_ns'] / 1e3:,.3f} µs{vs}", flush=True)  # fmt: skip
    if args.accept:
        cases = {**record["cases"], **measured}
        record = {"commit": _commit(), "date": date.today().isoformat(), "machine": machine(), "cases": cases}
        RECORD.write_text(json.dumps(record, indent=1) + "\n")
        return 0
    return _verdict(compare(record, measured, args.band))


def _verdict(problems: list[str]) -> int:
    for line in problems:
        print("REGRESSION " + line)
    print("speed guard: " + (f"{len(problems)} regression(s)" if problems else "every case within its band"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
