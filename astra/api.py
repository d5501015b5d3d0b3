"""``astra.simulate``: one simulation from paths, config objects or dicts; ``astra.estimate``:
what it would cost a backend, without simulating it.

They are :func:`astra_core.api.simulate` and :func:`astra_core.api.estimate`, re-exported here.
"""

from __future__ import annotations

from astra_core.api import estimate, simulate
from astra_core.estimate import Estimate
from astra_core.report import Report

__all__ = ["Estimate", "Report", "estimate", "simulate"]
