"""``astra.simulate``: one simulation from paths, config objects or dicts; ``astra.estimate``:
what it would cost a backend, without simulating it; ``astra.run`` and ``astra.estimate_run``:
the same for a :class:`RunSpec`, the one description of a run that tools build and pass.

They are :mod:`astra_core.api`'s and :mod:`astra_core.run_spec`'s, re-exported here.
"""

from __future__ import annotations

from astra_core.api import estimate, estimate_run, run, simulate
from astra_core.estimate import Estimate
from astra_core.report import Report
from astra_core.run_spec import RunSpec

__all__ = ["Estimate", "Report", "RunSpec", "estimate", "estimate_run", "run", "simulate"]
