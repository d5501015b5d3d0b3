"""PNG plots of a run (``astra run --plots DIR``), drawn with matplotlib's Agg backend.

* ``breakdown.png``: per rank, a stacked bar of compute, overlapped
  communication, exposed communication and idle time (the disjoint parts of
  :mod:`astra_core.report.breakdown`, adding up to the rank's finish time).
  Runs with more than :data:`MAX_BARS` ranks show groups of consecutive ranks
  (their mean).
* ``timeline.png``: per rank, when compute ran (upper half of its row) and
  when communication was in flight (lower half); up to :data:`MAX_TIMELINE_RANKS`
  ranks, evenly spaced, for larger runs.
* ``links.png``: utilization (busy time / step time) of every directed link,
  coloured by link kind, for backends that keep link statistics
  (:mod:`astra_core.report.links`); one bar per link up to
  :data:`MAX_LINK_BARS` links, the sorted utilization curve beyond.
"""

from __future__ import annotations

import os
from pathlib import Path

from astra_core.outputs import atomic_output, check_output_dir, check_output_file
from astra_core.report.breakdown import breakdowns, busy_intervals, rank_tracks
from astra_core.report.links import link_stats
from astra_core.report.results import RunResult

#: The files :func:`write_plots` may write into its directory.
PLOT_FILES = ("breakdown.png", "timeline.png", "links.png")
MAX_BARS = 64
MAX_TIMELINE_RANKS = 32
MAX_LINK_BARS = 256
COLORS = {
    "compute": "tab:blue",
    "overlapped": "tab:cyan",
    "exposed": "tab:red",
    "bubble": "tab:orange",
    "idle": "lightgray",
}
LINK_COLORS = {
    "npu-switch": "tab:blue",
    "switch-npu": "tab:green",
    "switch-switch": "tab:orange",
    "npu-npu": "tab:purple",
}


def time_unit(ns: float) -> tuple[float, str]:
    """(divisor, name) that shows ``ns`` as a number below 1000: ns, µs, ms or s."""
    for divisor, name in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if ns >= divisor:
            return divisor, name
    return 1.0, "ns"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    try:
        with atomic_output(path, "plot") as temporary:
            fig.savefig(temporary, dpi=110, bbox_inches="tight", format="png")
    finally:
        _pyplot().close(fig)
    return path


def bar_groups(parts: list) -> tuple[list[list], list[str]]:
    """Ranks per bar and bar labels: one rank each, or at most MAX_BARS runs of consecutive ranks."""
    if len(parts) <= MAX_BARS:
        return [[b] for b in parts], [str(b.rank) for b in parts]
    size = -(-len(parts) // MAX_BARS)
    groups = [parts[i : i + size] for i in range(0, len(parts), size)]
    return groups, [f"{g[0].rank}-{g[-1].rank}" for g in groups]


def plot_breakdown(result: RunResult, path: str | os.PathLike) -> Path:
    """Per-rank stacked bars of compute / overlapped comm / exposed comm / pipeline
    point-to-point waits / idle; the legend gives each part's mean over the ranks."""
    plt = _pyplot()
    parts = breakdowns(result)
    groups, labels = bar_groups(parts)

    def mean(group, attr):
        return sum(getattr(b, attr) for b in group) / len(group)

    divisor, unit = time_unit(result.step_ns)
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.28 * len(groups) + 1.5)))
    left = [0.0] * len(groups)
    ys = range(len(groups))
    for attr, key, label in (
        ("compute_only_ns", "compute", "compute"),
        ("overlapped_comm_ns", "overlapped", "overlapped communication"),
        ("comm_only_ns", "exposed", "exposed communication"),
        ("p2p_only_ns", "bubble", "pipeline send/recv wait"),
        ("idle_ns", "idle", "idle"),
    ):
        widths = [mean(g, attr) / divisor for g in groups]
        overall = mean(parts, attr) / divisor
        ax.barh(ys, widths, left=left, color=COLORS[key], label=f"{label} {overall:,.3g} {unit}", height=0.8)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_yticks(list(ys))
    ax.set_yticklabels(labels, fontsize=8 if len(groups) > 16 else 10)
    ax.set_ylim(len(groups) - 0.5, -0.5)
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("rank" if len(parts) <= MAX_BARS else "ranks (mean of each group)")
    ax.set_title(
        f"Where the time goes — {len(parts)} NPUs, backend {result.backend}, "
        f"step {result.step_ns / divisor:,.3f} {unit}",
        pad=24,
    )
    ax.legend(
        loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False, borderaxespad=0.2, fontsize=8
    )
    return _save(fig, Path(path))


