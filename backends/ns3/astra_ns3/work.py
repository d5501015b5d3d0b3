"""What a run costs the ns3 backend, message by message, before simulating it.

A message of ``B`` bytes over ``H`` links is ``P = max(1, ceil(B /
payload_bytes))`` data packets (what :class:`~astra_ns3.network.Ns3Network`
adds to its ``max_packet_hops`` budget at send) and ``ceil(P / ack_interval)``
ACKs back over the reverse route, which is as long (every cable has one
latency both ways, so a shortest path reversed is a shortest path): the C++
model ACKs every ``ack_interval``-th in-order packet and the last one
(``cpp/flow.cc`` ``Flow::OnData``). Its ``packet_hops`` statistic counts
every frame a port sends (``cpp/port.cc`` ``Port::Pump``), so without CNPs,
PFC frames, NACKs or retransmissions it is exactly ``(P + ceil(P /
ack_interval)) x H`` summed over the messages
(tests/backends/ns3/test_work.py).

Speed and memory: the projection is ``messages x`` :data:`MESSAGE_S` ``+
packet-hops /`` :data:`PACKET_HOPS_PER_S`, the peak memory ``messages x``
:data:`MEMORY_PER_MESSAGE_BYTES` ``+`` :data:`MEMORY_BASE_BYTES`, all fitted on
runs of this model (sources there).

With the steady-state fast-forward (``cpp/fastforward.cc``) most packets of a
training step are never simulated, and the projection prices the ones that
are (:meth:`Ns3Work.simulated_work`), part by part (the queue pairs whose
routes or ACKs share a port are measured and jump as one): of a message on a
queue pair that can be found steady, its last one or two packets
(``MarginPackets``) and those it sends while the part's queue pairs start
(a quiet pattern seen before jumps only once all of them send, so a part
whose routes differ in latency, a ring over several switches, simulates that
spread at every message); once per pair, one measurement from a standing
start (a base RTT to settle and two windows of ``kFfMinPackets`` or, under a
congestion control that moves, windows up to ``kFfCycleRtts`` base RTTs);
every packet of a pair whose messages are too short to be measured, of a
part with a route over a port loaded past its rate (the queues, ECN marks
and pauses there are never steady), and under a moving congestion control of
a pair that shares a port. A run also costs :data:`RUN_S` and
:data:`RUN_PER_NPU_S` per NPU. The wall time lies within
:data:`SPEED_SPREAD` of the projection either way.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from astra.plugin import PhysicalTopology, Topology
from astra_ns3.config import Ns3Config

# Fitted by benchmarks/ns3_message_cost.py on this project's 2-core machine, otherwise idle
# (2026-11-26, model of 8a91dbb): wall = 44.0 us x messages + packet-hops / 0.34 M over a
# 16-GPU Llama-shaped step at two sequence lengths (143,872 messages, 0.62 M and 4.65 M
# packet-hops: 8.0 s and 20.2 s) and a 64 MiB all-reduce (0.92 M packet-hops: 2.1 s),
# packet by packet. (Before the messages of a step crossed to the worker as one buffer
# the same fit gave 77 us a message, under load 3.6-4.4.) A projection on a busy machine
# is optimistic, on an idle one about right.
# benchmarks/ns3_speed.py gave 0.45 M packet-hops/s for a 1 GiB all-reduce at load 1.6;
# ../shared/NS3-NOTES.md 0.17-0.2 M; docs/cc-studies.md 0.36 M.
#: Packet-hops (data, ACK, CNP and PFC frames over one link) per wall second; also the
#: figure in max_packet_hops's refusal at a send (astra_ns3.network).
PACKET_HOPS_PER_S = 3.4e5
#: Wall seconds a message costs the run whatever its size: the system layer's work for it
#: (every rank is simulated on ns3), the send, the worker's flow set-up and completion,
#: and the lock-step round trips.
MESSAGE_S = 44e-6
RATE_SOURCE = "benchmarks/ns3_message_cost.py, a fit on this 2-core machine"
#: Peak resident memory of the caller and the ns-3 worker together, as fitted by the same
#: runs: 52 + 51 MiB at 448 messages, 108 + 119 MiB at 143,872 (the per-message counters
#: and flow records both keep until the run ends). The Llama-3-8B steps of
#: benchmarks/ns3_llm.py peaked lower per message: 585 + 1,193 MiB at 2.55 M messages (128 GPUs).
MEMORY_BASE_BYTES = 100 << 20
MEMORY_PER_MESSAGE_BYTES = 906
#: The factor by which a run's wall time may stand from the projection either way: the
#: same run varies by up to +-30 % on this shared 2-core machine (docs/backend-ns3.md,
#: benchmarks/ns3_fast_forward.py), and the 128-GPU Llama-3-8B step ran in 117 s
#: (benchmarks/results/speed_record.json) to 142 s (benchmarks/results/ns3_llm.md).
SPEED_SPREAD = 1.5
#: Packets per queue pair per window before the model trusts a rate (cpp/fastforward.cc
#: kFfMinPackets); two windows are compared before a part can be found steady.
FF_MIN_PACKETS = 8
#: Base RTTs a window must last before a congestion control that moves on its own
#: (HPCC, PINT, TIMELY, DCTCP) is judged steady (cpp/fastforward.cc kFfCycleRtts).
FF_CYCLE_RTTS = 32
#: The congestion controls whose rate stays put at line rate (cpp/fastforward.cc CcMayMove).
QUIET_CCS = ("dcqcn", "none")
#: Wall seconds a run costs whatever it sends, with the ns-3 worker loaded: the fabric and
#: its routes built in the worker, the system layer set up, the first instant, the
#: results read back; RUN_S plus RUN_PER_NPU_S per NPU. Measured with simulate() of one
#: 4 KiB message, worker warm, 4 runs each, on this 2-core machine at load 2: 0.037 s on
#: an 8-host switch, 0.040-0.046 s on the 16-NPU fabrics of validation/backends.py,
#: 0.087 s on a k = 8 fat-tree (128 NPUs); benchmarks/results/ns3_fast_forward.jsonl has
#: 0.026 s for its smallest run (p2p-fat-tree, 4 MiB, fast-forward on).
RUN_S = 0.025
RUN_PER_NPU_S = 0.4e-3


class Ns3Work:
    """:class:`~astra_core.backend.WorkModel` of the ns3 backend on ``physical``."""

    unit = "packet-hops"
    rate = PACKET_HOPS_PER_S
    rate_source = RATE_SOURCE
    limit_key = "max_packet_hops"
    message_s = MESSAGE_S
    spread = SPEED_SPREAD

    def __init__(self, physical: PhysicalTopology, config: Ns3Config):
        self.physical = physical
        self.payload = config.payload_bytes
        self.ack_interval = config.ack_interval
        self.limit = config.max_packet_hops or None
        # The steady-state fast-forward skips most packets of long flows.
        self.fast_forward = config.fast_forwards
        self.tolerance = config.fast_forward_tolerance
        self.moving_cc = config.cc not in QUIET_CCS
        self.run_s = RUN_S + RUN_PER_NPU_S * physical.npus_count

    def peak_memory_bytes(self, messages: int) -> int:
        """Peak resident memory (bytes) of a run of ``messages`` messages, caller and worker."""
        return MEMORY_BASE_BYTES + messages * MEMORY_PER_MESSAGE_BYTES

    def per_link(self, size_bytes: int) -> tuple[int, int]:
        """(data packets, data packets + ACKs) of a message of ``size_bytes``."""
        packets = max(1, -(-size_bytes // self.payload))
        return packets, packets + -(-packets // self.ack_interval)

    def hops(self, src: int, dst: int) -> int:
        """Links of the route from NPU ``src`` to NPU ``dst`` (every ECMP path is as long)."""
        return 0 if src == dst else len(self.physical.route(src, dst, 0))

    def simulated_work(self, pairs: Mapping[tuple[int, int], Sequence[tuple[int, int]]]) -> tuple[int, int]:
        """(expected, most) packet-hops the fast-forward simulates of the messages
        ``pairs`` lists as ``(bytes, count)`` per ``(src, dst)`` NPU pair (module
        docstring), part by part (:meth:`_parts`): a pair that jumps costs its
        messages' tails and the part's start skew each, and its longest message one
        measurement from a standing start (the most: with one check more); one that
        cannot jump costs every packet."""
        routes = {pair: self.physical.route(pair[0], pair[1], 0) for pair in pairs if pair[0] != pair[1]}
        hot = self._overloaded(pairs, routes)
        sharing = Counter(link for route in routes.values() for link in route)
        expected = most = 0
        for part in self._parts(routes):
            one_way = [self._latency_ns(routes[pair], 1) for pair in part]
            skew, settle = max(one_way) - min(one_way), max(self._latency_ns(routes[p], 2) for p in part)
            never_steady = any(pair in hot for pair in part)  # a part jumps as one
            for pair in part:
                share = max(sharing[link] for link in routes[pair])
                pair_expected, pair_most = self._pair_work(
                    pairs[pair], routes[pair], never_steady, share, skew, settle
                )
                expected, most = expected + pair_expected, most + pair_most
        return expected, most

    def _pair_work(
        self, messages, route, hot: bool, share: int, skew: float, settle: float
    ) -> tuple[int, int]:
        """(expected, most) packet-hops simulated of one pair's ``messages`` on ``route``,
        whose busiest port carries ``share`` pairs' data, in a part whose queue pairs start
        up to ``skew`` ns apart and settle for ``settle`` ns (:meth:`simulated_work`)."""
        slowest = min(self.physical.link_bandwidth[link] for link in route)
        per_ns = slowest / share / self.payload  # its packets per ns
        # The first window lets every queue pair send FF_MIN_PACKETS + 1 frames where it
        # shares a port; it is compared with the next, twice as long (fastforward.cc).
        window = max(1.0, (FF_MIN_PACKETS + 1) * share * self.payload / slowest)
        if self.moving_cc:  # windows double until one lasts FF_CYCLE_RTTS base RTTs
            doublings = max(0, math.ceil(math.log2(FF_CYCLE_RTTS * settle / window)))
        else:
            doublings = 1
        start = math.ceil((settle + window * (2 ** (doublings + 1) - 1)) * per_ns)
        # at most, one check more fails and the window doubles again
        start_most = math.ceil((settle + window * (2 ** (doublings + 2) - 1)) * per_ns)
        frames = self._frames
        expected = most = 0
        first = True
        for size, count in sorted(messages, reverse=True):
            packets = max(1, -(-size // self.payload))
            tail = min(packets, 1 if size % self.payload == 0 else 2)
            if hot or packets <= start + tail or (self.moving_cc and share > 1):
                expected, most = expected + frames(packets) * count, most + frames(packets) * count
                continue
            if self.moving_cc:  # a CC that moves may never be found steady
                expected, most = expected + frames(start + tail) * count, most + frames(packets) * count
                continue
            skewed = frames(min(packets, tail + math.ceil(skew * per_ns))) * count
            expected, most = expected + skewed, most + skewed
            if first:  # measured from a standing start once
                expected, most = expected + frames(start), most + frames(min(packets, start_most))
                first = False
        return expected * len(route), most * len(route)

    def _frames(self, packets: int) -> int:
        """Frames per link of ``packets`` data packets: they and their ACKs."""
        return packets + -(-packets // self.ack_interval)

    def _latency_ns(self, route: Sequence[int], ways: int) -> float:
        """Nanoseconds of a full packet over ``route``: its latency ``ways`` times (1: one
        way, 2: a base RTT) and its store-and-forward time at every link."""
        topo = self.physical
        return sum(
            ways * topo.link_latency[link] + self.payload / topo.link_bandwidth[link] for link in route
        )

    def _parts(self, routes: Mapping[tuple[int, int], Sequence[int]]) -> list[list[tuple[int, int]]]:
        """The pairs joined where their routes or their ACKs' (the reverse pair's route)
        share a port, directly or through others: the parts the fast-forward measures
        and jumps as one (cpp/fastforward.cc)."""
        parent = {pair: pair for pair in routes}

        def root(pair):
            while parent[pair] != pair:
                parent[pair] = parent[parent[pair]]
                pair = parent[pair]
            return pair

        owner: dict[int, tuple[int, int]] = {}
        for pair, route in routes.items():
            for link in (*route, *self.physical.route(pair[1], pair[0], 0)):
                a, b = root(pair), root(owner.setdefault(link, pair))
                if a != b:
                    parent[max(a, b)] = min(a, b)
        parts: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for pair in routes:
            parts.setdefault(root(pair), []).append(pair)
        return list(parts.values())

    def _overloaded(self, pairs, routes) -> set[tuple[int, int]]:
        """The pairs whose route crosses a link offered more than its rate (past the
        fast-forward tolerance) when every pair sends at once, each sharing its first
        link with the pairs that start there in proportion to their bytes."""
        volume = {pair: sum(size * count for size, count in pairs[pair]) for pair in routes}
        per_first: Counter[int] = Counter()
        for pair, route in routes.items():
            per_first[route[0]] += volume[pair]
        offered: Counter[int] = Counter()
        bandwidth = self.physical.link_bandwidth
        for pair, route in routes.items():
            rate = bandwidth[route[0]] * volume[pair] / max(per_first[route[0]], 1)
            for link in route:
                offered[link] += rate
        limit = 1 + self.tolerance
        return {
            pair for pair, route in routes.items() if any(offered[x] > limit * bandwidth[x] for x in route)
        }


def work_model(topology: Topology, config: Any = None) -> Ns3Work:
    """The ns3 backend's work model for ``topology`` (as :func:`astra_ns3.factory.create`
    builds its fabric) and ``config`` (None, an Ns3Config, a mapping or a TOML/YAML
    path). Raises ConfigError naming the file and key of a bad config."""
    from astra.plugin import from_network
    from astra_ns3.config import load_config

    physical = topology.physical if topology.physical is not None else from_network(topology.network)
    return Ns3Work(physical, load_config(config))
