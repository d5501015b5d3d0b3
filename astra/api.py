"""``astra.simulate``: one simulation from paths, config objects or dicts.

It is :func:`astra_core.api.simulate` (one function, re-exported here).
"""

from __future__ import annotations

from astra_core.api import simulate
from astra_core.report.results import RunResult

#: What :func:`simulate` returns: per-rank and per-collective results of one run,
#: with pandas views (``rank_frame()``, ``collective_frame()``, ...) and writers
#: (``write_csv``, ``write_parquet``, ``write_plots``, ``write_timeline``).
Report = RunResult

__all__ = ["Report", "simulate"]
