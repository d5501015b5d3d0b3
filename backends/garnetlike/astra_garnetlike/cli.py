"""``astra noc``: synthetic-traffic experiments on a mesh or torus of garnetlike routers.

One load point prints average packet latency and accepted throughput;
``--sweep`` runs a range of offered loads, prints a table and draws the
latency-load curve to a PNG. Errors are one ``error:`` line and exit 1 (the
``astra`` group's error boundary, which runs every plugin command).
Nothing heavy is imported until the command runs.
"""

from __future__ import annotations

import json
from functools import partial

import click

from astra.plugin import ConfigError, parse_dims

#: Offered loads of a default sweep (flits/node/cycle).
DEFAULT_RATES = (0.02, 0.05) + tuple(round(0.05 * k, 2) for k in range(2, 21))
PATTERN_NAMES = ("uniform_random", "transpose", "tornado", "bit_complement", "neighbor")


def _dims(text: str) -> list[int]:
    return parse_dims(text, example="8x8")


def _rates(text: str | None) -> list[float]:
    from astra_garnetlike.traffic import MAX_INJECTION_RATE

    if not text:
        return list(DEFAULT_RATES)
    try:
        rates = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--rates: expected numbers like 0.1,0.2,0.3, got '{text}'") from None
    if not rates or any(not 0 < r <= MAX_INJECTION_RATE for r in rates):
        raise ConfigError(
            "--rates: offered loads must be in (0, 1] flits/node/cycle (a node's injection port "
            f"takes one flit per cycle), got '{text}'"
        )
    return rates


def _line(r) -> str:
    shape = "x".join(map(str, r.dims))
    tail = " (saturated: measured packets still queued)" if r.saturated else ""
    return (
        f"{r.topology} {shape}, {r.pattern}, offered {r.offered:.4f} flits/node/cycle: "
        f"average packet latency {r.avg_packet_latency:.2f} cycles (network "
        f"{r.avg_network_latency:.2f}), accepted throughput {r.accepted:.4f} flits/node/cycle, "
        f"{r.packets_measured} packets measured{tail}"
    )


@click.command("noc", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--topology", type=click.Choice(["mesh", "torus"]), default="mesh", show_default=True)
@click.option("--dims", default="8x8", show_default=True, help="routers per dimension, e.g. 8x8 or 4x4x4")
@click.option("--pattern", type=click.Choice(PATTERN_NAMES), default="uniform_random", show_default=True)
@click.option(
    "--injection-rate", type=float, default=0.1, show_default=True, help="offered load, flits/node/cycle"
)
@click.option("--cycles", type=int, default=10000, show_default=True, help="measured cycles")
@click.option("--warmup", type=int, help="cycles before measuring [default: cycles/10]")
@click.option("--packet-flits", type=int, default=4, show_default=True, help="flits per packet")
@click.option("--vcs", type=int, help="VCs per virtual network [4]")
@click.option("--buffer-depth", type=int, help="flits per VC [4]")
@click.option("--router-pipeline", type=int, help="router pipeline, cycles [1]")
@click.option(
    "--link-latency",
    type=int,
    default=1,
    show_default=True,
    help="link traversal, cycles (one flit per cycle)",
)
@click.option(
    "--routing", type=click.Choice(["dimension_order", "table", "up_down"]), help="[dimension_order]"
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="garnetlike config (TOML/YAML); flags above override it",
)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option(
    "--sweep",
    "do_sweep",
    is_flag=True,
    help="run a range of offered loads (--rates) and draw the latency-load curve",
)
@click.option(
    "--rates",
    help="offered loads for --sweep, comma-separated [0.02,0.05,0.1,...,1.0; "
    "stops after the first saturated point]",
)
@click.option("--plot", type=click.Path(dir_okay=False), help="PNG of the sweep [noc_sweep.png]")
@click.option(
    "--jobs",
    type=int,
    default=1,
    show_default=True,
    help="load points run in parallel processes (runs every rate)",
)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="write the results as JSON")
def noc(
    topology,
    dims,
    pattern,
    injection_rate,
    cycles,
    warmup,
    packet_flits,
    vcs,
    buffer_depth,
    router_pipeline,
    link_latency,
    routing,
    config_path,
    seed,
    do_sweep,
    rates,
    plot,
    jobs,
    json_path,
) -> None:
    """Network-on-chip study: synthetic traffic on a mesh or torus of credit-based routers.

    Prints the average packet latency (cycles, source queueing included) and
    the accepted throughput (flits/node/cycle) of one offered load, or with
    --sweep of many, and draws the latency-load curve.
    """
    from astra.plugin import any_stdout, check_distinct, check_not_input, check_output_file, write_text
    from astra_garnetlike.noc import plot_sweep, run_noc, sweep

    echo = partial(click.echo, err=any_stdout((json_path, plot)))  # "-": the file alone on stdout
    # Outputs are checked before the run: none is lost after it, none replaces --config.
    outputs = {"--json": json_path, "--plot": (plot or "noc_sweep.png") if do_sweep else None}
    for option, path in outputs.items():
        if path is not None:
            check_output_file(path, option)
    check_distinct(outputs)
    check_not_input(outputs, {"--config": config_path})
    params = dict(
        topology=topology,
        dims=_dims(dims),
        pattern=pattern,
        cycles=cycles,
        warmup=warmup,
        packet_flits=packet_flits,
        config=config_path,
        link_latency_cycles=link_latency,
        seed=seed,
        vcs_per_vnet=vcs,
        buffer_depth_flits=buffer_depth,
        router_pipeline_cycles=router_pipeline,
        routing=routing,
    )
    if not do_sweep:
        results = [run_noc(injection_rate=injection_rate, **params)]
        echo(_line(results[0]))
    else:
        results = sweep(_rates(rates), jobs=jobs, **params)
        for r in results:
            echo(_line(r))
        path = outputs["--plot"]
        plot_sweep(results, path)
        echo(f"wrote {path}")
    wall = sum(r.wall_s for r in results)
    hops = sum(r.flit_hops for r in results)
    echo(f"simulated {hops:,} flit-hops in {wall:.2f} s")
    if json_path:
        write_text(json_path, json.dumps([r.to_dict() for r in results], indent=1), "--json")
