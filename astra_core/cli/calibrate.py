"""``astra calibrate nccl LOG...``: fit a calibrated NCCL profile to nccl-tests logs
(see :mod:`astra_core.calibrate.nccl_fit`)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from astra_core.cli.common import POSITIVE


@click.group()
def calibrate() -> None:
    """Fit astra's models to your own measurements."""


def _read(paths, collective, ranks, nodes) -> list:
    from astra_core.calibrate.nccl_tests import read_logs

    return [log for path in paths for log in read_logs(path, collective, ranks, nodes)]


@calibrate.command("nccl")
@click.argument("logs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--output", "-o", required=True, help="the profile to write (JSON; '-': standard output)")
@click.option("--system", "system_path", required=True, help="system.json of the machine (its nccl section)")
@click.option("--network", "network_path", required=True, help="network.yml of the machine")
@click.option(
    "--check",
    "check_paths",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="a log to predict with the profile but not fit on (repeatable)",
)
@click.option(
    "--collective",
    type=click.Choice(["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv"]),
    help="read only this test of a log that holds several; the test of a log that does not say",
)
@click.option("--ranks", type=POSITIVE, help="GPUs of the run, where a log has no rank lines")
@click.option("--nodes", type=POSITIVE, help="hosts of the run, where a log has no rank lines")
@click.option(
    "--prior",
    type=click.FloatRange(min=0.0),
    default=0.1,
    show_default=True,
    help="pull of each parameter towards NCCL's own value",
)
def calibrate_nccl(
    logs, output, system_path, network_path, check_paths, collective, ranks, nodes, prior
) -> None:
    """Fit an NCCL profile to LOGS (nccl-tests output: all_reduce_perf,
    all_gather_perf, reduce_scatter_perf, alltoall_perf, sendrecv_perf) taken on
    the machine that --system and --network describe; use it with
    "nccl": {"profile": "PROFILE"} in system.json. Prints each log's geometric-mean
    error before and after, and the same for the --check logs; warns (one line on
    stderr) of a parameter the fit left on its bound.
    """
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        warnings.simplefilter("always")  # every fit's warning, however many in one process
        _calibrate(logs, output, system_path, network_path, check_paths, collective, ranks, nodes, prior)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    click.echo(f"warning: {message}", err=True)


def _calibrate(logs, output, system_path, network_path, check_paths, collective, ranks, nodes, prior) -> None:
    from astra_core.calibrate.nccl_fit import compare, fit
    from astra_core.config.network import load_network
    from astra_core.config.system import load_system
    from astra_core.outputs import check_not_input, check_output_file, write_text

    check_output_file(output, "--output")
    inputs = {"LOG": logs, "--system": system_path, "--network": network_path, "--check": check_paths}
    check_not_input({"--output": output}, inputs)  # the profile named by --system may be refitted
    system = load_system(system_path)
    network = load_network(network_path)
    fitted = _read(logs, collective, ranks, nodes)
    result = fit(fitted, system, network, prior=prior)
    console = Console(stderr=output == "-")
    table = Table("log", "collective", "GPUs", "nodes", "rows", "error before", "error after", "")
    for log in fitted:
        table.add_row(*_cells(log, result), "fitted")
    checks = _read(check_paths, collective, ranks, nodes)
    if checks:
        checked = compare(checks, system, network, result.profile)
        for log in checks:
            table.add_row(*_cells(log, checked), "check")
    console.print(table)
    write_text(output, json.dumps(result.profile.to_json(), indent=2) + "\n", "--output")
    console.print(f"profile -> {output}")


def _cells(log, result) -> list[str]:
    return [
        Path(log.path).name,
        log.collective,
        str(log.ranks),
        str(log.nodes),
        str(len(log.points)),
        f"{result.geomean_error(log.label, after=False):.1%}",
        f"{result.geomean_error(log.label):.1%}",
    ]
