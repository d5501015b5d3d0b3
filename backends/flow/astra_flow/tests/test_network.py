"""The flow backend against closed forms derived here from its model.

Framing (the ns3 backend's): a message of B payload bytes is n = max(1,
ceil(B / 4096)) packets and W = B + 82 n wire bytes; an ACK of 86 bytes per
data packet goes back on the reverse route where a test sets ack_bytes = 86. A lone message takes
sum(latency) + W / r_b + sum over the other links of one packet / r_i (the
first packet before the bottleneck b, the last one after it). Flows that share
their bottleneck send there in rounds of one packet each, a flow that started its
message sooner (or at the same time and numbered lower: sent first) first in each
round: a message's last packet leaves one full packet (Q = 4096 + 82 bytes) at the
bottleneck's rate before the fluid drain ends for each flow behind it. Event times
are rounded to whole picoseconds.
"""

from __future__ import annotations

import math

import pytest

from astra_core.backend import Topology
from astra_core.config.network import NetworkConfig
from astra_core.errors import ConfigError
from astra_core.topology.physical import PhysicalTopology
from astra_flow.config import FlowConfig, load_config
from astra_flow.network import FlowNetwork, create

MIB = 1 << 20
PS = 2e-3  # ns: event times are rounded to whole ps, at most twice per message
C = 12.5  # bytes/ns: 100 Gbps
Q = 4096 + 82  # wire bytes of a full packet
L = 1000.0  # ns per link


