"""Congestion-control study on the ns3 backend: incast and all-to-all under every congestion control.

    .venv/bin/python examples/cc_study/run.py [--output DIR]

Two traffic patterns, each under every congestion control of the ns3
backend (none, DCQCN, HPCC, HPCC-PINT, TIMELY, DCTCP; 100 Gbps links, 1 us
per link, PFC on, defaults otherwise):

* incast: 8 NPUs each send 12.5 MB to NPU 0 through one switch;
* all-to-all: 16 NPUs of a 2:1 oversubscribed leaf-spine (4 leaves, 2 spines)
  each send 2 MB to every other NPU at once.

Writes to DIR (default ``cc_study_out``): per run the monitor tables
(``<pattern>_<cc>/*.csv``), ``summary.csv`` (the congestion control's name
and ``cc`` value, completion time, mean FCT and the spread of FCTs, peak and
mean queue of the most loaded egress port, that port's link by its two ends
(``switch 9 -> NPU 0``) with the MB it sent and its mean load in % of its line
rate, ECN marks, CNPs, PFC pauses, drops), and two PNGs per pattern, one panel
per congestion control: ``<pattern>_queues.png`` (the most loaded queue over
time, its legend naming the algorithm) and ``<pattern>_throughput.png``
(per-message throughput over time, the algorithm in each panel's title).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from astra_core.backend import Topology  # noqa: E402
from astra_core.topology.generators import leaf_spine  # noqa: E402
from astra_core.topology.logical import logical_dims  # noqa: E402
from astra_core.topology.physical import PhysicalTopology  # noqa: E402
from astra_ns3.factory import create  # noqa: E402

MODES = ("none", "dcqcn", "hpcc", "hpcc-pint", "timely", "dctcp")
#: What tables and plots call each mode (the ``cc`` value of the backend config).
CC_NAMES = {
    "none": "no CC (line rate, PFC)",
    "dcqcn": "DCQCN",
    "hpcc": "HPCC",
    "hpcc-pint": "HPCC-PINT",
    "timely": "TIMELY",
    "dctcp": "DCTCP",
}
MONITOR_US = 5
#: Throughput plotted over this many monitor samples (50 us: 5 us holds only ~15 packets).
SMOOTH = 10


def star(hosts: int, bytes_per_ns: float = 12.5, latency_ns: float = 1000.0) -> PhysicalTopology:
    links = []
    for h in range(hosts):
        links += [(h, hosts, bytes_per_ns, latency_ns), (hosts, h, bytes_per_ns, latency_ns)]
    return PhysicalTopology(hosts + 1, [hosts], links, source="star")


def incast(backend) -> None:
    for src in range(1, 9):
        backend.send(src, 0, 12_500_000, lambda _: None, tag=src)


def all_to_all(backend) -> None:
    n = backend.physical.npus_count
    for src in range(n):
        for dst in range(n):
            if src != dst:
                backend.send(src, dst, 2_000_000, lambda _: None, tag=0)


PATTERNS = {
    "incast": (lambda: star(9), incast),
    "all_to_all": (lambda: leaf_spine(16, 4, 2, oversubscription=2.0), all_to_all),
}


def node_name(physical: PhysicalTopology, node: int) -> str:
    """``switch N`` or ``NPU N`` (node ids as in the topology)."""
    return f"{'switch' if node in physical.switches else 'NPU'} {node}"


def link_name(physical: PhysicalTopology, link: int) -> str:
    """Directed link ``link`` by its two ends: ``switch 9 -> NPU 0``."""
    return f"{node_name(physical, physical.link_src[link])} -> {node_name(physical, physical.link_dst[link])}"


def run(pattern: str, cc: str, out: Path) -> dict:
    """One run of ``pattern`` under congestion control ``cc``: the summary's numbers, the
    most loaded egress port (the highest peak queue) by its two ends, with the MB it sent
    and its mean load (% of its line rate over the run), and the monitor's tables."""
    make_topology, traffic = PATTERNS[pattern]
    physical = make_topology()
    tables = out / f"{pattern}_{cc}"
    backend = create(
        Topology(logical_dims(physical), physical),
        {"cc": cc, "monitor": {"interval_us": MONITOR_US, "output_dir": str(tables)}},
    )
    traffic(backend)
    backend.run()
    results = backend.results
    messages = results.messages()
    ports = results.ports()
    busiest = int(ports.max_queue_bytes.idxmax())
    stats = backend.stats
    queues = results.queues()
    finish_ns = messages.finish_ns.max()
    # Samples every MONITOR_US; a port is absent from a sample while its queue is empty.
    busy = queues[queues.link == busiest]
    mean_queue = busy.bytes.sum() / max(1.0, finish_ns / (MONITOR_US * 1e3))
    port = ports.loc[busiest]
    return {
        "pattern": pattern,
        "congestion_control": CC_NAMES[cc],
        "cc": cc,
        "finish_us": finish_ns / 1e3,
        "mean_fct_us": messages.fct_ns.mean() / 1e3,
        "fct_spread": messages.fct_ns.max() / messages.fct_ns.min(),
        "peak_queue_kb": ports.max_queue_bytes.max() / 1e3,
        "mean_queue_kb": mean_queue / 1e3,
        "busiest_link": link_name(physical, busiest),
        "busiest_link_sent_mb": port.tx_bytes / 1e6,
        "busiest_link_load_pct": 100 * port.tx_bytes * 8 / (port.gbps * finish_ns),
        "link_id": busiest,
        "ecn_marks": stats["ecn_marks"],
        "cnps": stats["cnps"],
        "pfc_pauses": stats["pfc_pauses"],
        "drops": stats["drops"],
        "queues": queues,
        "samples": results.flow_samples(),
    }


