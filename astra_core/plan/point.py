"""Simulating one layout of ``astra plan`` (in a worker process): its step generated in
memory (what ``astra gen llm`` would write) and run on the given network and system.

A step of M micro-batches takes ``T(M) = a + b M``: every micro-batch adds the same
slot of the slowest stage, and the gradient reduction, optimizer and the pipeline's
fill and drain do not grow with M (Narayanan et al. SC'21, section 2.2: 1F1B, and GPipe's
order that 1F1B becomes with fewer micro-batches than stages, take ``(M + P - 1)``
slots of a micro-batch's forward and backward pass; interleaved 1F1B, from M = P on,
``(M + (P - 1) / V)``). A *screening* run simulates M = 1 and M = 2 micro-batches (P and 2P with interleaving,
which needs multiples of P) and extends the line to the plan's M; a *full* run simulates
all M. Each part of the step's breakdown is extended the same way. Every run is returned
on its own (``runs``), for the caller to keep.

A *bound* is what no simulation of the layout can beat: a stage's compute chain (the
first, second or last stage's; a rank cannot finish before its own kernels, and the
collectives they wait on, have run one after another: each such collective at the
least time NCCL's model lets it take, :mod:`.floors`) plus the pipeline's fill and
drain in front of it (:func:`compute_bound_ns`). The line's slope ``b`` is at least
any stage's chain per micro-batch (``slot_ns``: a stage runs every micro-batch's chain
one after another, so a slope below it would, for M large enough, finish the step
before its own chain); after a screen's first run at ``m``, ``T(m) +
slot_ns (M - m)`` bounds the step too, and the second run is skipped when that cannot
beat ``beat_ns``, the fastest step the search must beat.

:func:`run_layout` raises only MemoryError (its worker then ends, and the pool fails
the layout and starts another: :mod:`astra_core.workers`): a row with ``status``
``error`` and a one-line ``error`` stands for a layout that failed.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import replace
from typing import Any, NamedTuple

from astra_core.report.breakdown import PARTS
from astra_core.sweep.point import error_line

__all__ = ["FIELDS", "ComputeBound", "compute_bound_ns", "run_layout", "screen_microbatches"]

#: What a row carries besides ``key``, ``status``, ``error``, ``wall_s``, ``simulated``.
FIELDS = ("step_ns", "model_flops", *PARTS)


def screen_microbatches(pp: int, microbatches: int, virtual_stages: int = 1) -> tuple[int, ...]:
    """The micro-batch counts a screening run simulates: 1 and 2 (P and 2P with
    interleaving, which needs multiples of P) where that is fewer than the plan's, else
    the plan's own."""
    rounds = pp if virtual_stages > 1 else 1
    if 3 * rounds >= microbatches:
        return (microbatches,)
    return (rounds, 2 * rounds)


def _with_microbatches(cfg, microbatches: int):
    """``cfg`` with a global batch of ``microbatches`` micro-batches per data-parallel rank."""
    return replace(cfg, global_batch=cfg.dp * cfg.micro_batch * microbatches, microbatches=None)


def _stage_compute(cfg, microbatches: int, stage: int, floors=None) -> tuple[float, float]:
    """The least time [ns] of pipeline stage ``stage``'s compute chain with
    ``microbatches``, and of its second micro-batch's part alone (the first also runs the
    step's once-only kernels): its compute nodes at their trace times and the collectives
    that block the chain at their :class:`~.floors.CollectiveFloors` (none: 0)."""
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.generators.llm_stage import StageBuilder
    from astra_core.workload.trace_size import MAX_RANK_NODES

    cfg = _with_microbatches(cfg, microbatches)
    nodes, _, _ = StageBuilder(cfg, microbatches, stage, MAX_RANK_NODES, MAX_RANK_NODES, {}).build()
    chain = [
        (n.name, _trace_ns(n) if n.type == pb.COMP_NODE else (floors.floor_ns(n, stage) if floors else 0))
        for n in nodes
        if n.chain
    ]
    second = re.compile(r"(^|_)mb1(_|$)")
    return float(sum(ns for _, ns in chain)), float(sum(ns for name, ns in chain if second.search(name)))


def _trace_ns(node) -> int:
    """A compute node's time [ns] as the traces hold it (whole microseconds), the least of
    the expert-parallel ranks' where routing makes them differ."""
    durations = [d for d, _, _ in node.by_ep] if node.by_ep is not None else [node.duration_ns]
    return min(int(round(d / 1000)) for d in durations) * 1000


class ComputeBound(NamedTuple):
    """What the compute chains alone say of a layout's step (module docstring): ``step_ns``
    no simulated step is shorter; ``slot_ns`` no micro-batch adds less to it."""

    step_ns: float
    slot_ns: float


