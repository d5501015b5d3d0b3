"""PNG plots of a run (``astra run --plots DIR``), drawn with matplotlib's Agg backend.

* ``breakdown.png``: per rank, a stacked bar of the six disjoint parts of
  :mod:`astra_core.report.breakdown` (adding up to the rank's finish time);
  the legend gives each part's mean over the ranks, the very numbers (µs) of
  the terminal's breakdown table (:func:`~astra_core.report.table.breakdown_table`).
  Runs with more than :data:`MAX_BARS` ranks show groups of consecutive ranks
  (their mean).
* ``timeline.png``: per rank, when compute ran (upper half of its row) and,
  in the lower half, when its messages were in flight and when a
  communication node waited with nothing in flight; in larger runs than
  :data:`MAX_TIMELINE_RANKS` ranks, rank 0 and every k-th rank after it, the
  slowest (critical) rank and the fastest (:func:`~astra_core.report.breakdown.shown_ranks`;
  the title and the row labels say which).
* ``links.png``: utilization (busy time / step time, %) of every directed
  link, coloured by link kind, for backends that keep link statistics
  (:mod:`astra_core.report.links`); one bar per link (``src→dst``), busiest
  first, up to :data:`MAX_LINK_BARS` links, beyond that each kind's
  utilizations sorted busiest first (a curve per kind, each its own colour,
  line style and marker). The run's faulty cables
  (:attr:`~astra_core.results.RunResult.faults`) are marked: degraded ones
  hatched, ones down for a while cross-hatched, ones down for the whole run
  a red cross at 0; the legend names each mark.

Titles go above the axes and legends below them (constrained layout), so
neither covers the other.
"""

from __future__ import annotations

import os
from pathlib import Path

from astra_core import interval_sets as sets
from astra_core.outputs import atomic_output, check_output_dir, check_output_file
from astra_core.report.breakdown import (
    PART_LABELS,
    PARTS,
    activities,
    breakdown_unit,
    breakdowns,
    format_time,
    mean_parts,
    shown_ranks,
)
from astra_core.report.links import DEGRADED, DOWN_A_WHILE, LinkStat, link_faults, link_stats
from astra_core.results import RunResult

#: The files :func:`write_plots` may write into its directory.
PLOT_FILES = ("breakdown.png", "timeline.png", "links.png")
MAX_BARS = 64
MAX_TIMELINE_RANKS = 32
#: timeline.png closes gaps shorter than step time / this (about a pixel of its 11-inch axis)
TIMELINE_PIXELS = 2000
MAX_LINK_BARS = 256
#: Links up to which every bar gets its ``src→dst`` tick label.
MAX_LINK_LABELS = 48
COLORS = {
    "compute_only_ns": "tab:blue",
    "overlapped_comm_ns": "tab:cyan",
    "comm_only_ns": "tab:red",
    "collective_wait_ns": "tab:pink",
    "p2p_wait_ns": "tab:orange",
    "idle_ns": "lightgray",
}
LINK_COLORS = {
    "npu-switch": "tab:blue",
    "switch-npu": "tab:green",
    "switch-switch": "tab:orange",
    "npu-npu": "tab:purple",
}
#: Line style and marker of each kind's curve in links.png beyond MAX_LINK_BARS links.
KIND_STYLES = {
    "npu-switch": ("-", "o"),
    "switch-npu": ("--", "s"),
    "switch-switch": ("-.", "^"),
    "npu-npu": (":", "D"),
}
#: How links.png marks the links of a faulty cable: bar hatch and legend entry.
FAULT_MARKS = {
    DEGRADED: ("////", "cable degraded (bandwidth cut)"),
    DOWN_A_WHILE: ("xxxx", "cable down for part of the run"),
}
#: links.png's legend entry of the red crosses: cables down for the whole run.
GONE_LABEL = "cable down for the whole run (carried nothing)"


def time_unit(ns: float) -> tuple[float, str]:
    """(divisor, name) that shows ``ns`` as a number below 1000: ns, µs, ms or s."""
    for divisor, name in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if ns >= divisor:
            return divisor, name
    return 1.0, "ns"


