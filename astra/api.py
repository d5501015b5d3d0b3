"""``astra.simulate``: one simulation from paths, config objects or dicts; ``astra.estimate``:
what it would cost a backend, without simulating it.

They are :func:`astra_core.api.simulate` and :func:`astra_core.api.estimate`, re-exported here.
"""

from __future__ import annotations

from astra_core.api import estimate, simulate
from astra_core.estimate import Estimate
from astra_core.report.results import RunResult

#: What :func:`simulate` returns: per-rank and per-collective results of one run,
#: with pandas views (``rank_frame()``, ``collective_frame()``, ...) and writers
#: (``write_csv``, ``write_parquet``, ``write_plots``, ``write_timeline``).
Report = RunResult

__all__ = ["Estimate", "Report", "estimate", "simulate"]