#: Panels per row of the figures: six congestion controls make a 2 x 3 grid.
COLUMNS = 3


def grid(count: int):
    """A figure with one panel per run, COLUMNS to a row, sharing both axes; unused
    panels are hidden. Returns the figure and the panels in reading order."""
    rows = -(-count // COLUMNS)
    fig, axes = plt.subplots(
        rows, COLUMNS, figsize=(4 * COLUMNS, 3 * rows), sharex=True, sharey=True, squeeze=False
    )
    panels = list(axes.flat)
    for ax in panels[count:]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.tick_params(labelleft=True)
    return fig, axes, panels[:count]


def queue_figure(pattern: str, runs: list[dict]):
    """The most loaded egress queue of each run over time, one panel per congestion
    control: its line in the legend under the algorithm's name, its link by its two
    ends in the title with its peak queue and its load."""
    fig, axes, panels = grid(len(runs))
    for ax, r in zip(panels, runs):
        q = r["queues"]
        q = q[q.link == r["link_id"]]
        ax.step(q.time_ns / 1e3, q.bytes / 1e3, where="post", lw=0.9, label=r["congestion_control"])
        ax.legend(loc="best", fontsize=8, frameon=False)
        ax.set_title(
            f"{r['busiest_link']}: peak {r['peak_queue_kb']:.0f} KB, {r['busiest_link_load_pct']:.0f} % load",
            fontsize=9,
        )
    for ax in axes[-1]:
        ax.set_xlabel("time (us)")
    for ax in axes[:, 0]:
        ax.set_ylabel("queue (KB)")
    fig.suptitle(f"{pattern}: the most loaded egress queue under each congestion control")
    fig.tight_layout()
    return fig


def throughput_figure(pattern: str, runs: list[dict]):
    """Per-message throughput of each run, one panel per congestion control (named in
    its title); the legend of the messages (the same in every panel) sits once to the
    right of the grid, off the data."""
    fig, axes, panels = grid(len(runs))
    for ax, r in zip(panels, runs):
        s = r["samples"]
        shown = sorted(s.message.unique())[:8]
        for message in shown:
            m = s[s.message == message]
            gbps = m.delivered_bytes.diff(SMOOTH) * 8 / m.time_ns.diff(SMOOTH)
            ax.plot(
                m.time_ns / 1e3, gbps, lw=0.9, label=f"NPU {int(m.src.iloc[0])} -> NPU {int(m.dst.iloc[0])}"
            )
        ax.set_title(f"{r['congestion_control']}: done at {r['finish_us']:.0f} us", fontsize=9)
    for ax in axes[-1]:
        ax.set_xlabel("time (us)")
    for ax in axes[:, 0]:
        ax.set_ylabel(f"Gbps ({MONITOR_US * SMOOTH} us window)")
    handles, labels = panels[0].get_legend_handles_labels()
    fig.suptitle(
        f"{pattern}: per-message throughput under each congestion control"
        + ("" if pattern == "incast" else " (first 8 messages)")
    )
    fig.tight_layout(rect=(0, 0, 0.85, 1))  # the right 15 % holds the legend
    fig.legend(handles, labels, title="message", loc="center left", bbox_to_anchor=(0.85, 0.5), fontsize=8)
    return fig


def plot(pattern: str, runs: list[dict], out: Path) -> list[Path]:
    """Write :func:`queue_figure` and :func:`throughput_figure` as PNGs; their paths."""
    paths = []
    for name, figure in (("queues", queue_figure), ("throughput", throughput_figure)):
        fig = figure(pattern, runs)
        paths.append(out / f"{pattern}_{name}.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths


def summary_table(runs: list[dict]) -> pd.DataFrame:
    """One row per run: the numbers of :func:`run` without its tables and link id."""
    return pd.DataFrame(
        [{k: v for k, v in r.items() if k not in ("queues", "samples", "link_id")} for r in runs]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="cc_study_out", help="directory for tables and PNGs")
    args = parser.parse_args()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for pattern in PATTERNS:
        mine = [run(pattern, cc, out) for cc in MODES]
        for png in plot(pattern, mine, out):
            print(f"wrote {png}")
        runs += mine
    table = summary_table(runs)
    table.to_csv(out / "summary.csv", index=False)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.1f}"))


if __name__ == "__main__":
    main()
