"""FCT tables: size buckets, equal-count bins, percentiles, the slowdown plot."""

from __future__ import annotations

import random
import struct
from itertools import pairwise

import pytest

from astra_core.flows.report import (
    BUCKET_EDGES,
    COLUMNS,
    by_size_bins,
    by_size_bucket,
    flow_table,
    plot_slowdown,
)
from astra_core.flows.run import FlowResult
from tests.flows.conftest import bucket_of, percentile


def results(sizes: list[int], slowdowns: list[float]) -> list[FlowResult]:
    """Flows whose ideal FCT is 1000 ns and whose FCT gives ``slowdowns``."""
    return [
        FlowResult(k % 5, (k + 1) % 5, size, 10 * k, 1000.0 * s, 1000.0)
        for k, (size, s) in enumerate(zip(sizes, slowdowns))
    ]


def test_flow_table_has_one_row_per_flow_with_its_slowdown():
    flows = results([100, 2000], [1.5, 3.0])
    table = flow_table(flows)
    assert list(table.columns) == COLUMNS
    assert table.values.tolist() == [
        [0, 1, 100, 0, 1500.0, 1000.0, 1.5],
        [1, 2, 2000, 10, 3000.0, 1000.0, 3.0],
    ]


def test_buckets_are_decades_with_edges_in_the_upper_bucket():
    assert BUCKET_EDGES == (10_000, 100_000, 1_000_000, 10_000_000)
    sizes = [1, 9_999, 10_000, 99_999, 100_000, 100_001, 999_999, 1_000_000, 10_000_000, 30_000_000]
    table = flow_table(results(sizes, [1.0] * len(sizes)))
    buckets = by_size_bucket(table)
    assert buckets["bucket"].tolist() == [
        "< 10 KB",
        "10 KB - 100 KB",
        "100 KB - 1 MB",
        "1 MB - 10 MB",
        ">= 10 MB",
    ]
    assert buckets["flows"].tolist() == [2, 2, 3, 1, 2]


def test_bucket_counts_add_up_and_percentiles_are_linear_interpolations():
    rng = random.Random(3)
    sizes = [int(10 ** rng.uniform(0, 7)) for _ in range(500)]
    slowdowns = [1 + rng.expovariate(0.2) for _ in sizes]
    buckets = by_size_bucket(flow_table(results(sizes, slowdowns)))
    assert buckets["flows"].sum() == 500
    for row in buckets.itertuples():
        members = [s for size, s in zip(sizes, slowdowns) if _label_index(row.bucket) == bucket_of(size)]
        assert row.flows == len(members)
        assert row.p50 == pytest.approx(percentile(members, 50), rel=1e-12)
        assert row.p95 == pytest.approx(percentile(members, 95), rel=1e-12)
        assert row.p99 == pytest.approx(percentile(members, 99), rel=1e-12)
        assert row.max == pytest.approx(max(members), rel=1e-12)


def _label_index(label: str) -> int:
    return ["< 10 KB", "10 KB - 100 KB", "100 KB - 1 MB", "1 MB - 10 MB", ">= 10 MB"].index(label)


def test_percentiles_of_one_to_101():
    # 101 evenly spaced values: the p-th percentile is 1 + p exactly
    table = flow_table(results([500] * 101, [float(v) for v in range(101, 0, -1)]))
    row = by_size_bucket(table).iloc[0]
    assert (row["flows"], row["p50"], row["p95"], row["p99"], row["max"]) == (101, 51.0, 96.0, 100.0, 101.0)


def test_empty_buckets_are_left_out():
    buckets = by_size_bucket(flow_table(results([50_000, 60_000], [1.0, 2.0])))
    assert buckets["bucket"].tolist() == ["10 KB - 100 KB"]
    assert buckets.iloc[0]["p50"] == 1.5


@pytest.mark.parametrize("n, percent", [(103, 5.0), (20, 5.0), (1000, 10.0), (57, 12.5)])
def test_bins_hold_equal_counts_of_flows_sorted_by_size(n, percent):
    rng = random.Random(n)
    sizes = rng.sample(range(1, 10**7), n)  # distinct sizes
    slowdowns = [1 + rng.random() * 9 for _ in sizes]
    bins = by_size_bins(flow_table(results(sizes, slowdowns)), percent)
    count = round(100 / percent)
    assert len(bins) == count
    flows = bins["flows"].tolist()
    assert sum(flows) == n and max(flows) - min(flows) <= 1
    maxima = bins["max_size_bytes"].tolist()
    assert all(a < b for a, b in pairwise(maxima))
    ordered = sorted(zip(sizes, slowdowns))
    start = 0
    for row in bins.itertuples():
        members = ordered[start : start + row.flows]
        start += row.flows
        assert row.max_size_bytes == members[-1][0]
        assert row.p50 == pytest.approx(percentile([s for _, s in members], 50), rel=1e-12)
        assert row.p99 == pytest.approx(percentile([s for _, s in members], 99), rel=1e-12)


def test_fewer_flows_than_bins_give_one_flow_per_bin():
    bins = by_size_bins(flow_table(results([30, 10, 20], [3.0, 1.0, 2.0])))
    assert bins["max_size_bytes"].tolist() == [10, 20, 30]
    assert bins["flows"].tolist() == [1, 1, 1]
    assert bins["p99"].tolist() == [1.0, 2.0, 3.0]


def test_plot_slowdown_writes_a_png_of_the_figure_size(tmp_path):
    rng = random.Random(1)
    sizes = [rng.randrange(1, 10**6) for _ in range(200)]
    table = flow_table(results(sizes, [1 + rng.random() for _ in sizes]))
    path = tmp_path / "fct.png"
    plot_slowdown({"dcqcn": table, "hpcc": table.assign(slowdown=table.slowdown * 1.1)}, path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    # figsize (11, 4) inches at 120 dpi
    assert struct.unpack(">II", data[16:24]) == (11 * 120, 4 * 120)


def test_the_legend_sits_beside_the_panels_not_over_the_data():
    # One figure legend right of both panels, not a legend per panel over its lines
    # (upper right, where the 99th percentile of "none" runs).
    import matplotlib.pyplot as plt

    from astra_core.flows.report import slowdown_figure

    rng = random.Random(2)
    sizes = [rng.randrange(1, 10**6) for _ in range(200)]
    tables = {
        cc: flow_table(results(sizes, [k + rng.random() for _ in sizes]))
        for k, cc in enumerate(["none", "dcqcn", "hpcc", "hpcc-pint", "timely", "dctcp"], 1)
    }
    fig = slowdown_figure(tables)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    assert [t.get_text() for t in legend.get_texts()] == list(tables)
    for ax in fig.axes:
        assert ax.get_legend() is None
        assert box.x0 > ax.get_window_extent(renderer).x1  # wholly to the right of every panel
    assert box.x1 <= fig.bbox.x1  # and inside the figure
    plt.close(fig)


def test_a_table_without_flows_is_left_out_of_the_plot(tmp_path):
    # Not KeyError: 'max_size_bytes' (flows run of a 0-flow file with --plots).
    table = flow_table(results([1000, 2000], [1.0, 2.0]))
    path = tmp_path / "fct.png"
    plot_slowdown({"empty": flow_table([]), "two": table}, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
