"""Halving-doubling collectives (upstream ``HalvingDoubling.cc``; Thakur et al. 2005).

Recursive halving for reduce-scatter (partner distance 1, 2, 4, ... with
halving message sizes ``D/2, D/4, ...``), recursive doubling for all-gather
(distance ``n/2, n/4, ...`` with doubling sizes), and both in sequence for
all-reduce. Partners are found by walking the ring ``distance`` steps in the
direction given by the parity of ``index / distance``. Needs a power-of-two
group; all-to-all is not defined for it (upstream aborts).
"""

from __future__ import annotations

from collections import deque

from astra_core.errors import AstraError
from astra_core.system.collectives.base import (
    GENERAL,
    PACKET_RECEIVED,
    STREAM_INIT,
    CollectiveAlgorithm,
)
from astra_core.system.collectives.logical_topology import Direction, RingTopology
from astra_core.system.comm_types import CommType


class HalvingDoubling(CollectiveAlgorithm):
    """One halving-doubling phase of one chunk on one rank. Sizes in bytes."""

    name = "halvingDoubling"
    __slots__ = (
        "topology", "nodes", "stream_count", "msg_size", "rank_offset", "offset_multiplier",
        "receiver", "packets", "free_packets", "zero_latency_packets",
        "non_zero_latency_packets", "toggle", "log2n", "fast",
    )

    def __init__(self, comm_type: CommType, rank: int, topology: RingTopology, data_size: int):
        super().__init__(comm_type, rank, data_size)
        n = topology.nodes
        if n & (n - 1):
            raise AstraError(f"halvingDoubling needs a power-of-two group, got {n} ranks "
                             f"{topology.members}")
        if comm_type is CommType.ALL_TO_ALL:
            raise AstraError("halvingDoubling has no all-to-all (as upstream); use ring or direct "
                             "in all-to-all-implementation")
        self.topology = topology
        self.nodes = n
        self.fast = topology.local
        self.log2n = n.bit_length() - 1
        self.stream_count = 2 * self.log2n if comm_type is CommType.ALL_REDUCE else self.log2n
        if comm_type is CommType.ALL_REDUCE:
            self.final_data_size, self.msg_size = data_size, data_size // 2
            self.rank_offset, self.offset_multiplier = 1, 2.0
        elif comm_type is CommType.ALL_GATHER:
            self.final_data_size, self.msg_size = data_size * n, data_size
            self.rank_offset, self.offset_multiplier = n // 2, 0.5
        else:
            self.final_data_size, self.msg_size = data_size // n, data_size // 2
            self.rank_offset, self.offset_multiplier = 1, 2.0
        self.receiver = self._partner()
        self.packets: deque[tuple[int, int, int]] = deque()  # (src, dst, bytes)
        self.free_packets = 0
        self.zero_latency_packets = 0
        self.non_zero_latency_packets = 0
        self.toggle = False

    def _partner(self) -> int:
        if self.rank_offset == 0:
            direction = Direction.CLOCKWISE
        elif (self.topology.index_in_ring // self.rank_offset) % 2 == 0:
            direction = Direction.CLOCKWISE
        else:
            direction = Direction.ANTICLOCKWISE
        node = self.rank
        for _ in range(self.rank_offset):
            node = self.topology.receiver(node, direction)
        return node

    def run(self, event: int, data=None) -> None:
        if event == GENERAL:
            self.free_packets += 1
            self.ready()
            if self.stream_count == 0 and self.free_packets == 1:
                self.exit()
        elif event == PACKET_RECEIVED:
            self.insert_packet()
        elif event == STREAM_INIT:
            self.insert_packet()

    def insert_packet(self) -> None:
        if self.zero_latency_packets == 0 and self.non_zero_latency_packets == 0:
            self.zero_latency_packets = 1
            # Upstream computes log2(n) - 1 * parallel_reduce, i.e. log2(n) - 1.
            self.non_zero_latency_packets = self.log2n - 1
            self.toggle = not self.toggle
        self.packets.append((self.receiver, self.receiver, self.msg_size))
        if self.zero_latency_packets > 0:
            self.zero_latency_packets -= 1
            self.send_bundle(self.msg_size, False, self.fast)
        else:
            self.non_zero_latency_packets -= 1
            processed = self.comm_type is CommType.REDUCE_SCATTER or (
                self.comm_type is CommType.ALL_REDUCE and self.toggle)
            self.send_bundle(self.msg_size, processed, self.fast)
        # Next partner and message size (upstream process_max_count); C++ keeps
        # both as integers, so the products truncate.
        self.rank_offset = int(self.rank_offset * self.offset_multiplier)
        self.msg_size = int(self.msg_size / self.offset_multiplier)
        if self.rank_offset == self.nodes and self.comm_type is CommType.ALL_REDUCE:
            self.offset_multiplier = 0.5
            self.rank_offset = int(self.rank_offset * self.offset_multiplier)
            self.msg_size = int(self.msg_size / self.offset_multiplier)
        self.receiver = self._partner()

    def ready(self) -> bool:
        if not self.packets or self.stream_count == 0 or self.free_packets == 0:
            return False
        src, dst, size = self.packets.popleft()
        owner = self.stream.owner
        owner.send_collective(dst, size, self.stream)
        owner.recv_collective(src, size, self.stream)
        self.stream_count -= 1
        self.free_packets -= 1
        return True

    def waiting_for(self) -> str:
        return (f"halvingDoubling {self.comm_type.label} on ranks {self.topology.members}: "
                f"{self.stream_count} messages not sent yet, waiting for rank {self.receiver}")
