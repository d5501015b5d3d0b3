"""A run that cannot finish stops with SimulationDeadlock naming ranks and nodes."""

import pytest

from astra_core.api import simulate
from astra_core.errors import SimulationDeadlock
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.writer import make_node
from tests.system.conftest import network, system

RING4 = network(["Ring"], [4], [50.0], [500.0])


def _comp(i, **kw):
    return make_node(i, f"comp{i}", pb.COMP_NODE, duration_micros=1, **kw)


def test_receive_without_send(workload):
    # rank 1 waits for a message rank 0 never sends; ranks 2, 3 finish.
    prefix = workload({
        0: [_comp(1)],
        1: [make_node(1, "recv_from_0", pb.COMM_RECV_NODE, comm_src=0, comm_dst=1,
                      comm_size=1024, comm_tag=5)],
        2: [_comp(1)],
        3: [_comp(1)],
    })
    with pytest.raises(SimulationDeadlock) as exc:
        simulate(prefix, system(), RING4)
    message = str(exc.value)
    assert "rank 1" in message and "node 1 (recv_from_0)" in message
    assert "from rank 0" in message and "tag 5" in message
    assert "\n" not in message
    assert list(exc.value.waiting) == [1]


def test_data_dependency_cycle(workload):
    # nodes 2 and 3 depend on each other through data deps on every rank.
    nodes = [_comp(1),
             make_node(2, "a", pb.COMP_NODE, duration_micros=1, data_deps=[1, 3]),
             make_node(3, "b", pb.COMP_NODE, duration_micros=1, data_deps=[2])]
    prefix = workload({r: nodes for r in range(4)})
    with pytest.raises(SimulationDeadlock) as exc:
        simulate(prefix, system(), RING4)
    message = str(exc.value)
    assert sorted(exc.value.waiting) == [0, 1, 2, 3]
    assert "nodes 2, 3 depend on each other in a cycle of data dependencies" in message


def test_collective_a_member_never_joins(workload):
    # rank 3 has no all-reduce: ranks 0-2 wait for its ring messages forever.
    ar = make_node(1, "allreduce", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=1 << 20)
    prefix = workload({0: [ar], 1: [ar], 2: [ar], 3: [_comp(1)]})
    with pytest.raises(SimulationDeadlock) as exc:
        simulate(prefix, system(), RING4)
    message = str(exc.value)
    assert sorted(exc.value.waiting) == [0, 1, 2]
    assert "node 1 (allreduce) collective never completed" in message
    assert "ring all-reduce over ranks [0, 1, 2, 3]" in message


def test_send_never_received(workload):
    # rank 0 sends to 1, rank 1 never posts the receive: the send completes on
    # arrival (as upstream), so no deadlock; the run ends.
    prefix = workload({
        0: [make_node(1, "send", pb.COMM_SEND_NODE, comm_src=0, comm_dst=1, comm_size=64,
                      comm_tag=1)],
        1: [_comp(1)], 2: [_comp(1)], 3: [_comp(1)],
    })
    result = simulate(prefix, system(), RING4)
    # 1 hop of 500 ns + 64 B / (50 * 2^30 / 1e9 B/ns) = 500 + 1.19 -> 501 ns (truncated)
    assert result.ranks[0].finish_ns == 501
