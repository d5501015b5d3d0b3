"""Direct collectives (upstream ``AllToAll.cc``): talk to every peer at once.

The ring machinery with ``parallel_reduce = n - 1`` packets in flight (or the
``direct<W>`` window ``W``), and the destination rotating over all peers after
every packet. An all-reduce runs in two rounds (reduce-scatter then
all-gather, ``2(n-1)`` messages of ``D/n`` bytes); the second round starts
only after every first-round message has arrived, and then each processed
packet releases one send, oldest first, as upstream does.
"""

from __future__ import annotations

from astra_core.system.collectives.base import GENERAL, PACKET_RECEIVED, STREAM_INIT
from astra_core.system.collectives.logical_topology import Direction, RingTopology
from astra_core.system.collectives.ring import Ring
from astra_core.system.comm_types import CommType


class Direct(Ring):
    """One direct phase of one chunk on one rank; ``window`` < 0 means n - 1."""

    name = "direct"
    __slots__ = ("middle_point",)

    def __init__(self, comm_type: CommType, rank: int, topology: RingTopology,
                 data_size: int, direction: Direction = Direction.CLOCKWISE,
                 window: int = -1):
        super().__init__(comm_type, rank, topology, data_size, direction)
        n = self.nodes
        self.middle_point = n - 1
        self.parallel_reduce = n - 1 if window < 0 else min(window, n - 1)
        if comm_type is CommType.ALL_TO_ALL:
            self.stream_count = n - 1

    def non_zero_latency_packets_per_cycle(self) -> int:
        if self.topology.local:
            return (self.nodes - 1) * self.parallel_reduce
        return self.parallel_reduce

    def run(self, event: int, data=None) -> None:
        if event == GENERAL:
            self.free_packets += 1
            if self.comm_type is CommType.ALL_REDUCE and self.stream_count <= self.middle_point:
                if self.total_received < self.middle_point:
                    return
                for _ in range(self.parallel_reduce):
                    self.ready()
            else:
                self.ready()
            self.iteratable()
        elif event == PACKET_RECEIVED:
            self.total_received += 1
            self.insert_packet()
        elif event == STREAM_INIT:
            for _ in range(self.parallel_reduce):
                self.insert_packet()

    def after_release(self) -> None:
        topo, direction, me = self.topology, self.direction, self.rank
        self.receiver = topo.receiver(self.receiver, direction)
        if self.receiver == me:
            self.receiver = topo.receiver(self.receiver, direction)
        self.sender = topo.sender(self.sender, direction)
        if self.sender == me:
            self.sender = topo.sender(self.sender, direction)
