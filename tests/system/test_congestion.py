"""The congestion-aware backend against closed forms.

Model (upstream astra-network-analytical congestion_aware): store and forward,
one message per link at a time, FIFO. On a link of bandwidth bw (bytes/ns) and
latency L a message of B bytes occupies the link int(B / bw) ns and reaches the
far end int(L + B / bw) ns after it started. So with no other traffic a route of
h equal links takes h * int(L + B / bw); queueing adds waits only where links
are shared; the congestion-unaware model charges int(h * L + B / bw).
"""

from astra_core.api import simulate
from astra_core.topology.logical import from_network
from astra_core.topology.physical import PhysicalTopology
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.writer import make_node
from tests.system.conftest import network, system

GB = 2**30 / 1e9  # bytes/ns per GB/s of network.yml
MIB = 1 << 20


def _ar(size, **attrs):
    return make_node(1, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=size, **attrs)


def test_incast_through_one_switch_serializes_on_the_downlink(workload):
    # 8 senders -> rank 0 through one switch, 1 MiB each, 50 GB/s, 500 ns.
    # All reach the switch at int(L + B/bw) = 20031; the downlink then serves them
    # one after another (int(B/bw) = 19531 each); the last lands 20031 after it starts:
    # 2 * 20031 + 7 * 19531 = 176779 ns, about N * B / bw.
    nodes = {
        0: [
            make_node(i, f"recv{i}", pb.COMM_RECV_NODE, comm_src=i, comm_size=MIB, comm_tag=1)
            for i in range(1, 9)
        ]
    }
    for i in range(1, 9):
        nodes[i] = [make_node(1, "send", pb.COMM_SEND_NODE, comm_dst=0, comm_size=MIB, comm_tag=1)]
    prefix = workload(nodes)
    net = network(["Switch"], [9], [50.0], [500.0])
    aware = simulate(prefix, system(), net, backend="analytical-congestion")
    unaware = simulate(prefix, system(), net, backend="analytical")
    ser = int(MIB / (50 * GB))
    hop = int(500 + MIB / (50 * GB))
    assert aware.ranks[0].finish_ns == 2 * hop + 7 * ser == 176779
    assert abs(aware.ranks[0].finish_ns - 8 * MIB / (50 * GB)) / (8 * MIB / (50 * GB)) < 0.2
    # The unaware model has no queue: every message takes 2L + B/bw.
    assert unaware.ranks[0].finish_ns == int(1000 + MIB / (50 * GB))
    downlink = aware.links.topology.link(9, 0)
    assert aware.links.max_queue[downlink] == 7


def test_ring_all_reduce_on_a_ring_never_queues(workload):
    prefix = workload({r: [_ar(64 * MIB)] for r in range(8)})
    net = network(["Ring"], [8], [50.0], [500.0])
    aware = simulate(prefix, system(), net, backend="analytical-congestion")
    unaware = simulate(prefix, system(), net, backend="analytical")
    assert [r.finish_ns for r in aware.ranks] == [r.finish_ns for r in unaware.ranks] == [2326112] * 8
    assert max(aware.links.max_queue) == 0


def _dumbbell() -> PhysicalTopology:
    # Ranks 0, 2 on switch 4, ranks 1, 3 on switch 5; hosts at 1000 Gbps, the
    # single switch-to-switch cable at 100 Gbps (12.5 bytes/ns), 1000 ns everywhere.
    links = []
    for a, b, bw in ((0, 4, 125.0), (2, 4, 125.0), (1, 5, 125.0), (3, 5, 125.0), (4, 5, 12.5)):
        links += [(a, b, bw, 1000.0), (b, a, bw, 1000.0)]
    return PhysicalTopology(6, [4, 5], links, source="dumbbell")


def test_two_all_reduces_sharing_a_link_take_twice_as_long(workload):
    # With 8 chunks in flight one group alone keeps the slow cable busy, so a
    # second group sharing it halves what each gets. (With one chunk in flight
    # a group leaves the cable idle between steps and the other fills the gaps.)
    groups = {"1": [0, 1], "2": [2, 3]}
    busy = system(**{"active-chunks-per-dimension": 8, "preferred-dataset-splits": 8})
    alone = {
        0: [_ar(4 * MIB, pg_name="1")],
        1: [_ar(4 * MIB, pg_name="1")],
        2: [make_node(1, "idle", pb.COMP_NODE, duration_micros=1)],
        3: [make_node(1, "idle", pb.COMP_NODE, duration_micros=1)],
    }
    one = (
        simulate(
            workload(alone), busy, topology=_dumbbell(), comm_groups=groups, backend="analytical-congestion"
        )
        .ranks[0]
        .finish_ns
    )
    both = {r: [_ar(4 * MIB, pg_name="1" if r in (0, 1) else "2")] for r in range(4)}
    two = simulate(
        workload(both), busy, topology=_dumbbell(), comm_groups=groups, backend="analytical-congestion"
    )
    # Each direction of the 12.5 B/ns cable carries both groups' messages: about 2x
    # for each group (FIFO order lets one finish a little earlier).
    for rank in (0, 2):
        assert 1.8 <= two.ranks[rank].finish_ns / one <= 2.05


