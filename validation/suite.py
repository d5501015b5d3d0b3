"""The validation suite: astra's step time against independently published training runs.

Usage::

    .venv/bin/python validation/suite.py                    # every source, one row at a time
    .venv/bin/python validation/suite.py --sources megatron-bridge,nemotron4 --markdown docs/validation-suite.md

Every row comes from a source script that cites its numbers to the file and commit
they were read from, and builds the run's plan with ``astra gen llm``'s generator:

* ``sc21``: Megatron-LM's Table 1 (Narayanan et al., SC'21), DGX A100 (:mod:`megatron`);
* ``llama3``: the Llama 3 paper's Table 4, 8,192 and 16,384 H100s (:mod:`h100_scale`);
* ``nemotron4``: NVIDIA DGX Cloud benchmarking's Nemotron-4 340B recipe (:mod:`h100_scale`);
* ``megatron-bridge``: NVIDIA Megatron-Bridge's 25.11 and 26.02 performance summaries, DGX
  H100, DGX B200 and the GB200 / GB300 NVL72 racks, dense and MoE (:mod:`megatron_bridge`);
* ``megatron-moe``: NVIDIA's Megatron-Core MoE report (arXiv 2603.07685), Qwen3-235B on
  H100, GB200 and GB300 (:mod:`megatron_moe`);
* ``mcore-dsv3``: Megatron-LM's guide to DeepSeek-V3 on 256 GB200, its baseline and its
  optimised run (:mod:`mcore_deepseek`).

No constant of astra is fitted to any row. Each row is generated and simulated in its own
process (its wall time and peak resident memory are its own), stopped and reported if
it passes ``--max-gib`` of address space or ``--max-minutes``. Error = published step
time / predicted step time - 1 (= predicted throughput / published - 1: positive means
astra predicts the run faster than it ran). The report gives per row the source, plan,
published and predicted step, signed error, wall time and peak memory; overall the
geometric mean of |error|, the worst, the mean signed error (bias), and the geometric
means per source and per GPU generation; and the rows astra refuses or cannot express,
with why.
"""

from __future__ import annotations

import argparse
import importlib
import multiprocessing
import resource
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from summary import emit, geomean_abs

from astra_core.errors import AstraError

SOURCES = ("sc21", "llama3", "nemotron4", "megatron-bridge", "megatron-moe", "mcore-dsv3")
#: The sources whose rows are :class:`megatron_bridge.Row`, by module.
_BRIDGE_MODULES = {
    "megatron-bridge": "megatron_bridge",
    "megatron-moe": "megatron_moe",
    "mcore-dsv3": "mcore_deepseek",
}


@dataclass(frozen=True)
class Case:
    """One suite row: row ``index`` of ``module``'s ``ROWS``, and what the report prints."""

    source: str
    module: str
    index: int
    label: str
    gpu: str
    gpus: int
    precision: str
    moe: bool
    published_step_s: float
    plan: str


def _sc21() -> list[Case]:
    import megatron

    return [
        Case(
            "sc21",
            "megatron",
            i,
            f"GPT {row.name}",
            "A100",
            row.gpus,
            "fp16",
            False,
            row.paper_flops() / (row.published_tflops * 1e12 * row.gpus),
            f"TP {row.tp}, PP {row.pp}, DP {row.dp}, V {row.virtual_stages}, GBS {row.global_batch}",
        )
        for i, row in enumerate(megatron.ROWS)
    ]


def _h100(source: str) -> list[Case]:
    import h100_scale

    cases = []
    for i, row in enumerate(h100_scale.ROWS):
        if row.source != source:
            continue
        llama = source == "llama3"
        published = row.llama3_flops() / (row.published * 1e12 * row.gpus) if llama else row.published
        name = "Llama 3 405B" if llama else "Nemotron-4 340B"
        cases.append(
            Case(
                source,
                "h100_scale",
                i,
                f"{name}, {row.seq // 1024}K",
                "H100",
                row.gpus,
                row.precision,
                False,
                published,
                f"TP {row.tp}, CP {row.cp}, PP {row.pp}, DP {row.dp}, V {row.virtual_stages}, "
                f"GBS {row.global_batch}",
            )
        )
    return cases


