"""The plots say what the tables say and can be read, checked on the figures'
artists, not on pixels.

What must hold: breakdown.png's legend gives the table's numbers (its "compute" is not
the compute with no communication node open) and its title is not drawn over the
legend; timeline.png shows waiting; links.png's x-axis says more than "link id"; the
sweep plot's y-axis does not zoom to a range like 1.08249-1.08255 s.
"""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

import astra
from astra_core.config.system import upstream_system
from astra_core.report.breakdown import PART_LABELS, PARTS
from astra_core.report.plots import breakdown_figure, links_figure, timeline_figure
from astra_core.report.table import breakdown_table
from astra_core.sweep.table import results_figure
from astra_core.topology.generators import leaf_spine
from astra_core.workload.generators.micro import write_micro
from tests.report.test_breakdown_parts import RING2, SYSTEM, T, two_stage_pipeline


@pytest.fixture(scope="module")
def pipeline_result(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pp")
    two_stage_pipeline(folder / "pp")
    return astra.simulate(str(folder / "pp"), SYSTEM, RING2)


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_breakdown_legend_is_the_tables_mean_row(pipeline_result):
    table = breakdown_table(pipeline_result)
    mean_row = [list(column.cells)[-1] for column in table.columns]
    assert mean_row[0] == "mean"
    # ranks 0 and 1 (finish 80062 and 70062 ns): compute 20 µs each, 2T in flight each,
    # waits 20 and 10 µs -> the means in µs (a step under 1 ms is shown in µs)
    assert mean_row[1:] == ["20.000", "0.000", f"{2 * T / 1000:.3f}", "0.000", "15.000", "0.000"]
    assert "(µs;" in str(table.title)
    fig = breakdown_figure(pipeline_result)
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert texts == [f"{PART_LABELS[p]}: {cell} µs" for p, cell in zip(PARTS, mean_row[1:])]


def test_breakdown_title_and_legend_do_not_overlap(pipeline_result):
    fig = breakdown_figure(pipeline_result)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    title = ax.title.get_window_extent(renderer)
    legend = fig.legends[0].get_window_extent(renderer)
    assert title.width > 0 and legend.width > 0
    assert not _overlap(title, legend)
    assert not _overlap(ax.get_window_extent(renderer), legend)


def _bars(collection) -> list[tuple[float, float, float]]:
    """(x0, width, y0) of every rectangle of a broken_barh collection."""
    out = []
    for path in collection.get_paths():
        xs, ys = path.vertices[:, 0], path.vertices[:, 1]
        out.append(
            (round(float(xs.min()), 6), round(float(xs.max() - xs.min()), 6), round(float(ys.min()), 6))
        )
    return sorted(out)


def test_timeline_draws_in_flight_and_waiting_apart(pipeline_result):
    fig = timeline_figure(pipeline_result)
    (ax,) = fig.axes
    bars = {c.get_label(): c for c in ax.collections if not c.get_label().startswith("_")}
    waiting = "waiting (a receive or collective open, nothing in flight)"
    assert list(bars) == ["compute", waiting, "communication in flight"]
    t = T / 1000  # µs
    # rank 0 (row 0, lower half from y = 0): in flight [10, 10 + t] and [30 + t, 30 + 2t];
    # waiting [0, 10] (grad receive open under its forward) and the bubble [10 + t, 30 + t]
    row0 = [(x, w) for x, w, y in _bars(bars["communication in flight"]) if y == 0.0]
    assert row0 == [(10.0, pytest.approx(t)), (pytest.approx(30 + t), pytest.approx(t))]
    row0 = [(x, w) for x, w, y in _bars(bars[waiting]) if y == 0.0]
    assert row0 == [(0.0, 10.0), (pytest.approx(10 + t), pytest.approx(20.0))]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert not _overlap(ax.title.get_window_extent(renderer), fig.legends[0].get_window_extent(renderer))


def test_links_axis_names_the_links_and_the_unit(tmp_path):
    write_micro("all-reduce", 3_000_000, 8, str(tmp_path / "ar"))
    result = astra.simulate(
        str(tmp_path / "ar"), upstream_system("ring", 1), topology=leaf_spine(8, 2, 2), backend="flow"
    )
    fig = links_figure(result)
    (ax,) = fig.axes
    assert ax.get_xlabel() == "directed link src→dst (NPU and switch ids), busiest first"
    assert ax.get_ylabel() == "utilization (% of step time busy)"
    stats = result.link_frame().sort_values(["utilization", "link"], ascending=[False, True])
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        f"{s}→{d}" for s, d in zip(stats["src"], stats["dst"])
    ]


def test_sweep_plot_starts_at_zero_and_gives_the_relative_spread():
    frame = pd.DataFrame(
        {
            "status": ["ok"] * 3,
            "bw": [1.0, 2.0, 4.0],
            "step_ns": [1_082_550_000, 1_082_500_000, 1_082_490_000],
        }
    )
    spec = SimpleNamespace(metric="step_ns", x="bw", parameters=["bw"])
    fig = results_figure(frame, spec)
    (ax,) = fig.axes
    low, high = ax.get_ylim()
    assert low == 0 and high == pytest.approx(1.08255 * 1.08)
    assert ax.get_ylabel() == "step (s)"
    assert ax.get_title().splitlines()[1] == "range 1.08249–1.08255 s (max vs min +0.00554 %)"
