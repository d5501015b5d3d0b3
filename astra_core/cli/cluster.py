"""``astra cluster SPEC.yaml``: several jobs on one network (:mod:`astra_core.cluster`)."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from astra_core.cli.stopwatch import Stopwatch
from astra_core.outputs import any_stdout


@click.command()
@click.argument("spec", type=click.Path())
@click.option(
    "--json", "json_path", type=click.Path(), help="write per-job and per-link results as JSON ('-': stdout)"
)
@click.option(
    "--plots",
    "plots_dir",
    type=click.Path(),
    help="write jobs.png (iterations over time, together and alone) and links.png (bytes by job) here",
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="simulate every job alone again, even where an earlier call kept that run "
    "($XDG_CACHE_HOME/astra/cluster)",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=None,
    help="simulate the jobs alone beside the run of all jobs, in this many processes in all "
    "[default: one per CPU; 1: one run after the other]",
)
def cluster(spec, json_path, plots_dir, no_cache, processes) -> None:
    """Run the jobs of SPEC (a cluster spec, YAML) together on one network, then each alone
    on the same NPUs (or read that run from an earlier call with the same inputs), and
    print per job its iteration times, completion time (JCT) and slowdown.

    The spec names the network (network.yml or a --topology file with dims), the
    backend, a system.json and the jobs: each a trace prefix with its comm groups,
    dims, placement (packed, spread, rail-aligned, random or an NPU list), start
    time and iterations. Jobs share links on backends that model sharing (flow,
    ns3, garnetlike, analytical-congestion); elsewhere they cannot slow each other,
    and the run says so.
    """
    from astra_core.cluster import simulate_cluster
    from astra_core.cluster.spec import load_cluster_spec
    from astra_core.outputs import write_text

    watch = Stopwatch()
    loaded = load_cluster_spec(spec)
    _check_outputs(spec, loaded, json_path, plots_dir)
    watch.start_simulation()
    result = simulate_cluster(
        loaded,
        on_run=lambda what: click.echo(f"simulating {what}", err=True),
        cache=not no_cache,
        processes=processes,
    )
    watch.end_simulation()
    console = Console(stderr=any_stdout([json_path]))
    console.print(_job_table(result, spec))
    if result.note:
        console.print(f"note: {result.note}", highlight=False)
    if json_path:
        write_text(json_path, json.dumps(result.to_dict(), indent=1), "--json")
    if plots_dir:
        from astra_core.cluster.plots import write_cluster_plots

        for path in write_cluster_plots(result, plots_dir):
            console.print(f"--plots: wrote {path}", highlight=False)
    console.print(f"{watch.line()} (simulated: together and each job alone)", highlight=False, soft_wrap=True)


def _check_outputs(spec, loaded, json_path, plots_dir) -> None:
    """Raise ConfigError when an output cannot be written, when two name one file (``--json``
    onto a plot), or when one is an input: the spec or a file it names
    (:func:`~astra_core.cluster.spec.spec_input_files`)."""
    from astra_core.cluster.plots import CLUSTER_PLOT_FILES
    from astra_core.cluster.spec import spec_input_files
    from astra_core.outputs import check_distinct, check_not_input, check_output_dir, check_output_file

    paths = {}
    if json_path:
        paths["--json"] = check_output_file(json_path, "--json")
    if plots_dir:
        directory = check_output_dir(plots_dir, "--plots")
        for name in CLUSTER_PLOT_FILES:
            paths[f"--plots ({name})"] = check_output_file(directory / name, "--plots")
    check_distinct(paths)
    check_not_input(paths, {"SPEC": spec, **spec_input_files(loaded)})


def _job_table(result, spec) -> Table:
    table = Table(title=f"astra cluster — {spec} on backend {result.backend}")
    for name in ("job", "NPUs", "iterations (ms)", "alone (ms)", "JCT (ms)", "slowdown"):
        table.add_column(name, justify="left" if name == "job" else "right")
    for job in result.jobs:
        npus = f"{len(job.npus)}: {job.npus[0]}..{job.npus[-1]}" if len(job.npus) > 1 else str(job.npus[0])
        table.add_row(
            job.name,
            npus,
            ", ".join(f"{t / 1e6:,.3f}" for t in job.iteration_ns),
            ", ".join(f"{t / 1e6:,.3f}" for t in job.alone_iteration_ns),
            f"{job.jct_ns / 1e6:,.3f}",
            f"{job.slowdown:.3f}",
        )
    return table
