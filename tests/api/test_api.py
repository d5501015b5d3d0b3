"""The Python API: ``astra.simulate(...) -> Report`` and the Report's per-rank and
per-collective views.

Numbers come from upstream ASTRA-sim on the bundled ResNet-50 example (reference
case ``text_unaware_ring8_Resnet50_DataParallel``: 1,082,479,776 ns per rank,
29,776 ns exposed), from the trace files themselves, from closed forms derived
below, or from conservation laws (the four breakdown parts add up to the finish
time; a symmetric run equals the full one).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import astra
from astra_core.config import load_network, load_system
from astra_core.errors import ConfigError
from astra_core.report import Report
from astra_core.report.breakdown import PARTS
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.writer import make_node, write_rank_trace
from tests.conftest import isolate_plugins, read_et_nodes

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "resnet50_dp"
PREFIX = EXAMPLE / "workload" / "Resnet50_DataParallel"
SYSTEM = EXAMPLE / "system.json"
NETWORK = EXAMPLE / "network.yml"
NPUS = 8
UPSTREAM_FINISH_NS = 1_082_479_776
UPSTREAM_EXPOSED_NS = 29_776
MIB = 1 << 20
RING2 = {"topology": ["Ring"], "npus_count": [2], "bandwidth": [50.0], "latency": [500.0]}


@pytest.fixture(autouse=True)
def _plugins(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)


@pytest.fixture(scope="module")
def report():
    with pytest.MonkeyPatch.context() as mp:
        isolate_plugins(mp, Path(__import__("tempfile").mkdtemp()))
        return astra.simulate(workload=str(PREFIX), system=str(SYSTEM), network=str(NETWORK))


def example_nodes(rank: int) -> list:
    return read_et_nodes(PREFIX.with_name(f"{PREFIX.name}.{rank}.et"))


def attr(node: pb.Node, name: str):
    for a in node.attr:
        if a.name == name:
            return getattr(a, a.WhichOneof("value"))
    raise KeyError(name)


def test_simulate_returns_a_report_with_upstream_times(report):
    assert astra.Report is Report and isinstance(report, astra.Report)
    assert report.backend == "analytical"
    assert report.step_ns == UPSTREAM_FINISH_NS
    assert [r.rank for r in report.ranks] == list(range(NPUS))
    assert all(r.finish_ns == UPSTREAM_FINISH_NS for r in report.ranks)
    assert all(r.exposed_comm_ns == UPSTREAM_EXPOSED_NS for r in report.ranks)


@pytest.mark.parametrize("form", ["objects", "dicts", "pathlib"])
def test_configs_as_objects_dicts_or_paths_give_the_same_run(report, form):
    if form == "objects":
        system, network = load_system(SYSTEM), load_network(NETWORK)
    elif form == "dicts":
        system = json.loads(SYSTEM.read_text())
        network = load_network(NETWORK).to_dict()
    else:
        system, network = SYSTEM, NETWORK
    other = astra.simulate(PREFIX, system, network)
    assert other.to_dict() == report.to_dict()


def test_a_bad_dict_config_is_one_config_error_naming_it():
    network = {
        "topology": ["Ring"],
        "npus_count": [8],
        "bandwidth": [-1.0],
        "latency": [500.0],
        "latencyy": 3,
    }
    with pytest.raises(ConfigError) as err:
        astra.simulate(PREFIX, SYSTEM, network)
    assert str(err.value).splitlines() == [
        "network: bandwidth[0]: must be > 0, got -1.0",
        "network: unknown key 'latencyy'; did you mean 'latency'?",
    ]


def test_rank_frame_has_every_rank_and_a_breakdown_that_adds_up(report):
    frame = report.rank_frame()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == [
        "rank",
        "finish_ns",
        "compute_ns",
        "cpu_ns",
        "comm_ns",
        "comm_wait_ns",
        "exposed_comm_ns",
        "compute_only_ns",
        "overlapped_comm_ns",
        "comm_only_ns",
        "collective_wait_ns",
        "p2p_wait_ns",
        "idle_ns",
    ]
    assert frame["rank"].tolist() == list(range(NPUS))
    assert (frame["finish_ns"] == UPSTREAM_FINISH_NS).all()
    parts = frame[list(PARTS)]
    assert (parts >= 0).all().all()
    assert (parts.sum(axis=1) == frame["finish_ns"]).all()
    # No CPU ops and one GPU compute slot: compute = compute_only + overlapped, and
    # upstream's exposed communication (finish - compute) = the four parts without compute.
    assert (frame["compute_only_ns"] + frame["overlapped_comm_ns"] == frame["compute_ns"]).all()
    exposed = frame["comm_only_ns"] + frame["collective_wait_ns"] + frame["p2p_wait_ns"] + frame["idle_ns"]
    assert (exposed == UPSTREAM_EXPOSED_NS).all()
    # Compute time = the sum of the trace's COMP durations (µs -> ns).
    comp_ns = sum(n.duration_micros * 1000 for n in example_nodes(0) if n.type == pb.COMP_NODE)
    assert (frame["compute_ns"] == comp_ns).all()


def test_collective_frame_has_every_collective_of_every_rank(report):
    frame = report.collective_frame()
    assert len(frame) == NPUS * 54  # 54 COMM_COLL nodes per rank in the trace
    for rank in (0, 5):
        nodes = {n.id: n for n in example_nodes(rank) if n.type == pb.COMM_COLL_NODE}
        mine = frame[frame["rank"] == rank]
        assert sorted(mine["node_id"]) == sorted(nodes)
        for row in mine.itertuples():
            assert row.bytes == attr(nodes[row.node_id], "comm_size")
            assert row.name == nodes[row.node_id].name
    assert set(frame["type"]) == {"ALL_REDUCE"}
    assert (frame["chunks"] == 4).all()  # preferred-dataset-splits
    assert (frame["duration_ns"] == frame["end_ns"] - frame["start_ns"]).all()
    # One dimension, one ring all-reduce phase; chunks run one at a time
    # (active-chunks-per-dimension 1), so a phase never outlasts its collective.
    assert (frame["all_reduce_dim0_ns"] > 0).all()
    assert (frame["all_reduce_dim0_ns"] <= frame["duration_ns"]).all()
    # The last collective of every rank ends within its step.
    assert (frame["end_ns"] <= UPSTREAM_FINISH_NS).all()


def test_phase_frame_has_one_row_per_chunk_phase(report):
    phases = report.phase_frame()
    assert list(phases.columns) == ["rank", "node_id", "dim", "phase", "start_ns", "end_ns", "duration_ns"]
    assert len(phases) == NPUS * 54 * 4  # 4 chunks x 1 phase per collective
    assert set(phases["phase"]) == {"all-reduce"} and set(phases["dim"]) == {0}
    # Chunks of one collective run back to back: their phase times add up to the
    # union the collective frame reports.
    per_collective = phases.groupby(["rank", "node_id"])["duration_ns"].sum()
    frame = report.collective_frame().set_index(["rank", "node_id"])["all_reduce_dim0_ns"]
    assert (per_collective.sort_index() == frame.sort_index()).all()


def test_a_symmetric_run_reports_the_same_frames_as_the_full_run(report):
    full = astra.simulate(PREFIX, SYSTEM, NETWORK, symmetry=False)
    assert report.symmetric and not full.symmetric
    pd.testing.assert_frame_equal(report.rank_frame(), full.rank_frame())
    pd.testing.assert_frame_equal(report.collective_frame(), full.collective_frame())
    pd.testing.assert_frame_equal(report.phase_frame(), full.phase_frame())
    assert [b.to_dict() for b in report.breakdown()] == [b.to_dict() for b in full.breakdown()]


def test_breakdown_of_a_two_rank_trace_is_the_closed_form(tmp_path):
    # Rank 0: compute 5 µs, then send 1 MiB to rank 1.  Rank 1: a receive of it and,
    # independently, compute 10 µs; then compute 3 µs after the receive.
    # Ring 2 at 50 GB/s, 500 ns: the message takes int(500 + 2^20 / 53.6870912) = 20031 ns,
    # leaving at 5000 ns and in at 25031 ns.
    # rank 0: compute [0, 5000], send [5000, 25031]          -> finish 25031
    # rank 1: recv [0, 25031], compute [0, 10000] and [25031, 28031] -> finish 28031
    # The message is in flight [5000, 25031] for both ranks: rank 1's receive waits
    # [0, 5000], under its own compute.
    prefix = tmp_path / "pair"
    write_rank_trace(
        f"{prefix}.0.et",
        [
            make_node(1, "fwd", pb.COMP_NODE, duration_micros=5),
            make_node(2, "send", pb.COMM_SEND_NODE, data_deps=[1], comm_dst=1, comm_size=MIB, comm_tag=9),
        ],
    )
    write_rank_trace(
        f"{prefix}.1.et",
        [
            make_node(1, "recv", pb.COMM_RECV_NODE, comm_src=0, comm_size=MIB, comm_tag=9),
            make_node(2, "other", pb.COMP_NODE, duration_micros=10),
            make_node(3, "bwd", pb.COMP_NODE, data_deps=[1], duration_micros=3),
        ],
    )
    report = astra.simulate(str(prefix), SYSTEM, RING2)
    assert [b.to_dict() for b in report.breakdown()] == [
        {
            "rank": 0,
            "finish_ns": 25031,
            "compute_only_ns": 5000,
            "overlapped_comm_ns": 0,
            "comm_only_ns": 20031,  # the message moving, nothing else
            "collective_wait_ns": 0,
            "p2p_wait_ns": 0,
            "idle_ns": 0,
        },
        {
            "rank": 1,
            "finish_ns": 28031,
            "compute_only_ns": 8000,  # [0, 5000] and [25031, 28031]
            "overlapped_comm_ns": 5000,  # the message arriving under [5000, 10000]
            "comm_only_ns": 15031,
            "collective_wait_ns": 0,
            "p2p_wait_ns": 0,
            "idle_ns": 0,
        },
    ]
    # No collectives: the per-collective table is empty but keeps its columns.
    frame = report.collective_frame()
    assert len(frame) == 0 and list(frame.columns)[:6] == [
        "rank",
        "node_id",
        "name",
        "type",
        "bytes",
        "group",
    ]


def test_link_frame_only_for_backends_with_link_statistics(report):
    assert report.link_frame() is None
    # Switch 8 (50 GB/s, 500 ns) on the congestion-aware model: every message leaves
    # its NPU over exactly one NPU->switch link and enters its destination over one
    # switch->NPU link, so each kind carries every byte the NPUs sent, once.
    switch8 = {"topology": ["Switch"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]}
    congested = astra.simulate(PREFIX, SYSTEM, switch8, backend="analytical-congestion")
    links = congested.link_frame()
    assert list(links.columns) == [
        "link",
        "src",
        "dst",
        "kind",
        "bandwidth_bytes_per_ns",
        "latency_ns",
        "bytes",
        "busy_ns",
        "utilization",
        "max_queue",
        "peak_flows",
        "fault",
    ]
    assert len(links) == 2 * NPUS  # one cable (two directed links) per NPU
    by_kind = links.groupby("kind")["bytes"].sum().to_dict()
    assert by_kind == {"npu-switch": congested.message_bytes, "switch-npu": congested.message_bytes}
    # A link is busy bytes / bandwidth, truncated to whole ns per message.
    assert (links["busy_ns"] <= links["bytes"] / links["bandwidth_bytes_per_ns"]).all()
    assert ((links["utilization"] - links["busy_ns"] / congested.step_ns).abs() < 1e-12).all()
    assert links["utilization"].between(0, 1).all()


def test_a_network_the_nccl_model_cannot_place_is_refused_before_the_traces_are_read(tmp_path):
    # The config's error must come before the traces are read (an 8,192-rank job's
    # took 265 s): the trace files here do not even exist.
    network = {
        "topology": ["Switch"] * 3,
        "npus_count": [8, 64, 16],
        "bandwidth": [400.0] * 3,
        "latency": [300] * 3,
    }
    with pytest.raises(ConfigError, match=r"system\.json: nccl: the NCCL model places 2 network dimensions"):
        astra.simulate(str(tmp_path / "absent"), REPO / "examples/validation/hgx_h100/system.json", network)
