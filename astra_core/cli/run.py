"""``astra run`` (one simulation, a thin layer over :mod:`astra.api`) and ``astra backends``."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import click
from rich.console import Console

from astra_core.cli.stopwatch import Stopwatch
from astra_core.collector import few_passes
from astra_core.config.dims import parse_dims
from astra_core.outputs import any_stdout


def _show_warning(message, category, filename, lineno, file=None, line=None):
    click.echo(f"warning: {message}", err=True)


@click.command()
@click.option("--workload", required=True, help="Chakra trace prefix: rank r reads PREFIX.r.et")
@click.option("--system", "system", required=True, type=click.Path(), help="system.json")
@click.option("--network", type=click.Path(), help="network.yml (logical dimensions)")
@click.option(
    "--topology", type=click.Path(), help="physical topology, ns-3 format (NPU rank r = r-th non-switch node)"
)
@click.option("--dims", help="logical dimensions of a --topology, e.g. 8x16 (default: one)")
@click.option("--memory", type=click.Path(), help="remote-memory JSON")
@click.option("--comm-groups", type=click.Path(), help="communicator-group JSON")
@click.option("--backend", help="network backend (see `astra backends`)")
@click.option(
    "--backend-config", type=click.Path(), help="the backend's own config file (e.g. garnetlike: TOML/YAML)"
)
@click.option("--json", "json_path", type=click.Path(), help="write per-rank results as JSON ('-': stdout)")
@click.option("--timeline", type=click.Path(), help="write a Chrome/Perfetto trace ('-': stdout)")
@click.option(
    "--csv",
    "csv_path",
    type=click.Path(),
    help="write per-collective records (with per-phase times) as CSV ('-': stdout)",
)
@click.option(
    "--parquet",
    "parquet_path",
    type=click.Path(),
    help="write per-collective records (with per-phase times) as Parquet ('-': stdout)",
)
@click.option(
    "--plots",
    "plots_dir",
    type=click.Path(),
    help="write PNG plots here: per-rank breakdown, timeline, link utilization",
)
@click.option(
    "--no-symmetry", is_flag=True, help="simulate every rank even when rank 0 provably stands for all"
)
@click.option(
    "--background",
    type=click.Path(),
    help="flow file (`astra flows gen`) run on the same --topology alongside the step",
)
@click.option(
    "--faults",
    type=click.Path(),
    help="YAML file of degraded and failed cables of --topology (faults: [{link: [a, b], "
    "bandwidth: 0.5 | down: true, at_us, until_us}]); docs/cluster.md",
)
@click.option(
    "--iterations",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="run the step N times back to back, each rank's iteration i+1 starting when its "
    "iteration i has finished; prints and writes (--json) each iteration's time",
)
@click.option(
    "--estimate",
    "estimate_only",
    is_flag=True,
    help="print what the run would cost the backend (messages, bytes, packet- or flit-hops, "
    "expected wall time) and exit without simulating it (--json: write it as JSON)",
)
def run(
    workload,
    system,
    network,
    topology,
    dims,
    memory,
    comm_groups,
    backend,
    backend_config,
    json_path,
    timeline,
    csv_path,
    parquet_path,
    plots_dir,
    no_symmetry,
    background,
    faults,
    iterations,
    estimate_only,
) -> None:
    """Simulate one step of WORKLOAD and print a per-rank table.

    The network is network.yml's dimensions (--network), or a physical
    topology file (--topology) for backends that model links, with the
    logical dimensions the collectives run over given by --dims (sizes
    multiplying to its NPU count) or --network. With --background, a flow
    workload shares the fabric with the step; its FCT slowdowns are printed
    after the step's table (and written with --json). --faults slows or removes
    cables of the topology, for the whole run or from a time on (the latter on
    flow and analytical-congestion).

    On a backend that prices its work (ns3, garnetlike, flow), the run is first
    estimated without simulating it (the system layer on the analytical model);
    a run expected to take more than 30 s says so on stderr before it starts, and
    one past the backend's work limit is refused. --estimate prints the estimate
    and stops there.
    """
    from astra.api import RunSpec, run

    warnings.showwarning = _show_warning
    watch = Stopwatch()
    files = {"--json": json_path, "--timeline": timeline, "--csv": csv_path, "--parquet": parquet_path}
    # Outputs are checked before the run, so that no result is lost after it and no input
    # is destroyed by it.
    spec = RunSpec(
        workload,
        system,
        network,
        topology=topology,
        dims=parse_dims(dims) if dims is not None else None,
        memory=memory,
        comm_groups=comm_groups,
        backend=backend,
        symmetry=not no_symmetry,
        backend_config=backend_config,
        background=background,
        iterations=iterations,
        faults=faults,
    )
    _check_outputs(files, plots_dir, _inputs(spec), _backend_files(backend, backend_config))
    if estimate_only:
        _estimate(spec, files, plots_dir)
        return
    watch.start_simulation()
    with few_passes():  # the report's passes too kept off the run's results
        # A progress line on stderr while it is a terminal, none otherwise.
        result = run(spec, progress=True, on_estimate=_say_if_long)
        watch.end_simulation()
        # With an output on standard output ("-"), the table and messages go to stderr.
        console = Console(stderr=any_stdout(files.values()))
        _print_run(result, console, workload)
        _write_outputs(result, console, json_path, timeline, csv_path, parquet_path, plots_dir)
    console.print(watch.line(), highlight=False, soft_wrap=True)


def _inputs(spec) -> dict[str, Any]:
    """The input files of ``spec`` (a RunSpec of paths) by option, for :func:`_check_outputs`
    (the traces and the files the system.json names are listed lazily)."""
    return {
        "--workload": _trace_files(spec.workload),
        "--system": spec.system,
        "--system's nccl.profile": _system_files(spec.system, custom=False),
        "--system's *-implementation-custom": _system_files(spec.system, custom=True),
        "--network": spec.network,
        "--topology": spec.topology,
        "--memory": spec.memory,
        "--comm-groups": spec.comm_groups,
        "--backend-config": spec.backend_config,
        "--background": spec.background,
        "--faults": spec.faults,
    }


def _print_run(result, console: Console, workload: str) -> None:
    """The per-rank table, the background flows' slowdowns and NCCL's tuning lines."""
    from astra_core.report.nccl import tuning_lines
    from astra_core.report.table import print_summary

    print_summary(result, console, title=f"astra — {workload} on backend {result.backend}")
    if result.background is not None:
        from astra_core.flows.report import flow_table, summary_table

        console.print(
            summary_table(
                flow_table(result.background),
                f"background flows: FCT slowdown, {len(result.background)} flows",
            )
        )
    if result.iterations is not None:
        steps = ", ".join(f"{t / 1e3:,.3f}" for t in result.iterations.step_ns)
        console.print(f"iterations: {result.iterations.count}, each (µs): {steps}", highlight=False)
    for line in tuning_lines(result):  # as NCCL_DEBUG=INFO's tuning lines
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def _say_if_long(estimate) -> None:
    """Before a run: its estimate on stderr when it should take more than
    :data:`~astra_core.estimate.SHOW_ESTIMATE_S` of wall time."""
    from astra_core.estimate import SHOW_ESTIMATE_S

    if estimate.wall_s is not None and estimate.wall_s > SHOW_ESTIMATE_S:
        click.echo(estimate.line(), err=True)


def _estimate(spec, files, plots_dir) -> None:
    """``astra run --estimate``: print the run's estimate (and write it with --json);
    nothing is simulated. Raises ConfigError for an output only a run can write."""
    from astra.api import estimate_run
    from astra_core.errors import ConfigError

    unused = [option for option, path in files.items() if path is not None and option != "--json"]
    if plots_dir is not None:
        unused.append("--plots")
    if unused:
        raise ConfigError(f"--estimate simulates nothing: {', '.join(unused)} would have nothing to write")
    result = estimate_run(spec)
    json_path = files["--json"]
    console = Console(stderr=json_path == "-")
    for line in result.lines():
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    if json_path is not None:
        from astra_core.outputs import write_text

        write_text(json_path, json.dumps(result.as_dict(), indent=1), "--json")


def _trace_files(prefix: str) -> Iterator[str]:
    """The existing ``<prefix>.<rank>.et`` files (one directory listing, made lazily)."""
    from astra_core.workload.chakra import rank_trace_files

    yield from rank_trace_files(prefix).values()


def _system_files(system: str, custom: bool) -> Iterator[str]:
    """The files the system.json names (:func:`~astra_core.system.input_files.system_named_files`):
    its custom collectives' XML or ``.et`` files, or else its NCCL profile; loaded lazily,
    only when some output exists already."""
    from astra_core.system.input_files import system_named_files

    for key, path in system_named_files(system):
        if key.endswith("-custom") == custom:
            yield path


def _backend_files(backend: str | None, backend_config: str | None) -> dict[str, Any]:
    """The files the backend writes under --backend-config (ns3's monitor tables), by label
    (:meth:`~astra_core.plugins.BackendInfo.output_files`)."""
    if backend_config is None:
        return {}
    from astra_core.plugins import backend_registry

    return backend_registry().get(backend).output_files(backend_config)


def _check_outputs(
    files: dict[str, str | None],
    plots_dir: str | None,
    inputs: Mapping[str, Any],
    backend_files: Mapping[str, Any],
) -> None:
    """Raise ConfigError when an output file or the plot directory cannot be written, when
    two outputs (the backend's ``backend_files`` among them) name one file, or when an
    output is one of the ``inputs``."""
    from astra_core.outputs import check_distinct, check_not_input, check_output_dir, check_output_file

    for option, path in files.items():
        if path is not None:
            check_output_file(path, option)
    paths: dict[str, str | os.PathLike | None] = dict(files)
    if plots_dir is not None:
        from astra_core.report.plots import PLOT_FILES

        directory = check_output_dir(plots_dir, "--plots")
        for name in PLOT_FILES:
            paths[f"--plots ({name})"] = check_output_file(directory / name, "--plots")
    paths.update(backend_files)
    check_distinct(paths)
    check_not_input(paths, inputs)


def _write_outputs(result, console, json_path, timeline, csv_path, parquet_path, plots_dir) -> None:
    """Write every requested output file and say where.

    The per-collective table is built first: a time it cannot hold (past int64 ns, see
    :func:`astra_core.outputs.whole_ns_column`) is one error line before any file is written.
    """
    from astra_core.errors import AstraError, ConfigError
    from astra_core.outputs import write_text

    tables = [(path, kind) for path, kind in ((csv_path, "csv"), (parquet_path, "parquet")) if path]
    frame = None
    if tables:
        from astra_core.report.frames import collective_frame

        try:
            frame = collective_frame(result)
        except AstraError as exc:
            options = " and ".join(f"--{kind}" for _, kind in tables)
            raise ConfigError(
                f"{options}: {exc}; nothing was written (--json keeps such times exactly)"
            ) from None
    if json_path:
        write_text(json_path, json.dumps(result.to_dict(), indent=1), "--json")
    if timeline:
        from astra_core.report.timeline import write_timeline

        write_timeline(result, timeline)
    for path, kind in tables:
        from astra_core.report.frames import write_frame

        write_frame(frame, path, kind, f"--{kind}")
    if plots_dir:
        for png in result.write_plots(plots_dir):
            console.print(f"wrote {png}")


@click.command()
def backends() -> None:
    """List every registered network backend and whether it can run here."""
    from astra_core.plugins import backend_registry

    registry = backend_registry()
    for name, usable, text in registry.availability():
        mark = "usable" if usable else "unavailable"
        default = " (default)" if name == registry.default else ""
        click.echo(f"{name}{default}: {mark} — {text}")
