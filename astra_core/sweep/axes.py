"""What the sweep plot's axes are called, each with its unit.

The x-axis is a swept parameter: its unit is the config file's
(:mod:`astra_core.config.network`: bandwidth GB/s with 1 GB = 2^30 B, latency
ns; :mod:`astra_core.config.system` and :mod:`astra_core.config.memory`: the
units their docstrings give). The y-axis is a results column
(:mod:`astra_core.sweep.point`): times in ns shown in ns, µs, ms or s, counts,
bytes, and ``wall_s`` in seconds.
"""

from __future__ import annotations

from astra_core.report.breakdown import PART_LABELS, PARTS
from astra_core.report.plots import time_unit
from astra_core.sweep.spec import parse_parameter

__all__ = ["PARAMETER_UNITS", "metric_axis", "parameter_label"]

#: ``root.key`` -> the unit its values are in (the config module's docstring).
PARAMETER_UNITS = {
    "network.bandwidth": "GB/s",
    "network.latency": "ns",
    "network.npus_count": "NPUs",
    "system.endpoint-delay": "ns",
    "system.local-reduction-delay": "ns per 100 B",
    "system.preferred-dataset-splits": "chunks",
    "system.active-chunks-per-dimension": "chunks",
    "system.peak-perf": "TFLOP/s",
    "system.local-mem-bw": "GB/s",
    "system.L": "ns",
    "system.o": "ns",
    "system.g": "ns",
    "system.G": "ns/B",
    "memory.remote-mem-latency": "ns",
    "memory.remote-mem-bw": "GB/s",
    "memory.num-nodes": "nodes",
    "memory.num-npus-per-node": "NPUs",
}

#: Results columns that are not times in ns: (what the axis is called, unit).
_OTHER_METRICS = {
    "npus": ("NPUs", "count"),
    "messages": ("messages", "count"),
    "message_bytes": ("bytes carried by the network", "bytes"),
    "wall_s": ("wall time per point", "s"),
}
#: Times in ns (point.py's table): what the axis is called.
_TIME_METRICS = {
    "step_ns": "step",
    "compute_ns": "GPU compute, most of any rank",
    "comm_ns": "comm in flight, most of any rank",
    "exposed_comm_ns": "finish − compute, most of any rank",
    **{part: f"{PART_LABELS[part]}, mean over ranks" for part in PARTS},
}


def parameter_label(name: str, numeric: bool) -> str:
    """The x-axis label of parameter ``name``: the name and, for numeric values, their
    unit (:data:`PARAMETER_UNITS`; a key of unknown unit says whose unit it is)."""
    if not numeric:
        return name
    param, _ = parse_parameter(name)
    if param is None or param.key is None:
        return name
    unit = PARAMETER_UNITS.get(f"{param.root}.{param.key}")
    if unit is None:
        unit = f"the {param.root.replace('_', ' ')}'s unit"
    return f"{name} ({unit})"


def metric_axis(metric: str, largest: float) -> tuple[float, str, str]:
    """(divisor, unit, label) of the y-axis of results column ``metric`` whose largest
    value is ``largest``: a time in ns is shown in ns, µs, ms or s
    (:func:`~astra_core.report.plots.time_unit`)."""
    if metric in _OTHER_METRICS:
        name, unit = _OTHER_METRICS[metric]
        return 1.0, unit, f"{name} ({unit})"
    if metric.endswith("_ns"):
        divisor, unit = time_unit(largest)
        name = _TIME_METRICS.get(metric, metric.removesuffix("_ns").replace("_", " "))
        return divisor, unit, f"{name} ({unit})"
    return 1.0, "", metric
