"""Published layouts against ``astra plan``: for each published run of the validation suite
that the search space holds, is the layout its authors chose within 5 % of the fastest
layout astra finds?

For each run: the search (:func:`astra_core.plan.search.search`) over every layout of the
run's model, GPUs, global batch, sequence length and precision on the run's network, each
layout keeping the run's other settings (its plan as the ``base`` of the
:class:`~astra_core.plan.space.Space`: the attention kernels, DDP and gradient precision of
2021's Megatron-LM, the MoE dispatcher of a recipe, ...), ZeRO 1 and the run's own ZeRO
stage, no recomputation, full recomputation and the run's own; and the published plan
simulated in full, as the suite simulates it. The report gives both steps, the published
layout's distance from the best, and, past 5 %, the faster layout with what the simulator
says makes it faster (its memory and where its step goes).

The search space holds a run unless its pipeline split is one the search does not
enumerate (uneven layouts such as DeepSeek-V3's ``Etttt|...``) or it chooses what the
search does not (expert-tensor parallelism other than 1). Each run's outcome is kept in
``--results`` (JSON Lines; by default ``validation/data/plan_check.jsonl``, kept with the
code) under the digest of the run's search, with the digest of astra's sources and the git
commit it was searched at, so a page over every run is written from runs searched in
several sittings, at several commits: the page names each row's commit, and
``--refresh`` searches again the runs kept at other sources.

    .venv/bin/python validation/plan_check.py [--rows 1-4] [--results R.jsonl] [--cache C.jsonl]
        [--refresh] [--markdown docs/validation-plan.md]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import h100_scale
import megatron
import megatron_bridge
import megatron_moe
from summary import emit, parse_rows

import astra_core
from astra_core.config.network import NetworkConfig
from astra_core.config.system import nccl_system
from astra_core.plan.api import executor
from astra_core.plan.point import FIELDS, run_layout
from astra_core.plan.search import BOUNDS, PlanOutcome, search
from astra_core.plan.space import Layout, Limits, Space, identity
from astra_core.run_digest import InputDigests, source_digest
from astra_core.workload.generators.llm import LLMConfig
from astra_core.workload.generators.llm_memory import GiB, stage_memory
from astra_core.workload.generators.llm_params import virtual_stage_starts
from astra_core.workload.generators.pipeline import stage_layers

#: The published layout's step may be this much slower than the best found.
TOLERANCE = 0.05

#: Where each run's outcome is kept by default (committed: the searches take hours).
RESULTS = Path(__file__).parent / "data" / "plan_check.jsonl"


@dataclass(frozen=True)
class Run:
    """A published run of the suite: its name, its plan (as the suite simulates it), its
    network, and the GPU whose NCCL model times its collectives."""

    name: str
    plan: LLMConfig
    network: NetworkConfig
    gpu: str


def suite_runs() -> list[Run]:
    """Every published run of the validation suite, in the suite's source order."""
    runs = [
        Run(f"GPT {r.name}, {r.gpus:,} A100, FP16 (SC'21)", r.plan(), megatron.network(r.nodes), "A100")
        for r in megatron.ROWS
    ]
    for r in h100_scale.ROWS:
        model = "Llama 3 405B" if r.source == "llama3" else "Nemotron-4 340B"
        name = f"{model}, {r.gpus:,} H100, {r.precision.upper()}, {r.seq // 1024}K, GBS {r.global_batch}"
        runs.append(Run(name, r.plan(), h100_scale.network(r.gpus // 8), "H100"))
    for r in megatron_bridge.ROWS + megatron_moe.ROWS:
        runs.append(Run(r.name, r.plan(), megatron_bridge.network(r), r.gpu))
    return runs


def published_layout(plan: LLMConfig) -> Layout | None:
    """``plan``'s layout as the search writes it; None where the search does not hold it
    (module docstring)."""
    if plan.model.experts and plan.etp != 1:
        return None
    chunks, layers = plan.virtual_stages, plan.model.layers
    starts = virtual_stage_starts(plan)
    counts = [b - a for a, b in zip(starts, starts[1:])]
    n = plan.pp * chunks  # the search's splits (astra_core.plan.space): even, else the ends counted
    even = layers % n == 0 and counts == stage_layers(layers, plan.pp, chunks)
    ends = layers % n and plan.pp > 1 and (layers + 2) % n == 0
    edges = bool(ends) and counts == stage_layers(layers, plan.pp, chunks, embedding=True, loss=True)
    if not (even or edges):
        return None
    return Layout(
        plan.tp,
        plan.cp,
        plan.pp,
        chunks,
        plan.dp,
        plan.ep,
        plan.micro_batch,
        plan.recompute,
        plan.zero,
        edges,
    )


def held_runs() -> list[Run]:
    """The runs the search space holds."""
    return [run for run in suite_runs() if published_layout(run.plan) is not None]


def space(run: Run) -> Space:
    """The run's search (module docstring): its model, GPUs, batch, sequence and precision,
    the limits that let the search reach its layout, and its plan as the base."""
    plan = run.plan
    layout = published_layout(plan)
    assert layout is not None, run.name
    dims = tuple(run.network.npus_per_dim)
    gpus = layout.tp * layout.cp * layout.pp * layout.dp
    limits = Limits(
        max_pp=max(32, plan.pp),
        max_vp=max(8, plan.virtual_stages),
        micro_batches=tuple(sorted({1, 2, 4, plan.micro_batch})),
        recomputes=tuple(dict.fromkeys(("none", "full", plan.recompute))),
        zeros=tuple(sorted({plan.zero, 1 if plan.zero else 0})),
    )
    return Space(
        plan.model,
        plan.gpu,
        gpus,
        dims[0],
        plan.global_batch or 0,
        plan.seq_len or plan.model.seq_len,
        plan.precision,
        plan.fp8_recipe,
        dims,
        limits,
        base=plan,
    )


def _published_run(run: Run, microbatches: int, cache: str | None) -> dict:
    """The published plan simulated in full as the suite does: a row of
    :data:`~astra_core.plan.point.FIELDS` (kept in ``cache`` under the digest of the plan,
    network and astra's sources, beside the search's runs)."""
    system, network = nccl_system(run.gpu), run.network.to_dict()
    key = InputDigests().run({"published": repr(run.plan), "system": system, "network": network})
    kept = Path(cache) if cache else None
    if kept and kept.is_file():
        for line in kept.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("key") == key and entry.get("status") == "published":
                return entry
    task = {"key": key, "config": run.plan, "microbatches": microbatches, "counts": (microbatches,)}
    result = run_layout({**task, "system": system, "network": network, "backend": None})
    if result["status"] != "ok":
        raise RuntimeError(f"{run.name}: the published plan failed: {result['error']}")
    entry = {"key": key, "status": "published", **{k: result[k] for k in FIELDS}}
    if kept:
        with kept.open("a") as out:
            out.write(json.dumps(entry) + "\n")
    return entry


def _shares(fields: dict) -> dict[str, float]:
    """Where a step goes: each of :data:`~astra_core.plan.search.BOUNDS`' parts as a share."""
    total = sum(fields[p] for p in FIELDS[2:])
    return {name: sum(fields[p] for p in parts) / total for name, parts in BOUNDS.items()}


def check(run: Run, execute: Callable, cache: str | None) -> dict:
    """One run's search and its published plan's step (module docstring), as a JSON-able row."""
    searched = space(run)
    layout = published_layout(run.plan)
    assert layout is not None
    started = time.perf_counter()
    outcome: PlanOutcome = search(
        searched, nccl_system(run.gpu), run.network.to_dict(), run=execute, top=3, full=1, cache=cache
    )
    wall_s = time.perf_counter() - started
    frame = outcome.frame[outcome.frame["status"] == "ok"]
    failed = outcome.frame[outcome.frame["status"] == "error"]
    best = frame.iloc[0]
    microbatches = searched.microbatches(layout)
    published = _published_run(run, microbatches, cache)
    published_s = published["step_ns"] * 1e-9
    peak = max(m.peak_bytes for m in stage_memory(run.plan, microbatches)) / GiB
    return {
        "name": run.name,
        "published": layout.short(),
        "published_s": published_s,
        "published_gib": peak,
        "published_shares": _shares(published),
        "hbm_gib": searched.gpu.hbm_bytes / GiB,
        "best": best["short"],
        "best_s": float(best["step_s"]),
        "best_gib": float(best["peak_memory_gib"]),
        "best_shares": {name: float(best[name]) for name in BOUNDS},
        "gap": published_s / float(best["step_s"]) - 1,
        "considered": outcome.considered,
        "failed": len(failed),
        "first_failure": f"{failed.iloc[0]['short']}: {failed.iloc[0]['error']}" if len(failed) else "",
        "simulated": int(sum(outcome.runs.values())),
        "wall_s": wall_s,
    }


def _knobs(short: str) -> dict[str, str]:
    """A layout's settings from :meth:`Layout.short`: ``TP4 ... MBS1 full ZeRO3`` ->
    {"TP": "4", ..., "recompute": "full", "ZeRO": "3"} (EP 1, no recomputation and ZeRO 1
    where the text leaves them out)."""
    knobs: dict[str, str] = {}
    for word in short.split():
        name = word.rstrip("0123456789")
        knobs.update({name: word[len(name) :]} if name != word else {"recompute": word})
    return {
        **knobs,
        **{k: v for k, v in (("EP", "1"), ("recompute", "none"), ("ZeRO", "1")) if k not in knobs},
    }


def _changes(published: str, best: str) -> str:
    """What the best layout changes: ``recompute full -> none, TP 8 -> 2``."""
    a, b = _knobs(published), _knobs(best)
    return ", ".join(
        f"{k} {a[k]} -> {b[k]}" for k in sorted(a, key=lambda k: k != "recompute") if a[k] != b[k]
    )


def report(results: list[dict], pending: list[str] | None = None) -> str:
    """The page: one line per run, and past 5 % the faster layout and what sets it apart;
    ``pending``: the held runs not searched yet."""
    lines = [
        "# Published layouts against `astra plan`",
        "",
        "Generated by `validation/plan_check.py`. For each run of the "
        "[validation suite](validation-suite.md) that the search space holds: `astra plan` over "
        "every layout of the run's model, GPUs, global batch, sequence length and precision on "
        "the run's network, each keeping the run's other settings (2021's Megatron-LM kernels "
        "and DDP for SC'21, the MoE recipes' dispatchers), ZeRO 1 and the run's own ZeRO stage, "
        "no, full and the run's own recomputation; and the published plan simulated in full "
        "as the suite simulates it. *published vs best*: the published layout's step over the "
        "fastest found, minus 1 (negative where the published layout is faster but over HBM "
        "by astra's memory model, so the search never considers it: the GB200 and GB300 "
        "recipes offload activations to the host, which the model does not count). Past 5 %, the faster "
        "layout is named with what it changes, its peak memory and the HBM it leaves: the "
        "memory model counts what PyTorch's allocator holds, not the CUDA context or NCCL's "
        "buffers (544 to 688 MB per communicator on four A100s, NVIDIA/nccl#964), so a layout "
        "that leaves less than a few "
        "GiB may not fit in practice. *astra*: the commit each run was searched at (the "
        "searches take hours on two cores, so the page gathers several sittings).",
        "",
        "| run | published layout | its peak GiB | astra s | best layout found | its peak GiB | astra s "
        "| published vs best | layouts | astra |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        over = " (over HBM)" if r["published_gib"] > r["hbm_gib"] else ""
        lines.append(
            f"| {r['name']} | {r['published']} | {r['published_gib']:.1f}{over} | {r['published_s']:.3f} "
            f"| {r['best']} | {r['best_gib']:.1f} | {r['best_s']:.3f} | {r['gap']:+.1%} "
            f"| {r['considered']} | {r.get('commit', 'unknown')} |"
        )
    within = sum(r["gap"] <= TOLERANCE for r in results)
    lines += [
        "",
        f"{within} of {len(results)} published layouts within {TOLERANCE:.0%} of the fastest layout astra finds.",
        "",
    ]
    for r in results:
        if r.get("failed"):
            lines.append(
                f"- {r['name']}: {r['failed']} layouts failed to simulate, so the best found may not be "
                f"the best; the first: {r['first_failure']}."
            )
        if r["gap"] < 0 and r["published_gib"] > r["hbm_gib"]:
            lines.append(
                f"- {r['name']}: the published layout is faster but needs {r['published_gib']:.1f} GiB by "
                f"astra's memory model, over the GPU's {r['hbm_gib']:.0f}, so the search does not consider it."
            )
        elif r["gap"] < 0:
            lines.append(f"- {r['name']}: the published layout is faster and fits: the search missed it.")
        if r["gap"] > TOLERANCE:
            best, published = (
                ", ".join(f"{name} {share:.0%}" for name, share in r[key].items())
                for key in ("best_shares", "published_shares")
            )
            lines.append(
                f"- {r['name']}: faster: {r['best']} ({_changes(r['published'], r['best'])}), "
                f"{r['best_gib']:.1f} GiB, {r['hbm_gib'] - r['best_gib']:.1f} GiB of HBM left ({best}); "
                f"the published layout {r['published_gib']:.1f} GiB ({published})."
            )
    left = [run.name for run in suite_runs() if published_layout(run.plan) is None]
    if left:
        lines += ["", "Not in the search space (an uneven pipeline layout): " + "; ".join(left) + "."]
    if pending:
        lines += ["", f"Not searched yet ({len(pending)}): " + "; ".join(pending) + "."]
    return "\n".join(lines)


def _kept(path: Path) -> dict[str, dict]:
    """Outcomes kept in ``path`` by key (the digest of the run's search); a last line cut
    short (a search stopped while writing it) is not an outcome."""
    if not path.is_file():
        return {}
    kept = {}
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        kept[entry["key"]] = entry
    return kept


def _key(run: Run) -> str:
    """The digest of ``run``'s search: its space (files by content:
    :func:`~astra_core.plan.space.identity`) and network, not astra's sources (each
    outcome records those beside it)."""
    question = {"plan check": identity(space(run), InputDigests()), "network": run.network.to_dict()}
    return hashlib.blake2b(json.dumps(question, sort_keys=True).encode(), digest_size=32).hexdigest()


def _sources() -> dict[str, str]:
    """The digest of astra's sources and the git commit they are at (``+``: the tree
    differs from it under astra_core/ or backends/; ``unknown`` outside a checkout)."""
    git = ["git", "-C", str(Path(__file__).resolve().parent.parent)]
    try:
        commit = _git(git, "rev-parse", "--short=10", "HEAD")
        dirty = _git(git, "status", "--porcelain", "--", "astra_core", "backends")
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", ""
    folder = Path(astra_core.__file__).parent
    return {"sources": source_digest(str(folder)), "commit": commit + ("+" if dirty else "")}


def _git(git: list[str], *args: str) -> str:
    return subprocess.run([*git, *args], capture_output=True, text=True, check=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", help="1-based rows of the held runs (default: all)")
    parser.add_argument(
        "--results", default=str(RESULTS), help="each run's outcome (JSON Lines), kept and reused"
    )
    parser.add_argument("--markdown")
    parser.add_argument("--cache", help="the search's cache (JSON Lines); default none")
    parser.add_argument("-j", "--workers", type=int)
    parser.add_argument(
        "--kept-only", action="store_true", help="search nothing: the page of the kept outcomes"
    )
    parser.add_argument("--refresh", action="store_true", help="search again the runs kept at other sources")
    args = parser.parse_args(argv)
    execute, _, _ = executor(args.workers)
    runs = held_runs()
    chosen = parse_rows(args.rows or f"1-{len(runs)}", tuple(runs))
    results_path = Path(args.results)
    kept, sources = _kept(results_path), _sources()
    results, pending = [], []
    for run in chosen:
        key = _key(run)
        stale = key in kept and args.refresh and kept[key].get("sources") != sources["sources"]
        if (key not in kept or stale) and args.kept_only:
            pending.append(run.name)
            continue
        if key not in kept or stale:
            kept[key] = {"key": key, **sources, **check(run, execute, args.cache)}
            with results_path.open("a") as out:
                out.write(json.dumps(kept[key]) + "\n")
        results.append(kept[key])
        failed = results[-1].get("failed")
        note = f" ({failed} layouts failed: {results[-1]['first_failure']})" if failed else ""
        print(f"{run.name}: published {results[-1]['gap']:+.1%} from the best found{note}", flush=True)
    return emit(report(results, pending), args.markdown)


if __name__ == "__main__":
    sys.exit(main())
