"""GPU compute slowed beside NCCL collectives: the measured curve, the re-planned end of a
compute node, and a generated step on H100s (symmetric runs stay exact)."""

from __future__ import annotations

import pytest

import astra
from astra_core.config.gpus import GPUS
from astra_core.system.contention import ComputeContention, slowdown
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm
from astra_core.workload.writer import make_node

from .conftest import network
from .test_nccl_symmetry import GIB, MODEL, dgx, nccl_system

ROWS = ((8, 1.1), (16, 1.2), (32, 1.4))


def test_the_slowdown_is_linear_between_measured_sm_counts():
    assert slowdown(ROWS, 0) == 1.0
    assert slowdown(ROWS, 4) == pytest.approx(1.05)  # from (0, 1) to the first row
    assert slowdown(ROWS, 8) == pytest.approx(1.1)
    assert slowdown(ROWS, 24) == pytest.approx(1.3)
    assert slowdown(ROWS, 64) == pytest.approx(1.4)  # the last row beyond it
    assert slowdown((), 16) == 1.0


class _Clock:
    """A rank's clock: events run in time order when ``run`` is called."""

    def __init__(self):
        self.now = 0.0
        self.events: list[tuple[float, int, object, object]] = []

    def register(self, delay, callback, arg):
        self.events.append((self.now + delay, len(self.events), callback, arg))

    def run_until(self, t: float) -> None:
        while True:
            due = sorted(e for e in self.events if e[0] <= t)
            if not due:
                break
            event = due[0]
            self.events.remove(event)
            self.now = event[0]
            event[2](event[3])
        self.now = t


def test_a_compute_node_slows_while_a_collective_runs_beside_it():
    """1,000 ns of compute; a collective of 16 channels (x 1.2) runs from 200 to 500 ns.
    By 200 it has done 200 ns of work, by 500 another 300 / 1.2 = 250, and the 550 left
    end at 1,050 ns."""
    clock = _Clock()
    contention = ComputeContention(ROWS, clock.register, lambda: clock.now)
    ended = []
    contention.compute(1000, ended.append)
    clock.run_until(200)
    contention.collective_started(7, 16)
    clock.run_until(500)
    contention.collective_finished(7)
    clock.run_until(2000)
    assert ended == [pytest.approx(1050, abs=1)]


def test_a_compute_node_issued_beside_a_collective_starts_slow():
    """The collective (32 channels, x 1.4) is in flight when 700 ns of compute start at 0
    and ends at 280 ns: 200 ns of work done, 500 left, the node ends at 780."""
    clock = _Clock()
    contention = ComputeContention(ROWS, clock.register, lambda: clock.now)
    contention.collective_started(1, 32)
    ended = []
    contention.compute(700, ended.append)
    clock.run_until(280)
    contention.collective_finished(1)
    clock.run_until(5000)
    assert ended == [pytest.approx(780, abs=1)]


