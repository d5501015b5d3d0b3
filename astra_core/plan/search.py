"""``astra plan``'s search: enumerate, prune, simulate, rank.

1. :func:`~astra_core.plan.space.layouts` lists the layouts that divide and fit in HBM.
2. Of layouts that differ only in recomputation or ZeRO stage, the one with the least of
   either that fits is kept (more recomputation or sharding only adds work).
3. Each survivor is bounded below by its stages' compute chains: their kernels and the
   collectives they wait on, each at NCCL's least time for it
   (:func:`~astra_core.plan.point.compute_bound_ns`).
4. The survivors are screened in bound order on the sweep executors (a local process pool
   of :mod:`astra_core.workers`, or Ray), each admitted as a worker takes it only while its
   bound can beat the ``top``-th fastest step found: a screen extends the step time of 1
   and 2 micro-batches (P and 2P interleaved) to the plan's M, and stops after the first
   when that run and the compute of the micro-batches left cannot beat it (:mod:`.point`).
5. The ``full`` best are simulated again with all their micro-batches; the ranking uses
   each layout's best-known figure. A full run that fails (a step the generator refuses:
   the trace limits are checked before on a lower bound of the nodes) leaves the screen's
   figure, and the layout's ``error`` says why.

Every compute bound and every simulated run (one micro-batch count of one layout) is
cached by the digest of what it read (the layout, model, GPU, network, system, backend
and astra's sources: :mod:`astra_core.run_digest`) in a JSON Lines file, so a repeated
or widened search re-simulates nothing it has seen.
"""

from __future__ import annotations

import bisect
import json
import math
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from astra_core.errors import ConfigError
from astra_core.plan.point import FIELDS, run_layout, screen_microbatches
from astra_core.plan.space import Layout, Space, identity, layouts, reasons
from astra_core.run_digest import InputDigests
from astra_core.workload.generators.llm_memory import GiB, StageMemory

__all__ = ["PlanOutcome", "search"]

#: The parts of a step that say what bounds it (:mod:`astra_core.report.breakdown`).
BOUNDS = {
    "compute": ("compute_only_ns", "overlapped_comm_ns"),
    "exposed collectives": ("comm_only_ns", "collective_wait_ns"),
    "pipeline bubble and sends": ("p2p_wait_ns", "idle_ns"),
}


@dataclass
class PlanOutcome:
    """A search's result: ``frame`` (pandas, one row per simulated layout, fastest first),
    ``pruned`` (reason -> layouts), ``considered`` (layouts enumerated), ``runs`` (phase
    -> runs made: compute bounds, screening runs, full runs; the cache's not counted)."""

    frame: Any
    pruned: Counter = field(default_factory=Counter)
    considered: int = 0
    runs: Counter = field(default_factory=Counter)


def _least_work(fit: list[tuple[Layout, list[StageMemory]]], pruned: Counter) -> list:
    """Of layouts equal but for recomputation and ZeRO stage, the one with least of both."""
    rank_r = {r: i for i, r in enumerate(("none", "selective", "full"))}
    best: dict[Layout, tuple[Layout, list[StageMemory]]] = {}
    for layout, memory in fit:
        shape = replace(layout, recompute="none", zero=1)
        held = best.get(shape)
        cost = (rank_r[layout.recompute], layout.zero)
        if held is None or cost < (rank_r[held[0].recompute], held[0].zero):
            if held is not None:
                pruned["more recomputation or sharding than a layout that fits"] += 1
            best[shape] = (layout, memory)
        else:
            pruned["more recomputation or sharding than a layout that fits"] += 1
    return list(best.values())


class _Cache:
    """Rows by key in a JSON Lines file (None: no cache)."""

    def __init__(self, path: str | os.PathLike | None):
        self.path = Path(path) if path else None
        self.rows: dict[str, dict] = {}
        if self.path and self.path.is_file():
            for line in self.path.read_text().splitlines():
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a line cut short by an interrupted run
                if isinstance(row, dict) and row.get("status") == "ok":
                    self.rows[row["key"]] = row

    def add(self, row: dict) -> None:
        if row.get("status") != "ok":
            return
        self.rows[row["key"]] = row
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as out:
                out.write(json.dumps(row) + "\n")


