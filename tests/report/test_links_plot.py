"""links.png read on the figure matplotlib builds: every bar labelled or the labelled
ones counted in plain English, bars busiest first, every kind of link visible, and the
faulty cables of the run marked and named in the legend."""

from __future__ import annotations

import pytest

import astra
from astra_core.config.system import upstream_system
from astra_core.report.plots import links_figure, ordinal
from astra_core.results import LinkSnapshot, RankResult, RunResult
from astra_core.topology.faults import apply_faults, load_faults
from astra_core.topology.generators import leaf_spine
from astra_core.topology.physical import PhysicalTopology
from astra_core.workload.generators.micro import write_micro

STEP_NS = 1000.0


@pytest.fixture(autouse=True)
def _close_figures():
    """Each test's figures closed after it (pyplot keeps every open figure)."""
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def snapshot_result(topology, busy_ns, **changes) -> RunResult:
    """A run of one 1000 ns step whose link ``i`` was busy ``busy_ns[i]`` ns."""
    links = LinkSnapshot(topology, tuple(b * 10 for b in busy_ns), tuple(busy_ns))
    rank = RankResult(rank=0, finish_ns=STEP_NS, compute_ns=0.0, cpu_ns=0.0, comm_ns=0.0, exposed_comm_ns=0.0)
    return RunResult(backend="flow", ranks=[rank], links=links, **changes)


@pytest.mark.parametrize(
    "n, text",
    [
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (4, "4th"),
        (11, "11th"),
        (12, "12th"),
        (13, "13th"),
        (21, "21st"),
        (22, "22nd"),
        (23, "23rd"),
        (101, "101st"),
        (111, "111th"),
        (112, "112th"),
    ],
)
def test_ordinal(n, text):
    assert ordinal(n) == text


def test_links_axis_counts_the_labelled_links_in_english():
    topology = leaf_spine(32, 4, 2)  # 64 host links + 16 leaf-spine links: every 2nd labelled
    result = snapshot_result(topology, [float(i % 7) for i in range(len(topology.link_src))])
    (ax,) = links_figure(result).axes
    assert "every 2nd link labelled" in ax.get_xlabel()
    assert "2th" not in ax.get_xlabel()


def test_links_bars_are_sorted_busiest_first():
    topology = leaf_spine(8, 2, 2)
    busy = [float((i * 7) % 24) * 10 for i in range(24)]  # a permutation: unsorted by link id
    (ax,) = links_figure(snapshot_result(topology, busy)).axes
    bars = sorted((p.get_x() + p.get_width() / 2, p.get_height()) for p in ax.patches)
    assert [round(h, 6) for _, h in bars] == sorted((b / 10 for b in busy), reverse=True)
    order = sorted(range(24), key=lambda i: (-busy[i], i))
    names = [f"{topology.link_src[i]}→{topology.link_dst[i]}" for i in order]
    assert [t.get_text() for t in ax.get_xticklabels()] == names
    assert ax.get_xlabel() == "directed link src→dst (NPU and switch ids), busiest first"


FAULTS = [
    {"link": [0, 8], "down": True},  # host 0's cable: gone from the run's topology
    {"link": [8, 10], "bandwidth": 0.5},  # a leaf-spine cable at half its bandwidth
    {"link": [9, 11], "down": True, "at_us": 0.2, "until_us": 0.4},  # down for a while
]


def test_links_marks_the_faulty_cables_and_says_so_in_the_legend():
    faults = tuple(load_faults(FAULTS))
    topology = apply_faults(leaf_spine(8, 2, 2), faults)  # 22 links: cable 0-8 removed
    busy = [100.0 + i for i in range(len(topology.link_src))]
    fig = links_figure(snapshot_result(topology, busy, faults=faults))
    (ax,) = fig.axes
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "npu-switch",
        "switch-npu",
        "switch-switch",
        "cable degraded (bandwidth cut)",
        "cable down for part of the run",
        "cable down for the whole run (carried nothing)",
    ]
    labels = {t.get_text(): t for t in ax.get_xticklabels()}
    red = sorted(name for name, t in labels.items() if t.get_color() == "tab:red")
    assert red == ["0↔8", "10→8", "11→9", "8→10", "9→11"]
    centres = {round(t.get_position()[0]): name for name, t in labels.items()}
    hatched = sorted(
        (p.get_hatch(), centres[round(p.get_x() + p.get_width() / 2)]) for p in ax.patches if p.get_hatch()
    )
    assert hatched == [("////", "10→8"), ("////", "8→10"), ("xxxx", "11→9"), ("xxxx", "9→11")]
    (cross,) = [line for line in ax.lines if line.get_marker() == "X"]
    assert list(cross.get_ydata()) == [0.0] and not cross.get_clip_on()
    assert list(cross.get_xdata()) == [len(busy)]  # after the bars, labelled 0↔8
    assert centres[len(busy)] == "0↔8"


