"""astra's congestion-unaware analytical network backend (upstream ASTRA-sim's model)."""

from astra_analytical.network import AnalyticalNetwork

__all__ = ["AnalyticalNetwork"]