def _bridge_rows(source: str, module: str) -> list[Case]:
    """The rows of a source written as :class:`megatron_bridge.Row` (labelled by the
    module's ``LABELS`` where it has them, else by model and release)."""
    found = importlib.import_module(module)
    labels = getattr(found, "LABELS", None) or [f"{row.model} ({row.release})" for row in found.ROWS]
    return [
        Case(
            source,
            module,
            i,
            labels[i],
            row.gpu,
            row.gpus,
            row.precision,
            row.moe,
            row.published_step_s,
            f"TP {row.tp}, CP {row.cp}, PP {row.pp}, DP {row.dp}, V {row.vp}"
            f"{f', EP {row.ep}' if row.ep > 1 else ''}, GBS {row.gbs}, "
            f"MBS {row.mbs}{', FSDP' if row.fsdp else ''}",
        )
        for i, row in enumerate(found.ROWS)
    ]


def cases(sources: tuple[str, ...] = SOURCES) -> list[Case]:
    """The rows of ``sources``, in source order."""
    make = {
        "sc21": _sc21,
        "llama3": lambda: _h100("llama3"),
        "nemotron4": lambda: _h100("nemotron4"),
    }
    return [
        case
        for source in sources
        for case in (
            _bridge_rows(source, _BRIDGE_MODULES[source]) if source in _BRIDGE_MODULES else make[source]()
        )
    ]


def citations() -> dict[str, str]:
    """Each source's citation, as its script gives it."""
    import h100_scale
    import megatron

    return {
        "sc21": f"{megatron.PAPER}; plans from {megatron.RUN_SCRIPT}",
        "llama3": h100_scale.LLAMA3,
        "nemotron4": h100_scale.NEMOTRON,
        **{source: importlib.import_module(module).SOURCE for source, module in _BRIDGE_MODULES.items()},
    }


def not_expressible() -> list[tuple[str, str, str]]:
    """(source, runs, why) of the published runs the suite does not run yet."""
    return [
        (source, runs, why)
        for source, module in _BRIDGE_MODULES.items()
        for runs, why in importlib.import_module(module).NOT_EXPRESSIBLE
    ]


