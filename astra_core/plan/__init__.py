"""``astra plan``: the fastest parallel layout of an LLM on a cluster that fits in memory,
found by simulating every candidate (:mod:`.space`, :mod:`.point`, :mod:`.search`)."""

from astra_core.plan.search import PlanOutcome, search
from astra_core.plan.space import Layout, Limits, Space, layouts

__all__ = ["Layout", "Limits", "PlanOutcome", "Space", "layouts", "search"]
