"""Every axis of the sweep plot names its unit, the unit the results table's numbers are in
(network bandwidth GB/s, latencies ns, times scaled to ns/µs/ms/s, bytes as bytes)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from astra_core.sweep.table import results_figure


@pytest.fixture(autouse=True)
def _close_figures():
    """Each test's figures closed after it (pyplot keeps every open figure)."""
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def _axes(x: str, metric: str, xs: list, ys: list):
    frame = pd.DataFrame({"status": ["ok"] * len(xs), x: xs, metric: ys})
    spec: Any = SimpleNamespace(metric=metric, x=x, parameters=[x])
    (ax,) = results_figure(frame, spec).axes
    return ax


@pytest.mark.parametrize(
    "x, xlabel",
    [
        ("network.bandwidth[1]", "network.bandwidth[1] (GB/s)"),
        ("network.latency[0]", "network.latency[0] (ns)"),
        ("system.endpoint-delay", "system.endpoint-delay (ns)"),
        ("system.peak-perf", "system.peak-perf (TFLOP/s)"),
        ("system.local-mem-bw", "system.local-mem-bw (GB/s)"),
        ("system.preferred-dataset-splits", "system.preferred-dataset-splits (chunks)"),
        ("memory.remote-mem-bw", "memory.remote-mem-bw (GB/s)"),
        ("memory.remote-mem-latency", "memory.remote-mem-latency (ns)"),
    ],
)
def test_x_axis_names_the_parameters_unit(x, xlabel):
    ax = _axes(x, "step_ns", [1.0, 2.0, 4.0], [3_000.0, 2_000.0, 1_500.0])
    assert ax.get_xlabel() == xlabel
    assert ax.get_ylabel() == "step (µs)"


@pytest.mark.parametrize(
    "metric, ys, ylabel",
    [
        ("message_bytes", [1_000, 2_000, 4_000], "bytes carried by the network (bytes)"),
        ("messages", [10, 20, 40], "messages (count)"),
        ("npus", [8, 16, 32], "NPUs (count)"),
        ("wall_s", [0.5, 1.0, 2.0], "wall time per point (s)"),
        ("exposed_comm_ns", [5e6, 6e6, 7e6], "finish − compute, most of any rank (ms)"),
        ("comm_only_ns", [5e3, 6e3, 7e3], "comm in flight, no compute, mean over ranks (µs)"),
    ],
)
def test_y_axis_names_the_metrics_unit(metric, ys, ylabel):
    ax = _axes("network.bandwidth[1]", metric, [1.0, 2.0, 4.0], ys)
    assert ax.get_ylabel() == ylabel


def test_a_numeric_parameter_of_unknown_unit_says_where_its_unit_comes_from():
    ax = _axes("backend_config.seed", "step_ns", [1, 2, 3], [1.0, 2.0, 3.0])
    assert ax.get_xlabel() == "backend_config.seed (the backend config's unit)"
