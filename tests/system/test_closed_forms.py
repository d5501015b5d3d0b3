"""System-layer behaviour checked against closed forms derived here.

Notation for one ring step on the analytical backend: T = int(hops * latency +
bytes / bandwidth) ns (bandwidth GB/s with 1 GB = 2^30 B), E = endpoint delay
(10 ns), D = 3 * int(bytes / local-mem-bw) ns (one write and two reads at
local-mem-bw GB/s, 1 GB = 1e9 B). A ring all-reduce over n ranks of one chunk
sends 2(n-1) messages, reduces n-1 of them, and ends one E after the last
arrival: chunk time = 2(n-1)(E + T) + (n-1) D + E; with one active chunk per
dimension the chunks run back to back.
"""

import pytest

from astra_core.api import simulate
from astra_core.config.memory import MemoryConfig
from astra_core.errors import AstraError, TraceError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.writer import make_node
from tests.system.conftest import network, system

GB = 2**30 / 1e9  # bytes per ns per GB/s in network.yml


def ring_allreduce_ns(n, size, splits, hops, latency, bw_gbps, mem_bw=1600, endpoint=10):
    chunk = size // splits
    msg = chunk // n
    t = int(hops * latency + msg / (bw_gbps * GB))
    d = 3 * int(msg / mem_bw)
    return splits * (2 * (n - 1) * (endpoint + t) + (n - 1) * d + endpoint)


def test_ring_allreduce_closed_form_matches_upstream_number():
    # The closed form reproduces upstream's 64440 ns (ring8, 1 MiB, 4 chunks).
    assert ring_allreduce_ns(8, 1 << 20, 4, 1, 500, 50.0) == 64440