def run_case(case: Case, max_gib: float = 12.0, max_minutes: float = 20.0) -> tuple:
    """``case`` in this process: (predicted step s or None, wall s, peak resident GiB,
    astra's one-line refusal or why the row was stopped, or None). The process may
    address at most ``max_gib`` GiB and run ``max_minutes`` (a row past either is
    stopped and reported, the machine stays usable)."""
    limit = int(max_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGALRM, _out_of_time)
    signal.alarm(int(max_minutes * 60))
    module = importlib.import_module(case.module)
    start = time.perf_counter()
    try:
        found = module.predict(module.ROWS[case.index])
        seconds, refusal = (found[0] if isinstance(found, tuple) else found), None
    except AstraError as exc:
        seconds, refusal = None, str(exc)
    except MemoryError:
        seconds, refusal = (
            None,
            f"stopped: it needs more than the suite's {max_gib:g} GiB of address space",
        )
    except _OutOfTime:
        seconds, refusal = None, f"stopped: it runs longer than the suite's {max_minutes:g} minutes"
    signal.alarm(0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return seconds, time.perf_counter() - start, peak, refusal


class _OutOfTime(BaseException):
    """A row past its time (not an OSError, which astra's writers catch as I/O errors)."""


def _out_of_time(signum, frame) -> None:
    raise _OutOfTime


def _in_child(case: Case, max_gib: float, max_minutes: float) -> tuple:
    """``case`` in a fresh process (spawned: its memory is its own); a process that
    dies is a row stopped with its exit."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        try:
            return pool.submit(run_case, case, max_gib, max_minutes).result()
        except BrokenProcessPool:
            return None, 0.0, 0.0, "stopped: its process died (out of memory?)"


def run(
    chosen: list[Case], jobs: int = 1, max_gib: float = 12.0, max_minutes: float = 20.0
) -> dict[Case, tuple]:
    """Every case in its own process, ``jobs`` at a time, the largest first."""
    order = sorted(chosen, key=lambda case: -case.gpus)
    with ThreadPoolExecutor(jobs) as threads:
        results = threads.map(lambda case: _in_child(case, max_gib, max_minutes), order)
        return dict(zip(order, results))


def _geomeans(errors: list[tuple[Case, float]], key) -> str:
    groups: dict[str, list[float]] = {}
    for case, err in errors:
        groups.setdefault(key(case), []).append(err)
    return ", ".join(f"{name} {geomean_abs(errs):.1%} ({len(errs)})" for name, errs in groups.items())


def render(chosen: list[Case], results: dict[Case, tuple]) -> str:
    """The suite's page (module docstring)."""
    lines = [
        "# Validation suite: published training runs, predicted vs measured",
        "",
        "Generated by `validation/suite.py`. Error = published step time / predicted - 1 "
        "(positive: astra predicts the run faster than it ran). No constant is fitted to a row.",
        "",
        "| source | run | GPUs | GPU | precision | plan | published s | astra s | error | run s | peak GiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    errors: list[tuple[Case, float]] = []
    refused = []
    for case in chosen:
        seconds, wall, peak, refusal = results[case]
        if seconds is None:
            refused.append((case, refusal))
            continue
        err = case.published_step_s / seconds - 1
        errors.append((case, err))
        lines.append(
            f"| {case.source} | {case.label} | {case.gpus:,} | {case.gpu} | {case.precision.upper()} "
            f"| {case.plan} | {case.published_step_s:.3f} | {seconds:.3f} | {err:+.1%} "
            f"| {wall:.0f} | {peak:.1f} |"
        )
    lines += ["", "## Summary", ""]
    if errors:
        values = [err for _, err in errors]
        worst_case, worst = max(errors, key=lambda item: abs(item[1]))
        lines += [
            f"* {len(errors)} rows from {len({c.source for c, _ in errors})} sources on "
            f"{len({c.gpu for c, _ in errors})} GPU generations; "
            f"{sum(c.precision.startswith('fp8') for c, _ in errors)} FP8, "
            f"{sum(c.moe for c, _ in errors)} MoE, {sum(c.gpus >= 1024 for c, _ in errors)} of "
            "1,024 GPUs or more.",
            f"* Geometric mean of |error|: {geomean_abs(values):.1%}; worst: {worst:+.1%} "
            f"({worst_case.source}, {worst_case.label}, {worst_case.gpus:,} GPUs); mean signed "
            f"error (bias): {sum(values) / len(values):+.1%}; within 10 %: "
            f"{sum(abs(e) <= 0.10 for e in values)} of {len(values)}.",
            f"* Per source: {_geomeans(errors, lambda c: c.source)}.",
            f"* Per GPU generation: {_geomeans(errors, lambda c: c.gpu)}.",
            f"* Slowest row: {max(results[c][1] for c, _ in errors):.0f} s; largest peak memory: "
            f"{max(results[c][2] for c, _ in errors):.1f} GiB; within 10 minutes and 8 GiB: "
            f"{sum(results[c][1] <= 600 and results[c][2] <= 8 for c, _ in errors)} of {len(errors)}.",
        ]
    if refused:
        lines += ["", "## Rows astra refuses or the suite stopped", ""]
        lines += [f"* {c.source}, {c.label}, {c.gpus:,} GPUs: {why}" for c, why in refused]
    lines += ["", "## Published runs the suite does not run yet", ""]
    lines += [f"* {source}: {runs}: {why}." for source, runs, why in not_expressible()]
    lines += ["", "## Sources", ""]
    cited = citations()
    lines += [f"* `{source}`: {cited[source]}." for source in dict.fromkeys(c.source for c in chosen)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", default=",".join(SOURCES), help=f"comma-separated: {', '.join(SOURCES)}")
    parser.add_argument("--jobs", type=int, default=1, help="rows simulated at once (one process each)")
    parser.add_argument("--markdown", help="also write the page to this file")
    parser.add_argument("--max-gib", type=float, default=12.0, help="address space per row [GiB]")
    parser.add_argument("--max-minutes", type=float, default=20.0, help="wall time per row [min]")
    args = parser.parse_args(argv)
    sources = tuple(s.strip() for s in args.sources.split(",") if s.strip())
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        parser.error(f"unknown source {unknown[0]!r} (known: {', '.join(SOURCES)})")
    chosen = cases(sources)
    results = run(chosen, max(1, args.jobs), args.max_gib, args.max_minutes)
    return emit(render(chosen, results), args.markdown)


if __name__ == "__main__":
    sys.exit(main())
