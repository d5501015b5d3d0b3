"""Reading nccl-tests output (astra_core.calibrate.nccl_tests) on two public logs
(tests/data/nccl_tests/README.md) and on the forms their headers and rows take."""

from __future__ import annotations

from pathlib import Path

import pytest

from astra_core.calibrate.nccl_tests import nccl_version, read_logs
from astra_core.errors import ConfigError

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl_tests"
BUS_FACTOR = {  # nccl-tests' busbw = algbw x this (src/*.cu GetBw)
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    "send-recv": lambda n: 1.0,
}


def test_a_file_with_five_tests_gives_five_logs_with_the_machine_of_its_rank_lines():
    logs = read_logs(DATA / "h100_1node_5colls.txt")
    assert [log.collective for log in logs] == [
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "all-to-all",
        "send-recv",
    ]
    for log in logs:
        assert (log.ranks, log.nodes, log.gpus_per_node) == (8, 1, 8)
        assert log.device == "NVIDIA H100 80GB HBM3"
        assert log.nccl_version == "2.29.2" and log.tests_version == "2.17.8"
        assert not log.cuda_graph
        sizes = [p.size_bytes for p in log.points]
        assert len(sizes) == 10 and all(b // a == 2 for a, b in zip(sizes, sizes[1:], strict=False))


@pytest.mark.parametrize("name", ["h100_1node_5colls.txt", "h100_p5_2node_all_reduce.txt"])
def test_every_row_read_keeps_nccl_tests_own_bus_bandwidth_law(name):
    """busbw = size / time x the collective's factor: the columns read are the
    out-of-place time and busbw of the same row (to the log's 2-decimal print)."""
    for log in read_logs(DATA / name):
        for p in log.points:
            expected = p.size_bytes / (p.time_us * 1e3) * BUS_FACTOR[log.collective](log.ranks)
            assert p.busbw_gbps == pytest.approx(expected, rel=2e-3, abs=0.006)
            assert p.in_place_time_us is not None


def test_mpirun_tags_inside_rows_are_removed_and_two_hosts_make_two_nodes():
    (log,) = read_logs(DATA / "h100_p5_2node_all_reduce.txt")
    assert (log.collective, log.ranks, log.nodes) == ("all-reduce", 16, 2)
    assert log.nccl_version is None  # this test version printed none
    assert log.points[0].size_bytes == 8 and log.points[0].time_us == 85.70
    assert log.points[0].in_place_time_us == 74.97
    assert log.points[-1].size_bytes == 16 * 2**30
    assert len(log.points) == 32


def test_collective_selects_one_test_of_several_and_names_an_unnamed_one(tmp_path):
    (only,) = read_logs(DATA / "h100_1node_5colls.txt", collective="all-to-all")
    assert only.collective == "all-to-all" and only.points[0].time_us == 124.79
    gather = tmp_path / "gather.txt"
    gather.write_text(
        "# Collective test starting: all_gather_perf\n"
        "#  Rank  0 Group  0 Pid 1 on a device  0 [0x1] NVIDIA H100 80GB HBM3\n"
        "#  Rank  1 Group  0 Pid 2 on a device  1 [0x2] NVIDIA H100 80GB HBM3\n"
        "        1024   128  float  none  -1   10.0  0.10  0.05  0   10.0  0.10  0.05  0\n"
    )
    with pytest.raises(ConfigError, match=r"gather.txt: no all-reduce test"):
        read_logs(gather, collective="all-reduce")
    anonymous = tmp_path / "run.log"
    anonymous.write_text((DATA / "h100_p5_2node_all_reduce.txt").read_text())
    with pytest.raises(ConfigError, match=r"run.log: cannot tell the collective"):
        read_logs(anonymous)
    assert read_logs(anonymous, collective="all-reduce")[0].collective == "all-reduce"


def test_nccl_version_codes():
    assert nccl_version(22403) == "2.24.3"
    assert nccl_version(22902) == "2.29.2"
    assert nccl_version(2708) == "2.7.8"  # the code before 2.9: major x 1000 + minor x 100 + patch


def test_unreadable_logs_are_one_line_naming_the_file(tmp_path):
    empty = tmp_path / "all_reduce_perf.txt"
    empty.write_text("# nThread 1 nGpus 8\n")
    with pytest.raises(ConfigError, match=r"all_reduce_perf.txt: no nccl-tests rows"):
        read_logs(empty)
    no_ranks = tmp_path / "all_gather_perf.txt"
    no_ranks.write_text("        1024   256  float  none  -1   10.0  0.10  0.09  0   10.0  0.10  0.09  0\n")
    with pytest.raises(ConfigError, match=r"all_gather_perf.txt: no '#  Rank N"):
        read_logs(no_ranks)
    (log,) = read_logs(no_ranks, ranks=8, nodes=1)
    assert (log.collective, log.ranks, log.points[0].time_us) == ("all-gather", 8, 10.0)
    bad = tmp_path / "sendrecv_perf.txt"
    bad.write_text("        1024   256  float  sum  -1   x  0.10  0.09  0\n")
    with pytest.raises(ConfigError, match=r"sendrecv_perf.txt:1: a row needs time"):
        read_logs(bad, ranks=2, nodes=1)
    with pytest.raises(ConfigError, match=r"missing.txt: cannot read"):
        read_logs(tmp_path / "missing.txt")


def test_the_launch_constant_is_the_floor_of_an_eight_gpu_thread_over_its_eight_calls():
    """LAUNCH_US's source: all_reduce_perf -t 1 -g 8 on 8 A100 is flat from 64 B to
    32 KiB; one thread launches 8 calls per iteration."""
    from astra_core.system.collectives.nccl.tuning import LAUNCH_US

    (log,) = read_logs(DATA / "a100_1node_g8_all_reduce.txt")
    assert (log.collective, log.ranks, log.nodes, log.gpus_per_thread) == ("all-reduce", 8, 1, 8)
    flat = [p.time_us for p in log.points if p.size_bytes <= 32768]
    assert len(flat) == 10 and max(flat) - min(flat) < 1.0
    assert sorted(flat)[len(flat) // 2] / 8 == pytest.approx(LAUNCH_US, rel=0.01)
