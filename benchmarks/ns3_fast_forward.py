"""The ns3 backend's steady-state fast-forward: agreement with packet-by-packet runs, and speed.

Every case runs twice on ``ns3``, with ``fast_forward = true`` (the default)
and ``false`` (every packet simulated), under each of ``--ccs`` (DCQCN, HPCC,
no congestion control; PFC on, defaults otherwise). Cases (100 Gbps, 1 us
links):

* the nine cases of ``validation/backends.py`` at each of ``--sizes`` MiB
  (p2p, rings and all-to-alls on a k = 4 fat-tree and a 2:1 leaf-spine, an
  incast, two jobs sharing uplinks);
* ``ring-switch8`` / ``a2a-switch8``: ring all-reduce / direct all-to-all of
  ``--speed-mib`` (256) MiB on 8 hosts of one 8-port switch, as
  ``benchmarks/ns3_speed.py``'s all-reduce (4 chunks);
* ``cc-study-incast``: ``examples/cc_study``'s incast, 8 NPUs each send
  12.5 MB to NPU 0 through one switch;
* ``websearch-50``: ``validation/cc_fct.py``'s study, WebSearch flow sizes
  with Poisson arrivals at 50 % of the host links for ``--duration-ms`` (10) ms
  on a k = 4 fat-tree, seed 1.

Per case and congestion control the report gives the step (the last message's
arrival) with fast-forward on and off and its relative error (on / off - 1);
FCT slowdown (FCT over the message alone on the idle fabric, the backend's own
``lone_message_ns``) p50 and p99 per size bucket
(:func:`astra_core.flows.report.by_size_bucket`) on and off and their errors;
the bytes on the wire (every port's ``tx_bytes``) on / off; the simulation's
own wall time (``simulate()`` or ``run_flows()`` alone: inputs are written and
the ns-3 worker is loaded first, so process and worker start-up do not count)
and off / on; and the peak RSS of the caller and of the ns-3 worker
(``resource.getrusage``). Flags (``!``) mark a case beyond the model's
targets: step within 1 %, FCT p50 and p99 within 5 % per bucket, and at least
100x less simulation time on the 8-host cases at 256 MiB and the fat-tree
cases at 64 MiB.

The ``skipped`` column is the share of the run's packet-hops that the model
jumped over rather than simulated, and its number of jumps. Each run is one
child process (so its peak memory is its own) and appends a JSON line to
``--results`` (with the checkout's commit); a run already there is not run
again (``--fresh`` runs it again, the last line of a run counting), so the
matrix can be filled in parts:

    python benchmarks/ns3_fast_forward.py [--cases validation,speed,incast,websearch|NAME,...]
        [--ccs dcqcn,hpcc,none] [--sizes 4,64] [--speed-mib 256] [--duration-ms 10]
        [--results benchmarks/results/ns3_fast_forward.jsonl] [--fresh] [--report-only]
        [--timeout-s 3600] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
CCS = ("dcqcn", "hpcc", "none")
#: The fast-forward's targets: step and FCT percentiles within these of the packet run ...
STEP_TOLERANCE = 0.01
FCT_TOLERANCE = 0.05
#: ... and at least this much less simulation time on the cases of SPEED_TARGETS.
SPEED_TARGET = 100.0
#: (case, size MiB) of the speed target: the 8-host cases at 256 MiB, the fat-tree ones at 64.
SPEED_TARGETS = {
    ("ring-switch8", 256),
    ("a2a-switch8", 256),
    ("p2p-fat-tree", 64),
    ("ring-fat-tree", 64),
    ("a2a-fat-tree", 64),
    ("incast", 64),
}
#: examples/cc_study's incast: 8 senders of 12.5 MB each.
INCAST_SENDERS, INCAST_BYTES = 8, 12_500_000
RESULTS = ROOT / "benchmarks" / "results" / "ns3_fast_forward.jsonl"


def _validation(name: str):
    """validation/<name>.py as a module (its folder on sys.path for its own imports)."""
    folder = str(ROOT / "validation")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_name = f"_ff_validation_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, ROOT / "validation" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules[module_name]


def star(hosts: int, gbps: float = 100.0, latency_ns: float = 1000.0):
    """``hosts`` NPUs on one switch (node ``hosts``), as examples/cc_study's."""
    from astra_core.topology.physical import PhysicalTopology

    links = []
    for h in range(hosts):
        links += [(h, hosts, gbps / 8, latency_ns), (hosts, h, gbps / 8, latency_ns)]
    return PhysicalTopology(hosts + 1, [hosts], links, source=f"{hosts}-port switch")


