"""pandas DataFrames of a run, and the CSV / Parquet files ``astra run`` writes.

pandas (and pyarrow, for Parquet) are imported on first use, so runs that
write neither pay nothing for them.

* :func:`rank_frame`: one row per rank: ``rank, finish_ns, compute_ns,
  cpu_ns, comm_ns, comm_wait_ns, exposed_comm_ns`` (see
  :class:`~astra_core.results.RankResult`: communication in flight,
  communication waiting, upstream's exposed communication) and the six
  disjoint parts of :data:`~astra_core.report.breakdown.PARTS` (they add up
  to ``finish_ns``; :mod:`astra_core.report.breakdown`).
* :func:`collective_frame`: one row per collective per rank
  (:mod:`astra_core.report.collectives`), with the NCCL model's choice
  (``nccl_algorithm``, ``nccl_protocol``, ``nccl_channels``,
  ``nccl_predicted_ns``; empty where it did not run the collective).
* :func:`phase_frame`: one row per phase of every chunk.
* :func:`link_frame`: one row per directed link, for backends that keep link
  statistics (:mod:`astra_core.report.links`); None otherwise.

Every time column (``*_ns``, but a link's ``latency_ns``) holds whole ns (pandas ``Int64``, empty where a time is
unknown, e.g. a collective that never finished).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from astra_core.outputs import atomic_output, whole_ns_column
from astra_core.report.breakdown import PARTS, breakdowns
from astra_core.report.collectives import PHASE_COLUMNS, collective_rows, phase_rows
from astra_core.report.links import LINK_COLUMNS, link_stats
from astra_core.results import RunResult

if TYPE_CHECKING:
    import pandas as pd

RANK_COLUMNS = (
    "rank",
    "finish_ns",
    "compute_ns",
    "cpu_ns",
    "comm_ns",
    "comm_wait_ns",
    "exposed_comm_ns",
    *PARTS,
)
#: Link columns kept as given (not times of the run): parameters and a ratio.
_LINK_PARAMETERS = ("latency_ns", "bandwidth_bytes_per_ns", "utilization")
_INT_COLUMNS = ("rank", "node_id", "bytes", "chunks", "dim", "link", "src", "dst", "max_queue", "peak_flows")
#: Counts that are empty where they do not apply (pandas ``Int64``).
_NULLABLE_INT_COLUMNS = ("nccl_channels",)


def _frame(rows: list[dict], columns) -> pd.DataFrame:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(columns))
    for column in frame.columns:
        if column in _INT_COLUMNS:
            frame[column] = frame[column].astype("int64")
        elif column in _NULLABLE_INT_COLUMNS:
            frame[column] = frame[column].astype("Float64").astype("Int64")
        elif column in _LINK_PARAMETERS:
            frame[column] = frame[column].astype("float64")
        elif column.endswith("_ns"):  # times: whole ns, empty where unknown; AstraError past int64
            frame[column] = whole_ns_column(frame[column], column)
        else:
            frame[column] = frame[column].astype(str)
    return frame


def rank_frame(result: RunResult) -> pd.DataFrame:
    """Per-rank times (ns); see the module docstring for the columns."""
    split = {b.rank: b for b in breakdowns(result)}
    rows = []
    for r in result.ranks:
        row = r.to_dict()
        b = split.get(r.rank)
        row.update({part: getattr(b, part) if b else float("nan") for part in PARTS})
        rows.append(row)
    return _frame(rows, RANK_COLUMNS)


def collective_frame(result: RunResult) -> pd.DataFrame:
    """Per-collective records, one row per collective per rank."""
    rows, columns = collective_rows(result)
    return _frame(rows, columns)


def phase_frame(result: RunResult) -> pd.DataFrame:
    """Every phase of every chunk: rank, node_id, dim, phase, start_ns, end_ns, duration_ns."""
    return _frame(phase_rows(result), PHASE_COLUMNS)


def link_frame(result: RunResult) -> pd.DataFrame | None:
    """Per-link statistics, or None when the backend keeps none."""
    stats = link_stats(result)
    if stats is None:
        return None
    return _frame([s.to_dict() for s in stats], LINK_COLUMNS)


def write_frame(frame: pd.DataFrame, path: str | os.PathLike, kind: str, what: str | None = None) -> Path:
    """Write ``frame`` as ``kind`` ("csv" or "parquet") to ``path`` through
    :func:`astra_core.outputs.atomic_output` (atomic for a file; parent dirs are created).

    Raises ConfigError naming ``what`` (default ``kind``) and the path when it cannot be
    written, ValueError for an unknown ``kind``.
    """
    if kind not in ("csv", "parquet"):
        raise ValueError(f"unknown table format {kind!r}")
    with atomic_output(path, what or kind) as temporary:
        if kind == "csv":
            frame.to_csv(temporary, index=False)
        else:
            frame.to_parquet(temporary, index=False, engine="pyarrow")
    return Path(path)


def write_collectives(result: RunResult, path: str | os.PathLike, kind: str) -> Path:
    """Write the per-collective records of ``result`` (``astra run --csv/--parquet``)."""
    return write_frame(collective_frame(result), path, kind)