def test_compute_beside_an_nccl_all_reduce_ends_at_the_closed_form(workload):
    """Eight H100s on one NVSwitch, each running 1 ms of compute and, independent of it,
    a 64 MiB all-reduce: while the all-reduce (NCCL's choice of C channels) runs for T,
    the compute does T / f of its work (f the measured slowdown at C); the rest runs
    alone after it, so the rank ends at T + (1 ms - T / f)."""
    size, compute_ns = 64 << 20, 1_000_000
    nodes = {
        rank: [
            make_node(1, "gemm", pb.COMP_NODE, duration_micros=compute_ns // 1000),
            make_node(2, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=size),
        ]
        for rank in range(8)
    }
    result = astra.simulate(
        workload(nodes), nccl_system(gpu="H100"), network(["Switch"], [8], [450e9 / GIB], [300.0])
    )
    for rank, record in zip(result.ranks, result.collectives):
        f = slowdown(GPUS["h100"].nccl_compute_slowdown, record.nccl_choice.channels)
        t = record.finish_ns - record.start_ns
        assert 0 < t < f * compute_ns and f > 1.1
        assert rank.finish_ns == pytest.approx(t + compute_ns - t / f, abs=2)
        assert rank.compute_ns == pytest.approx(rank.finish_ns, abs=2)


def test_blackwell_takes_h200s_factors_at_the_same_share_of_sms():
    hopper = GPUS["h200"].nccl_compute_slowdown
    for name in ("b200", "gb200", "gb300"):
        gpu = GPUS[name]
        assert gpu.sms == 148
        for sms, factor in gpu.nccl_compute_slowdown:
            assert factor == pytest.approx(slowdown(hopper, sms * 132 / 148), abs=5e-4)


COMPUTE_NS = 1_000_000


def _gb200_compute_beside_an_all_to_all(workload, comm_sms: int):
    """Eight GB200s, each running 1 ms of compute and, independent of it, a 64 MiB
    all-to-all whose node names ``comm_sms``: the run's result."""
    nodes = {
        rank: [
            make_node(1, "gemm", pb.COMP_NODE, duration_micros=COMPUTE_NS // 1000),
            make_node(
                2, "a2a", pb.COMM_COLL_NODE, comm_type=pb.ALL_TO_ALL, comm_size=64 << 20, comm_sms=comm_sms
            ),
        ]
        for rank in range(8)
    }
    return astra.simulate(
        workload(nodes), nccl_system(gpu="GB200"), network(["Switch"], [8], [900e9 / GIB], [300.0])
    )


def test_a_collective_that_names_its_sms_slows_compute_at_them(workload):
    """As the closed form above, on eight GB200s, with an all-to-all whose node says its
    kernels hold 32 SMs (``comm_sms``, as a HybridEP dispatch does): the slowdown is the
    GPU's at 32 SMs, whatever channels NCCL would have picked."""
    result = _gb200_compute_beside_an_all_to_all(workload, 32)
    f = slowdown(GPUS["gb200"].nccl_compute_slowdown, 32)
    for rank, record in zip(result.ranks, result.collectives):
        t = record.finish_ns - record.start_ns
        assert 0 < t < f * COMPUTE_NS and f == pytest.approx(1.292)
        assert rank.finish_ns == pytest.approx(t + COMPUTE_NS - t / f, abs=2)


def test_a_collective_on_sms_the_compute_left_free_slows_nothing(workload):
    """The same all-to-all with ``comm_sms`` 0 (Transformer Engine's ``set_sm_margin``: the
    GEMM was launched on the other SMs, its own time counts them): the compute takes its
    1 ms whatever runs beside it."""
    result = _gb200_compute_beside_an_all_to_all(workload, 0)
    for rank, record in zip(result.ranks, result.collectives):
        assert 0 < record.finish_ns - record.start_ns < COMPUTE_NS
        assert rank.compute_ns == COMPUTE_NS and rank.finish_ns == COMPUTE_NS


def test_h100_steps_fold_exactly_with_their_compute_slowed(tmp_path):
    """A data- and tensor-parallel step on two DGX H100s, its gradients reduced in 4 MiB
    buckets during the backward pass: compute slowed beside the collectives, rank symmetry
    stays exact."""
    cfg = LLMConfig(
        MODEL,
        GPUS["h100"],
        dp=2,
        tp=8,
        pp=1,
        micro_batch=1,
        global_batch=8,
        dims=[8, 2],
        bucket_bytes=1 << 22,
    )
    _, groups = write_llm(generate_llm(cfg), tmp_path / "llm")
    system, traces, comm_groups = (
        nccl_system(gpu="H100"),
        str(tmp_path / "llm"),
        str(groups) if groups else None,
    )
    sym, full = (
        astra.simulate(traces, system, dgx(2), comm_groups=comm_groups, symmetry=flag)
        for flag in (True, False)
    )
    assert sym.symmetric and not full.symmetric
    assert [r.finish_ns for r in sym.ranks] == [r.finish_ns for r in full.ranks]
    assert [r.compute_ns for r in sym.ranks] == [r.compute_ns for r in full.ranks]
