"""Published layouts against ``astra plan``: for each published run that the search space
holds, is the layout its authors chose within 5 % of the fastest layout astra finds?

For each row: the search (:func:`astra_core.plan.search.search`) over every layout of the
run's model, GPUs, global batch, sequence length and precision on the row's network
(:mod:`megatron_bridge`'s systems), ZeRO 1 and, where the row ran FSDP, ZeRO 3 too; and
the published layout (as :mod:`megatron_bridge` expresses it) simulated in full. The
report gives both steps, the published layout's distance from the best, and, past 5 %,
the faster layout with what the simulator says makes it faster (its memory and where its
step goes). Dense rows only: the search keeps routing balanced and does not choose MoE
dispatchers or expert-tensor parallelism, which the MoE recipes set.

    .venv/bin/python validation/plan_check.py [--rows 1-4] [--markdown docs/validation-plan.md]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import megatron_bridge as mb
from summary import emit, parse_rows

from astra_core.config.system import nccl_system
from astra_core.plan.api import executor
from astra_core.plan.point import FIELDS, run_layout
from astra_core.plan.search import BOUNDS, PlanOutcome, search
from astra_core.plan.space import Layout, Limits, Space
from astra_core.run_digest import InputDigests
from astra_core.workload.generators.llm_memory import GiB, stage_memory

#: Rows the search space holds (dense, at most 256 GPUs: each search is minutes on two cores).
ROWS = tuple(r for r in mb.ROWS if not r.moe and r.gpus <= 256)
#: The published layout's step may be this much slower than the best found.
TOLERANCE = 0.05


def _space(row: mb.Row) -> Space:
    """The row's search: its model, GPUs, batch, sequence and precision as the row's own
    plan (:meth:`megatron_bridge.Row.plan`) has them, on its network."""
    plan = row.plan()
    dims = tuple(mb.network(row).npus_per_dim)
    limits = Limits(zeros=(1, 3) if row.fsdp else (1,))
    return Space(
        plan.model,
        plan.gpu,
        row.gpus,
        dims[0],
        row.gbs,
        row.seq,
        plan.precision,
        plan.fp8_recipe,
        dims,
        limits,
    )


def _network(row: mb.Row) -> dict:
    return mb.network(row).to_dict()


def _published(row: mb.Row) -> Layout:
    plan = row.plan()
    return Layout(
        row.tp,
        row.cp,
        row.pp,
        row.vp,
        row.dp,
        row.ep,
        row.mbs,
        plan.recompute,
        plan.zero,
        plan.account_for_embedding,
    )


def _published_run(row: mb.Row, space: Space, system: dict, network: dict, cache: str | None) -> dict:
    """The published layout's step, simulated in full: a row of
    :data:`~astra_core.plan.point.FIELDS` (kept in ``cache`` under the digest of its
    inputs and astra's sources, as the search keeps its runs)."""
    layout = _published(row)
    task = {"key": "published", "config": space.config(layout), "microbatches": space.microbatches(layout)}
    task.update(counts=(task["microbatches"],), system=system, network=network, backend=None)
    key = InputDigests().run({"published": repr(task["config"]), "system": system, "network": network})[:16]
    kept = Path(cache) if cache else None
    if kept and kept.is_file():
        for line in kept.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("key") == key and entry.get("status") == "published":
                return entry
    result = run_layout(task)
    if result["status"] != "ok":
        raise RuntimeError(f"{row.name}: the published layout failed: {result['error']}")
    entry = {"key": key, "status": "published", **{k: result[k] for k in FIELDS}}
    if kept:
        with kept.open("a") as out:
            out.write(json.dumps(entry) + "\n")
    return entry


def _shares(fields) -> str:
    """Where a step goes: each of :data:`~astra_core.plan.search.BOUNDS`' parts as a share."""
    total = sum(fields[p] for p in FIELDS[2:])
    return ", ".join(f"{name} {sum(fields[p] for p in parts) / total:.0%}" for name, parts in BOUNDS.items())


def _why(best, published: dict, published_gib: float) -> str:
    """The faster layout and what sets the two apart: peak memory and where each step goes."""
    return (
        f"{best['short']}, {best['peak_memory_gib']:.1f} GiB "
        f"({', '.join(f'{name} {best[name]:.0%}' for name in BOUNDS)}); the published layout "
        f"{published_gib:.1f} GiB ({_shares(published)})"
    )


def check(row: mb.Row, run: Callable, cache: str | None) -> dict:
    """One row's search and the published layout's step (module docstring)."""
    space = _space(row)
    system = nccl_system(row.gpu)
    network = _network(row)
    started = time.perf_counter()
    outcome: PlanOutcome = search(space, system, network, run=run, top=3, full=1, cache=cache)
    wall_s = time.perf_counter() - started
    frame = outcome.frame[outcome.frame["status"] == "ok"]
    best = frame.iloc[0]
    published = _published_run(row, space, system, network, cache)
    published_ns = published["step_ns"]
    layout = _published(row)
    peak = max(m.peak_bytes for m in stage_memory(space.config(layout), space.microbatches(layout))) / GiB
    gap = published_ns * 1e-9 / best["step_s"] - 1
    return {
        "row": row,
        "best": best,
        "best_s": float(best["step_s"]),
        "published_s": published_ns * 1e-9,
        "gap": gap,
        "why": "" if gap <= TOLERANCE else _why(best, published, peak),
        "published_gib": peak,
        "hbm_gib": space.gpu.hbm_bytes / GiB,
        "considered": outcome.considered,
        "simulated": int(sum(outcome.runs.values())),
        "wall_s": wall_s,
    }


def report(results: list[dict]) -> str:
    lines = [
        "# Published layouts against `astra plan`",
        "",
        "Generated by `validation/plan_check.py`. For each dense run of the "
        "[validation suite](validation-suite.md) on at most 256 GPUs (NVIDIA's Megatron-Bridge "
        "performance tables, `validation/megatron_bridge.py`): `astra plan` over every layout of "
        "the run's model, GPUs, global batch, sequence length and precision on the run's network "
        "(ZeRO 1, and ZeRO 3 where the run used FSDP), and the published layout simulated in full "
        "with the same settings. *published vs best*: the published layout's step over the fastest "
        "found, minus 1 (negative where the published layout is faster but over HBM by astra's "
        "memory model, which does not count the activation offloading the GB200 and GB300 recipes "
        "use, so the search never considers it). Past 5 %, the faster layout is named with "
        "what sets the two apart.",
        "",
        "| run | published layout | its peak GiB | astra s | best layout found | its peak GiB | astra s | published vs best |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        row = r["row"]
        over = " (over HBM)" if r["published_gib"] > r["hbm_gib"] else ""
        lines.append(
            f"| {row.name} | {_published(row).short()} | {r['published_gib']:.1f}{over} | {r['published_s']:.3f} "
            f"| {r['best']['short']} | {r['best']['peak_memory_gib']:.1f} | {r['best_s']:.3f} | {r['gap']:+.1%} |"
        )
    within = sum(r["gap"] <= TOLERANCE for r in results)
    lines.append("")
    lines.append(
        f"{within} of {len(results)} published layouts within {TOLERANCE:.0%} of the fastest layout astra finds."
    )
    lines.append("")
    for r in results:
        if r["why"]:
            lines.append(f"- {r['row'].name}: faster: {r['why']}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=f"1-{len(ROWS)}")
    parser.add_argument("--markdown")
    parser.add_argument("--cache", help="the search's cache (JSON Lines); default none")
    parser.add_argument("-j", "--workers", type=int)
    args = parser.parse_args(argv)
    run, _, _ = executor(args.workers)
    results = []
    for row in parse_rows(args.rows, ROWS):
        results.append(check(row, run, args.cache))
        print(
            f"{row.name}: published {results[-1]['gap']:+.1%} from the best found, in {results[-1]['wall_s']:.0f} s",
            flush=True,
        )
    return emit(report(results), args.markdown)


if __name__ == "__main__":
    sys.exit(main())