def compute_bound_ns(cfg, microbatches: int, floors=None) -> ComputeBound:
    """A lower bound on the step time [ns] (module docstring): stage p cannot start before
    the first micro-batch's forward pass through the p stages before it, nor end before
    that micro-batch's backward pass back through them, and runs its own compute chain
    between: ``chain_p + p x (one micro-batch through one chunk, forward and backward)``,
    the chunk's share the least of the stages built. Each stage's program is built for
    two micro-batches (P with interleaving) and extended by its second micro-batch's part
    of the chain, the most of which is the bound's ``slot_ns``. ``floors``: the
    :class:`~.floors.CollectiveFloors` of the layout (None: collectives count 0)."""
    built = cfg.pp if cfg.virtual_stages > 1 else 2
    stages = sorted({0, cfg.pp - 1} | ({1} if cfg.pp > 2 else set()))
    runs = {stage: _stage_compute(cfg, built, stage, floors) for stage in stages}
    chunk = min(each for _, each in runs.values()) / cfg.virtual_stages
    step = max(total + each * (microbatches - built) + stage * chunk for stage, (total, each) in runs.items())
    return ComputeBound(step, max(each for _, each in runs.values()))


def _simulate(task: dict[str, Any], microbatches: int) -> dict[str, float]:
    import astra
    from astra_core.workload.generators.llm import generate_llm
    from astra_core.workload.generators.llm_traces import llm_traces

    started = time.perf_counter()
    wl = generate_llm(_with_microbatches(task["config"], microbatches))
    traces, groups = llm_traces(wl)
    result = astra.simulate(
        traces, task["system"], task["network"], comm_groups=groups or None, backend=task.get("backend")
    )
    parts = result.breakdown()
    row = {part: sum(getattr(b, part) for b in parts) / len(parts) if parts else 0.0 for part in PARTS}
    row["step_ns"] = float(result.step_ns)
    row["model_flops"] = float(sum(wl.model_flops.values()))
    row["wall_s"] = time.perf_counter() - started
    return row


def _extend(runs: dict[int, dict[str, float]], target: int) -> dict[str, float]:
    """Each field at ``target`` micro-batches on the line through the two runs. A part of
    the breakdown the line takes below zero (one that shrinks between the screen's two
    runs, as a bubble does before the steady state) counts zero, and the other parts give
    up what it lacked in proportion: the parts keep their sum, and no share is negative."""
    (m1, r1), (m2, r2) = sorted(runs.items())
    out = {k: r1[k] + (r2[k] - r1[k]) * (target - m1) / (m2 - m1) for k in FIELDS}
    lacking = -sum(min(0.0, out[part]) for part in PARTS)
    if lacking > 0:
        kept = sum(max(0.0, out[part]) for part in PARTS)
        for part in PARTS:
            out[part] = max(0.0, out[part]) * (kept - lacking) / kept
    return out


def _runs(task: dict[str, Any], row: dict[str, Any]) -> dict[int, dict[str, float]] | None:
    """The runs of ``task``'s counts, the known ones not run again (each made here goes
    into ``row["runs"]``, each count into ``row["simulated"]``); None, with ``row`` marked
    ``bounded``, when a screen's first run shows it cannot beat ``beat_ns``."""
    counts, target = task["counts"], task["microbatches"]
    runs = {int(m): r for m, r in task.get("known", {}).items()}
    for m in counts:
        if m not in runs:
            runs[m] = row["runs"][m] = _simulate(task, m)
        row["simulated"].append(m)
        if len(counts) > 1 and len(runs) == 1:
            line = runs[m]["step_ns"] + task.get("slot_ns", 0.0) * (target - m)
            if line >= task.get("beat_ns", math.inf):
                row.update(status="bounded", line_bound_ns=line)
                return None
    return runs


def run_layout(task: dict[str, Any]) -> dict[str, Any]:
    """Run task ``{"key", "config", "microbatches", "counts", "system", "network",
    "backend"}``: ``counts`` the micro-batch counts to simulate (one: the plan's own;
    two: a screening line extended to ``microbatches``; none: the compute bound only,
    ``bound_ns`` and ``slot_ns``). Optional: ``known`` (count -> a run of it made before,
    not run again), ``slot_ns`` and ``beat_ns`` (a screen stops after its first run, with
    status ``bounded`` and its ``line_bound_ns``, when that bound cannot beat ``beat_ns``;
    module docstring). A row of :data:`FIELDS` at the plan's micro-batches, and ``runs``
    (count -> each run simulated here); raises only MemoryError."""
    from astra_core.collector import paused

    started = time.perf_counter()
    row: dict[str, Any] = {"key": task["key"], "status": "ok", "error": "", "simulated": [], "runs": {}}
    # a step's programs, traces, graphs and symmetry tables make no reference cycles: the
    # collector stays off until they are freed (on return from the calls that made them),
    # else its first pass walks them all (about 0.3 s of a 3 s run of 1,024 ranks)
    with paused():
        try:
            counts, target = task["counts"], task["microbatches"]
            if not counts:
                from astra_core.plan.floors import CollectiveFloors

                floors = CollectiveFloors(task["system"], task["network"], task["config"])
                bound = compute_bound_ns(task["config"], target, floors)
                row.update(bound_ns=bound.step_ns, slot_ns=bound.slot_ns)
            elif (runs := _runs(task, row)) is not None:
                row.update(
                    {k: runs[target][k] for k in FIELDS} if len(counts) == 1 else _extend(runs, target)
                )
        except MemoryError:  # the worker's to end (astra_core.workers): its heap stays full
            raise
        except Exception as exc:  # AstraError, or a bug: say where, but do not stop the search
            row.update(status="error", error=error_line(exc))
    row["wall_s"] = time.perf_counter() - started
    return row
