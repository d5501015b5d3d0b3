"""The Chrome / Perfetto timeline (``astra run --timeline FILE``, ``write_timeline``).

Checked against the trace files themselves (one slice per ET node that ran,
COMP slices as long as the node's ``duration_micros``), against the run's own
finish times, and against a two-rank trace whose every slice has a closed form.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from astra_core.api import simulate
from astra_core.cli import main
from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.report.timeline import write_timeline
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.writer import make_node, write_rank_trace
from tests.conftest import isolate_plugins, read_et_nodes, write_pair_trace

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "resnet50_dp"
PREFIX = EXAMPLE / "workload" / "Resnet50_DataParallel"
NPUS = 8
MIB = 1 << 20
RING2 = {"topology": ["Ring"], "npus_count": [2], "bandwidth": [50.0], "latency": [500.0]}


@pytest.fixture(autouse=True)
def _plugins(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)


def slices(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def node_slices(trace: dict) -> list[dict]:
    """The slices of ET nodes (not the in-flight and waiting threads)."""
    return [e for e in slices(trace) if "node_id" in e.get("args", {})]


def process_names(trace: dict) -> dict[int, str]:
    return {
        e["pid"]: e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_name"
    }


def overlaps(trace: dict) -> list[tuple]:
    """Pairs of slices on one (pid, tid) where the later one starts before the earlier ends."""
    lanes: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for e in slices(trace):
        lanes[e["pid"], e["tid"]].append(e)
    bad = []
    for lane, events in lanes.items():
        events.sort(key=lambda e: (e["ts"], e["dur"]))
        for a, b in zip(events, events[1:]):
            if b["ts"] < a["ts"] + a["dur"] - 1e-9:
                bad.append((lane, a["name"], b["name"]))
    return bad


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    """``astra run --json --timeline`` on the bundled example: (json document, trace)."""
    out = tmp_path_factory.mktemp("timeline")
    with pytest.MonkeyPatch.context() as mp:
        isolate_plugins(mp, out)
        result = CliRunner().invoke(
            main,
            [
                "run",
                "--workload",
                str(PREFIX),
                "--system",
                str(EXAMPLE / "system.json"),
                "--network",
                str(EXAMPLE / "network.yml"),
                "--json",
                str(out / "run.json"),
                "--timeline",
                str(out / "trace.json"),
            ],
        )
    assert result.exit_code == 0, result.output
    return json.loads((out / "run.json").read_text()), json.loads((out / "trace.json").read_text())


def test_one_named_process_per_rank(resnet):
    _, trace = resnet
    assert process_names(trace) == {rank: f"rank {rank}" for rank in range(NPUS)}
    assert {e["pid"] for e in slices(trace)} == set(range(NPUS))


def test_one_slice_per_et_node_that_ran(resnet):
    _, trace = resnet
    by_rank: dict[int, list[dict]] = defaultdict(list)
    for e in node_slices(trace):
        by_rank[e["pid"]].append(e)
    for rank in range(NPUS):
        nodes = read_et_nodes(PREFIX.with_name(f"{PREFIX.name}.{rank}.et"))
        events = by_rank[rank]
        assert len(nodes) == 215  # 161 COMP + 54 COMM_COLL per rank; every node runs
        assert len(events) == len(nodes)
        assert sorted(e["args"]["node_id"] for e in events) == sorted(n.id for n in nodes)
        # Times are µs: a COMP node of duration_micros d is a slice of dur d exactly.
        duration = {n.id: n.duration_micros for n in nodes if n.type == pb.COMP_NODE}
        comp = [e for e in events if e["args"]["type"] == "COMP"]
        assert len(comp) == len(duration) == 161
        for e in comp:
            assert e["dur"] == duration[e["args"]["node_id"]]


def test_slices_on_one_lane_never_overlap(resnet):
    _, trace = resnet
    assert overlaps(trace) == []


def test_last_slice_of_each_rank_ends_at_its_finish_time(resnet):
    doc, trace = resnet
    ends: dict[int, float] = defaultdict(float)
    starts: dict[int, float] = defaultdict(lambda: float("inf"))
    for e in slices(trace):
        assert e["ts"] >= 0 and e["dur"] >= 0
        ends[e["pid"]] = max(ends[e["pid"]], e["ts"] + e["dur"])
        starts[e["pid"]] = min(starts[e["pid"]], e["ts"])
    for r in doc["ranks"]:
        assert r["finish_ns"] == 1_082_479_776  # upstream's step time (examples/resnet50_dp)
        assert ends[r["rank"]] == pytest.approx(r["finish_ns"] / 1000, abs=1e-6)
        assert starts[r["rank"]] == 0


def test_timeline_of_a_two_rank_trace_is_the_closed_form(tmp_path):
    # Rank 0: compute 5 µs, then send 1 MiB to rank 1.  Rank 1: receive it, then compute 3 µs.
    # Ring 2 at 50 GB/s, 500 ns: the message takes 500 + 2^20 / (50 * 2^30 / 1e9)
    # = 500 + 19531.25 ns, truncated to 20031 ns; it leaves at 5000 ns and is in at 25031 ns.
    prefix = write_pair_trace(tmp_path / "pair", nbytes=MIB, tag=9, fwd_us=5, bwd_us=3)
    system = SystemConfig.from_dict(json.loads((EXAMPLE / "system.json").read_text()))
    result = simulate(str(prefix), system, NetworkConfig.from_dict(RING2))
    assert [r.finish_ns for r in result.ranks] == [25031, 28031]

    write_timeline(result, tmp_path / "trace.json")
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert process_names(trace) == {0: "rank 0", 1: "rank 1"}
    got = sorted((e["pid"], e["name"], e["ts"], e["dur"]) for e in slices(trace))
    # The message is in flight for both ranks from 5 µs; rank 1's receive waits before that.
    want = sorted(
        [
            (0, "fwd", 0.0, 5.0),
            (0, "send", 5.0, 20.031),
            (0, "in flight", 5.0, 20.031),
            (1, "recv", 0.0, 25.031),
            (1, "bwd", 25.031, 3.0),
            (1, "in flight", 5.0, 20.031),
            (1, "waiting", 0.0, 5.0),
        ]
    )
    assert [g[:2] for g in got] == [w[:2] for w in want]
    for g, w in zip(got, want):
        assert g[2:] == pytest.approx(w[2:], abs=1e-9)
    assert overlaps(trace) == []
    assert trace["otherData"] == {"backend": "analytical", "step_ns": 28031}


def test_concurrent_receives_do_not_overlap_on_one_lane(tmp_path):
    # Rank 1 posts two receives at t=0; 1 MiB arrives at 20031 ns, then 1 KiB (sent once
    # the first send is done: sends hold the rank's one communication slot) at
    # 20031 + int(500 + 1024 / 53.6870912) = 20031 + 519 = 20550 ns.  Both receives run
    # over [0, 20031] and [0, 20550]: one lane cannot show both without overlap.
    prefix = tmp_path / "two"
    write_rank_trace(
        f"{prefix}.0.et",
        [
            make_node(1, "s_big", pb.COMM_SEND_NODE, comm_dst=1, comm_size=MIB, comm_tag=1),
            make_node(2, "s_small", pb.COMM_SEND_NODE, comm_dst=1, comm_size=1024, comm_tag=2),
        ],
    )
    write_rank_trace(
        f"{prefix}.1.et",
        [
            make_node(1, "r_big", pb.COMM_RECV_NODE, comm_src=0, comm_size=MIB, comm_tag=1),
            make_node(2, "r_small", pb.COMM_RECV_NODE, comm_src=0, comm_size=1024, comm_tag=2),
        ],
    )
    system = SystemConfig.from_dict(json.loads((EXAMPLE / "system.json").read_text()))
    result = simulate(str(prefix), system, NetworkConfig.from_dict(RING2))
    assert [r.finish_ns for r in result.ranks] == [20550, 20550]
    write_timeline(result, tmp_path / "trace.json")
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert len(node_slices(trace)) == 4
    # the two messages back to back: one in-flight slice per rank, nothing waiting
    flights = [
        (e["pid"], e["name"], e["ts"], e["dur"]) for e in slices(trace) if "node_id" not in e.get("args", {})
    ]
    assert flights == [(0, "in flight", 0.0, 20.55), (1, "in flight", 0.0, 20.55)]
    assert overlaps(trace) == []
