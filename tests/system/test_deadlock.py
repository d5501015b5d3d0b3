"""A run that cannot finish stops with SimulationDeadlock naming ranks and nodes."""

import re

import pytest

from astra_core.api import simulate
from astra_core.config.system import upstream_system
from astra_core.errors import SimulationDeadlock
from astra_core.system import simulation as simulation_module
from astra_core.system.collectives.logical_topology import involved_members
from astra_core.system.wait_report import raise_deadlock
from astra_core.topology.generators import gpu_cluster
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators.micro import write_micro
from astra_core.workload.graph import TraceWarning
from astra_core.workload.writer import make_node
from tests.system.conftest import network, system

RING4 = network(["Ring"], [4], [50.0], [500.0])


def _comp(i, **kw):
    return make_node(i, f"comp{i}", pb.COMP_NODE, duration_micros=1, **kw)


def test_receive_without_send(workload):
    # rank 1 waits for a message rank 0 never sends; ranks 2, 3 finish.
    prefix = workload(
        {
            0: [_comp(1)],
            1: [
                make_node(
                    1, "recv_from_0", pb.COMM_RECV_NODE, comm_src=0, comm_dst=1, comm_size=1024, comm_tag=5
                )
            ],
            2: [_comp(1)],
            3: [_comp(1)],
        }
    )
    with pytest.raises(SimulationDeadlock) as exc:
        simulate(prefix, system(), RING4)
    message = str(exc.value)
    assert "rank 1" in message and "node 1 (recv_from_0)" in message
    assert "from rank 0" in message and "tag 5" in message
    assert "\n" not in message
    assert list(exc.value.waiting) == [1]


def test_data_dependency_cycle(workload):
    # nodes 2 and 3 depend on each other through data deps on every rank.
    nodes = [
        _comp(1),
        make_node(2, "a", pb.COMP_NODE, duration_micros=1, data_deps=[1, 3]),
        make_node(3, "b", pb.COMP_NODE, duration_micros=1, data_deps=[2]),
    ]
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
    # arrival (as upstream's analytical frontend), so no deadlock; the run ends
    # and warns once, naming sender, node, destination and tag.
    prefix = workload(
        {
            0: [make_node(1, "send", pb.COMM_SEND_NODE, comm_src=0, comm_dst=1, comm_size=64, comm_tag=1)],
            1: [_comp(1)],
            2: [_comp(1)],
            3: [_comp(1)],
        }
    )
    with pytest.warns(TraceWarning) as caught:
        result = simulate(prefix, system(), RING4)
    # 1 hop of 500 ns + 64 B / (50 * 2^30 / 1e9 B/ns) = 500 + 1.19 -> 501 ns (truncated)
    assert result.ranks[0].finish_ns == 501
    assert [str(w.message) for w in caught] == [
        "rank 0 node 1 (send) sent 64 bytes to rank 1 with tag 1 that no receive matched; "
        "the send completed when the message arrived, as upstream's"
    ]


def _ring(tag_sent, tag_received, n=4, size=1024, received=True):
    """Rank r sends to r + 1 (tag ``tag_sent``) and receives from r - 1 (``tag_received``)."""
    per_rank = {}
    for r in range(n):
        nodes = [
            make_node(1, "send", pb.COMM_SEND_NODE, comm_dst=(r + 1) % n, comm_size=size, comm_tag=tag_sent)
        ]
        if received:
            nodes.append(
                make_node(
                    2, "recv", pb.COMM_RECV_NODE, comm_src=(r - 1) % n, comm_size=size, comm_tag=tag_received
                )
            )
        per_rank[r] = nodes
    return per_rank


@pytest.mark.parametrize("symmetry", [True, False])
def test_unreceived_sends_warn_once_with_real_ranks(workload, symmetry):
    # Every rank sends to the next one; nobody receives: one warning naming the
    # first send and counting the other three, the same with rank symmetry.
    prefix = workload(_ring(7, None, received=False))
    with pytest.warns(TraceWarning) as caught:
        result = simulate(prefix, system(), RING4, symmetry=symmetry)
    assert result.symmetric is symmetry
    assert [str(w.message) for w in caught] == [
        "rank 0 node 1 (send) sent 1024 bytes to rank 1 with tag 7 that no receive matched "
        "(+3 more such sends); the send completed when the message arrived, as upstream's"
    ]


def _deadlock(prefix, sys_config, net, symmetry, monkeypatch):
    """The SimulationDeadlock of a run, and whether the run used rank symmetry."""
    used = []

    def spy(sim):
        used.append(sim.symmetry is not None)
        raise_deadlock(sim)

    monkeypatch.setattr(simulation_module, "raise_deadlock", spy)
    with pytest.raises(SimulationDeadlock) as exc:
        simulate(prefix, sys_config, net, symmetry=symmetry)
    assert used == [symmetry]
    return exc.value


