"""``astra topology``: generate, convert and look at physical topologies.

Each generator prints a one-line summary and can write the ns-3 topology file
(``--output``) and a picture (``--plot``); ``show FILE`` does the same for an
existing file.
"""

from __future__ import annotations

import click

from astra_core.config.dims import parse_dims
from astra_core.topology import generators
from astra_core.topology.physical import PhysicalTopology


def summary(topology: PhysicalTopology) -> str:
    """One line: node counts, cables, NPU injection and total link capacity (Gbps, per direction)."""
    gbps = [bw * 8 for bw in topology.link_bandwidth]
    hosts = set(topology.hosts)
    injection = sum(g for g, src in zip(gbps, topology.link_src) if src in hosts)
    return (
        f"{topology.nodes_count} nodes: {topology.npus_count} NPUs, {len(topology.switches)} switches; "
        f"{topology.links_count // 2} cables ({topology.links_count} directed links); "
        f"NPU injection {injection:g} Gbps, total link capacity {sum(gbps):g} Gbps"
    )


def _finish(
    topology: PhysicalTopology, output: str | None, plot: str | None, grid: list[int] | None = None
) -> None:
    from astra_core.outputs import any_stdout
    from astra_core.topology.ns3_format import write_ns3_topology

    err = any_stdout((output, plot))  # "-": the file alone on standard output, messages on stderr
    click.echo(f"{topology.source}: {summary(topology)}", err=err)
    if output:
        write_ns3_topology(topology, output)
        click.echo(f"wrote {output}", err=err)
    if plot:
        from astra_core.topology.plot import plot_topology

        plot_topology(topology, plot, grid=grid)
        click.echo(f"wrote {plot}", err=err)


def _outputs(command):
    command = click.option("--plot", type=click.Path(), help="draw the topology to a PNG ('-': stdout)")(
        command
    )
    return click.option(
        "--output", "-o", type=click.Path(), help="write the ns-3 topology file ('-': stdout)"
    )(command)


def _run(build, output, plot, grid=None, inputs=None) -> None:
    """Check the output paths (not one of ``inputs``, ``{"FILE": path}``), build the topology,
    summarize and write it; AstraError -> one line."""
    from astra_core.outputs import check_distinct, check_not_input, check_output_file

    for option, path in (("--output", output), ("--plot", plot)):
        if path is not None:
            check_output_file(path, option)
    check_distinct({"--output": output, "--plot": plot})
    check_not_input({"--output": output, "--plot": plot}, inputs or {})
    if plot is not None:
        from astra_core.topology.plot import image_format

        image_format(plot)
    _finish(build(), output, plot, grid)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def topology() -> None:
    """Generate physical topologies (upstream's ns-3 file format) and show existing ones.

    Sizes are limited to 2^20 NPUs, 2^21 nodes and 2^22 directed links (about
    1.7 GB and 8 s to build); larger ones are refused at once with their estimate.
    """


@topology.command("fat-tree")
@click.option("--k", "k", type=int, required=True, help="switch radix (even): k^3/4 hosts")
@click.option(
    "--gbps", type=float, default=generators.DEFAULT_GBPS, show_default=True, help="every link, Gbps"
)
@click.option("--latency-ns", type=float, default=generators.DEFAULT_LATENCY_NS, show_default=True)
@_outputs
def fat_tree(k, gbps, latency_ns, output, plot) -> None:
    """A k-ary fat-tree (Al-Fares et al., SIGCOMM 2008)."""
    _run(lambda: generators.fat_tree(k, gbps, latency_ns), output, plot)


@topology.command("leaf-spine")
@click.option("--hosts", type=int, required=True)
@click.option("--leaves", type=int, required=True)
@click.option("--spines", type=int, required=True)
@click.option(
    "--oversubscription", type=float, default=1.0, show_default=True, help="leaf downlink / uplink capacity"
)
@click.option("--host-gbps", type=float, default=generators.DEFAULT_GBPS, show_default=True)
@click.option("--latency-ns", type=float, default=generators.DEFAULT_LATENCY_NS, show_default=True)
@_outputs
def leaf_spine(hosts, leaves, spines, oversubscription, host_gbps, latency_ns, output, plot) -> None:
    """A two-tier leaf-spine fabric."""
    _run(
        lambda: generators.leaf_spine(hosts, leaves, spines, oversubscription, host_gbps, latency_ns),
        output,
        plot,
    )


@topology.command("torus")
@click.option("--dims", required=True, help="e.g. 4x4 or 4x4x4")
@click.option(
    "--gbps", type=float, default=generators.DEFAULT_GBPS, show_default=True, help="every link, Gbps"
)
@click.option("--latency-ns", type=float, default=generators.DEFAULT_LATENCY_NS, show_default=True)
@_outputs
def torus(dims, gbps, latency_ns, output, plot) -> None:
    """A 2-D or 3-D torus of NPUs (no switches)."""
    sizes = parse_dims(dims, counts=(2, 3), example="4x4 or 4x4x4", count_rule="a torus here is 2-D or 3-D")
    _run(lambda: generators.torus(sizes, gbps, latency_ns), output, plot, grid=sizes)


@topology.command("gpu-cluster")
@click.option("--nodes", type=int, required=True, help="servers")
@click.option("--gpus", type=int, required=True, help="GPUs per server")
@click.option("--nvlink-gbps", type=float, default=generators.NVLINK4_GBPS, show_default=True)
@click.option("--nvlink-latency-ns", type=float, default=generators.NVLINK_LATENCY_NS, show_default=True)
@click.option("--nic-gbps", type=float, default=generators.NIC_GBPS, show_default=True)
@click.option("--nic-latency-ns", type=float, default=generators.DEFAULT_LATENCY_NS, show_default=True)
@click.option("--leaves", type=int, help="default: one per rail (GPUs per server)")
@click.option("--spines", type=int, help="default: as many as leaves")
@click.option("--spine-gbps", type=float, help="default: non-blocking")
@_outputs
def gpu_cluster(
    nodes,
    gpus,
    nvlink_gbps,
    nvlink_latency_ns,
    nic_gbps,
    nic_latency_ns,
    leaves,
    spines,
    spine_gbps,
    output,
    plot,
) -> None:
    """Servers with an NVSwitch each on a rail-optimized leaf-spine."""
    _run(
        lambda: generators.gpu_cluster(
            nodes, gpus, nvlink_gbps, nvlink_latency_ns, nic_gbps, nic_latency_ns, leaves, spines, spine_gbps
        ),
        output,
        plot,
    )


@topology.command("show")
@click.argument("file", type=click.Path())
@_outputs
def show(file, output, plot) -> None:
    """Summarize an ns-3 topology FILE (and rewrite or draw it)."""
    from astra_core.topology.ns3_format import read_ns3_topology

    _run(lambda: read_ns3_topology(file), output, plot, inputs={"FILE": file})
