"""Ring collectives (upstream ``Ring.cc``; Patarasuk & Yuan 2009 bandwidth-optimal ring).

On a ring of ``n`` ranks, one chunk of ``D`` bytes moves as messages to the
next rank, each received from the previous one:

==============  ==================  ============  =========================
collective      messages            bytes each    reduced on arrival
==============  ==================  ============  =========================
reduce-scatter  n - 1               D / n         every one
all-gather      n - 1               D (a shard)   none
all-reduce      2 (n - 1)           D / n         the first n - 1
all-to-all      n (n - 1) / 2       D / n         none
==============  ==================  ============  =========================

One message is in flight at a time: each is sent once the previous one has
arrived and gone through local memory (upstream's window of one packet).
"""

from __future__ import annotations

from astra_core.system.collectives.logical_topology import Direction, RingTopology
from astra_core.system.collectives.plan import Plan, packets
from astra_core.system.comm_types import CommType


def message_sizes(comm_type: CommType, n: int, data_size: int) -> tuple[int, int]:
    """(bytes per message, bytes after the phase) of a ring-family phase."""
    if comm_type is CommType.ALL_GATHER:
        return data_size, data_size * n
    if comm_type is CommType.REDUCE_SCATTER:
        return data_size // n, data_size // n
    return data_size // n, data_size  # all-reduce, all-to-all


def ring_plan(
    comm_type: CommType,
    rank: int,
    ring: RingTopology,
    data_size: int,
    direction: Direction = Direction.CLOCKWISE,
) -> Plan:
    """Rank ``rank``'s plan for one ring phase of a ``data_size``-byte chunk."""
    n = ring.nodes
    if comm_type is CommType.ALL_REDUCE:
        count = 2 * (n - 1)
    elif comm_type is CommType.ALL_TO_ALL:
        count = n * (n - 1) // 2
    else:
        count = n - 1
    msg, final = message_sizes(comm_type, n, data_size)
    dst, src = ring.receiver(rank, direction), ring.sender(rank, direction)
    return Plan(
        messages=((dst, src, msg),) * count,
        window=1,
        packets=packets(comm_type, count + 1, 1, n - 1, msg),
        final_data_size=final,
        fast=ring.local,
        peers=ring.members,
    )
