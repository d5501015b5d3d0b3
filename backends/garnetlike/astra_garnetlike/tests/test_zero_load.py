"""Zero-load latency of a lone packet/message against the model's closed form.

Model (astra_garnetlike.network): a packet of F flits crossing H links, with a
router pipeline of P, links of flit serialization s and latency L, and a
one-cycle ejection c into the destination NI, arrives (tail in the NI) after

    T = (H + 1) * P + H * (s + L) + c + (F - 1) * s

Derivation: the head is ready for switch allocation P after it enters each of
the H + 1 routers on its path (the source's injection VC included); each link
takes s to put the head on the wire and L to carry it; at the destination the
ejection port moves it into the NI in one cycle. The other F - 1 flits follow
the head one serialization apart (every link is equally fast, so none waits
for a credit: the VC buffers cover the credit round trip).

In the NoC mode a link moves one flit per cycle (s = 1 cycle) and
``link_latency`` LL counts the whole traversal (L = LL - 1), so in cycles

    T = (H + 1) * P + H * LL + F
"""

from __future__ import annotations

import itertools
import math

import pytest

from astra_core.backend import Topology
from astra_core.config.network import NetworkConfig
from astra_core.topology.generators import fat_tree
from astra_garnetlike.config import GarnetConfig
from astra_garnetlike.network import GarnetNetwork, create
from astra_garnetlike.tests.networks import lone_times_ps, noc_network

CYCLE_PS = 1000  # 1 GHz


def mesh_hops(a: int, b: int, k: int) -> int:
    return abs(a % k - b % k) + abs(a // k - b // k)


def torus_hops(a: int, b: int, k: int) -> int:
    dx, dy = abs(a % k - b % k), abs(a // k - b // k)
    return min(dx, k - dx) + min(dy, k - dy)


@pytest.mark.parametrize("pipeline, link_latency, flits", [(1, 1, 1), (1, 1, 5), (3, 2, 4), (2, 4, 2)])
def test_mesh_4x4_every_pair(pipeline, link_latency, flits):
    net = noc_network(
        "mesh", [4, 4], packet_flits=flits, link_latency=link_latency, router_pipeline_cycles=pipeline
    )
    pairs = list(itertools.permutations(range(16), 2))
    times = lone_times_ps(net, [(a, b, flits * 16) for a, b in pairs])
    for (a, b), t in zip(pairs, times):
        h = mesh_hops(a, b, 4)
        assert t == ((h + 1) * pipeline + h * link_latency + flits) * CYCLE_PS, (a, b)


@pytest.mark.parametrize("pipeline, link_latency, flits", [(1, 1, 4), (2, 3, 3)])
def test_torus_4x4_every_pair_takes_the_short_way_round(pipeline, link_latency, flits):
    # Wrap-around links make 0 -> 3 one hop; the dateline VC classes change no timing.
    net = noc_network(
        "torus", [4, 4], packet_flits=flits, link_latency=link_latency, router_pipeline_cycles=pipeline
    )
    assert net.routing.uses_classes
    pairs = list(itertools.permutations(range(16), 2))
    times = lone_times_ps(net, [(a, b, flits * 16) for a, b in pairs])
    for (a, b), t in zip(pairs, times):
        h = torus_hops(a, b, 4)
        assert t == ((h + 1) * pipeline + h * link_latency + flits) * CYCLE_PS, (a, b)


def test_ring_of_eight_goes_the_short_way_and_clockwise_on_a_tie():
    net = noc_network("torus", [8], packet_flits=2)
    sends = [(0, 4, 32), (0, 5, 32), (6, 1, 32)]  # 4 hops either way; 3 back; 3 forward
    assert [len(net.routing.links(a, b)) for a, b, _ in sends] == [4, 3, 3]
    assert net.routing.grid.path(0, 4) == [0, 1, 2, 3, 4]  # the tie goes the positive way
    times = lone_times_ps(net, sends)
    assert times == [((h + 1) + h + 2) * CYCLE_PS for h in (4, 3, 3)]


# -- network.yml Switch 8 (50 GB/s, 500 ns) with the default config ----------------------------
# 50 GB/s = 50 * 2^30 / 1e9 = 53.6870912 B/ns; a 256-byte flit takes 4768.37 ps, rounded
# up to 4769 ps (never faster than the link); L = 500000 ps, P = c = 1000 ps. NPU -> switch
# -> NPU is H = 2 links.
S_SW8 = math.ceil(256 * 1000 / (50 * 2**30 / 1e9))
L_SW8 = 500_000


def test_sw8_flit_time_is_the_link_bandwidth_rounded_up():
    assert S_SW8 == 4769


@pytest.mark.parametrize("size, flits", [(0, 1), (1, 1), (256, 1), (257, 2), (4096, 16), (65536, 256)])
def test_switch_single_packet(size, flits):
    net = create(
        Topology(
            NetworkConfig.from_dict(
                {"topology": ["Switch"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]}
            )
        )
    )
    times = lone_times_ps(net, [(0, 5, size), (7, 2, size)])
    h = 2
    expected = (h + 1) * 1000 + h * (S_SW8 + L_SW8) + 1000 + (flits - 1) * S_SW8
    assert times == [expected, expected]


def test_a_multi_packet_message_streams_its_flits_back_to_back():
    # 1 MiB = 16 packets of 64 KiB = 4096 flits over one FullyConnected link (H = 1): the
    # packets share the link flit by flit, so the message is one train of 4096 flits.
    net = create(
        Topology(
            NetworkConfig.from_dict(
                {"topology": ["FullyConnected"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]}
            )
        )
    )
    (t,) = lone_times_ps(net, [(3, 6, 1 << 20)])
    assert t == 2 * 1000 + (S_SW8 + L_SW8) + 1000 + (4096 - 1) * S_SW8
    # ... which is the closed form of the analytical model (500 ns + 2^20 B / 53.687 B/ns =
    # 20031.25 ns) plus the model's own overheads: 3 cycles of routers and ejection, and the
    # 0.63 ps by which each of the 4096 flit times was rounded up to whole ps.
    rounding_ns = 4096 * (S_SW8 / 1000 - 256 / (50 * 2**30 / 1e9))
    assert t / 1000 - (500 + 19531.25) == pytest.approx(3 + rounding_ns, abs=1e-6)


def test_fat_tree_cross_pod_takes_six_links_of_the_table_routes():
    # k = 4 fat-tree, 100 Gbps = 12.5 B/ns links of 1000 ns: a 256-byte flit takes 20480 ps.
    # Hosts 0 and 15 are in different pods: host-edge-agg-core-agg-edge-host, H = 6.
    net = GarnetNetwork(fat_tree(4), GarnetConfig())
    assert net.routing.mode == "table"
    times = lone_times_ps(net, [(0, 15, 3 * 256), (0, 1, 256)])
    s, L = 20480, 1_000_000
    assert times == [
        7 * 1000 + 6 * (s + L) + 1000 + 2 * s,  # 3 flits, 6 links
        3 * 1000 + 2 * (s + L) + 1000,
    ]  # same edge switch: 2 links