# -- cases --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One comparison. ``kind``: ``"trace"`` (Chakra traces through ``simulate``, sized
    in MiB) or ``"flows"`` (flows through ``run_flows``; ``size`` unused)."""

    name: str
    group: str
    kind: str


def _trace_cases() -> dict[str, Any]:
    """name -> validation/backends.py Case builder ``size_bytes -> Case``."""
    vb = _validation("backends")
    builders: dict[str, Callable[[int], Any]] = {}
    for case in vb.cases(MIB):
        builders[case.name] = lambda size, name=case.name: next(c for c in vb.cases(size) if c.name == name)
    builders["ring-switch8"] = lambda size: vb.Case(
        "ring-switch8", False, lambda: star(8), vb._every_rank("ring", size)
    )
    builders["a2a-switch8"] = lambda size: vb.Case(
        "a2a-switch8", True, lambda: star(8), vb._every_rank("a2a", size), "direct"
    )
    return builders


VALIDATION_CASES = (
    "p2p-fat-tree",
    "p2p-gpu-cluster",
    "ring-switch",
    "ring-fat-tree",
    "a2a-fat-tree",
    "ring-leaf-spine",
    "a2a-leaf-spine",
    "incast",
    "two-jobs",
)
CASES = {
    **{name: Case(name, "validation", "trace") for name in VALIDATION_CASES},
    "ring-switch8": Case("ring-switch8", "speed", "trace"),
    "a2a-switch8": Case("a2a-switch8", "speed", "trace"),
    "cc-study-incast": Case("cc-study-incast", "incast", "flows"),
    "websearch-50": Case("websearch-50", "websearch", "flows"),
}


def ns3_config(cc: str, fast_forward: bool | None) -> dict[str, Any]:
    """The backend config of a run; ``fast_forward`` None leaves the key out (as on
    code from before it existed)."""
    config: dict[str, Any] = {"cc": cc}
    if fast_forward is not None:
        config["fast_forward"] = fast_forward
    return config


def incast_flows(per_sender: int = INCAST_BYTES, senders: int = INCAST_SENDERS) -> list:
    """examples/cc_study's incast: NPUs 1..senders each send ``per_sender`` bytes to NPU 0 at t = 0."""
    from astra_core.flows.flowfile import FlowSpec

    return [FlowSpec(src, 0, per_sender, 0) for src in range(1, senders + 1)]


def websearch_flows(duration_ms: float, load: float = 0.5, seed: int = 1) -> list:
    """validation/cc_fct.py's flows: WebSearch sizes, Poisson arrivals at ``load``."""
    from astra_core.flows.cdf import load_cdf
    from astra_core.flows.generate import host_link_gbps, poisson_flows
    from astra_core.topology.generators import fat_tree

    fabric = fat_tree(4, 100.0, 1000.0)
    return poisson_flows(
        load_cdf("websearch"), fabric.npus_count, host_link_gbps(fabric), load, round(duration_ms * 1e6), seed
    )


def _run_trace_case(name: str, size: int, config: dict, folder: Path) -> tuple[Any, float, Any]:
    """(the ns3 backend after the run, simulation wall s, step ns) of a trace case."""
    from astra_core.api import simulate
    from astra_core.config.system import upstream_system
    from astra_core.topology.ns3_format import write_ns3_topology
    from astra_core.workload.writer import write_rank_trace

    case = _trace_cases()[name](size)
    fabric = case.fabric()
    topo = folder / f"{name}.txt"
    write_ns3_topology(fabric, topo)
    prefix = folder / name
    for rank, nodes in case.nodes(fabric.npus_count).items():
        write_rank_trace(f"{prefix}.{rank}.et", nodes)
    system = upstream_system(case.algorithm, 1)
    started = time.perf_counter()
    from astra_core.plugins import backends_built

    with backends_built() as built:
        result = simulate(
            str(prefix),
            system,
            topology=str(topo),
            backend="ns3",
            backend_config=config,
            comm_groups=case.comm_groups,
        )
    return built[-1], time.perf_counter() - started, result.step_ns


def _slowdowns(network) -> Any:
    """A flow table (astra_core.flows.report.COLUMNS' size and slowdown) of every message
    of a trace run: FCT over the backend's own lone-message time."""
    import pandas as pd

    m = network.results.messages()
    m = m[m.src != m.dst]
    ideal = [
        network.lone_message_ns(int(s), int(d), int(b), int(t))
        for s, d, b, t in zip(m.src, m.dst, m["bytes"], m.tag)
    ]
    return pd.DataFrame({"size_bytes": m["bytes"].to_numpy(), "slowdown": m.fct_ns.to_numpy() / ideal})


