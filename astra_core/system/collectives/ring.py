"""Ring collectives (upstream ``Ring.cc``; Patarasuk & Yuan 2009 bandwidth-optimal ring).

On ``n`` ranks a chunk of ``D`` bytes moves as ``n - 1`` (reduce-scatter,
all-gather, all-to-all windows aside) or ``2(n - 1)`` (all-reduce) messages to
the ring neighbour, each of ``D/n`` bytes (``D`` for all-gather, whose input is
one shard). A message is sent when the previous one has been received and
moved through local memory; during the reduce-scatter half of an all-reduce
(and during a reduce-scatter) each received message is reduced first.

The packet accounting below mirrors upstream's exactly because the order in
which packets become free decides when each message leaves, and so the
reproduced timings:

* ``parallel_reduce`` packets are in flight at once (1 for the ring; ``n - 1``
  or the window for the direct algorithm, which reuses this class);
* packets come in cycles of ``parallel_reduce`` "zero-latency" ones (moved
  NPU->memory, never reduced) then :meth:`non_zero_latency_packets` ones
  (memory->NPU, reduced in the first cycle of an all-reduce or in a
  reduce-scatter);
* the phase ends when all ``stream_count`` messages are sent and every packet
  slot is free again.
"""

from __future__ import annotations

from collections import deque

from astra_core.system.collectives.base import (
    GENERAL,
    PACKET_RECEIVED,
    STREAM_INIT,
    CollectiveAlgorithm,
)
from astra_core.system.collectives.logical_topology import Direction, RingTopology
from astra_core.system.comm_types import CommType


class Ring(CollectiveAlgorithm):
    """One ring phase of one chunk on one rank. Sizes in bytes."""

    name = "ring"
    __slots__ = (
        "topology", "direction", "nodes", "receiver", "sender", "parallel_reduce",
        "stream_count", "msg_size", "packets", "free_packets", "zero_latency_packets",
        "non_zero_latency_packets", "toggle", "total_received", "fast",
    )

    def __init__(self, comm_type: CommType, rank: int, topology: RingTopology,
                 data_size: int, direction: Direction = Direction.CLOCKWISE):
        super().__init__(comm_type, rank, data_size)
        n = topology.nodes
        self.topology = topology
        self.direction = direction
        self.nodes = n
        self.receiver = topology.receiver(rank, direction)
        self.sender = topology.sender(rank, direction)
        self.parallel_reduce = 1
        self.fast = topology.local
        if comm_type is CommType.ALL_REDUCE:
            self.stream_count = 2 * (n - 1)
        elif comm_type is CommType.ALL_TO_ALL:
            self.stream_count = ((n - 1) * n) // 2
        else:
            self.stream_count = n - 1
        if comm_type is CommType.ALL_REDUCE:
            self.final_data_size, self.msg_size = data_size, data_size // n
        elif comm_type is CommType.ALL_GATHER:
            self.final_data_size, self.msg_size = data_size * n, data_size
        elif comm_type is CommType.REDUCE_SCATTER:
            self.final_data_size, self.msg_size = data_size // n, data_size // n
        else:  # all-to-all
            self.final_data_size, self.msg_size = data_size, data_size // n
        self.packets: deque[tuple[int, int]] = deque()  # (src, dst) per packet
        self.free_packets = 0
        self.zero_latency_packets = 0
        self.non_zero_latency_packets = 0
        self.toggle = False
        self.total_received = 0

    def non_zero_latency_packets_per_cycle(self) -> int:
        return (self.nodes - 1) * self.parallel_reduce

    # -- events -------------------------------------------------------------
    def run(self, event: int, data=None) -> None:
        if event == GENERAL:
            self.free_packets += 1
            self.ready()
            self.iteratable()
        elif event == PACKET_RECEIVED:
            self.total_received += 1
            self.insert_packet()
        elif event == STREAM_INIT:
            for _ in range(self.parallel_reduce):
                self.insert_packet()

    def insert_packet(self) -> None:
        if self.zero_latency_packets == 0 and self.non_zero_latency_packets == 0:
            self.zero_latency_packets = self.parallel_reduce
            self.non_zero_latency_packets = self.non_zero_latency_packets_per_cycle()
            self.toggle = not self.toggle
        self.packets.append((self.sender, self.receiver))
        if self.zero_latency_packets > 0:
            self.zero_latency_packets -= 1
            self.send_bundle(self.msg_size, False, self.fast)
        elif self.non_zero_latency_packets > 0:
            self.non_zero_latency_packets -= 1
            processed = self.comm_type is CommType.REDUCE_SCATTER or (
                self.comm_type is CommType.ALL_REDUCE and self.toggle)
            self.send_bundle(self.msg_size, processed, self.fast)
        else:  # pragma: no cover - upstream panics here too
            raise RuntimeError("ring: packet inserted with no packet slot left")
        self.after_release()

    def after_release(self) -> None:
        """Hook run after each packet bundle leaves (the direct algorithm rotates peers)."""

    def ready(self) -> bool:
        """Send the oldest packet if a slot is free and messages remain."""
        if not self.packets or self.stream_count == 0 or self.free_packets == 0:
            return False
        src, dst = self.packets.popleft()
        stream = self.stream
        owner = stream.owner
        owner.send_collective(dst, self.msg_size, stream)
        owner.recv_collective(src, self.msg_size, stream)
        self.stream_count -= 1
        self.free_packets -= 1
        return True

    def iteratable(self) -> bool:
        if self.stream_count == 0 and self.free_packets == self.parallel_reduce:
            self.exit()
            return False
        return True

    def waiting_for(self) -> str:
        return (f"{self.name} {self.comm_type.label} on ranks {self.topology.members}: "
                f"{self.stream_count} of its messages not sent yet, waiting for a message "
                f"from rank(s) {self.sender}")
