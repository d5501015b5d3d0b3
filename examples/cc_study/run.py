"""Congestion-control study on the ns3 backend: incast and all-to-all under every congestion control.

    .venv/bin/python examples/cc_study/run.py [--output DIR]

Two traffic patterns, each under every congestion control of the ns3
backend (none, DCQCN, HPCC, HPCC-PINT, TIMELY, DCTCP; 100 Gbps links, 1 us
per link, PFC on, defaults otherwise):

* incast: 8 NPUs each send 12.5 MB to NPU 0 through one switch;
* all-to-all: 16 NPUs of a 2:1 oversubscribed leaf-spine (4 leaves, 2 spines)
  each send 2 MB to every other NPU at once.

Writes to DIR (default ``cc_study_out``): per run the monitor tables
(``<pattern>_<cc>/*.csv``), ``summary.csv`` (completion time, mean FCT and
the spread of FCTs, peak and mean queue of the most loaded port, ECN marks,
CNPs, PFC pauses, drops), and two PNGs per pattern:
``<pattern>_queues.png`` (the most loaded queue over time) and
``<pattern>_throughput.png`` (per-message throughput over time).
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


def run(pattern: str, cc: str, out: Path) -> dict:
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
    return {
        "pattern": pattern,
        "cc": cc,
        "finish_us": finish_ns / 1e3,
        "mean_fct_us": messages.fct_ns.mean() / 1e3,
        "fct_spread": messages.fct_ns.max() / messages.fct_ns.min(),
        "peak_queue_kb": ports.max_queue_bytes.max() / 1e3,
        "mean_queue_kb": mean_queue / 1e3,
        "busiest_link": busiest,
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


def plot(pattern: str, runs: list[dict], out: Path) -> list[Path]:
    """Two PNGs in a grid of one panel per congestion control: the most loaded queue
    (its link is in each title) and per-message throughput, whose legend (the same
    messages in every panel) sits once to the right of the grid, off the data."""
    fig, axes, panels = grid(len(runs))
    for ax, r in zip(panels, runs):
        q = r["queues"]
        q = q[q.link == r["busiest_link"]]
        ax.step(q.time_ns / 1e3, q.bytes / 1e3, where="post", lw=0.9)
        ax.set_title(f"{r['cc']}: link {r['busiest_link']} (peak {r['peak_queue_kb']:.0f} KB)", fontsize=9)
    for ax in axes[-1]:
        ax.set_xlabel("time (us)")
    for ax in axes[:, 0]:
        ax.set_ylabel("queue (KB)")
    fig.suptitle(f"{pattern}: the most loaded egress queue")
    fig.tight_layout()
    queues_png = out / f"{pattern}_queues.png"
    fig.savefig(queues_png, dpi=110)
    plt.close(fig)

    fig, axes, panels = grid(len(runs))
    for ax, r in zip(panels, runs):
        s = r["samples"]
        shown = sorted(s.message.unique())[:8]
        for message in shown:
            m = s[s.message == message]
            gbps = m.delivered_bytes.diff(SMOOTH) * 8 / m.time_ns.diff(SMOOTH)
            ax.plot(m.time_ns / 1e3, gbps, lw=0.9, label=f"{int(m.src.iloc[0])}->{int(m.dst.iloc[0])}")
        ax.set_title(f"{r['cc']}: done at {r['finish_us']:.0f} us", fontsize=9)
    for ax in axes[-1]:
        ax.set_xlabel("time (us)")
    for ax in axes[:, 0]:
        ax.set_ylabel(f"Gbps ({MONITOR_US * SMOOTH} us window)")
    handles, labels = panels[0].get_legend_handles_labels()
    fig.suptitle(
        f"{pattern}: per-message throughput" + ("" if pattern == "incast" else " (first 8 messages)")
    )
    fig.tight_layout(rect=(0, 0, 0.88, 1))  # the right 12 % holds the legend
    fig.legend(handles, labels, title="message", loc="center left", bbox_to_anchor=(0.88, 0.5), fontsize=8)
    throughput_png = out / f"{pattern}_throughput.png"
    fig.savefig(throughput_png, dpi=110)
    plt.close(fig)
    return [queues_png, throughput_png]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="cc_study_out", help="directory for tables and PNGs")
    args = parser.parse_args()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    summary = []
    for pattern in PATTERNS:
        runs = [run(pattern, cc, out) for cc in MODES]
        for png in plot(pattern, runs, out):
            print(f"wrote {png}")
        summary += [{k: v for k, v in r.items() if k not in ("queues", "samples")} for r in runs]
    table = pd.DataFrame(summary)
    table.to_csv(out / "summary.csv", index=False)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.1f}"))


if __name__ == "__main__":
    main()