def measure(
    name: str,
    cc: str,
    fast_forward: bool | None,
    size_mib: float = 4,
    duration_ms: float = 10.0,
    incast_bytes: int = INCAST_BYTES,
) -> dict[str, Any]:
    """One run of case ``name``: its step (ns), simulation wall time (s), the backend's
    counters, every port's bytes and packets sent, bytes delivered and FCT slowdown p50
    and p99 per size bucket. ``size_mib``: the collectives' (and transfers') size of a
    trace case; ``duration_ms``: websearch-50's arrivals; ``incast_bytes``:
    cc-study-incast's per sender. Also every port's speed (Gbps) and the longest base
    RTT of any message (ns). Raises KeyError for an unknown case."""
    from astra_core.flows.report import by_size_bucket, flow_table
    from astra_core.flows_api import run_flows

    case = CASES[name]
    config = ns3_config(cc, fast_forward)
    if case.kind == "trace":
        with tempfile.TemporaryDirectory() as tmp:
            network, wall, step = _run_trace_case(name, round(size_mib * MIB), config, Path(tmp))
        table = _slowdowns(network)
    else:
        from astra_core.topology.generators import fat_tree

        if name == "websearch-50":
            flows, fabric = websearch_flows(duration_ms), fat_tree(4, 100.0, 1000.0)
        else:
            flows, fabric = incast_flows(incast_bytes), star(INCAST_SENDERS + 1)
        run = run_flows(flows, fabric, "ns3", config)
        network, wall = run.backend, run.wall_s
        table = flow_table(run.flows)
        step = max(f.start_ns + f.fct_ns for f in run.flows)
    ports = network.results.ports()
    messages = network.results.messages()
    buckets = by_size_bucket(table)
    return {
        "case": name,
        "size": size_label(name, size_mib, duration_ms, incast_bytes),
        "cc": cc,
        "fast_forward": fast_forward,
        "step_ns": float(step),
        "sim_wall_s": wall,
        "delivered_bytes": int(messages["bytes"][messages.finish_ns.notna()].sum()),
        "port_tx_bytes": [int(x) for x in ports.tx_bytes],
        "port_tx_packets": [int(x) for x in ports.tx_packets],
        "port_gbps": [float(x) for x in ports.gbps],
        "max_base_rtt_ns": float(messages.base_rtt_ns.max()),
        "fct": [
            {"bucket": b.bucket, "flows": int(b.flows), "p50": float(b.p50), "p99": float(b.p99)}
            for b in buckets.itertuples()
        ],
        **network.stats,
    }


def size_label(name: str, size_mib: float, duration_ms: float, incast_bytes: int) -> str:
    """How a run's size is shown and keyed: ``64 MiB``, ``10 ms``, ``8 x 12.5 MB``."""
    kind = CASES[name].kind
    if kind == "trace":
        return f"{size_mib:g} MiB"
    if name == "websearch-50":
        return f"{duration_ms:g} ms"
    return f"{INCAST_SENDERS} x {incast_bytes / 1e6:g} MB"


# -- one run in a child process ---------------------------------------------------------------------
def _child(name: str, cc: str, fast_forward: str, size: str, duration_ms: str, incast_bytes: str) -> None:
    """Run one measurement after a warm-up that loads the ns-3 model into a worker;
    print it as JSON with the peak RSS of this process and of the worker."""
    from astra_ns3 import process

    ff = {"on": True, "off": False}[fast_forward]
    measure("p2p-fat-tree", cc, ff, size_mib=0.0625)  # warm-up: load (or compile) the model
    row = measure(name, cc, ff, float(size), float(duration_ms), int(incast_bytes))
    process.close_idle()  # the worker is reaped, so RUSAGE_CHILDREN holds its peak
    row["caller_peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    row["worker_peak_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps(row))


