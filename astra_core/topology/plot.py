"""A picture of a physical topology (PNG, matplotlib's Agg backend, no display).

Switched fabrics are drawn in layers: NPUs at the bottom, each switch one
layer above its nearest NPU (edge, aggregation, core; or leaf, spine). A
fabric without switches is drawn on a grid when its dimensions are given (a
torus: 3-D ones as z slices side by side; cables between positions that are
not grid neighbours, such as the wrap-around ones, as dashed arcs), otherwise
on a circle.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Sequence
from typing import Any

from astra_core.errors import ConfigError
from astra_core.outputs import atomic_output
from astra_core.topology.physical import PhysicalTopology

NPU_STYLE: dict[str, Any] = dict(marker="o", color="tab:blue", label="NPU")
SWITCH_STYLE: dict[str, Any] = dict(marker="s", color="tab:orange", label="switch")


def _levels(topology: PhysicalTopology) -> dict[int, int]:
    """Hops from each node to its nearest NPU (breadth-first from all NPUs)."""
    level = {h: 0 for h in topology.hosts}
    queue = deque(topology.hosts)
    while queue:
        node = queue.popleft()
        for link in topology.out_links[node]:
            nxt = topology.link_dst[link]
            if nxt not in level:
                level[nxt] = level[node] + 1
                queue.append(nxt)
    return level


def _layered(topology: PhysicalTopology) -> dict[int, tuple[float, float]]:
    layers: dict[int, list[int]] = {}
    for node, level in sorted(_levels(topology).items()):
        layers.setdefault(level, []).append(node)
    return {
        node: ((i + 0.5) / len(members), float(level))
        for level, members in layers.items()
        for i, node in enumerate(members)
    }


def _grid(dims: Sequence[int]) -> dict[int, tuple[float, float]]:
    x_size = dims[0]
    y_size = dims[1] if len(dims) > 1 else 1
    pos = {}
    for node in range(x_size * y_size * (dims[2] if len(dims) > 2 else 1)):
        x, y, z = node % x_size, (node // x_size) % y_size, node // (x_size * y_size)
        pos[node] = (float(x + z * (x_size + 1)), float(y))
    return pos


def _circle(count: int) -> dict[int, tuple[float, float]]:
    import math

    return {n: (math.cos(2 * math.pi * n / count), math.sin(2 * math.pi * n / count)) for n in range(count)}


def image_format(path: str | os.PathLike, what: str = "--plot") -> str:
    """The image format matplotlib writes for ``path``'s suffix (``png`` without one).

    Raises ConfigError naming ``what`` and the path for a suffix matplotlib
    cannot write (``.txt``), listing the ones it can.
    """
    from matplotlib.backend_bases import FigureCanvasBase

    suffix = os.path.splitext(os.fspath(path))[1]
    fmt = suffix[1:].lower() or "png"
    supported = FigureCanvasBase.get_supported_filetypes()
    if fmt not in supported:
        raise ConfigError(
            f"{what} {os.fspath(path)}: cannot draw a '{suffix}' image "
            f"(one of: {', '.join(sorted(supported))})"
        )
    return fmt


def plot_topology(
    topology: PhysicalTopology,
    path_png: str | os.PathLike,
    title: str | None = None,
    grid: Sequence[int] | None = None,
) -> None:
    """Draw ``topology`` to ``path_png``; ``grid`` gives a switchless fabric's dimensions.

    The image format follows the suffix (PNG without one, :func:`image_format`).
    The file is written atomically (parent directories created on demand);
    raises ConfigError naming the path when it cannot be written.
    """
    fmt = image_format(path_png, "plot")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    pos = _positions(topology, grid)
    many = topology.nodes_count > 64
    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=110)
    _draw_cables(ax, topology, pos, grid, width=0.4 if many else 0.9)
    _draw_nodes(ax, topology, pos, many)
    ax.set_title(
        title
        or f"{topology.source}: {topology.npus_count} NPUs, "
        f"{len(topology.switches)} switches, {topology.links_count // 2} cables"
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=8, frameon=False)
    ax.margins(0.06)
    ax.set_aspect("auto")
    ax.axis("off")
    fig.tight_layout()
    try:
        with atomic_output(path_png, "plot") as temporary:
            fig.savefig(temporary, format=fmt)
    finally:
        plt.close(fig)


def _positions(topology: PhysicalTopology, grid: Sequence[int] | None) -> dict[int, tuple[float, float]]:
    """Each node's place: in layers with switches, else on the grid, else on a circle."""
    if topology.switches:
        return _layered(topology)
    if grid is not None and 1 <= len(grid) <= 3:
        return _grid(grid)
    return _circle(topology.nodes_count)


def _draw_cables(
    ax,
    topology: PhysicalTopology,
    pos: dict[int, tuple[float, float]],
    grid: Sequence[int] | None,
    width: float,
) -> None:
    """One line per cable (a pair of links); on a grid, cables between positions that
    are not neighbours as dashed arcs."""
    from matplotlib.collections import LineCollection
    from matplotlib.patches import FancyArrowPatch

    drawn = set()
    segments = []  # straight cables, drawn as one collection: one artist per cable is
    # about half a millisecond each, minutes for a large fat-tree
    for src, dst in zip(topology.link_src, topology.link_dst):
        if (dst, src) in drawn:
            continue
        drawn.add((src, dst))
        (x0, y0), (x1, y1) = pos[src], pos[dst]
        if not topology.switches and grid is not None and abs(x1 - x0) + abs(y1 - y0) > 1.5:
            ax.add_patch(
                FancyArrowPatch(
                    (x0, y0),
                    (x1, y1),
                    arrowstyle="-",
                    connectionstyle="arc3,rad=0.25",
                    color="0.55",
                    linewidth=width,
                    linestyle="--",
                )
            )
        else:
            segments.append(((x0, y0), (x1, y1)))
    ax.add_collection(LineCollection(segments, colors="0.6", linewidths=width, zorder=1))


def _draw_nodes(ax, topology: PhysicalTopology, pos: dict[int, tuple[float, float]], many: bool) -> None:
    """NPUs and switches as markers, numbered unless there are many."""
    for nodes, style in ((topology.hosts, NPU_STYLE), (sorted(topology.switches), SWITCH_STYLE)):
        if nodes:
            ax.scatter(
                [pos[n][0] for n in nodes],
                [pos[n][1] for n in nodes],
                s=18 if many else 80,
                zorder=2,
                edgecolors="black",
                linewidths=0.5,
                **style,
            )
    if not many:
        for node, (x, y) in pos.items():
            ax.annotate(
                str(node),
                (x, y),
                fontsize=7,
                ha="center",
                va="center",
                zorder=3,
                xytext=(0, 9),
                textcoords="offset points",
            )
