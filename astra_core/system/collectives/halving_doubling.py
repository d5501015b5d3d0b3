"""Halving-doubling collectives (upstream ``HalvingDoubling.cc``; Thakur et al. 2005).

Recursive halving for reduce-scatter (partner at distance 1, 2, 4, ... with
message sizes ``D/2, D/4, ...``), recursive doubling for all-gather (distance
``n/2, n/4, ...``, sizes ``D, 2D, ...``), and both in sequence for all-reduce;
one message in flight. The partner at distance ``d`` is ``d`` steps round the
ring, clockwise when ``index / d`` is even. Needs a power-of-two group;
all-to-all is not defined (upstream aborts).

Upstream counts ``log2(n) - 1`` "non-zero-latency" packets per cycle (an
operator-precedence slip for ``log2(n) - 1 * window``), so only the first
``log2(n) - 1`` arrivals are reduced; we keep that to give upstream's numbers.
"""

from __future__ import annotations

from astra_core.errors import AstraError
from astra_core.system.collectives.logical_topology import Direction, RingTopology
from astra_core.system.collectives.plan import Plan, reduce_rule, upstream_packet_flags
from astra_core.system.comm_types import CommType


def _partner(ring: RingTopology, rank: int, distance: int) -> int:
    if distance == 0 or (ring.index_in_ring // distance) % 2 == 0:
        direction = Direction.CLOCKWISE
    else:
        direction = Direction.ANTICLOCKWISE
    node = rank
    for _ in range(distance):
        node = ring.receiver(node, direction)
    return node


def halving_doubling_plan(comm_type: CommType, rank: int, ring: RingTopology, data_size: int) -> Plan:
    """Rank ``rank``'s plan for one halving-doubling phase. Raises AstraError."""
    n = ring.nodes
    if n & (n - 1):
        raise AstraError(f"halvingDoubling needs a power-of-two group, got {n} ranks {list(ring.members)}")
    if comm_type is CommType.ALL_TO_ALL:
        raise AstraError(
            "halvingDoubling has no all-to-all (as upstream); use ring or direct in all-to-all-implementation"
        )
    log2n = n.bit_length() - 1
    count = 2 * log2n if comm_type is CommType.ALL_REDUCE else log2n
    if comm_type is CommType.ALL_GATHER:
        final, size, distance, factor = data_size * n, data_size, n // 2, 0.5
    else:
        final = data_size if comm_type is CommType.ALL_REDUCE else data_size // n
        size, distance, factor = data_size // 2, 1, 2.0
    messages, sizes = [], []
    for _ in range(count + 1):
        partner = _partner(ring, rank, distance)
        messages.append((partner, partner, size))
        sizes.append(size)
        # C++ keeps the distance and size as integers: products truncate.
        distance = int(distance * factor)
        size = int(size / factor)
        if distance == n and comm_type is CommType.ALL_REDUCE:
            factor = 0.5
            distance = int(distance * factor)
            size = int(size / factor)
    flags = upstream_packet_flags(count + 1, 1, log2n - 1, reduce_rule(comm_type))
    return Plan(
        messages=messages[:count],
        window=1,
        packets=list(zip(flags, sizes)),
        final_data_size=final,
        fast=ring.local,
        peers=ring.members,
    )
