"""``astra serve``: LLM inference serving on a deployment (see :mod:`astra_core.serve`)."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from astra_core.cli.common import fail
from astra_core.errors import AstraError


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "--rate",
    type=click.FloatRange(min=0, min_open=True),
    help="generated requests per second (overrides the spec's)",
)
@click.option("--count", type=click.IntRange(min=1), help="generated requests (overrides the spec's)")
@click.option("--backend", help="network backend (overrides the spec's)")
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False), help="write the summary as JSON ('-': stdout)"
)
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="write one row per request as CSV")
@click.option(
    "--parquet", "parquet_path", type=click.Path(dir_okay=False), help="write one row per request as Parquet"
)
@click.option(
    "--plots",
    type=click.Path(file_okay=False),
    help="write latency CDFs and KV cache use (rates.png with --find-rate)",
)
@click.option("--find-rate", is_flag=True, help="search the highest request rate that meets the spec's SLOs")
@click.option(
    "--attainment", type=click.FloatRange(0, 1, min_open=True), default=0.9, show_default=True,
    help="with --find-rate: the share of requests that must meet every SLO",
)  # fmt: skip
def serve(spec: str, **opts: Any) -> None:
    """Serve the requests of SPEC (a YAML file: model, GPU, TP, replicas, engine limits,
    network, requests) and print per-request latency statistics: TTFT, TPOT, ITL, end to
    end, throughput and goodput under the spec's SLOs; or, with --find-rate, the highest
    request rate at which the SLOs hold."""
    from astra_core.outputs import check_distinct, check_output_dir, check_output_file

    outputs = {f"--{k.split('_')[0]}": opts[k] for k in ("json_path", "csv_path", "parquet_path") if opts[k]}
    try:
        check_distinct(outputs)
        for option, path in outputs.items():
            check_output_file(path, option)
        if opts["plots"]:
            check_output_dir(opts["plots"], "--plots")
        loaded = _loaded(spec, opts)
        if opts["find_rate"]:
            _find_rate(loaded, opts)
        else:
            _one_run(loaded, opts)
    except AstraError as exc:
        fail(exc)


def _loaded(spec: str, opts: dict[str, Any]) -> Any:
    """The spec with the command line's overrides."""
    from astra_core.serve.spec import load_serve_spec

    loaded = load_serve_spec(spec)
    changes = {k: opts[k] for k in ("rate", "count") if opts[k] is not None}
    if changes:
        if loaded.requests.file is not None:
            raise click.UsageError(f"--{next(iter(changes))}: {spec} reads its requests from a file")
        loaded = loaded.model_copy(update={"requests": loaded.requests.model_copy(update=changes)})
    if opts["backend"]:
        loaded = loaded.model_copy(update={"backend": opts["backend"]})
    return loaded


def _one_run(loaded: Any, opts: dict[str, Any]) -> None:
    from astra_core.outputs import atomic_output, is_stdout, write_text
    from astra_core.serve.api import run_spec
    from astra_core.serve.plots import plot_run

    result = run_spec(loaded)
    summary = result.summary(slo_ms=loaded.slo or None, warmup=loaded.requests.warmup)
    if opts["json_path"]:
        write_text(opts["json_path"], json.dumps(summary, indent=2) + "\n", "--json")
    if opts["csv_path"]:
        with atomic_output(opts["csv_path"], "--csv") as tmp:
            result.requests.to_csv(tmp, index=False)
    if opts["parquet_path"]:
        with atomic_output(opts["parquet_path"], "--parquet") as tmp:
            result.requests.to_parquet(tmp, index=False)
    if opts["plots"]:
        plot_run(result, opts["plots"])
    if not (opts["json_path"] and is_stdout(opts["json_path"])):
        _print(Console(), loaded, summary)


def _find_rate(loaded: Any, opts: dict[str, Any]) -> None:
    from astra_core.outputs import is_stdout, write_text
    from astra_core.serve.plots import plot_rates
    from astra_core.serve.rate_search import find_rate

    quiet = bool(opts["json_path"] and is_stdout(opts["json_path"]))
    console = Console(stderr=quiet)

    def show(p: dict[str, Any]) -> None:
        console.print(
            f"  {p['rate']:10.3f} requests/s: {p['attainment']:6.1%} within the SLOs; TTFT p99 "
            f"{p['ttft']['p99_ms']:,.1f} ms, TPOT p99 {(p['tpot']['p99_ms'] or 0):,.1f} ms",
            soft_wrap=True,
        )

    slos = ", ".join(f"{k} <= {v:g} ms" for k, v in loaded.slo.items())
    console.print(f"highest rate with {opts['attainment']:.0%} of requests within {slos or 'the SLOs'}:")
    best, points = find_rate(loaded, opts["attainment"], on_point=show)
    if opts["json_path"]:
        write_text(
            opts["json_path"], json.dumps({"best_rate": best, "points": points}, indent=2) + "\n", "--json"
        )
    if opts["plots"]:
        plot_rates(points, opts["plots"])
    console.print(f"{best:.3f} requests/s" if best is not None else "no rate tried meets the SLOs")


def _print(console: Console, spec: Any, s: dict[str, Any]) -> None:
    if spec.prefill is None:
        where = f"{spec.replicas} x TP {spec.tp} {spec.gpu}"
    else:
        where = f"prefill {spec.prefill.replicas} x TP {spec.prefill.tp}, decode {spec.decode.replicas} x TP {spec.decode.tp} {spec.gpu}"
    kv = ", ".join(
        f"{role} {blocks:,} blocks per replica, peak use {s['peak_kv_use'][role]:.0%}"
        for role, blocks in s["kv_blocks_per_replica"].items()
    )
    console.print(
        f"{spec.model} on {where}: {s['requests']:,} requests in {s['duration_s']:.1f} s; "
        f"{s['request_throughput']:.2f} requests/s, {s['output_token_throughput']:,.0f} output tokens/s; "
        f"{s['preemptions']} preemptions; KV cache: {kv}",
        soft_wrap=True,
    )
    table = Table()
    table.add_column("ms")
    for column in ("mean", "median", "p99"):
        table.add_column(column, justify="right")
    rows = [("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "end to end"), ("queue", "queueing")]
    if spec.prefill is not None:
        rows.append(("kv_transfer", "KV transfer"))
    for key, label in rows:
        values = (s[key][f"{q}_ms"] for q in ("mean", "median", "p99"))
        table.add_row(label, *("-" if v is None else f"{v:,.1f}" for v in values))
    console.print(table)
    if "goodput" in s:
        console.print(f"goodput: {s['goodput']:.2f} requests/s within the SLOs")