def test_receive_matched_by_no_send_names_the_near_miss(workload, monkeypatch):
    # Each rank receives tag 2 from its left neighbour, which sent tag 1: every
    # rank waits; the report names the real peer of each rank (rank symmetry
    # runs one rank for all four) and the message that did arrive.
    prefix = workload(_ring(1, 2))
    fast = _deadlock(prefix, system(), RING4, True, monkeypatch)
    full = _deadlock(prefix, system(), RING4, False, monkeypatch)
    assert str(fast) == str(full)
    assert fast.waiting == full.waiting
    assert sorted(full.waiting) == [0, 1, 2, 3]
    assert str(full) == (
        "simulation cannot finish at t=519 ns: 4 rank(s) wait forever: "
        "rank 0: node 2 (recv) waits for a message from rank 3 (tag 2, 1024 bytes) that was "
        "never sent; rank 3 sent it 1 message(s) no receive matched (tag 1, 1024 bytes); "
        "also rank 1: node 2 (recv), rank 2: node 2 (recv) (+1 more ranks)"
    )
    assert full.waiting[2] == [
        "node 2 (recv) waits for a message from rank 1 (tag 2, 1024 bytes) that was never sent; "
        "rank 1 sent it 1 message(s) no receive matched (tag 1, 1024 bytes)"
    ]


@pytest.mark.parametrize("joined", [(4, 5, 6, 7), (0, 1, 2, 3), (1, 3, 5, 7)])
def test_collective_half_the_ranks_join_under_symmetry(workload, monkeypatch, joined):
    # 8 NPUs [Ring 2, Ring 4]: only `joined` run the all-reduce. Rank symmetry
    # simulates one rank per class; the report (once an IndexError) must name the
    # same real ranks, rings and peers as the full run.
    ar = make_node(1, "allreduce", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=1 << 20)
    prefix = workload({r: [ar] if r in joined else [_comp(1)] for r in range(8)})
    net = network(["Ring", "Ring"], [2, 4], [50.0, 50.0], [500.0, 500.0])
    fast = _deadlock(prefix, system(dims=2), net, True, monkeypatch)
    full = _deadlock(prefix, system(dims=2), net, False, monkeypatch)
    assert str(fast) == str(full)
    assert fast.waiting == full.waiting
    assert sorted(full.waiting) == list(joined)
    message = str(full)
    assert "\n" not in message and message.endswith("(+1 more ranks)")
    first, second, third = joined[:3]
    assert f"rank {first}: node 1 (allreduce) collective never completed: chunk tag 0: " in message
    assert f"; also rank {second}: node 1 (allreduce), rank {third}: node 1 (allreduce) (+1" in message
    assert all(
        lines[0].startswith("node 1 (allreduce) collective never completed")
        for lines in full.waiting.values()
    )


def test_long_member_lists_are_shortened(workload):
    # 16 ranks on one ring, rank 15 never joins: the ring is listed up to 8 members.
    ar = make_node(1, "allreduce", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=1 << 20)
    prefix = workload({r: [ar] if r < 15 else [_comp(1)] for r in range(16)})
    with pytest.raises(SimulationDeadlock) as exc:
        simulate(prefix, system(), network(["Ring"], [16], [50.0], [500.0]))
    message = str(exc.value)
    assert "over ranks [0, 1, 2, 3, 4, 5, 6, ..., 15]" in message
    assert message.endswith("(+12 more ranks)") and len(exc.value.waiting) == 15


def test_chunks_started_in_opposite_orders_name_the_pair_and_the_fix(tmp_path):
    # 64 GPUs, 8 per server, rail leaves split in two groups: the flow backend times
    # ranks apart, so partner ranks start a 1 GiB all-reduce's chunks on a dimension
    # in different orders; with one active chunk per dimension each waits for the other.
    write_micro("all-reduce", 1 << 30, 64, str(tmp_path / "ar"))
    topology, dims = gpu_cluster(8, 8, leaves=16, spines=16), (8, 4, 2)
    system_json = upstream_system("ring", 3)
    with pytest.raises(SimulationDeadlock) as exc:
        simulate(str(tmp_path / "ar"), system_json, topology=topology, dims=dims, backend="flow")
    cause = re.search(
        r"cause: ranks (\d+) and (\d+) started chunks in opposite orders on dimension (\d+): "
        r"rank \1 runs chunk tag (\d+) and holds chunk tag (\d+) queued",
        str(exc.value),
    )
    assert cause, str(exc.value)
    a, b, dim, running, held = map(int, cause.groups())
    assert running != held
    partners = involved_members(a, dims, [d == dim for d in range(len(dims))])
    assert b in partners and a != b
    assert "active-chunks-per-dimension (1)" in str(exc.value) and "\n" not in str(exc.value)
    # The fix the message gives: every chunk may run at once on a dimension.
    system_json["active-chunks-per-dimension"] = system_json["preferred-dataset-splits"]
    result = simulate(str(tmp_path / "ar"), system_json, topology=topology, dims=dims, backend="flow")
    assert len(result.ranks) == 64 and all(r.finish_ns > 0 for r in result.ranks)