def _in_child(args: list[str], timeout_s: float) -> dict[str, Any] | str:
    """The child's JSON row, or its last error line (or the timeout) as a string."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed program, with cached bytecode
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--child", *args],
            capture_output=True,
            text=True,
            check=False,
            env=env,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout_s:g} s"
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        return lines[-1] if lines else f"exit status {out.returncode}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def _key(row: dict) -> tuple[str, str, str, bool]:
    return row["case"], row["size"], row["cc"], bool(row["fast_forward"])


def load_rows(path: Path) -> dict[tuple, dict]:
    """The runs recorded in a results file (the last row of each key wins)."""
    rows: dict[tuple, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[_key(row)] = row
    return rows


# -- comparison and report ----------------------------------------------------------------------------
def rel(on: float, off: float) -> float:
    """on / off - 1 (0 when both are 0)."""
    if off == 0:
        return 0.0 if on == 0 else float("inf")
    return on / off - 1


def compare(on: dict, off: dict) -> dict[str, Any]:
    """Errors of a fast-forward run against its packet run: ``step``, ``wire_bytes``,
    per bucket (both runs') ``fct`` p50 and p99, ``speedup`` (off / on simulation
    wall time), ``flags`` (the targets missed, as short strings)."""
    fct = []
    on_buckets = {b["bucket"]: b for b in on["fct"]}
    for b in off["fct"]:
        o = on_buckets.get(b["bucket"])
        if o is None:
            fct.append({**b, "p50_on": None, "p99_on": None, "p50_err": None, "p99_err": None})
            continue
        fct.append(
            {
                **b,
                "p50_on": o["p50"],
                "p99_on": o["p99"],
                "p50_err": rel(o["p50"], b["p50"]),
                "p99_err": rel(o["p99"], b["p99"]),
            }
        )
    out = {
        "step": rel(on["step_ns"], off["step_ns"]),
        "wire_bytes": rel(on["bytes_on_wire"], off["bytes_on_wire"]),
        "delivered_equal": on["delivered_bytes"] == off["delivered_bytes"],
        "fct": fct,
        "speedup": off["sim_wall_s"] / on["sim_wall_s"] if on["sim_wall_s"] > 0 else float("inf"),
    }
    flags = []
    if abs(out["step"]) > STEP_TOLERANCE:
        flags.append("step")
    for b in fct:
        for p in ("p50", "p99"):
            err = b[f"{p}_err"]
            if err is None or abs(err) > FCT_TOLERANCE:
                flags.append(f"{p} {b['bucket']}")
    if not out["delivered_equal"]:
        flags.append("bytes delivered")
    size_mib = float(on["size"].split()[0]) if on["size"].endswith("MiB") else None
    if (on["case"], size_mib) in SPEED_TARGETS and out["speedup"] < SPEED_TARGET:
        flags.append(f"speed < {SPEED_TARGET:g}x")
    out["flags"] = flags
    return out


def report(rows: dict[tuple, dict], order: list[tuple[str, str, str]]) -> str:
    """Markdown tables for the (case, size, cc) of ``order`` that have both runs."""
    pairs = [
        (k, rows[(*k, True)], rows[(*k, False)]) for k in order if (*k, True) in rows and (*k, False) in rows
    ]
    lines = [
        "| case | size | cc | step off µs | step on µs | step err | wire bytes err | skipped | "
        "sim s off | sim s on | off / on | peak MiB caller / worker (off; on) | targets |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    details = [
        "",
        "FCT slowdown per size bucket (p50 and p99, off and on, and the error on / off - 1):",
        "",
        "| case | size | cc | bucket | flows | p50 off | p50 on | p50 err | p99 off | p99 on | p99 err |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (case, size, cc), on, off in pairs:
        c = compare(on, off)
        mem = (
            f"{off.get('caller_peak_mib', 0):.0f} / {off.get('worker_peak_mib', 0):.0f}; "
            f"{on.get('caller_peak_mib', 0):.0f} / {on.get('worker_peak_mib', 0):.0f}"
        )
        verdict = "! " + ", ".join(c["flags"]) if c["flags"] else "met"
        skipped = f"{on['fast_forward_packet_hops'] / on['packet_hops']:.0%} in {on['fast_forwards']}"
        lines.append(
            f"| {case} | {size} | {cc} | {off['step_ns'] / 1e3:.1f} | {on['step_ns'] / 1e3:.1f} | "
            f"{c['step']:+.2%} | {c['wire_bytes']:+.2%} | {skipped} | "
            f"{off['sim_wall_s']:.2f} | {on['sim_wall_s']:.2f} | "
            f"{c['speedup']:.1f}x | {mem} | {verdict} |"
        )
        for b in c["fct"]:
            if b["p50_on"] is None:
                details.append(
                    f"| {case} | {size} | {cc} | {b['bucket']} | {b['flows']} | {b['p50']:.3f} | - | - | {b['p99']:.3f} | - | - |"
                )
                continue
            details.append(
                f"| {case} | {size} | {cc} | {b['bucket']} | {b['flows']} | {b['p50']:.3f} | {b['p50_on']:.3f} | "
                f"{b['p50_err']:+.2%} | {b['p99']:.3f} | {b['p99_on']:.3f} | {b['p99_err']:+.2%} |"
            )
    missing = [k for k in order if (*k, True) not in rows or (*k, False) not in rows]
    tail = ["", f"Not measured (yet): {', '.join(' '.join(k) for k in missing)}"] if missing else []
    return "\n".join(lines + details + tail)


def selected(args: argparse.Namespace) -> list[tuple[str, float]]:
    """(case, size MiB) of every run the command line selects, in order (size 0 for the
    flow cases, which ``--duration-ms`` and ``--incast-bytes`` size). Exits with one
    line naming an unknown case or group."""
    names: list[str] = []
    for item in args.cases.split(","):
        group = [n for n, c in CASES.items() if c.group == item]
        if not group and item not in CASES:
            raise SystemExit(
                f"ns3_fast_forward: unknown case or group {item!r}; cases: {', '.join(CASES)}; "
                "groups: validation, speed, incast, websearch"
            )
        names += group or [item]
    out: list[tuple[str, float]] = []
    for name in dict.fromkeys(names):
        case = CASES[name]
        if case.kind == "flows":
            out.append((name, 0.0))
        elif case.group == "validation":
            out += [(name, float(size)) for size in args.sizes.split(",")]
        else:
            out.append((name, args.speed_mib))
    return out


def _say(name: str, label: str, cc: str, ff: bool, text: str) -> None:
    print(f"{name} {label} {cc} fast_forward={'on' if ff else 'off'}: {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="validation,speed,incast,websearch", help="case names or groups")
    parser.add_argument("--ccs", default=",".join(CCS))
    parser.add_argument("--sizes", default="4,64", help="MiB of the validation cases")
    parser.add_argument("--speed-mib", type=float, default=256, help="MiB of ring-switch8 and a2a-switch8")
    parser.add_argument("--duration-ms", type=float, default=10.0, help="websearch-50's arrivals")
    parser.add_argument("--incast-bytes", type=int, default=INCAST_BYTES, help="cc-study-incast's per sender")
    parser.add_argument("--results", type=Path, default=RESULTS, help="JSON lines, one per run (resumed)")
    parser.add_argument("--fresh", action="store_true", help="run again what --results holds")
    parser.add_argument("--report-only", action="store_true", help="report what --results holds")
    parser.add_argument("--timeout-s", type=float, default=3600, help="per run")
    parser.add_argument("--markdown", help="also write the report here")
    parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    rows = load_rows(args.results)
    commit = _commit()
    order = []
    for name, size in selected(args):
        label = size_label(name, size, args.duration_ms, args.incast_bytes)
        for cc in args.ccs.split(","):
            order.append((name, label, cc))
            for ff in (False, True):
                if args.report_only or ((name, label, cc, ff) in rows and not args.fresh):
                    continue
                started = time.perf_counter()
                child = [
                    name,
                    cc,
                    "on" if ff else "off",
                    str(size),
                    str(args.duration_ms),
                    str(args.incast_bytes),
                ]
                row = _in_child(child, args.timeout_s)
                if isinstance(row, str):
                    _say(name, label, cc, ff, row)
                    continue
                row["commit"] = commit
                rows[_key(row)] = row
                args.results.parent.mkdir(parents=True, exist_ok=True)
                with args.results.open("a") as f:  # per-port counters stay out of the record
                    f.write(json.dumps({k: v for k, v in row.items() if not k.startswith("port_")}) + "\n")
                _say(
                    name,
                    label,
                    cc,
                    ff,
                    f"step {row['step_ns'] / 1e3:.1f} us, simulated in {row['sim_wall_s']:.2f} s "
                    f"({time.perf_counter() - started:.1f} s with start-up)",
                )
    return _emit(report(rows, order), args.markdown)


def _commit() -> str:
    """The checkout's commit, with ``+`` if its model or benchmark differ from it."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)

    head = git("rev-parse", "--short", "HEAD").stdout.strip() or "unknown"
    code = ("astra_core", "backends", "validation", "benchmarks/ns3_fast_forward.py")
    dirty = git("diff", "--quiet", "HEAD", "--", *code).returncode
    return head + ("+" if dirty else "")


def _emit(text: str, markdown: str | None) -> int:
    print(text)
    if markdown:
        Path(markdown).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