def test_multi_dimensional_differences_come_from_the_switch_hop_and_sharing(workload, reference_dir):
    net_path = reference_dir / "network/ring4_sw4.yml"
    # (1) all-gather on the ring dimension only: one-hop routes, no sharing -> identical.
    ag = reference_dir / "workload/custom/ALL_GATHER_DIM0ONLY_16npus_1MB/ag"
    sys2 = reference_dir / "system/ring_2d.json"
    aware = simulate(ag, sys2, net_path, backend="analytical-congestion")
    assert {r.finish_ns for r in aware.ranks} == {31852}  # upstream's unaware number
    assert max(aware.links.max_queue) == 0
    # (2) ring all-reduce on the switch dimension only: no link is shared, so the
    # only difference is store and forward: 2 * int(500 + x) vs int(1000 + x) per
    # message, x = 65536 B / 50 GB/s, 6 messages x 4 chunks.
    prefix = workload({r: [_ar(MIB, involved_dim=[False, True])] for r in range(16)})
    ring = system(dims=2)
    aware = simulate(prefix, ring, net_path, backend="analytical-congestion")
    unaware = simulate(prefix, ring, net_path, backend="analytical")
    x = 65536 / (50 * GB)
    assert max(aware.links.max_queue) == 0
    assert {a.finish_ns - u.finish_ns for a, u in zip(aware.ranks, unaware.ranks)} == {
        24 * (2 * int(500 + x) - int(1000 + x))
    }
    # (3) direct all-to-all on the switch dimension: 3 messages share each uplink,
    # so queueing adds more than the store-and-forward term.
    a2a = workload(
        {
            r: [
                make_node(
                    1,
                    "a2a",
                    pb.COMM_COLL_NODE,
                    comm_type=pb.ALL_TO_ALL,
                    comm_size=MIB,
                    involved_dim=[False, True],
                )
            ]
            for r in range(16)
        }
    )
    direct = system("direct", dims=2)
    aware = simulate(a2a, direct, net_path, backend="analytical-congestion")
    unaware = simulate(a2a, direct, net_path, backend="analytical")
    uplinks = [aware.links.topology.link(r, 16 + r % 4) for r in range(16)]
    assert min(aware.links.max_queue[link] for link in uplinks) == 2
    assert all(a.finish_ns > u.finish_ns for a, u in zip(aware.ranks, unaware.ranks))


def test_network_yml_topology_has_the_expected_links():
    # [Ring 4, Switch 4]: 4 rings of 4 cables + 4 switches x 4 cables = 32 cables.
    net = network(["Ring", "Switch"], [4, 4], [100.0, 50.0], [200.0, 500.0])
    topo = from_network(net)
    assert (topo.npus_count, topo.nodes_count, topo.links_count) == (16, 20, 64)
    # dimension order: ring hop 1 -> 2 first, then through dimension 1's switch
    route = [(topo.link_src[i], topo.link_dst[i]) for i in topo.route(1, 14)]
    assert route == [(1, 2), (2, 18), (18, 14)]


def _run_both(prefix, sys_config, topology):
    return [
        simulate(prefix, sys_config, topology=topology, backend=b)
        for b in ("analytical-congestion", "analytical")
    ]


def test_fat_tree_results_differ_only_where_links_are_shared(workload):
    # k = 4 fat-tree, 16 NPUs. On a physical topology `analytical` charges each
    # message the same store-and-forward hops without queueing, so any
    # difference between the backends is queueing on shared links.
    from astra_core.topology.generators import fat_tree

    topo = fat_tree(4)
    # Ring all-reduce: each rank talks to its ring neighbours; no two messages
    # of a step share a directed link, so the backends agree exactly.
    ring = workload({r: [_ar(16 * MIB)] for r in range(16)})
    aware, unaware = _run_both(ring, system(), topo)
    assert max(aware.links.max_queue) == 0
    assert [r.finish_ns for r in aware.ranks] == [r.finish_ns for r in unaware.ranks]
    # Direct all-to-all: every rank sends to 15 peers at once through its one
    # link to the edge switch, so messages queue and every rank takes longer.
    a2a = workload(
        {
            r: [make_node(1, "a2a", pb.COMM_COLL_NODE, comm_type=pb.ALL_TO_ALL, comm_size=16 * MIB)]
            for r in range(16)
        }
    )
    aware, unaware = _run_both(a2a, system("direct"), topo)
    host_links = [topo.out_links[h][0] for h in topo.hosts]
    assert min(aware.links.max_queue[link] for link in host_links) >= 14
    assert all(a.finish_ns > 1.5 * u.finish_ns for a, u in zip(aware.ranks, unaware.ranks))


def test_oversubscribed_leaf_spine_all_to_all_takes_about_twice_as_long(workload):
    # 16 NPUs, 8 leaves of 2, 2 spines. Each NPU sends 14 of its 15 messages
    # across the spines. Non-blocking (1:1): the NPU link is the bottleneck
    # (15 messages); 2:1: a leaf's uplinks carry 2 x 14 messages at the speed of
    # one NPU link, 28 message times: 28 / 15 = 1.87x.
    from astra_core.topology.generators import leaf_spine

    a2a = workload(
        {
            r: [make_node(1, "a2a", pb.COMM_COLL_NODE, comm_type=pb.ALL_TO_ALL, comm_size=64 * MIB)]
            for r in range(16)
        }
    )
    times = {}
    for oversubscription in (1.0, 2.0):
        topo = leaf_spine(16, 8, 2, oversubscription=oversubscription)
        result = simulate(a2a, system("direct"), topology=topo, backend="analytical-congestion")
        times[oversubscription] = result.step_ns
    assert 1.7 <= times[2.0] / times[1.0] <= 2.1
