"""examples/cc_study: its table and plots name the congestion control of each row and
line, and the most loaded link by its two ends with its load in units."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("astra_ns3")

RUN = Path(__file__).resolve().parents[2] / "examples" / "cc_study" / "run.py"


@pytest.fixture(scope="module")
def study():
    spec = importlib.util.spec_from_file_location("cc_study_run", RUN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def incast_runs(study, tmp_path_factory):
    out = tmp_path_factory.mktemp("cc")
    return [study.run("incast", cc, out) for cc in ("dcqcn", "hpcc")]


def test_summary_names_the_algorithm_and_the_busiest_link(study, incast_runs):
    table = study.summary_table(incast_runs)
    assert list(table["congestion_control"]) == ["DCQCN", "HPCC"]
    # the incast's bottleneck: the switch's port to NPU 0 (star of 8 senders, switch node 9)
    assert list(table["busiest_link"]) == ["switch 9 -> NPU 0"] * 2
    assert "link_id" not in table.columns
    for row in table.itertuples():
        # 8 x 12.5 MB of payload crossed it, plus at most 5 % of headers and ACK-free framing
        assert 100.0 <= row.busiest_link_sent_mb <= 105.0
        # its mean load: MB sent x 8 / (100 Gbps x finish time), in %
        assert row.busiest_link_load_pct == pytest.approx(
            row.busiest_link_sent_mb * 8e6 / (100 * row.finish_us * 1e3) * 100
        )


def test_queue_plot_legend_and_titles_name_algorithm_and_link(study, incast_runs):
    fig = study.queue_figure("incast", incast_runs)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    legends = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in panels]
    assert legends == [["DCQCN"], ["HPCC"]]
    for ax, r in zip(panels, incast_runs):
        assert ax.get_title().startswith("switch 9 -> NPU 0: peak ")
        assert ax.get_title().endswith(f"{r['busiest_link_load_pct']:.0f} % load")
    fig = study.throughput_figure("incast", incast_runs)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert [t.split(":")[0] for t in titles] == ["DCQCN", "HPCC"]
    (legend,) = fig.legends
    assert legend.get_texts()[0].get_text() == "NPU 1 -> NPU 0"