def test_comm_group_allreduce_runs_a_ring_over_the_group(workload):
    # Two groups of 4 on a FullyConnected 8 (every pair 1 hop): each group's
    # all-reduce is a 4-rank ring, independent of the other group.
    size = 1 << 20
    nodes = {
        r: [
            make_node(
                1,
                "ar",
                pb.COMM_COLL_NODE,
                comm_type=pb.ALL_REDUCE,
                comm_size=size,
                pg_name="1" if r < 4 else "2",
            )
        ]
        for r in range(8)
    }
    prefix = workload(nodes)
    result = simulate(
        prefix,
        system(),
        network(["FullyConnected"], [8], [50.0], [500.0]),
        comm_groups={"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]},
    )
    expected = ring_allreduce_ns(4, size, 4, 1, 500, 50.0)
    assert expected == 43000
    assert [r.finish_ns for r in result.ranks] == [expected] * 8


def test_group_of_all_npus_uses_configured_algorithms(workload):
    # A group with every NPU behaves like no group at all (upstream CollectivePlan).
    size = 1 << 20
    ar = make_node(1, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=size, pg_name="7")
    prefix = workload({r: [ar] for r in range(8)})
    result = simulate(
        prefix, system(), network(["Ring"], [8], [50.0], [500.0]), comm_groups={"7": list(range(8))}
    )
    assert {r.finish_ns for r in result.ranks} == {64440}


def test_compute_then_allreduce_then_compute_is_serial(workload):
    # fwd (10 us) -> all-reduce -> bwd (10 us): finish = 20 us + all-reduce,
    # exposed communication = the all-reduce alone.
    size = 1 << 20
    nodes = [
        make_node(1, "fwd", pb.COMP_NODE, duration_micros=10),
        make_node(2, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=size, data_deps=[1]),
        make_node(3, "bwd", pb.COMP_NODE, duration_micros=10, data_deps=[2]),
    ]
    prefix = workload({r: nodes for r in range(8)})
    result = simulate(prefix, system(), network(["Ring"], [8], [50.0], [500.0]))
    ar = ring_allreduce_ns(8, size, 4, 1, 500, 50.0)
    # In flight: 4 chunks x 2(n-1) messages of t = int(500 + 32768 / 53.687...) = 1110 ns,
    # one at a time; the rest of the all-reduce (endpoint delays, reductions) moves nothing.
    in_flight = 4 * 2 * 7 * 1110
    for r in result.ranks:
        assert (r.finish_ns, r.compute_ns, r.exposed_comm_ns) == (20000 + ar, 20000, ar)
        assert (r.comm_ns, r.comm_wait_ns) == (in_flight, ar - in_flight) == (62160, 2280)


def test_independent_compute_overlaps_communication(workload):
    # An all-reduce and a 100 us kernel with no dependency run at once:
    # finish = max(kernel, all-reduce), exposed = finish - compute.
    size = 1 << 20
    nodes = [
        make_node(1, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=size),
        make_node(2, "kernel", pb.COMP_NODE, duration_micros=100),
    ]
    prefix = workload({r: nodes for r in range(8)})
    result = simulate(prefix, system(), network(["Ring"], [8], [50.0], [500.0]))
    assert {(r.finish_ns, r.exposed_comm_ns) for r in result.ranks} == {(100000, 0)}


def test_two_gpu_kernels_never_overlap(workload):
    # Independent kernels share the one GPU compute slot: 3 + 4 us back to back.
    nodes = [
        make_node(1, "k1", pb.COMP_NODE, duration_micros=3),
        make_node(2, "k2", pb.COMP_NODE, duration_micros=4),
        make_node(3, "host", pb.COMP_NODE, duration_micros=5, is_cpu_op=True),
    ]
    prefix = workload({r: nodes for r in range(2)})
    result = simulate(prefix, system(), network(["Ring"], [2], [50.0], [500.0]))
    # The CPU op runs beside the kernels; GPU compute 7 us, CPU 5 us.
    assert [(r.finish_ns, r.compute_ns, r.cpu_ns) for r in result.ranks] == [(7000, 7000, 5000)] * 2


@pytest.mark.parametrize(
    "memory_type, finishes",
    [
        # 100 ns + 1e6 B / (10 GB/s * 1e9 B/GB) = 100 + 100000 ns per access.
        ("PER_NPU_MEMORY_EXPANSION", [100100, 100100]),
        # One shared pool serves the two ranks' requests one after the other.
        ("MEMORY_POOL", [100100, 200200]),
    ],
)
def test_remote_memory_access_time(workload, memory_type, finishes):
    load = make_node(1, "load", pb.MEM_LOAD_NODE, tensor_size=1_000_000)
    prefix = workload({0: [load], 1: [load]})
    memory = MemoryConfig.from_dict(
        {"memory-type": memory_type, "remote-mem-latency": 100, "remote-mem-bw": 10}
    )
    result = simulate(prefix, system(), network(["Ring"], [2], [50.0], [500.0]), memory=memory)
    assert [r.finish_ns for r in result.ranks] == finishes


def test_memory_node_without_remote_memory_is_a_clear_error(workload):
    prefix = workload(
        {
            0: [make_node(1, "load", pb.MEM_LOAD_NODE, tensor_size=8)],
            1: [make_node(1, "load", pb.MEM_LOAD_NODE, tensor_size=8)],
        }
    )
    with pytest.raises(TraceError, match=r"rank 0: node 1 \(load\): remote memory access needs"):
        simulate(prefix, system(), network(["Ring"], [2], [50.0], [500.0]))


def test_unsupported_collective_is_a_clear_error(workload):
    node = make_node(1, "gather", pb.COMM_COLL_NODE, comm_type=pb.GATHER, comm_size=64)
    prefix = workload({0: [node], 1: [node]})
    with pytest.raises(TraceError, match=r"collective GATHER is not supported"):
        simulate(prefix, system(), network(["Ring"], [2], [50.0], [500.0]))


def test_halving_doubling_all_to_all_is_a_clear_error(workload):
    node = make_node(1, "a2a", pb.COMM_COLL_NODE, comm_type=pb.ALL_TO_ALL, comm_size=1 << 20)
    prefix = workload({r: [node] for r in range(4)})
    with pytest.raises(AstraError, match="halvingDoubling has no all-to-all"):
        simulate(prefix, system("halvingDoubling"), network(["Ring"], [4], [50.0], [500.0]))


def test_undefined_comm_group_is_a_clear_error(workload):
    node = make_node(1, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=64, pg_name="3")
    prefix = workload({0: [node], 1: [node]})
    with pytest.raises(TraceError, match="communicator group '3' is not defined"):
        simulate(prefix, system(), network(["Ring"], [2], [50.0], [500.0]))


def test_double_binary_tree_needs_a_power_of_two(workload):
    node = make_node(1, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=64)
    prefix = workload({r: [node] for r in range(6)})
    with pytest.raises(
        AstraError, match="doubleBinaryTree needs a power-of-two dimension, dimension 0 has 6 NPUs"
    ):
        simulate(prefix, system("doubleBinaryTree"), network(["Ring"], [6], [50.0], [500.0]))