def plot_timeline(result: RunResult, path: str | os.PathLike) -> Path:
    """When each rank computed and communicated, one row per rank."""
    plt = _pyplot()
    tracks = rank_tracks(result)
    if len(tracks) > MAX_TIMELINE_RANKS:
        step = (len(tracks) - 1) / (MAX_TIMELINE_RANKS - 1)
        tracks = [tracks[round(i * step)] for i in range(MAX_TIMELINE_RANKS)]
    divisor, unit = time_unit(result.step_ns)
    fig, ax = plt.subplots(figsize=(11, max(2.5, 0.4 * len(tracks) + 1.2)))
    for row, trace in enumerate(tracks):
        compute, comm = busy_intervals(trace.records, trace.nodes)
        # An edge of the bar's own colour keeps intervals narrower than a pixel visible
        # (a ResNet-50 step's all-reduces are microseconds in a one-second step).
        ax.broken_barh(
            [(s / divisor, (e - s) / divisor) for s, e in compute],
            (row - 0.4, 0.4),
            facecolors=COLORS["compute"],
            edgecolors=COLORS["compute"],
            linewidth=0.6,
            label="compute" if row == 0 else None,
        )
        ax.broken_barh(
            [(s / divisor, (e - s) / divisor) for s, e in comm],
            (row, 0.4),
            facecolors=COLORS["exposed"],
            edgecolors=COLORS["exposed"],
            linewidth=0.6,
            label="communication" if row == 0 else None,
        )
    ax.set_yticks(range(len(tracks)))
    ax.set_yticklabels([str(t.rank) for t in tracks], fontsize=8 if len(tracks) > 16 else 10)
    ax.set_ylim(len(tracks) - 0.5, -0.5)
    ax.set_xlim(0, result.step_ns / divisor if result.step_ns else 1)
    ax.set_xlabel(f"simulated time ({unit})")
    ax.set_ylabel("rank")
    shown = "" if len(tracks) == len(result.ranks) else f" ({len(tracks)} of {len(result.ranks)} ranks)"
    ax.set_title(f"Timeline — backend {result.backend}{shown}", pad=24)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False, borderaxespad=0.2)
    return _save(fig, Path(path))


def plot_links(result: RunResult, path: str | os.PathLike) -> Path | None:
    """Utilization of every link (None, and no file, if the backend keeps no link stats)."""
    stats = link_stats(result)
    if not stats:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11, 4))
    kinds = [k for k in LINK_COLORS if any(s.kind == k for s in stats)]
    if len(stats) <= MAX_LINK_BARS:
        for kind in kinds:
            mine = [s for s in stats if s.kind == kind]
            ax.bar(
                [s.link for s in mine],
                [100 * s.utilization for s in mine],
                width=0.9,
                color=LINK_COLORS[kind],
                label=kind,
            )
        ax.set_xlabel("link id")
    else:
        for kind in kinds:
            values = sorted((100 * s.utilization for s in stats if s.kind == kind), reverse=True)
            ax.plot(range(len(values)), values, color=LINK_COLORS[kind], label=kind)
        ax.set_xlabel("links of a kind, busiest first")
    busiest = max(stats, key=lambda s: s.utilization)
    ax.set_ylabel("utilization (% of step time busy)")
    ax.set_title(
        f"Link utilization — backend {result.backend}, {len(stats)} links; busiest: "
        f"{busiest.src}→{busiest.dst} at {100 * busiest.utilization:.1f}%"
    )
    ax.legend(frameon=False)
    return _save(fig, Path(path))


def write_plots(result: RunResult, directory: str | os.PathLike) -> list[Path]:
    """Write breakdown.png, timeline.png and (if the backend has link stats) links.png.

    ``directory`` is created on demand; each file is written atomically.
    Raises ConfigError naming the path when it cannot be written.
    """
    directory = check_output_dir(directory, "plots")
    for name in PLOT_FILES:
        check_output_file(directory / name, "plots")
    written = [
        plot_breakdown(result, directory / "breakdown.png"),
        plot_timeline(result, directory / "timeline.png"),
    ]
    links = plot_links(result, directory / "links.png")
    if links is not None:
        written.append(links)
    return written
