"""FCT results as tables, CSV and plots: slowdown percentiles by flow size.

Two views, as congestion-control papers show them:

* :func:`by_size_bucket`: fixed size ranges (decades from 10 KB to 10 MB),
  each with its flow count and median, 95th and 99th percentile slowdown;
* :func:`by_size_bins`: flows sorted by size and cut into bins of equal
  count (5 % of the flows each by default, the HPCC artifact's
  ``fct_analysis.py``), each with its largest size and the same
  percentiles; :func:`plot_slowdown` draws these against flow size.

Percentiles are numpy's linear interpolation between order statistics.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from astra_core.flows.run import FlowResult
from astra_core.outputs import atomic_output, whole_ns_column

#: Upper edges of the fixed size buckets, bytes (the last bucket is open).
BUCKET_EDGES = (10_000, 100_000, 1_000_000, 10_000_000)
PERCENTILES = (50, 95, 99)
COLUMNS = ["src", "dst", "size_bytes", "start_ns", "fct_ns", "ideal_fct_ns", "slowdown"]


def flow_table(flows: Sequence[FlowResult]) -> pd.DataFrame:
    """One row per flow, columns :data:`COLUMNS` (times in ns)."""
    return pd.DataFrame(
        [(f.src, f.dst, f.size_bytes, f.start_ns, f.fct_ns, f.ideal_fct_ns, f.slowdown) for f in flows],
        columns=COLUMNS,
    )


def fct_csv(table: pd.DataFrame) -> str:
    """The ``--fct`` CSV of a :func:`flow_table`: times as whole ns, as every astra output."""
    out = table.copy()
    for column in ("start_ns", "fct_ns", "ideal_fct_ns"):
        out[column] = whole_ns_column(out[column], column)
    return out.to_csv(index=False)


def _label(low: float, high: float | None) -> str:
    def size(b: float) -> str:
        return f"{b / 1e6:g} MB" if b >= 1e6 else f"{b / 1e3:g} KB"

    if high is None:
        return f">= {size(low)}"
    return f"< {size(high)}" if low == 0 else f"{size(low)} - {size(high)}"


def by_size_bucket(table: pd.DataFrame) -> pd.DataFrame:
    """Per fixed size bucket (rows with flows only): ``bucket``, ``flows``, ``p50``,
    ``p95``, ``p99`` and ``max`` slowdown."""
    lows: tuple[int, ...] = (0, *BUCKET_EDGES)
    highs: tuple[int | None, ...] = (*BUCKET_EDGES, None)
    rows = []
    for low, high in zip(lows, highs):
        size = table["size_bytes"]
        mask = (size >= low) & ((size < high) if high is not None else True)
        s = table.loc[mask, "slowdown"].to_numpy()
        if len(s):
            rows.append(
                {
                    "bucket": _label(low, high),
                    "flows": len(s),
                    **{f"p{p}": float(np.percentile(s, p)) for p in PERCENTILES},
                    "max": float(s.max()),
                }
            )
    return pd.DataFrame(rows)


def by_size_bins(table: pd.DataFrame, percent: float = 5.0) -> pd.DataFrame:
    """Flows sorted by size in bins of ``percent`` of the flows: ``max_size_bytes``,
    ``flows`` and the slowdown percentiles of each bin."""
    ordered = table.sort_values("size_bytes", kind="stable")
    n = len(ordered)
    bins = max(1, round(100 / percent))
    rows = []
    for k in range(bins):
        part = ordered.iloc[k * n // bins : (k + 1) * n // bins]
        if len(part):
            s = part["slowdown"].to_numpy()
            rows.append(
                {
                    "max_size_bytes": int(part["size_bytes"].iloc[-1]),
                    "flows": len(s),
                    **{f"p{p}": float(np.percentile(s, p)) for p in PERCENTILES},
                }
            )
    return pd.DataFrame(rows)


def summary_table(table: pd.DataFrame, title: str):
    """A rich Table of :func:`by_size_bucket` (flow count, median/p95/p99/max slowdown)."""
    from rich.table import Table

    out = Table(title=title)
    for column in ("flow size", "flows", "median", "p95", "p99", "max"):
        out.add_column(column, justify="left" if column == "flow size" else "right")
    for row in by_size_bucket(table).itertuples():
        out.add_row(
            row.bucket, str(row.flows), f"{row.p50:.2f}", f"{row.p95:.2f}", f"{row.p99:.2f}", f"{row.max:.2f}"
        )
    return out


def plot_slowdown(
    tables: dict[str, pd.DataFrame], path_png: str | os.PathLike, title: str = "FCT slowdown by flow size"
) -> None:
    """:func:`slowdown_figure` written as a PNG (1320 x 480 px) through
    :func:`astra_core.outputs.atomic_output` (ConfigError naming the path if it cannot be)."""
    import matplotlib.pyplot as plt

    fig = slowdown_figure(tables, title)
    try:  # through astra_core.outputs: atomic for a file, written through a FIFO
        with atomic_output(path_png, "plot") as temporary:
            fig.savefig(temporary, dpi=120, format="png")
    finally:
        plt.close(fig)


def slowdown_figure(tables: dict[str, pd.DataFrame], title: str = "FCT slowdown by flow size"):
    """Median and 99th percentile slowdown per equal-count size bin against flow size,
    one pair of lines per labelled table (e.g. one per congestion control), with one
    legend for both panels to their right, off the data. Tables without flows are
    left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharex=True)
    for label, table in tables.items():
        if table.empty:
            continue
        bins = by_size_bins(table)
        for ax, column in zip(axes, ("p50", "p99")):
            ax.plot(bins["max_size_bytes"], bins[column], marker=".", label=label)
    for ax, name in zip(axes, ("median", "99th percentile")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("flow size (bytes, largest in each 5 % bin)")
        ax.set_ylabel(f"{name} FCT slowdown")
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 0.88, 1))  # the right 12 % holds the legend
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="center left", bbox_to_anchor=(0.88, 0.5))
    return fig