def ordinal(n: int) -> str:
    """``n`` as an English ordinal: 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, 112th."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def pyplot():
    """matplotlib.pyplot on the Agg backend (imported on first use)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: Path) -> Path:
    """Write ``fig`` to ``path`` as PNG (atomically; through links and FIFOs) and close it."""
    try:
        with atomic_output(path, "plot") as temporary:
            fig.savefig(temporary, dpi=110, bbox_inches="tight", format="png")
    finally:
        pyplot().close(fig)
    return path


def bar_groups(parts: list) -> tuple[list[list], list[str]]:
    """Ranks per bar and bar labels: one rank each, or at most MAX_BARS runs of consecutive ranks."""
    if len(parts) <= MAX_BARS:
        return [[b] for b in parts], [str(b.rank) for b in parts]
    size = -(-len(parts) // MAX_BARS)
    groups = [parts[i : i + size] for i in range(0, len(parts), size)]
    return groups, [f"{g[0].rank}-{g[-1].rank}" for g in groups]


def legend_label(part: str, mean_ns: float, step_ns: float) -> str:
    """The legend entry of one part of ``breakdown.png``: its name and its mean over the
    ranks, as the breakdown table's ``mean`` row prints it (same unit, same digits)."""
    divisor, unit = breakdown_unit(step_ns)
    return f"{PART_LABELS[part]}: {format_time(mean_ns, divisor)} {unit}"


def plot_breakdown(result: RunResult, path: str | os.PathLike) -> Path:
    """Write :func:`breakdown_figure` to ``path`` (PNG)."""
    return save_figure(breakdown_figure(result), Path(path))


def breakdown_figure(result: RunResult):
    """Per-rank stacked bars of the six disjoint parts
    (:data:`~astra_core.report.breakdown.PARTS`); the legend gives each part's mean
    over the ranks (the breakdown table's row ``mean``). A matplotlib Figure."""
    plt = pyplot()
    parts = breakdowns(result)
    groups, labels = bar_groups(parts)
    means = mean_parts(parts)

    def mean(group, attr):
        return sum(getattr(b, attr) for b in group) / len(group)

    divisor, unit = time_unit(result.step_ns)
    fig, ax = plt.subplots(figsize=(9, max(3.2, 0.28 * len(groups) + 2.2)), layout="constrained")
    left = [0.0] * len(groups)
    ys = range(len(groups))
    for attr in PARTS:
        widths = [mean(g, attr) / divisor for g in groups]
        ax.barh(
            ys,
            widths,
            left=left,
            color=COLORS[attr],
            label=legend_label(attr, means[attr], result.step_ns),
            height=0.8,
        )
        left = [a + b for a, b in zip(left, widths)]
    ax.set_yticks(list(ys))
    ax.set_yticklabels(labels, fontsize=8 if len(groups) > 16 else 10)
    ax.set_ylim(len(groups) - 0.5, -0.5)
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("rank" if len(parts) <= MAX_BARS else "ranks (mean of each group)")
    ax.set_title(
        f"Where the time goes — {len(parts)} NPUs, backend {result.backend}, "
        f"step {result.step_ns / divisor:,.3f} {unit}"
    )
    fig.legend(
        loc="outside lower center",
        ncol=2,
        frameon=False,
        fontsize=8,
        title=f"mean over the {len(parts)} ranks (the breakdown table's row 'mean')",
        title_fontsize=8,
    )
    return fig


def plot_timeline(result: RunResult, path: str | os.PathLike) -> Path:
    """Write :func:`timeline_figure` to ``path`` (PNG)."""
    return save_figure(timeline_figure(result), Path(path))


def timeline_figure(result: RunResult):
    """When each rank computed, had messages in flight and waited, one row per rank
    (a matplotlib Figure)."""
    plt = pyplot()
    tracks = activities(result, shown=MAX_TIMELINE_RANKS)
    pixel = result.step_ns / TIMELINE_PIXELS
    divisor, unit = time_unit(result.step_ns)
    fig, ax = plt.subplots(figsize=(11, max(2.8, 0.4 * len(tracks) + 1.6)), layout="constrained")
    rows = (
        ("compute", "compute", COLORS["compute_only_ns"], -0.4),
        # waiting before in flight: at a pixel where both alternate (a pipeline of chunk
        # messages), the data moving is what shows
        ("waiting", "waiting (a receive or collective open, nothing in flight)", COLORS["p2p_wait_ns"], 0.0),
        ("in_flight", "communication in flight", COLORS["comm_only_ns"], 0.0),
    )
    for row, (_, activity) in enumerate(tracks):
        for attr, label, color, offset in rows:
            # An edge of the bar's own colour keeps intervals narrower than a pixel visible
            # (a ResNet-50 step's all-reduces are microseconds in a one-second step).
            ax.broken_barh(
                [
                    (s / divisor, (e - s) / divisor)
                    for s, e in sets.pairs(sets.coarsen(getattr(activity, attr), pixel))
                ],
                (row + offset, 0.4),
                facecolors=color,
                edgecolors=color,
                linewidth=0.6,
                label=label if row == 0 else None,
            )
    ax.set_yticks(range(len(tracks)))
    chosen = shown_ranks(result, MAX_TIMELINE_RANKS)
    roles = {} if chosen.stride == 1 else {chosen.slowest: " slowest", chosen.fastest: " fastest"}
    ax.set_yticklabels(
        [f"{t.rank}{roles.get(t.rank, '')}" for t, _ in tracks], fontsize=8 if len(tracks) > 16 else 10
    )
    ax.set_ylim(len(tracks) - 0.5, -0.5)
    ax.set_xlim(0, result.step_ns / divisor if result.step_ns else 1)
    ax.set_xlabel(f"simulated time ({unit})")
    ax.set_ylabel("rank")
    shown = (
        ""
        if chosen.stride == 1
        else f" ({len(tracks)} of {len(result.ranks)} ranks: every {ordinal(chosen.stride)} from rank 0, "
        + (
            "all finishing together)"
            if chosen.slowest == chosen.fastest
            else f"the slowest {chosen.slowest} (critical) and the fastest {chosen.fastest})"
        )
    )
    ax.set_title(f"Timeline — backend {result.backend}{shown}")
    fig.legend(loc="outside lower center", ncol=3, frameon=False, fontsize=9)
    return fig


def plot_links(result: RunResult, path: str | os.PathLike) -> Path | None:
    """Write :func:`links_figure` to ``path`` (None, and no file, if the backend keeps no
    link statistics)."""
    fig = links_figure(result)
    return None if fig is None else save_figure(fig, Path(path))


def links_figure(result: RunResult):
    """Utilization of every link, a matplotlib Figure (None if the backend keeps no
    link statistics): one bar per link busiest first (:func:`_link_bars`), or beyond
    :data:`MAX_LINK_BARS` links one curve per kind (:func:`_link_curves`). The legend,
    below the axes, names each kind and each mark of a faulty cable."""
    stats = link_stats(result)
    if not stats:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 4.5), layout="constrained")
    if len(stats) <= MAX_LINK_BARS:
        _link_bars(ax, stats, result)
    else:
        _link_curves(ax, stats, result)
    busiest = max(stats, key=lambda s: s.utilization)
    ax.set_ylabel("utilization (% of step time busy)")
    ax.set_title(
        f"Link utilization — backend {result.backend}, {len(stats)} links; busiest: "
        f"{busiest.src}→{busiest.dst} at {100 * busiest.utilization:.1f}%"
    )
    # kinds first, then the marks of faulty cables in FAULT_MARKS order, then the crosses
    order = [label for _, label in FAULT_MARKS.values()] + [GONE_LABEL]
    handles = sorted(
        zip(*ax.get_legend_handles_labels()),
        key=lambda h: (h[1] in order, order.index(h[1]) if h[1] in order else 0),
    )
    fig.legend(
        *zip(*handles), loc="outside lower center", ncol=min(len(handles), 4), frameon=False, fontsize=8
    )
    return fig


