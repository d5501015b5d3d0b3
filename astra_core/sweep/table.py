"""A sweep's results: the resumable point log, the results table, and its plot.

The output directory holds:

* ``points.jsonl``: one JSON row per finished point, appended as each point
  finishes (the resume log: a point whose key has an ``ok`` row is not run
  again; failed points are retried);
* ``results.parquet`` and ``results.csv``: one row per point of the spec, in
  spec order: ``point``, one column per swept parameter (named as in the
  spec; lists and mixed-type values as JSON text), ``status``, the metrics of
  :mod:`astra_core.sweep.point`, ``wall_s``, ``error`` and ``key``;
* ``<metric>.png``: the metric against the ``x`` parameter, one line per
  combination of the other parameters (failed points left out and counted in
  the title).
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

from astra_core.errors import AstraError
from astra_core.outputs import atomic_output, whole_ns_column
from astra_core.sweep.axes import metric_axis, parameter_label
from astra_core.sweep.point import METRICS
from astra_core.sweep.spec import SweepSpec

LOG_NAME = "points.jsonl"
MAX_LINES = 12


class PointLog:
    """The append-only ``points.jsonl`` of an output directory."""

    def __init__(self, directory: Path):
        self.path = Path(directory) / LOG_NAME

    def load(self) -> dict[str, dict[str, Any]]:
        """Last row per point key.

        A torn last line (a sweep killed while writing it) is cut off the
        file, so that the next row starts on a line of its own; its point
        runs again. Any other line that is not a row is skipped with a
        warning naming it. Raises AstraError if the log cannot be read or
        repaired.
        """
        rows: dict[str, dict[str, Any]] = {}
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return rows
        except OSError as exc:
            raise AstraError(f"{self.path}: cannot read the point log: {exc.strerror or exc}") from None
        if data and not data.endswith(b"\n"):
            data = data[: data.rfind(b"\n") + 1]
            try:
                with self.path.open("r+b") as f:
                    f.truncate(len(data))
            except OSError as exc:
                raise AstraError(
                    f"{self.path}: cannot repair the torn last line: {exc.strerror or exc}"
                ) from None
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            try:
                row = json.loads(line)
            except ValueError:
                row = None
            if isinstance(row, dict) and "key" in row:
                rows[row["key"]] = row
            elif line.strip():
                warnings.warn(
                    f"{self.path}: line {number} is not a point row; ignored (its point runs again)",
                    stacklevel=2,
                )
        return rows

    def append(self, row: dict[str, Any]) -> None:
        """Add one row as one line (a single write, flushed at once). Raises AstraError
        if the log cannot be written (the sweep stops; finished rows are kept)."""
        try:
            with self.path.open("a") as f:
                f.write(json.dumps(row, default=str) + "\n")
                f.flush()
        except OSError as exc:
            raise AstraError(f"{self.path}: cannot write the point log: {exc.strerror or exc}") from None

    def clear(self) -> None:
        """Forget every row (``--fresh``)."""
        self.path.unlink(missing_ok=True)


def _column(values: list[Any]) -> list[Any]:
    """Parameter values as one Parquet-compatible column (JSON text unless uniform scalars)."""
    present = [v for v in values if v is not None]
    if all(isinstance(v, bool) for v in present) or all(isinstance(v, str) for v in present):
        return values
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return [math.nan if v is None else v for v in values]
    return [None if v is None else json.dumps(v) for v in values]


def results_frame(spec: SweepSpec, keys: list[str], rows: dict[str, dict[str, Any]]):
    """The results table (pandas) of ``spec``'s points, ``keys[i]`` being point i's key."""
    import pandas as pd

    columns: dict[str, list[Any]] = {"point": list(range(len(spec.points)))}
    for name in spec.parameters:
        columns[name] = _column([point.get(name) for point in spec.points])
    found = [rows.get(key) for key in keys]
    columns["status"] = [row["status"] if row else "not run" for row in found]
    for name in (*METRICS, "wall_s"):
        default = "" if name == "backend" else None
        values = [row.get(name, default) if row else default for row in found]
        if name != "backend":  # null (a failed point) is NaN in the table
            values = [math.nan if v is None else v for v in values]
        if name in columns:  # also a swept parameter (backend): keep what a failed point asked for
            values = [v if v not in ("", None) else p for v, p in zip(values, columns[name])]
        columns[name] = values
    columns["error"] = [row.get("error", "") if row else "" for row in found]
    columns["key"] = keys
    frame = pd.DataFrame(columns)
    for name in ("npus", "messages", "message_bytes"):
        if frame[name].notna().all():
            frame[name] = frame[name].astype("int64")
    for name in METRICS:
        if name.endswith("_ns"):  # whole ns, empty for a point without results
            frame[name] = whole_ns_column(frame[name], name)
    return frame


def write_results(frame, directory: Path) -> list[Path]:
    """results.parquet and results.csv in ``directory``."""
    paths = [directory / "results.parquet", directory / "results.csv"]
    try:
        with atomic_output(paths[0], "sweep results") as temporary:
            frame.to_parquet(temporary, index=False, engine="pyarrow")
        with atomic_output(paths[1], "sweep results") as temporary:
            frame.to_csv(temporary, index=False)
    except OSError as exc:
        raise AstraError(f"{directory}: cannot write sweep results: {exc.strerror or exc}") from None
    return paths


def plot_results(frame, spec: SweepSpec, path: Path) -> Path | None:
    """Write :func:`results_figure` to ``path`` (None, and no file, if there is no x or
    no such metric). Raises AstraError naming ``path`` when it cannot be written."""
    fig = results_figure(frame, spec)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

    try:
        with atomic_output(path, "sweep plot") as temporary:
            fig.savefig(temporary, dpi=110, bbox_inches="tight")
    except OSError as exc:
        raise AstraError(f"{path}: cannot write plot: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    return path


def results_figure(frame, spec: SweepSpec):
    """The swept metric against ``spec.x``, a matplotlib Figure (None if there is no x or
    no such metric).

    The y-axis of a non-negative metric starts at zero, so that a change of a
    few parts in ten thousand looks like one; the title's second line gives
    the smallest and largest value and their relative spread.
    """
    metric, x = spec.metric, spec.x
    if x is None or metric not in frame.columns:
        return None
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    ok = frame[frame["status"] == "ok"]
    others = [p for p in spec.parameters if p != x and ok[p].nunique(dropna=False) > 1]
    numeric_x = ok[x].map(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)).all()
    scale, unit, ylabel = metric_axis(metric, float(ok[metric].max()) if len(ok) else 0.0)
    fig, ax = plt.subplots(figsize=(8, 5))
    groups = list(ok.groupby(others, dropna=False, sort=False)) if others else [((), ok)]
    for label, group in groups[:MAX_LINES]:
        group = group.sort_values(x) if numeric_x else group
        xs = group[x].tolist() if numeric_x else [str(v) for v in group[x]]
        name = (
            ", ".join(f"{p}={v}" for p, v in zip(others, label if isinstance(label, tuple) else (label,)))
            or None
        )
        ax.plot(xs, group[metric] / scale, marker="o", label=name)
    if numeric_x and len(ok) and (ok[x] > 0).all() and ok[x].max() >= 8 * ok[x].min():
        ax.set_xscale("log", base=2)
    ax.ticklabel_format(axis="y", useOffset=False, style="plain")
    values = [float(v) for v in ok[metric].dropna()]
    spread = ""
    if values and min(values) >= 0:
        ax.set_ylim(bottom=0, top=max(values) / scale * 1.08 or 1.0)
        low, high = min(values), max(values)
        change = f"{100 * (high - low) / low:+.3g} %" if low > 0 else "n/a"
        spread = f"\nrange {low / scale:,.6g}–{high / scale:,.6g} {unit}".rstrip() + f" (max vs min {change})"
    ax.set_xlabel(parameter_label(x, bool(numeric_x)))
    ax.set_ylabel(ylabel)
    failed = int((frame["status"] != "ok").sum())
    shown = "" if len(groups) <= MAX_LINES else f", first {MAX_LINES} of {len(groups)} lines"
    ax.set_title(
        f"{metric} vs {x} — {len(ok)} points"
        + (f" ({failed} failed, not shown)" if failed else "")
        + shown
        + spread
    )
    if any(name for name, _ in groups[:MAX_LINES]) and others:
        ax.legend(fontsize=8, frameon=False)
    ax.grid(True, alpha=0.3)
    return fig