def _task(space: Space, layout: Layout, counts: tuple[int, ...], inputs: dict, digests: InputDigests) -> dict:
    config = space.config(layout)
    values = {**inputs, "config": identity(config, digests)}  # every setting simulated, a base plan's too

    def key(runs: tuple[int, ...]) -> str:
        return digests.run({**values, "counts": list(runs)})[:16]

    return {
        "key": key(counts),
        "run_keys": {m: key((m,)) for m in counts},
        "config": config,
        "microbatches": space.microbatches(layout),
        "counts": counts,
        **inputs,
    }


def _run(
    tasks: list[dict],
    cache: _Cache,
    run: Callable,
    on_done: Callable[[], None],
    admit: Callable[[dict], bool] | None = None,
    on_each: Callable[[dict], None] | None = None,
) -> tuple[dict, int]:
    """Rows of ``tasks`` by key: what the cache holds (a bound, or every run a task needs)
    made here, the rest by ``run`` (``admit``: asked before each is run; ``on_each(row)``:
    each row as it comes), and how many simulations (or bounds) were made."""
    rows: dict[str, dict] = {}
    simulated = 0
    by_key = {t["key"]: t for t in tasks}

    def on_row(row: dict, cached: bool = False) -> None:
        nonlocal simulated
        task = by_key[row["key"]]
        for m, fields in (row.pop("runs", None) or {}).items():
            cache.add({"key": task["run_keys"][int(m)], "status": "ok", **fields})
            simulated += 1
        if not task["counts"] and not cached:
            cache.add(row)
            simulated += 1
        rows[row["key"]] = row
        if on_each:
            on_each(row)
        on_done()

    todo = []
    for t in tasks:  # the cache's rows first, so that they can rule out the rest
        if not t["counts"] and t["key"] in cache.rows:
            on_row(cache.rows[t["key"]], cached=True)
            continue
        t["known"] = {m: cache.rows[k] for m, k in t["run_keys"].items() if k in cache.rows}
        if t["counts"] and len(t["known"]) == len(t["counts"]):
            on_row(run_layout(t))  # no simulation: the line through the runs known
        else:
            todo.append(t)
    run(todo, on_row, admit=admit)
    return rows, simulated


def _frame(space: Space, entries: list[tuple[Layout, list[StageMemory], dict]]) -> Any:
    import pandas as pd

    peak_flops = space.gpu.dense_tflops(space.precision) * 1e12
    records = []
    for layout, memory, row in entries:
        record: dict[str, Any] = {"layout": layout.label(), "short": layout.short(), **asdict(layout)}
        record["peak_memory_gib"] = max(m.peak_bytes for m in memory) / GiB
        record["memory_per_stage_gib"] = [round(m.peak_bytes / GiB, 2) for m in memory]
        record.update(status=row["status"], error=row.get("error", ""), simulated=row.get("simulated"))
        record["bound_s"] = max(row.get("bound_ns", math.nan), row.get("line_bound_ns", 0.0)) * 1e-9
        ok = row["status"] == "ok"
        step_s = row["step_ns"] * 1e-9 if ok else math.nan
        record["step_s"] = step_s if ok else None
        tokens = space.global_batch * space.seq_len
        record["tokens_per_gpu_s"] = tokens / step_s / space.gpus if ok else None
        record["mfu"] = row["model_flops"] / step_s / space.gpus / peak_flops if ok else None
        total = sum(row[p] for p in FIELDS[2:]) if ok else 0.0
        for name, parts in BOUNDS.items():
            record[name] = sum(row[p] for p in parts) / total if ok and total else None
        record["bound"] = max(BOUNDS, key=lambda b: record[b] or 0.0) if ok else None
        records.append(record)
    frame = pd.DataFrame.from_records(records)
    return frame.sort_values("step_s", na_position="last").reset_index(drop=True)


