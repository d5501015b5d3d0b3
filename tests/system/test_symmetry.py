"""Rank symmetry (one simulated rank standing for all) gives the full simulation's results."""

import json
import warnings

import pytest

from astra_core.api import simulate
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.writer import make_node
from tests.conftest import REFERENCE_DIR
from tests.system.conftest import network, system

_CASES = []
if (REFERENCE_DIR / "expected.json").is_file():
    _CASES = [c for c in json.loads((REFERENCE_DIR / "expected.json").read_text())["cases"]
              if c["backend"] == "analytical"]


def _run(case, reference_dir, symmetry):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return simulate(reference_dir / case["workload"], reference_dir / case["system"],
                        reference_dir / case["network"], memory=reference_dir / case["memory"],
                        backend=case["backend"], symmetry=symmetry)


@pytest.mark.parametrize("case", _CASES, ids=[c["name"] for c in _CASES])
def test_symmetric_run_equals_full_run(case, reference_dir):
    fast = _run(case, reference_dir, True)
    full = _run(case, reference_dir, False)
    assert not full.symmetric
    assert [(r.finish_ns, r.exposed_comm_ns, r.compute_ns, r.comm_ns) for r in fast.ranks] == [
        (r.finish_ns, r.exposed_comm_ns, r.compute_ns, r.comm_ns) for r in full.ranks]
    assert (fast.messages, fast.message_bytes) == (full.messages, full.message_bytes)


def test_symmetry_is_used_where_it_applies(reference_dir):
    used = {c["name"]: _run(c, reference_dir, True).symmetric for c in _CASES}
    # Double binary trees give ranks different roles; point-to-point nodes name peers.
    assert not any(v for k, v in used.items() if "doubleBinaryTree" in k or "P2P" in k)
    assert sum(used.values()) >= 100


@pytest.mark.parametrize("dims, algorithm, symmetric", [
    ([8], "ring", True),
    ([8], "direct", True),
    ([8], "halvingDoubling", True),   # XOR group on a power-of-two dimension
    ([8], "doubleBinaryTree", False),
    ([4, 4], "ring", True),
])
def test_symmetry_detection(workload, dims, algorithm, symmetric):
    node = make_node(1, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=1 << 20)
    npus = 1
    for d in dims:
        npus *= d
    prefix = workload({r: [node] for r in range(npus)})
    net = network(["Ring"] * len(dims), dims, [50.0] * len(dims), [500.0] * len(dims))
    fast = simulate(prefix, system(algorithm, dims=len(dims)), net)
    full = simulate(prefix, system(algorithm, dims=len(dims)), net, symmetry=False)
    assert fast.symmetric is symmetric
    assert [r.finish_ns for r in fast.ranks] == [r.finish_ns for r in full.ranks]


def test_no_symmetry_on_the_congestion_aware_backend(workload):
    node = make_node(1, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=1 << 20)
    prefix = workload({r: [node] for r in range(8)})
    result = simulate(prefix, system(), network(["Switch"], [8], [50.0], [500.0]),
                      backend="analytical-congestion")
    assert not result.symmetric and len(result.engines) == 8


def test_no_symmetry_with_a_partial_comm_group(workload):
    nodes = {r: [make_node(1, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE,
                           comm_size=1 << 20, pg_name="1")] for r in range(4)}
    prefix = workload(nodes)
    result = simulate(prefix, system(), network(["Ring"], [4], [50.0], [500.0]),
                      comm_groups={"1": [0, 1, 2, 3]})
    assert result.symmetric  # a group of every NPU is the whole network
    result = simulate(workload({r: [make_node(1, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE,
                                              comm_size=1 << 20, pg_name="1" if r < 2 else "2")]
                                for r in range(4)}),
                      system(), network(["Ring"], [4], [50.0], [500.0]),
                      comm_groups={"1": [0, 1], "2": [2, 3]})
    assert not result.symmetric
