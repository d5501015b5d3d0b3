"""The breakdown tells communication in flight from waiting.

A receive posted at t = 0 must not count as communication until its message
arrives: on a pipeline, stage 0's gradient receives would make ``comm_ns`` nearly
the whole step and ``breakdown.png`` show no waiting at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import astra
from astra_core.intervals import flat_covered
from astra_core.report.breakdown import PARTS
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, ModelConfig, generate_llm, write_llm
from astra_core.workload.writer import make_node, write_rank_trace

REPO = Path(__file__).resolve().parents[2]
SYSTEM = REPO / "examples" / "resnet50_dp" / "system.json"
MIB = 1 << 20
RING2 = {"topology": ["Ring"], "npus_count": [2], "bandwidth": [50.0], "latency": [500.0]}
#: One 1 MiB message on RING2: int(500 + 2^20 / (50 * 2^30 / 1e9)) ns (analytical backend).
T = 20031


def two_stage_pipeline(prefix: Path) -> None:
    """Stage 0: forward 10 µs, send the activation, backward 10 µs once the gradient is in
    (its receive posted at t = 0, as Megatron's stage 0 posts its grad receives).
    Stage 1: receive the activation (posted at t = 0), forward 10 µs, backward 10 µs, send
    the gradient back."""
    write_rank_trace(
        f"{prefix}.0.et",
        [
            make_node(1, "fwd", pb.COMP_NODE, duration_micros=10),
            make_node(2, "send_act", pb.COMM_SEND_NODE, data_deps=[1], comm_dst=1, comm_size=MIB, comm_tag=1),
            make_node(3, "recv_grad", pb.COMM_RECV_NODE, comm_src=1, comm_size=MIB, comm_tag=2),
            make_node(4, "bwd", pb.COMP_NODE, data_deps=[3], duration_micros=10),
        ],
    )
    write_rank_trace(
        f"{prefix}.1.et",
        [
            make_node(1, "recv_act", pb.COMM_RECV_NODE, comm_src=0, comm_size=MIB, comm_tag=1),
            make_node(2, "fwd", pb.COMP_NODE, data_deps=[1], duration_micros=10),
            make_node(3, "bwd", pb.COMP_NODE, data_deps=[2], duration_micros=10),
            make_node(
                4, "send_grad", pb.COMM_SEND_NODE, data_deps=[3], comm_dst=0, comm_size=MIB, comm_tag=2
            ),
        ],
    )


def test_pipeline_breakdown_is_the_closed_form(tmp_path):
    # Stage 0: fwd [0, 10000], activation in flight [10000, 10000 + T]; stage 1 computes
    # [10000 + T, 30000 + T], the gradient is in flight [30000 + T, 30000 + 2T]; stage 0's
    # bwd [30000 + 2T, 40000 + 2T].  Stage 0's grad receive is open [0, 30000 + 2T] but
    # the gradient moves only in its last T: it waits [10000 + T, 30000 + T] = 20 µs.
    # Stage 1 waits for the activation from 0 until it leaves stage 0 at 10000.
    two_stage_pipeline(tmp_path / "pp")
    result = astra.simulate(str(tmp_path / "pp"), SYSTEM, RING2)
    assert [b.to_dict() for b in result.breakdown()] == [
        {
            "rank": 0,
            "finish_ns": 40000 + 2 * T,
            "compute_only_ns": 20000,
            "overlapped_comm_ns": 0,
            "comm_only_ns": 2 * T,  # activation out, gradient in: both moving
            "collective_wait_ns": 0,
            "p2p_wait_ns": 20000,  # the bubble: stage 1 computing
            "idle_ns": 0,
        },
        {
            "rank": 1,
            "finish_ns": 30000 + 2 * T,
            "compute_only_ns": 20000,
            "overlapped_comm_ns": 0,
            "comm_only_ns": 2 * T,
            "collective_wait_ns": 0,
            "p2p_wait_ns": 10000,  # stage 0's forward
            "idle_ns": 0,
        },
    ]
    ranks = [r.to_dict() for r in result.ranks]
    # in flight: 2T each; waiting: the grad receive's open time with nothing moving
    # (rank 0: [0, 10000] under its forward and the 20 µs bubble), rank 1: [0, 10000].
    assert [(r["comm_ns"], r["comm_wait_ns"]) for r in ranks] == [(2 * T, 30000), (2 * T, 10000)]
    assert [list(t.in_flight) for t in sorted(result.traces, key=lambda t: t.rank)] == [
        [10000, 10000 + T, 30000 + T, 30000 + 2 * T]
    ] * 2


def test_rank_frame_and_json_carry_in_flight_and_waiting(tmp_path):
    two_stage_pipeline(tmp_path / "pp")
    result = astra.simulate(str(tmp_path / "pp"), SYSTEM, RING2)
    frame = result.rank_frame()
    assert list(frame.columns) == [
        "rank",
        "finish_ns",
        "compute_ns",
        "cpu_ns",
        "comm_ns",
        "comm_wait_ns",
        "exposed_comm_ns",
        *PARTS,
    ]
    assert frame["comm_ns"].tolist() == [2 * T, 2 * T]
    assert frame["p2p_wait_ns"].tolist() == [20000, 10000]
    assert (frame[list(PARTS)].sum(axis=1) == frame["finish_ns"]).all()
    assert [r["comm_wait_ns"] for r in result.to_dict()["ranks"]] == [30000, 10000]


# -- conservation on generated pipelines, every backend that times messages ------------------

TINY = ModelConfig("tiny", layers=4, hidden=512, heads=8, ffn_hidden=2048, vocab=0, seq_len=512)
DIMS = [2, 4]  # TP 2 on dim 0, PP 4 on dim 1
NETWORK = {
    "topology": ["Switch", "Switch"],
    "npus_count": DIMS,
    "bandwidth": [200.0, 25.0],
    "latency": [500.0, 2000.0],
}


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("pp4")
    cfg = LLMConfig(TINY, GPUS["h100"], dp=1, tp=2, pp=4, microbatches=4, dims=DIMS)
    write_llm(generate_llm(cfg), folder / "llm")
    return folder / "llm"


def _system(tmp_path: Path) -> Path:
    import json

    path = tmp_path / "system.json"
    data = json.loads(SYSTEM.read_text())
    for key in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        data[f"{key}-implementation"] = ["ring", "ring"]
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("backend", ["analytical", "analytical-congestion", "flow"])
def test_six_parts_add_up_to_the_finish_time_on_every_backend(pipeline, tmp_path, backend):
    result = astra.simulate(str(pipeline), _system(tmp_path), NETWORK, backend=backend)
    parts = result.breakdown()
    assert len(parts) == 8
    for b, r in zip(parts, result.ranks):
        values = [getattr(b, p) for p in PARTS]
        assert min(values) >= 0, (backend, b)
        assert sum(values) == pytest.approx(r.finish_ns, rel=1e-12, abs=1e-6), (backend, b)
        # in flight + waiting never exceed the step; compute = compute only + overlapped
        assert r.comm_ns + r.comm_wait_ns <= r.finish_ns + 1e-6
        assert b.compute_only_ns + b.overlapped_comm_ns == pytest.approx(r.compute_ns + r.cpu_ns)
    # Stage 0 (ranks 0, 1) waits for the last stage's gradients: a pipeline bubble, not
    # communication, and far more than the messages' time on the network.
    first = parts[0]
    assert first.p2p_wait_ns > 0
    assert result.ranks[0].comm_wait_ns > result.ranks[0].comm_ns


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (0, 100, 40),  # both intervals [10, 30) and [50, 70)
        (20, 60, 20),  # from inside the first to inside the second
        (30, 50, 0),  # exactly the gap
        (10, 30, 20),  # exactly the first
        (25, 26, 1),  # inside one
        (70, 90, 0),  # after both
        (60, 60, 0),  # empty
    ],
)
def test_flat_covered_is_the_overlap(start, end, expected):
    assert flat_covered([10.0, 30.0, 50.0, 70.0], start, end) == expected