def _link_bars(ax, stats: list[LinkStat], result: RunResult) -> None:
    """One bar per directed link, busiest first (ties in link-id order), coloured by kind;
    the links of a faulty cable hatched (:data:`FAULT_MARKS`) and always labelled in red,
    each cable down for the whole run (gone from the topology) a red cross at 0 after
    the bars."""
    marks, gone = link_faults(result)
    order = sorted(stats, key=lambda s: (-s.utilization, s.link))
    for kind in [k for k in LINK_COLORS if any(s.kind == k for s in stats)]:
        mine = [(x, s) for x, s in enumerate(order) if s.kind == kind]
        ax.bar(
            [x for x, _ in mine],
            [100 * s.utilization for _, s in mine],
            width=0.9,
            color=LINK_COLORS[kind],
            label=kind,
        )
    for mark, (hatch, label) in FAULT_MARKS.items():
        hit = [(x, s) for x, s in enumerate(order) if marks.get((s.src, s.dst)) == mark]
        if hit:
            ax.bar(
                [x for x, _ in hit],
                [100 * s.utilization for _, s in hit],
                width=0.9,
                fill=False,
                hatch=hatch,
                edgecolor="black",
                linewidth=0.6,
                label=label,
                zorder=3,
            )
    names = [f"{s.src}→{s.dst}" for s in order] + [f"{a}↔{b}" for a, b in gone]
    faulty = {x for x, s in enumerate(order) if (s.src, s.dst) in marks} | {
        len(order) + j for j in range(len(gone))
    }
    if gone:
        ax.plot(
            range(len(order), len(names)),
            [0.0] * len(gone),
            linestyle="none",
            marker="X",
            markersize=9,
            color="tab:red",
            clip_on=False,
            zorder=4,
            label=GONE_LABEL,
        )
    every = -(-len(names) // MAX_LINK_LABELS)  # label every link, or every k-th
    ticked = sorted({x for x in range(len(names)) if x % every == 0} | faulty)
    ax.set_xticks(ticked)
    ax.set_xticklabels([names[x] for x in ticked], rotation=90, fontsize=7)
    for x, label in zip(ticked, ax.get_xticklabels()):
        if x in faulty:
            label.set_color("tab:red")
    ax.set_xlabel(
        "directed link src→dst (NPU and switch ids), busiest first"
        + ("" if every == 1 else f"; every {ordinal(every)} link labelled")
        + ("; faulty cables in red" if faulty else "")
    )
    ax.set_xlim(-0.6, len(names) - 0.4)


def _link_curves(ax, stats: list[LinkStat], result: RunResult) -> None:
    """Per kind of link its utilizations sorted busiest first, each kind in its own
    colour, line style and marker (:data:`KIND_STYLES`: the two directions of every
    cable often have the same curve, and one must not hide the other), the links of a
    faulty cable marked on their curve."""
    marks, _ = link_faults(result)
    labelled: set[str] = set()  # each mark once in the legend, whatever kinds it is on
    for z, kind in enumerate(k for k in LINK_COLORS if any(s.kind == k for s in stats)):
        mine = sorted((s for s in stats if s.kind == kind), key=lambda s: (-s.utilization, s.link))
        style, marker = KIND_STYLES[kind]
        step = max(len(LINK_COLORS), len(mine) // 12)
        ax.plot(
            range(len(mine)),
            [100 * s.utilization for s in mine],
            color=LINK_COLORS[kind],
            linestyle=style,
            marker=marker,
            markevery=((z * step // len(LINK_COLORS)) % len(mine), step),  # equal curves: markers apart
            markersize=6 - z,
            linewidth=2.8 - 0.6 * z,  # a curve drawn later is thinner: one beneath still shows
            zorder=2 + z,
            label=f"{kind} ({len(mine)} links)",
        )
        for mark, (_, label) in FAULT_MARKS.items():
            hit = [(x, s) for x, s in enumerate(mine) if marks.get((s.src, s.dst)) == mark]
            if not hit:
                continue
            ax.plot(
                [x for x, _ in hit],
                [100 * s.utilization for _, s in hit],
                linestyle="none",
                marker="o" if mark == DEGRADED else "X",
                markerfacecolor="none",
                markeredgecolor="black",
                zorder=9,
                label="_" + label if label in labelled else label,
            )
            labelled.add(label)
    ax.set_xlabel("directed links of each kind, sorted by utilization, busiest first (rank in its kind)")


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
