"""PNG plots of a cluster run (``astra cluster --plots DIR``), drawn with matplotlib.

* ``jobs.png``: per job, its iterations as bars over simulated time, run with the
  others (upper half of its row) and alone on the same NPUs (lower half), each
  job in its own colour; the label gives its slowdown.
* ``links.png``: the links that carried the most bytes (up to
  :data:`MAX_PLOTTED_LINKS`), each a bar of its bytes stacked by job in the jobs'
  colours (each job's bytes are those of its run alone, the same routes as
  together; :mod:`astra_core.cluster.run`), busiest first; the links of a faulty
  cable hatched and labelled in red as the run's links.png marks them, the cables
  down for the whole run named in the title. Only for backends that keep link
  statistics.
"""

from __future__ import annotations

import os
from pathlib import Path

from astra_core.report.links import link_faults
from astra_core.report.plots import FAULT_MARKS, pyplot, save_figure, time_unit

__all__ = ["MAX_PLOTTED_LINKS", "CLUSTER_PLOT_FILES", "write_cluster_plots"]

#: The files :func:`write_cluster_plots` may write into its directory.
CLUSTER_PLOT_FILES = ("jobs.png", "links.png")

#: The busiest links links.png shows.
MAX_PLOTTED_LINKS = 48


def _colors(count: int) -> list:
    cmap = pyplot().get_cmap("tab20" if count > 10 else "tab10")
    return [cmap(i % cmap.N) for i in range(count)]


def jobs_figure(result):
    """Each job's iterations over time, together and alone (a matplotlib Figure)."""
    plt = pyplot()
    jobs = result.jobs
    end = max(max(j.end_ns, j.alone_end_ns) for j in jobs)
    divisor, unit = time_unit(end)
    fig, ax = plt.subplots(figsize=(11, max(2.6, 0.5 * len(jobs) + 1.6)), layout="constrained")
    for row, (job, color) in enumerate(zip(jobs, _colors(len(jobs)))):
        for times, offset, alpha in ((job.iteration_ns, -0.4, 1.0), (job.alone_iteration_ns, 0.0, 0.45)):
            bars, start = [], job.start_ns
            for t in times:
                bars.append((start / divisor, t / divisor))
                start += t
            ax.broken_barh(bars, (row + offset, 0.38), facecolors=color, edgecolors="white", alpha=alpha)
    ax.set_yticks(range(len(jobs)))
    ax.set_yticklabels([f"{j.name} (x{j.slowdown:.2f})" for j in jobs], fontsize=8 if len(jobs) > 16 else 10)
    ax.set_ylim(len(jobs) - 0.5, -0.5)
    ax.set_xlim(0, end / divisor if end else 1)
    ax.set_xlabel(f"simulated time ({unit}); each bar an iteration")
    ax.set_title(f"Jobs on backend {result.backend}: together (upper) and alone on the same NPUs (lower)")
    return fig


def job_links_figure(result):
    """The busiest links' bytes stacked by job (a matplotlib Figure), or None without
    link statistics."""
    links = result.report.links
    jobs = [j for j in result.jobs if j.link_bytes is not None]
    if links is None or not jobs:
        return None
    plt = pyplot()
    busiest = sorted(range(len(links.link_bytes)), key=lambda i: -links.link_bytes[i])[:MAX_PLOTTED_LINKS]
    busiest = [i for i in busiest if links.link_bytes[i]]
    topo = links.topology
    fig, ax = plt.subplots(figsize=(9, max(3.0, 0.22 * len(busiest) + 1.8)), layout="constrained")
    left = [0.0] * len(busiest)
    for job, color in zip(jobs, _colors(len(result.jobs))):
        widths = [job.link_bytes[i] / 1e6 for i in busiest]
        ax.barh(range(len(busiest)), widths, left=left, color=color, label=job.name, height=0.8)
        left = [a + b for a, b in zip(left, widths)]
    marks, gone = link_faults(result.report)
    pairs = [(topo.link_src[i], topo.link_dst[i]) for i in busiest]
    for mark, (hatch, label) in FAULT_MARKS.items():
        hit = [row for row, pair in enumerate(pairs) if marks.get(pair) == mark]
        if hit:
            ax.barh(hit, [left[row] for row in hit], fill=False, hatch=hatch, edgecolor="black", height=0.8)
            ax.barh([], [], fill=False, hatch=hatch, edgecolor="black", label=label)  # legend entry
    ax.set_yticks(range(len(busiest)))
    ax.set_yticklabels([f"{a}→{b}" for a, b in pairs], fontsize=7)
    for pair, tick in zip(pairs, ax.get_yticklabels()):
        if pair in marks:
            tick.set_color("tab:red")
    ax.set_ylim(len(busiest) - 0.5, -0.5)
    ax.set_xlabel("MB that crossed the link (each job's from its run alone: the same routes)")
    down = "; down all run (carried nothing): " + ", ".join(f"{a}↔{b}" for a, b in gone) if gone else ""
    ax.set_title(f"The {len(busiest)} busiest links, bytes by job, busiest first{down}")
    fig.legend(loc="outside lower center", ncol=min(len(jobs) + len(marks), 6), frameon=False, fontsize=8)
    return fig


def write_cluster_plots(result, directory: str | os.PathLike) -> list[Path]:
    """Write jobs.png (and links.png) into ``directory`` (created); their paths."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    written = [save_figure(jobs_figure(result), folder / "jobs.png")]
    figure = job_links_figure(result)
    if figure is not None:
        written.append(save_figure(figure, folder / "links.png"))
    return written