def test_links_curves_keep_every_kind_visible():
    # 320 links: one curve per kind; both directions of every host cable are equally busy,
    # so the npu-switch and switch-npu curves coincide and must still both show
    topology = leaf_spine(128, 8, 4)
    busy = [float(50 + (min(s, d) % 9)) for s, d in zip(topology.link_src, topology.link_dst)]
    fig = links_figure(snapshot_result(topology, busy))
    (ax,) = fig.axes
    curves = [line for line in ax.lines if not line.get_label().startswith("_")]
    styles = [(line.get_linestyle(), line.get_marker()) for line in curves]
    assert len(curves) == 3 and len(set(styles)) == 3
    assert all(marker not in ("None", "", None) for _, marker in styles)
    # the curve drawn on top is thinner and its markers sit between the other's
    down, up = curves[0], curves[1]
    assert down.get_linewidth() > up.get_linewidth()
    assert not set(_marked(down)) & set(_marked(up))
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "npu-switch (128 links)",
        "switch-npu (128 links)",
        "switch-switch (64 links)",
    ]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box, axes_box = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert box.y1 <= axes_box.y0  # below the axes, over no curve


def test_a_run_keeps_its_faults_and_links_png_marks_them(tmp_path):
    write_micro("all-reduce", 3_000_000, 8, str(tmp_path / "ar"))
    faults = [{"link": [8, 10], "bandwidth": 0.5}, {"link": [9, 11], "down": True}]
    result = astra.simulate(
        str(tmp_path / "ar"),
        upstream_system("ring", 1),
        topology=leaf_spine(8, 2, 2),
        backend="flow",
        faults=faults,
    )
    assert [(f.link, f.down, f.bandwidth) for f in result.faults] == [
        ([8, 10], False, 0.5),
        ([9, 11], True, None),
    ]
    fig = links_figure(result)
    (ax,) = fig.axes
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts[-2:] == ["cable degraded (bandwidth cut)", "cable down for the whole run (carried nothing)"]
    red = sorted(t.get_text() for t in ax.get_xticklabels() if t.get_color() == "tab:red")
    assert red == ["10→8", "8→10", "9↔11"]
    # the links table says it too: both directions of the degraded cable, nothing else (the
    # cable down for the whole run is gone from the run's topology)
    table = result.link_frame()
    faulty = table[table["fault"] != ""]
    assert sorted(zip(faulty["src"], faulty["dst"], faulty["fault"])) == [
        (8, 10, "degraded"),
        (10, 8, "degraded"),
    ]


def _marked(line) -> list[int]:
    """The indices of a curve's points that carry a marker."""
    start, step = line.get_markevery()
    return list(range(start, len(line.get_xdata()), step))


def test_a_kind_of_one_link_still_shows_its_marker():
    # 264 host links and one switch-switch cable (two links, one per kind of its curve)
    hosts = 132
    links = []
    for h in range(hosts):
        links += [(h, hosts + h % 2, 12.5, 500.0), (hosts + h % 2, h, 12.5, 500.0)]
    links += [(hosts, hosts + 1, 12.5, 500.0), (hosts + 1, hosts, 12.5, 500.0)]
    topology = PhysicalTopology(hosts + 2, [hosts, hosts + 1], links, source="two switches")
    fig = links_figure(snapshot_result(topology, [10.0] * len(links)))
    (curve,) = [line for line in fig.axes[0].lines if line.get_label() == "switch-switch (2 links)"]
    assert _marked(curve) == [0]