def wire(size: int) -> int:
    return size + max(1, -(-size // 4096)) * 82


def last_packet(size: int) -> int:
    return size - (max(1, -(-size // 4096)) - 1) * 4096 + 82


def star(hosts: int) -> PhysicalTopology:
    """``hosts`` NPUs on one switch (node ``hosts``), 100 Gbps and 1 µs per link."""
    links = []
    for h in range(hosts):
        links += [(h, hosts, C, L), (hosts, h, C, L)]
    return PhysicalTopology(hosts + 1, [hosts], links)


def deliveries(network: FlowNetwork, sends: list[tuple]) -> dict:
    """Send (src, dst, bytes, tag, at_ns) messages; arrival time of each by index."""
    arrived = {}

    def send(i):
        src, dst, size, tag, _ = sends[i]
        network.send(src, dst, size, lambda j: arrived.__setitem__(j, network.now()), i, tag=tag)

    for i, (*_, at) in enumerate(sends):
        network.schedule(at, send, i)
    network.run()
    return arrived


def test_lone_message_pipelines_across_a_slower_middle_link():
    # 0 -> switch 2 -> switch 3 -> 1: 100 Gbps, 50 Gbps (500 ns), 100 Gbps.
    links = [
        (0, 2, C, L),
        (2, 0, C, L),
        (2, 3, C / 2, 500.0),
        (3, 2, C / 2, 500.0),
        (3, 1, C, L),
        (1, 3, C, L),
    ]
    net = FlowNetwork(PhysicalTopology(4, [2, 3], links))
    size = 10_000  # 3 packets: 4096, 4096, 1808 bytes of payload
    full, last = 4096 + 82, last_packet(size)
    # The last frame leaves the 50 Gbps link 2 last / C after the full frame before it,
    # sooner than that frame clears the last link (full / C): it waits behind it there.
    # (ns3 with cc = "none" gives the same 4656.64 ns.)
    expected = 2500 + wire(size) / (C / 2) + full / C + (full - last) / C
    assert deliveries(net, [(0, 1, size, 0, 0)])[0] == pytest.approx(expected, abs=PS)


def test_incast_shares_the_receivers_link_and_counts_every_byte():
    # Four senders to NPU 0: each gets C/4 of the switch->0 link (the ACKs go the other
    # way), so all four drain together at 4W/C and land 2L + one packet later, each
    # sooner by a full packet per sender behind it in the last round.
    net = FlowNetwork(star(5), FlowConfig(ack_bytes=86))
    arrived = deliveries(net, [(s, 0, MIB, 0, 0) for s in range(1, 5)])
    fluid = 4 * wire(MIB) / C + 2 * L + last_packet(MIB) / C
    assert arrived == pytest.approx({i: fluid - (3 - i) * Q / C for i in range(4)}, abs=PS)
    down, up = net.topology.link(5, 0), net.topology.link(0, 5)
    assert net.link_bytes[down] == 4 * wire(MIB)
    ack_weight = 86 / (4096 + 82)
    assert net.link_bytes[up] == pytest.approx(4 * wire(MIB) * ack_weight, rel=1e-12)
    assert net.link_busy_ns[down] == pytest.approx(4 * wire(MIB) / C)
    assert net.peak_flows[down] == 4 and net.peak_flows[up] == 4
    for s in range(1, 5):  # each sender's uplink: its own data, once
        assert net.link_bytes[net.topology.link(s, 5)] == wire(MIB)


@pytest.mark.parametrize("delay", [0.0, 1000.0, 50_000.0])
def test_a_finished_flow_frees_its_share_after_the_reallocation_delay(delay):
    # Two senders to NPU 0, 1 MiB and 4 MiB: C/2 each until the small one drains at
    # t1 = 2 W1 / C; the large one runs at C from the first multiple of the delay after
    # t1 (the fixed reallocation clock), or from t1 with no delay. The small one's last
    # packet leaves a full packet before t1, ahead of the large one's in the last round.
    net = FlowNetwork(star(3), FlowConfig(reallocation_delay_ns=delay, ack_bytes=86))
    arrived = deliveries(net, [(1, 0, MIB, 0, 0), (2, 0, 4 * MIB, 0, 0)])
    t1 = 2 * wire(MIB) / C
    freed = (math.floor(t1 / delay) + 1) * delay if delay else t1
    assert freed == t1 if not delay else t1 < freed <= t1 + delay
    left = wire(4 * MIB) - freed * C / 2
    t2 = freed + left / C
    tail = 2 * L + last_packet(MIB) / C
    assert arrived[0] == pytest.approx(t1 + tail - Q / C, abs=PS)
    assert arrived[1] == pytest.approx(t2 + 2 * L + last_packet(4 * MIB) / C, abs=PS)


def test_messages_of_a_queue_pair_go_one_after_the_other():
    # Same (src, dst, tag): the second drains after the first; another tag runs beside them.
    net = FlowNetwork(star(3), FlowConfig(ack_bytes=0))
    arrived = deliveries(net, [(1, 0, MIB, 7, 0), (1, 0, 2 * MIB, 7, 0)])
    tail = 2 * L + last_packet(MIB) / C
    assert arrived[0] == pytest.approx(wire(MIB) / C + tail, abs=PS)
    assert arrived[1] == pytest.approx(
        wire(MIB) / C + wire(2 * MIB) / C + 2 * L + last_packet(2 * MIB) / C, abs=PS
    )


def test_flow_rate_cap_limits_a_lone_flow():
    net = FlowNetwork(star(2), FlowConfig(flow_rate_cap_gbps=25, ack_bytes=0))
    arrived = deliveries(net, [(0, 1, MIB, 0, 0)])
    assert arrived[0] == pytest.approx(wire(MIB) / (25 * 0.125) + 2 * L + last_packet(MIB) / C, abs=PS)


def test_network_yml_dimensions_build_their_links():
    # Without --topology the backend uses network.yml's links: Switch 4 at 50 GB/s.
    network = NetworkConfig.from_dict(
        {"topology": ["Switch"], "npus_count": [4], "bandwidth": [50.0], "latency": [500.0]}
    )
    net = create(Topology(network))
    bw = 50 * 2**30 / 1e9
    arrived = deliveries(net, [(0, 3, MIB, 0, 0)])
    assert arrived[0] == pytest.approx(wire(MIB) / bw + 1000 + last_packet(MIB) / bw, abs=PS)


def test_config_errors_are_one_line_each_naming_the_key(tmp_path):
    path = tmp_path / "flow.toml"
    path.write_text("payload_bytes = 0\nmtu = 9000\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    lines = str(err.value).splitlines()
    assert lines == [
        f"{path}: payload_bytes: must be in [1, 1073741824] bytes, got 0",
        f"{path}: unknown key 'mtu'",
    ]
    assert load_config({"payload_bytes": 1024}).payload_bytes == 1024
    with pytest.raises(ConfigError, match="flow backend config: expected a file path"):
        load_config(3)


def test_flows_joining_one_by_one_queue_one_drain_event_per_rate_rise_not_per_change():
    # A rate change must not queue a new drain event and leave the old one in the heap:
    # n flows joining a link one after the other would queue ~n^2 / 2 events (81,700
    # processed for these 400; 20,000 flows of 1,000 B took 1.66 GB). A fall in rate
    # moves the live event on when it fires.
    from astra_core.flows.flowfile import FlowSpec
    from astra_core.flows_api import run_flows
    from astra_core.topology.generators import BYTES_PER_NS_PER_GBPS, DEFAULT_GBPS, DEFAULT_LATENCY_NS, star

    n = 400
    flows = [FlowSpec(1 + i % 7, 0, 1000, i) for i in range(n)]
    run = run_flows(flows, star(8), "flow")
    backend = run.backend
    assert backend.events.events_processed < 10 * n
    into_host_0 = backend.topology.link(8, 0)
    assert backend.link_bytes[into_host_0] == n * (1000 + 82)
    # the shared link into NPU 0 is the bottleneck: the last byte is no sooner than all
    # wire bytes through it after the first flow's start, plus both links' latency
    last = max(f.start_ns + f.fct_ns for f in run.flows)
    assert last >= n * 1082 / (DEFAULT_GBPS * BYTES_PER_NS_PER_GBPS) + 2 * DEFAULT_LATENCY_NS
    assert min(f.slowdown for f in run.flows) >= 1


def test_the_flow_that_started_sooner_leads_the_last_round():
    # Two 1 MiB messages to NPU 0, the second sent 3 us later: the first runs alone for
    # 3 us, then both at C/2; the first drains at 2W/C - 3 us with its last packet a full
    # packet ahead of the second's last round; the second drains alone at 2W/C.
    net = FlowNetwork(star(3), FlowConfig(reallocation_delay_ns=0.0))
    later = 3000.0
    arrived = deliveries(net, [(2, 0, MIB, 0, later), (1, 0, MIB, 0, 0)])
    tail = 2 * L + last_packet(MIB) / C
    assert arrived[1] == pytest.approx(2 * wire(MIB) / C - later + tail - Q / C, abs=PS)
    assert arrived[0] == pytest.approx(2 * wire(MIB) / C + tail, abs=PS)
