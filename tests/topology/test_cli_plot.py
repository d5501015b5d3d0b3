"""``astra topology``: files that read back equal, PNGs, one-line errors."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from astra_core.cli import main
from astra_core.topology.generators import fat_tree, gpu_cluster, leaf_spine, torus
from astra_core.topology.ns3_format import read_ns3_topology, write_ns3_topology
from astra_core.topology.plot import plot_topology
from tests.topology.conftest import signature

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def invoke(*args):
    return CliRunner().invoke(main, ["topology", *map(str, args)])


@pytest.mark.parametrize(
    "args, expected",
    [
        (["fat-tree", "--k", "4"], fat_tree(4)),
        (
            [
                "leaf-spine",
                "--hosts",
                "8",
                "--leaves",
                "2",
                "--spines",
                "3",
                "--oversubscription",
                "2",
                "--host-gbps",
                "200",
            ],
            leaf_spine(8, 2, 3, 2.0, 200.0),
        ),
        (["torus", "--dims", "4x4x2", "--gbps", "50", "--latency-ns", "300"], torus([4, 4, 2], 50, 300)),
        (["gpu-cluster", "--nodes", "2", "--gpus", "4", "--leaves", "2"], gpu_cluster(2, 4, leaves=2)),
    ],
    ids=["fat-tree", "leaf-spine", "torus", "gpu-cluster"],
)
def test_generated_file_reads_back_equal(tmp_path, args, expected):
    out = tmp_path / "topo.txt"
    result = invoke(*args, "--output", out)
    assert result.exit_code == 0, result.output
    assert signature(read_ns3_topology(out)) == signature(expected)
    first = result.stdout.splitlines()[0]
    assert (
        f"{expected.npus_count} NPUs, {len(expected.switches)} switches; "
        f"{expected.links_count // 2} cables" in first
    )


def test_fat_tree_summary_and_plot(tmp_path):
    png = tmp_path / "ft.png"
    result = invoke("fat-tree", "--k", "4", "--plot", png)
    assert result.exit_code == 0, result.output
    # 16 hosts x 100 Gbps out; 96 links x 100 Gbps in all
    assert result.stdout.splitlines()[0] == (
        "fat-tree k=4: 36 nodes: 16 NPUs, 20 switches; 48 cables (96 directed links); "
        "NPU injection 1600 Gbps, total link capacity 9600 Gbps"
    )
    data = png.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 10_000


def test_show_summarizes_and_plots_a_file(tmp_path):
    path, png = tmp_path / "torus.txt", tmp_path / "torus.png"
    write_ns3_topology(torus([4, 4]), path)
    result = invoke("show", path, "--plot", png)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"{path}: 16 nodes: 16 NPUs, 0 switches; 32 cables")
    assert png.read_bytes()[:8] == PNG_SIGNATURE


def test_plot_grid_layout_for_a_torus(tmp_path):
    png = tmp_path / "t.png"
    plot_topology(torus([3, 3, 2]), png, title="3x3x2", grid=[3, 3, 2])
    data = png.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 10_000


@pytest.mark.parametrize(
    "args, message",
    [
        (["fat-tree", "--k", "3"], "error: fat-tree k=3: k must be an even integer >= 2, got 3"),
        (
            ["torus", "--dims", "4xa"],
            "error: --dims: expected sizes joined by 'x' like 4x4 or 4x4x4, got '4xa'",
        ),
        (["torus", "--dims", "16"], "error: --dims: a torus here is 2-D or 3-D, got '16'"),
        (
            ["leaf-spine", "--hosts", "10", "--leaves", "4", "--spines", "2"],
            "error: leaf-spine 10 hosts/4 leaves/2 spines: 10 hosts do not split evenly over 4 leaves",
        ),
        (
            ["gpu-cluster", "--nodes", "2", "--gpus", "4", "--leaves", "3"],
            "error: gpu-cluster 2x4: leaves (3) must divide gpus_per_node (4) or be a multiple of it",
        ),
    ],
)
def test_errors_are_one_line_exit_1(args, message):
    result = invoke(*args)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [message]


def test_show_bad_file_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("3 1 2\n2\n0 2 100Gbps 1us 0\n1 2 100Gbps 1 0\n")
    result = invoke("show", path)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: {path}: line 4: delay '1' has no unit (e.g. 0.001ms or 1000ns)"
    ]
