"""``astra plan``: the fastest parallel layout of an LLM on a cluster that fits in memory
(see :mod:`astra_core.plan`)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from astra_core.cli.common import fail as _fail
from astra_core.cli.common import ray_option
from astra_core.errors import AstraError

#: Where the search keeps every simulated layout (the user's cache directory).
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "astra" / "plan.jsonl"


def _fixed(name: str, help_text: str):
    return click.option(f"--{name}", type=click.IntRange(min=1), help=help_text)


@click.command()
@click.option("--model", required=True, help="model preset (astra gen llm's) or a JSON/YAML file")
@click.option("--gpu", default="H100", show_default=True, help="GPU preset or a JSON/YAML file")
@click.option("--network", required=True, type=click.Path(dir_okay=False), help="network.yml of the cluster")
@click.option(
    "--system", type=click.Path(dir_okay=False), help="system.json (default: NCCL's model of --gpu)"
)
@click.option("--backend", help="network backend (default: the default backend)")
@click.option("--global-batch", type=click.IntRange(min=1), required=True, help="sequences per step")
@click.option("--seq-len", type=click.IntRange(min=1), help="tokens per sequence (default: the model's)")
@click.option("--precision", type=click.Choice(["bf16", "fp16", "fp8"]), default="bf16", show_default=True)
@click.option(
    "--fp8-recipe",
    type=click.Choice(["delayed", "tensorwise", "mxfp8"]),
    default="tensorwise",
    show_default=True,
)
@_fixed("tp", "fixed tensor-parallel size")
@_fixed("pp", "fixed pipeline stages")
@_fixed("cp", "fixed context-parallel size")
@_fixed("vp", "fixed virtual stages per pipeline stage")
@_fixed("ep", "fixed expert-parallel size")
@_fixed("micro-batch", "fixed micro-batch [sequences]")
@_fixed("max-tp", "largest tensor-parallel size (default: the network's first dimension)")
@click.option("--max-pp", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--max-vp", type=click.IntRange(min=1), default=8, show_default=True)
@click.option(
    "--max-cp",
    type=click.IntRange(min=1),
    help="largest context-parallel size (default: 4,096 tokens per rank)",
)
@click.option(
    "--recompute",
    type=click.Choice(["none", "selective", "full"]),
    multiple=True,
    default=("none", "full"),
    show_default=True,
    help="recomputation choices tried (repeat the option)",
)
@click.option("--zero", type=click.Choice(["1", "3"]), multiple=True, default=("1",), show_default=True)
@click.option(
    "--reserve-gib",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="HBM per GPU kept free for what PyTorch's allocator does not hold (CUDA context, NCCL's buffers)",
)
@click.option("--top", type=click.IntRange(min=1), default=5, show_default=True, help="layouts found exactly")
@click.option(
    "--full", type=click.IntRange(min=0), default=1, show_default=True, help="best layouts run in full"
)
@click.option("--workers", "-j", type=click.IntRange(min=1), help="worker processes (default: one per CPU)")
@ray_option()
@click.option("--cache", type=click.Path(dir_okay=False), default=str(DEFAULT_CACHE), show_default=True)
@click.option("--no-cache", is_flag=True, help="simulate everything again and keep nothing")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="write every layout as JSON")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="write every layout as CSV")
@click.option("--plots", type=click.Path(file_okay=False), help="write the Pareto front and breakdowns here")
def plan(**opts: Any) -> None:
    """Find the fastest parallel layout of MODEL for a global batch on the cluster of
    NETWORK that fits in the GPUs' memory: every layout that divides and fits is bounded
    by its compute, and those that could beat the TOP fastest are simulated."""
    from astra_core.plan import Limits
    from astra_core.plan.api import executor
    from astra_core.plan.api import plan as run_plan

    console = Console()
    limits = Limits(
        tp=opts["tp"],
        pp=opts["pp"],
        cp=opts["cp"],
        vp=opts["vp"],
        ep=opts["ep"],
        micro_batch=opts["micro_batch"],
        max_tp=opts["max_tp"],
        max_pp=opts["max_pp"],
        max_vp=opts["max_vp"],
        max_cp=opts["max_cp"],
        recomputes=tuple(opts["recompute"]),
        zeros=tuple(int(z) for z in opts["zero"]),
        reserve_bytes=opts["reserve_gib"] * 2**30,
    )
    ray = opts["ray_address"]
    header = f"astra plan: {opts['model']} on the GPUs of {opts['network']}; simulating on {executor(opts['workers'], ray)[2]}"
    try:
        with _Bar(Console(stderr=True), lambda: console.print(header, soft_wrap=True)) as bar:
            outcome = run_plan(
                opts["model"],
                opts["network"],
                opts["global_batch"],
                gpu=opts["gpu"],
                system=opts["system"],
                backend=opts["backend"],
                seq_len=opts["seq_len"],
                precision=opts["precision"],
                fp8_recipe=opts["fp8_recipe"],
                limits=limits,
                top=opts["top"],
                full=opts["full"],
                workers=opts["workers"],
                ray=ray,
                cache=None if opts["no_cache"] else opts["cache"],
                on_progress=bar.update,
            )
    except AstraError as exc:
        _fail(exc)
    _print(console, outcome, opts["top"])
    _write(console, outcome, opts)


class _Bar:
    """A progress bar per phase on a terminal's stderr (bounds, screening, full runs);
    ``on_first()`` once the search has layouts to run."""

    def __init__(self, err: Console, on_first: Any):
        self.on_first = on_first
        self.bar = (
            Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                     TimeRemainingColumn(),
                     console=err, transient=True)
            if err.is_terminal
            else None
        )  # fmt: skip
        self.tasks: dict[str, Any] = {}

    def __enter__(self):
        if self.bar:
            self.bar.start()
        return self

    def __exit__(self, *exc):
        if self.bar:
            self.bar.stop()

    def update(self, phase: str, done: int, total: int | None) -> None:
        if self.on_first:
            self.on_first()
            self.on_first = None
        if not self.bar:
            return
        if phase not in self.tasks:
            self.tasks[phase] = self.bar.add_task(phase, total=total)
        self.bar.update(self.tasks[phase], completed=done, total=total)


def _print(console: Console, outcome, top: int) -> None:
    frame = outcome.frame
    ok = frame[frame["status"] == "ok"]
    table = Table(title=f"fastest of {len(ok)} simulated layouts ({outcome.considered} considered)")
    table.add_column("layout", no_wrap=True)
    for column in ("step s", "tok/s/GPU", "MFU", "GiB", "bound by"):
        table.add_column(column, justify="right", no_wrap=True)
    for _, r in ok.head(top).iterrows():
        mark = "" if len(r["simulated"]) == 1 else "*"
        share = r[r["bound"]] if r["bound"] else 0.0
        table.add_row(
            r["short"], f"{r['step_s']:.3f}{mark}", f"{r['tokens_per_gpu_s']:,.0f}", f"{r['mfu']:.1%}",
            f"{r['peak_memory_gib']:.1f}", f"{r['bound']} {share:.0%}",
        )  # fmt: skip
    console.print(table)
    console.print("* screened: 1 and 2 micro-batches (P and 2P interleaved) extended to the step's")
    console.print(f"pruned, by reason ({sum(outcome.pruned.values())}):")
    for why, n in outcome.pruned.most_common():
        console.print(f"  {n:6d}  {why}")
    for _, r in ok[ok["error"] != ""].head(top).iterrows():  # a full run that failed
        console.print(f"{r['short']}: screened only, {r['error']}")
    failed = frame[frame["status"] == "error"]
    if len(failed):
        console.print(
            f"{len(failed)} layouts failed; first: {failed.iloc[0]['layout']}: {failed.iloc[0]['error']}"
        )
    made = ", ".join(f"{n} {phase}" for phase, n in outcome.runs.items())
    console.print(f"runs made: {made} (the rest from the cache)")


def _write(console: Console, outcome, opts: dict) -> None:
    from astra_core.outputs import write_text

    frame = outcome.frame
    if opts["json_path"]:
        records = json.loads(frame.to_json(orient="records"))
        payload = {"considered": outcome.considered, "pruned": dict(outcome.pruned), "layouts": records}
        write_text(opts["json_path"], json.dumps(payload, indent=1) + "\n")
        console.print(f"wrote {opts['json_path']}")
    if opts["csv_path"]:
        write_text(opts["csv_path"], frame.to_csv(index=False))
        console.print(f"wrote {opts['csv_path']}")
    if opts["plots"]:
        from astra_core.plan.plots import plot_plan

        for path in plot_plan(frame, opts["plots"]):
            console.print(f"wrote {path}")
    if frame[frame["status"] == "ok"].empty:
        sys.exit(1)
