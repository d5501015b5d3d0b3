"""Direct collectives (upstream ``AllToAll.cc``): talk to every peer at once.

Every rank sends one message to each of its ``n - 1`` peers, up to ``W``
messages in flight (``direct<W>``; all peers by default), destinations going
round the ring starting at the next rank. Sizes are the ring's (see
:mod:`ring`). An all-reduce does this twice, ``2 (n - 1)`` messages of
``D / n`` bytes: a reduce-scatter round whose arrivals are reduced, then an
all-gather round that starts only once every first-round message has arrived,
each reduced arrival releasing one send (upstream's order, which decides the
timing on rings where peers are at different distances).
"""

from __future__ import annotations

from astra_core.system.collectives.logical_topology import Direction, RingTopology
from astra_core.system.collectives.plan import Plan, packets
from astra_core.system.collectives.ring import message_sizes
from astra_core.system.comm_types import CommType


def direct_plan(
    comm_type: CommType,
    rank: int,
    ring: RingTopology,
    data_size: int,
    direction: Direction = Direction.CLOCKWISE,
    window: int = -1,
) -> Plan:
    """Rank ``rank``'s plan for one direct phase; ``window`` < 0 means all peers."""
    n = ring.nodes
    count = 2 * (n - 1) if comm_type is CommType.ALL_REDUCE else n - 1
    slots = n - 1 if window < 0 else min(window, n - 1)
    msg, final = message_sizes(comm_type, n, data_size)
    # Peers in upstream's rotation: one step round the ring per packet, skipping self,
    # so every n - 1 messages go round once (receivers ahead, senders behind).
    members, i = ring.members, ring.index_of(rank)
    step = 1 if direction is Direction.CLOCKWISE else -1
    turn = list(
        zip(
            [members[(i + step * k) % n] for k in range(1, n)],
            [members[(i - step * k) % n] for k in range(1, n)],
            [msg] * (n - 1),
        )
    )
    messages = turn * (count // (n - 1)) if n > 1 else []
    # Upstream counts n - 1 "non-zero-latency" packets per cycle on a
    # communicator-group ring and one window's worth on a network dimension.
    per_cycle = (n - 1) * slots if ring.local else slots
    return Plan(
        messages=messages,
        window=slots,
        packets=packets(comm_type, count + slots, slots, per_cycle, msg),
        final_data_size=final,
        barrier=n - 1 if comm_type is CommType.ALL_REDUCE else None,
        fast=ring.local,
        peers=ring.members,
    )
