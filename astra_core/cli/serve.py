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
def serve(spec: str, **opts: Any) -> None:
    """Serve the requests of SPEC (a YAML file: model, GPU, TP, replicas, engine limits,
    network, requests) and print per-request latency statistics: TTFT, TPOT, ITL, end to
    end, throughput and goodput under the spec's SLOs."""
    from astra_core.outputs import atomic_output, check_distinct, check_output_file, is_stdout, write_text
    from astra_core.serve.api import run_spec
    from astra_core.serve.spec import load_serve_spec

    outputs = {f"--{k.split('_')[0]}": opts[k] for k in ("json_path", "csv_path", "parquet_path") if opts[k]}
    try:
        check_distinct(outputs)
        for option, path in outputs.items():
            check_output_file(path, option)
        loaded = load_serve_spec(spec)
        changes = {k: opts[k] for k in ("rate", "count") if opts[k] is not None}
        if changes:
            if loaded.requests.file is not None:
                raise click.UsageError(f"--{next(iter(changes))}: {spec} reads its requests from a file")
            loaded = loaded.model_copy(update={"requests": loaded.requests.model_copy(update=changes)})
        if opts["backend"]:
            loaded = loaded.model_copy(update={"backend": opts["backend"]})
        result = run_spec(loaded)
        summary = result.summary(slo_ms=loaded.slo or None)
        if opts["json_path"]:
            write_text(opts["json_path"], json.dumps(summary, indent=2) + "\n", "--json")
        if opts["csv_path"]:
            with atomic_output(opts["csv_path"], "--csv") as tmp:
                result.requests.to_csv(tmp, index=False)
        if opts["parquet_path"]:
            with atomic_output(opts["parquet_path"], "--parquet") as tmp:
                result.requests.to_parquet(tmp, index=False)
    except AstraError as exc:
        fail(exc)
    if not (opts["json_path"] and is_stdout(opts["json_path"])):
        _print(Console(), loaded, summary)


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