def search(
    space: Space,
    system: Any,
    network: Any,
    *,
    run: Callable[..., None],
    backend: str | None = None,
    top: int = 5,
    full: int = 1,
    cache: str | os.PathLike | None = None,
    on_progress: Callable[[str, int, int | None], None] | None = None,
) -> PlanOutcome:
    """Search ``space`` (module docstring): ``system`` and ``network`` as ``simulate``
    takes them (paths or dicts); ``run(tasks, on_row, admit=None)`` an executor that asks
    ``admit(task)`` before running each; the ``top`` fastest found exactly (every layout
    whose compute bound could beat them is simulated), ``full`` of them simulated with all
    their micro-batches; ``on_progress(phase, done, total)`` as layouts finish. Raises
    ConfigError (one line) when no layout divides or none fits."""
    fit, pruned = layouts(space)
    considered = len(fit) + sum(pruned.values())
    kept = _least_work(fit, pruned)
    if not kept:
        raise ConfigError(
            f"no layout of {space.model.name} on {space.gpus} {space.gpu.name} fits: {reasons(pruned)}"
        )
    digests = InputDigests()
    inputs = {"system": system, "network": network, "backend": backend}
    store = _Cache(cache)
    progress = on_progress or (lambda phase, done, total: None)

    def task(layout: Layout, counts: tuple[int, ...]) -> dict:
        return _task(space, layout, counts, inputs, digests)

    bound_tasks = [task(lay, ()) for lay, _ in kept]
    runs: Counter = Counter()
    bounds, runs["compute bounds"] = _run(
        bound_tasks, store, run, _counter(progress, "compute bounds", len(bound_tasks))
    )
    bound_of = {lay: bounds[t["key"]] for (lay, _), t in zip(kept, bound_tasks, strict=True)}
    order = sorted(kept, key=lambda e: bound_of[e[0]].get("bound_ns", math.inf))
    rows, runs["screening runs"] = _branch_and_bound(
        order, bound_of, task, space.microbatches, store, run, top, progress
    )
    ranked = sorted(
        (lay for lay, _ in order if lay in rows and rows[lay]["status"] == "ok"),
        key=lambda x: rows[x]["step_ns"],
    )
    finals = [
        (lay, task(lay, (space.microbatches(lay),)))
        for lay in ranked[:full]
        if len(rows[lay]["simulated"]) > 1
    ]
    full_rows, runs["full runs"] = _run(
        [t for _, t in finals], store, run, _counter(progress, "full runs", len(finals))
    )
    for lay, t in finals:
        full_row = full_rows[t["key"]]
        if full_row["status"] == "ok":
            rows[lay] = full_row
        else:  # the screen's line stands for the step; the row says why the full run is missing
            rows[lay] = {**rows[lay], "error": f"its full run failed: {full_row['error']}"}
    best = min((r["step_ns"] for r in rows.values() if r["status"] == "ok"), default=math.inf)
    entries = []
    for lay, mem in order:
        row = rows.get(lay) or {"key": "", "status": "bounded", "simulated": []}
        entries.append((lay, mem, {"bound_ns": bound_of[lay].get("bound_ns", math.inf), **row}))
    fastest = f"the {min(top, len(rows))} fastest found (best {best * 1e-9:.3f} s)"
    for _, _, r in entries:
        if r["status"] == "bounded":
            how = "one screening run and the compute left" if r["simulated"] else "the compute chain alone"
            pruned[f"{how} slower than {fastest}"] += 1
    return PlanOutcome(_frame(space, entries), pruned, considered, runs)


def _counter(progress: Callable, phase: str, total: int) -> Callable[[], None]:
    done = 0
    progress(phase, 0, total)

    def tick() -> None:
        nonlocal done
        done += 1
        progress(phase, done, total)

    return tick


def _branch_and_bound(order, bound_of, task, microbatches, store, run, top, progress) -> tuple[dict, int]:
    """Screen layouts in order of their compute bound, each admitted as a worker takes it
    only while its bound can still beat the ``top``-th fastest step found, and told that
    step (``beat_ns``: its screen stops after one run that cannot beat it): rows by
    layout, runs made."""
    rows: dict[Layout, dict] = {}
    tasks = [task(lay, screen_microbatches(lay.pp, microbatches(lay), lay.vp)) for lay, _ in order]
    layout_of = {t["key"]: lay for (lay, _), t in zip(order, tasks, strict=True)}
    steps: list[float] = []
    tick = _counter(progress, "screening runs", len(order))

    def admit(t: dict) -> bool:
        bound = bound_of[layout_of[t["key"]]]
        t["beat_ns"] = steps[top - 1] if len(steps) >= top else math.inf
        t["slot_ns"] = bound.get("slot_ns", 0.0)
        if bound.get("bound_ns", math.inf) < t["beat_ns"]:
            return True
        tick()  # ruled out by its bound: done too, for the progress bar and its ETA
        return False

    def on_row(row: dict) -> None:
        rows[layout_of[row["key"]]] = row
        if row["status"] == "ok":
            bisect.insort(steps, row["step_ns"])

    done, simulated = _run(tasks, store, run, tick, admit=admit, on_each=on_row)
    return rows, simulated
