"""Uneven compute in a cluster run: slow NPUs and per-iteration stragglers, against the
plain run plus the extra compute they add."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import astra
from astra_core.cluster.hardware import MIN_SPEED, ComputeSpeed, NormalSpeed, Stragglers, slowness
from astra_core.cluster.spec import load_cluster_spec
from astra_core.errors import ConfigError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.writer import make_node, write_rank_trace

SYSTEM = Path(__file__).parents[1] / "data" / "reference" / "system" / "ring_1d.json"
COMPUTE_US = 100


@pytest.fixture
def four_npus(tmp_path):
    """spec(**keys) -> a cluster of 4 NPUs on one switch; one job on all of them: each rank
    computes 100 us, then all-reduces 1 MiB."""
    (tmp_path / "network.yml").write_text(
        "topology: [Switch]\nnpus_count: [4]\nbandwidth: [50]\nlatency: [500]\n"
    )
    for rank in range(4):
        write_rank_trace(
            tmp_path / f"job.{rank}.et",
            [
                make_node(1, "c", pb.COMP_NODE, duration_micros=COMPUTE_US),
                make_node(
                    2, "ar", pb.COMM_COLL_NODE, data_deps=[1], comm_type=pb.ALL_REDUCE, comm_size=1 << 20
                ),
            ],
        )

    def spec(iterations: int = 1, **keys) -> Path:
        data = {"network": "network.yml", "system": str(SYSTEM), **keys}
        data["jobs"] = [{"name": "j", "workload": "job", "iterations": iterations}]
        path = tmp_path / "cluster.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    return spec


def _plain(tmp_path) -> float:
    return astra.simulate(str(tmp_path / "job"), SYSTEM, tmp_path / "network.yml").step_ns


def test_a_slow_npu_holds_its_job_back_by_its_extra_compute(tmp_path, four_npus):
    plain = _plain(tmp_path)
    result = astra.simulate_cluster(four_npus(compute_speed={"factors": {2: 0.5}}))
    job = result.jobs[0]
    # NPU 2 computes 200 us instead of 100; the others wait for it in the all-reduce
    assert job.iteration_ns == pytest.approx((plain + COMPUTE_US * 1000,))
    assert job.slowdown == 1.0  # alone it is as slow: no interference


def test_each_iteration_has_its_straggler(tmp_path, four_npus):
    plain = _plain(tmp_path)
    stragglers = {"fraction": 0.25, "slowdown": 3.0, "seed": 5}
    job = astra.simulate_cluster(four_npus(3, stragglers=stragglers)).jobs[0]
    # iteration 0: one NPU computes 300 us, the others wait for it in the all-reduce
    assert job.iteration_ns[0] == pytest.approx(plain + 2 * COMPUTE_US * 1000)
    # the whole run is the plain run of hand-written traces where that iteration's
    # straggler computes 300 us
    chosen = slowness(None, Stragglers(**stragglers), 4, 3).stragglers
    for rank in range(4):
        nodes = []
        for i in range(3):
            us = COMPUTE_US * chosen[i].get(rank, 1.0)
            deps = [2 * i] if i else []
            nodes += [
                make_node(2 * i + 1, "c", pb.COMP_NODE, data_deps=deps, duration_micros=int(us)),
                make_node(
                    2 * i + 2,
                    "ar",
                    pb.COMM_COLL_NODE,
                    data_deps=[2 * i + 1],
                    comm_type=pb.ALL_REDUCE,
                    comm_size=1 << 20,
                ),
            ]
        write_rank_trace(tmp_path / f"by_hand.{rank}.et", nodes)
    by_hand = astra.simulate(str(tmp_path / "by_hand"), SYSTEM, tmp_path / "network.yml")
    assert job.jct_ns == pytest.approx(by_hand.step_ns)


def test_stragglers_and_speeds_are_drawn_reproducibly():
    spec = Stragglers(fraction=0.1, slowdown=[1.5, 2.5], seed=3)
    one, again = slowness(None, spec, 100, 4), slowness(None, spec, 100, 4)
    assert one == again
    for iteration in range(4):
        chosen = one.stragglers[iteration]
        assert len(chosen) == 10 and all(1.5 <= x <= 2.5 for x in chosen.values())
    assert one.stragglers[0] != one.stragglers[1]  # drawn anew every iteration
    speeds = slowness(ComputeSpeed(normal=NormalSpeed(mean=1.0, std=2.0, seed=1)), None, 1000, 1).speed
    assert min(speeds) == MIN_SPEED and len(set(speeds)) > 100


def test_a_factor_for_an_npu_the_cluster_lacks_is_an_error():
    with pytest.raises(ConfigError, match="^compute_speed: factors: NPU 9 is not on the cluster"):
        slowness(ComputeSpeed(factors={9: 0.5}), None, 4, 1)


@pytest.mark.parametrize(
    ("stragglers", "message"),
    [
        ("{fraction: 0.5, slowdown: []}", "stragglers.slowdown: must have at least 2 entries, got []"),
        (
            "{fraction: 0.5, slowdown: [1, 2, 3]}",
            "stragglers.slowdown: must have at most 2 entries, got [1, 2, 3]",
        ),
        ("{fraction: 0.5, slowdown: abc}", "stragglers.slowdown: expected a number or a list, got 'abc'"),
        ("{fraction: 0.5, slowdown: [1, .inf]}", "stragglers.slowdown[1]: expected a finite number, got inf"),
        ("{fraction: 0.5, slowdown: 1e308}", "stragglers.slowdown: must be <= 20, got 1e+308"),
    ],
)
def test_a_bad_straggler_slowdown_is_one_line_naming_the_key(tmp_path, stragglers, message):
    """A slowdown is a number or [low, high] within [1, 1 / MIN_SPEED]; pydantic's names of
    the union's branches never reach the user, and an empty or huge slowdown is refused
    before it runs."""
    path = tmp_path / "cluster.yaml"
    path.write_text(f"network: network.yml\nstragglers: {stragglers}\njobs: [{{name: a, workload: job}}]\n")
    with pytest.raises(ConfigError) as caught:
        load_cluster_spec(path)
    assert str(caught.value) == f"{path}: {message}"


@pytest.mark.parametrize(
    ("dims", "message"),
    [
        ("-4x-4", "dims: sizes must be >= 1, got '-4x-4'"),
        ("4xa", "dims: expected sizes joined by 'x' like 8x16, got '4xa'"),
        ("[4, 4.5]", "dims: expected sizes joined by 'x' like 8x16, got [4, 4.5]"),
    ],
)
def test_bad_cluster_dims_are_refused_when_the_spec_is_read(tmp_path, dims, message):
    path = tmp_path / "cluster.yaml"
    path.write_text(f"network: network.yml\ndims: {dims}\njobs: [{{name: a, workload: job, dims: {dims}}}]\n")
    with pytest.raises(ConfigError) as caught:
        load_cluster_spec(path)
    assert str(caught.value).splitlines() == [f"{path}: {message}", f"{path}: jobs[0] (a): {message}"]
