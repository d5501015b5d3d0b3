"""astra's flow-level network backend: max-min fair flows with packet framing."""

from astra_flow.maxmin import Flow, MaxMinSolver

__all__ = ["Flow", "MaxMinSolver"]
