"""``astra flows``: flow workloads for congestion-control studies (generate, run).

An ``AstraError`` is printed by the command group's error boundary
(:class:`astra_core.cli.common.AstraGroup`)."""

from __future__ import annotations

import warnings

import click


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings (a config key that changes nothing, ...) as one ``warning:`` line."""
    click.echo(f"warning: {message}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def flows() -> None:
    """Flow workloads: Poisson arrivals from a flow-size CDF, and their completion times.

    `gen` draws flows for a fabric at a given load; `run` simulates them on a
    backend that models links and reports FCT slowdown by flow size.
    """


@flows.command("gen")
@click.option(
    "--cdf",
    required=True,
    help="flow-size distribution: websearch, hadoop, or a CDF file (<bytes> <percent> lines)",
)
@click.option("--load", type=float, required=True, help="offered load per host, fraction of its link")
@click.option("--duration-ms", type=float, required=True, help="flows start in [0, duration)")
@click.option("--topology", type=click.Path(), required=True, help="physical topology (ns-3 format)")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--output", "-o", type=click.Path(), required=True, help="flow file to write ('-': stdout)")
def gen(cdf, load, duration_ms, topology, seed, output) -> None:
    """Draw Poisson flow arrivals between random host pairs (HPCC artifact's format)."""
    from astra_core.flows.cdf import load_cdf
    from astra_core.flows.flowfile import format_flows
    from astra_core.flows.generate import duration_ns, host_link_gbps, poisson_flows
    from astra_core.outputs import check_not_input, check_output_file, is_stdout, write_text
    from astra_core.topology.ns3_format import read_ns3_topology

    check_output_file(output, "--output")
    check_not_input({"--output": output}, {"--topology": topology, "--cdf": cdf})
    window_ns = duration_ns(duration_ms)
    distribution = load_cdf(cdf)
    fabric = read_ns3_topology(topology)
    gbps = host_link_gbps(fabric)
    drawn = poisson_flows(distribution, fabric.npus_count, gbps, load, window_ns, seed)
    write_text(output, format_flows(drawn), "--output")
    total = sum(f.size_bytes for f in drawn)
    click.echo(
        f"{len(drawn)} flows, {total / 1e6:.1f} MB, mean {total / len(drawn):,.0f} B drawn "
        f"(the CDF's mean {distribution.mean_bytes:,.0f} B); {fabric.npus_count} hosts at "
        f"{gbps:g} Gbps x {load:g} load over {duration_ms:g} ms; "
        f"wrote {'standard output' if is_stdout(output) else output}",
        err=is_stdout(output),  # the flows themselves are on standard output
    )


@flows.command("run")
@click.option("--flows", "flow_file", type=click.Path(), required=True, help="flow file")
@click.option("--topology", type=click.Path(), required=True, help="physical topology (ns-3 format)")
@click.option(
    "--backend",
    required=True,
    help="network backend that models link sharing (ns3, flow, garnetlike, analytical-congestion)",
)
@click.option("--backend-config", type=click.Path(), help="the backend's own config file")
@click.option("--fct", "fct_path", type=click.Path(), help="write one CSV row per flow ('-': stdout)")
@click.option("--plots", "plots_dir", type=click.Path(), help="write fct_slowdown.png here")
@click.option(
    "--payload-bytes",
    type=int,
    help="payload per packet for the ideal FCT [default: the backend's own framing; else 4096]",
)
@click.option(
    "--header-bytes",
    type=int,
    help="wire bytes per packet besides payload, for the ideal FCT [default: the backend's; else 82, RoCEv2]",
)
def run(
    flow_file, topology, backend, backend_config, fct_path, plots_dir, payload_bytes, header_bytes
) -> None:
    """Simulate a flow file and print FCT slowdown percentiles by flow size.

    The ideal FCT is the flow alone on the idle fabric in the backend's own framing
    (its packets and headers), so every slowdown is >= 1; --payload-bytes and
    --header-bytes fix another framing instead (RoCEv2's 4096 + 82 where one is
    missing). A backend that does not model link sharing is refused."""
    from rich.console import Console

    from astra_core.backend import counters
    from astra_core.cli.stopwatch import Stopwatch
    from astra_core.errors import ConfigError
    from astra_core.flows.flowfile import read_flows
    from astra_core.flows.report import fct_csv, flow_table, plot_slowdown, summary_table
    from astra_core.flows.run import check_framing
    from astra_core.flows_api import run_flows
    from astra_core.outputs import (
        check_distinct,
        check_not_input,
        check_output_dir,
        check_output_file,
        is_stdout,
        write_text,
    )
    from astra_core.topology.ns3_format import read_ns3_topology

    warnings.showwarning = _show_warning
    watch = Stopwatch()
    check_framing(payload_bytes, header_bytes)
    outputs = {"--fct": fct_path}
    if fct_path:
        check_output_file(fct_path, "--fct")
    directory = check_output_dir(plots_dir, "--plots") if plots_dir else None
    if directory is not None:
        outputs["--plots (fct_slowdown.png)"] = str(
            check_output_file(directory / "fct_slowdown.png", "--plots")
        )
    check_distinct(outputs)
    check_not_input(
        outputs, {"--flows": flow_file, "--topology": topology, "--backend-config": backend_config}
    )
    fabric = read_ns3_topology(topology)
    specs = read_flows(flow_file, fabric.npus_count)
    if not specs:
        raise ConfigError(f"{flow_file}: holds no flows; nothing to run")
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
    watch.start_simulation()
    result = run_flows(
        specs, fabric, backend, backend_config, payload_bytes=payload_bytes, header_bytes=header_bytes
    )
    watch.end_simulation()
    table = flow_table(result.flows)
    if fct_path:
        write_text(fct_path, fct_csv(table), "--fct")
    if directory is not None:
        plot_slowdown({result.backend_name: table}, directory / "fct_slowdown.png")
    console = Console(stderr=is_stdout(fct_path))  # the CSV alone on standard output
    console.print(summary_table(table, f"FCT slowdown, {len(table)} flows on backend {result.backend_name}"))
    stats = counters(result.backend)
    if stats:
        console.print(
            ", ".join(f"{k} {v:,.6g}" if isinstance(v, float) else f"{k} {v:,}" for k, v in stats.items())
        )
    if fct_path and not is_stdout(fct_path):
        console.print(f"wrote {fct_path}")
    if directory is not None:
        console.print(f"wrote {directory / 'fct_slowdown.png'}")
    console.print(watch.line(), highlight=False, soft_wrap=True)
