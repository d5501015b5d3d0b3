"""The per-rank plans of ring, direct and halving-doubling, checked as data.

Conservation: over all ranks of a phase, every message a rank sends to ``d`` is
a message ``d`` expects from it (same size, same count). Volumes: the bytes a
rank sends equal the textbook amounts (ring/HD all-reduce ``2(n-1)/n * D``,
reduce-scatter ``(n-1)/n * D``, all-gather of a ``D``-byte shard ``(n-1) * D``).
"""

from collections import Counter

import pytest

from astra_core.errors import AstraError
from astra_core.system.collectives.direct import direct_plan
from astra_core.system.collectives.halving_doubling import halving_doubling_plan
from astra_core.system.collectives.logical_topology import RingTopology
from astra_core.system.collectives.ring import ring_plan
from astra_core.system.comm_types import CommType

BUILDERS = {
    "ring": lambda t, r, ring, d: ring_plan(t, r, ring, d),
    "direct": lambda t, r, ring, d: direct_plan(t, r, ring, d),
    "direct2": lambda t, r, ring, d: direct_plan(t, r, ring, d, window=2),
    "halvingDoubling": lambda t, r, ring, d: halving_doubling_plan(t, r, ring, d),
}
TYPES = [CommType.ALL_REDUCE, CommType.REDUCE_SCATTER, CommType.ALL_GATHER, CommType.ALL_TO_ALL]


def _plans(name, comm_type, n, data):
    return [BUILDERS[name](comm_type, r, RingTopology(r, list(range(n))), data) for r in range(n)]


@pytest.mark.parametrize("name", list(BUILDERS))
@pytest.mark.parametrize("comm_type", TYPES, ids=lambda t: t.label)
@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_every_send_has_a_matching_receive(name, comm_type, n):
    if name == "halvingDoubling" and comm_type is CommType.ALL_TO_ALL:
        with pytest.raises(AstraError, match="no all-to-all"):
            _plans(name, comm_type, n, 1 << 20)
        return
    plans = _plans(name, comm_type, n, 1 << 20)
    sent = Counter((r, dst, size) for r, p in enumerate(plans) for dst, _, size in p.messages)
    expected = Counter((src, r, size) for r, p in enumerate(plans) for _, src, size in p.messages)
    assert sent == expected
    for plan in plans:
        # one packet per slot at the start and one per received message
        assert len(plan.packets) == plan.window + len(plan.messages)


@pytest.mark.parametrize("name", ["ring", "direct", "halvingDoubling"])
@pytest.mark.parametrize(
    "comm_type, volume",
    [
        (CommType.ALL_REDUCE, lambda n, d: 2 * (n - 1) * d // n),
        (CommType.REDUCE_SCATTER, lambda n, d: (n - 1) * d // n),
        (CommType.ALL_GATHER, lambda n, d: (n - 1) * d),
    ],
    ids=["all-reduce", "reduce-scatter", "all-gather"],
)
def test_bytes_sent_per_rank(name, comm_type, volume):
    n, data = 8, 1 << 20
    for plan in _plans(name, comm_type, n, data):
        assert sum(size for _, _, size in plan.messages) == volume(n, data)


def test_ring_reduces_the_reduce_scatter_half_of_an_all_reduce():
    plan = _plans("ring", CommType.ALL_REDUCE, 8, 1 << 20)[3]
    assert plan.messages[0][:2] == (4, 2)  # next and previous rank
    # packet 0 starts the phase; packets 1..7 carry reduce-scatter arrivals.
    assert [flag for flag, _ in plan.packets] == [False] + [True] * 7 + [False] * 7


def test_halving_doubling_partners():
    plans = _plans("halvingDoubling", CommType.ALL_REDUCE, 8, 1 << 20)
    # distance 1, 2, 4 out (halving sizes), then 4, 2, 1 back (doubling)
    assert [m[0] for m in plans[0].messages] == [1, 2, 4, 4, 2, 1]
    assert [m[2] for m in plans[0].messages] == [1 << 19, 1 << 18, 1 << 17, 1 << 17, 1 << 18, 1 << 19]
    for r, plan in enumerate(plans):
        for step, (partner, _, _) in enumerate(plan.messages):
            assert plans[partner].messages[step][0] == r  # pairs exchange with each other


def test_direct_round_two_waits_for_round_one():
    plan = _plans("direct", CommType.ALL_REDUCE, 8, 1 << 20)[0]
    assert [m[0] for m in plan.messages] == [1, 2, 3, 4, 5, 6, 7] * 2
    assert plan.barrier == 7 and plan.window == 7


def test_a_dimension_ring_holds_no_list_of_its_members():
    # Every rank holds a ring per collective type and dimension; as a list of members
    # with an index they would take 3.3 MB a rank on [8, 1024] NPUs (27 GB for 8,192
    # ranks). A dimension's ring is arithmetic: a few hundred bytes whether it has 16 or
    # 4,096 NPUs (a list of 4,096 members alone is 32 KiB), and the same neighbours as the
    # list ring.
    import tracemalloc

    from astra_core.system.collectives.logical_topology import Direction

    def held(size: int) -> int:
        tracemalloc.start()
        ring = RingTopology.for_dimension(5 * 8 + 3, size, 8)  # dimension 1, stride 8
        used = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert ring.index_in_ring == 5 and ring.nodes == size
        listed = RingTopology(ring.rank, list(ring.members))
        for direction in Direction:
            assert ring.receiver(43, direction) == listed.receiver(43, direction)
            assert ring.sender(43, direction) == listed.sender(43, direction)
        return used

    assert held(16) < 1024 and held(4096) < 1024
