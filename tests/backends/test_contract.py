"""The backend contract: what every network model must satisfy (astra_core/backend.py).

Parametrized over every backend the registry knows, each built through
``registry.create(name, Topology(network))`` exactly as ``simulate`` builds it,
on four small networks: Ring 8, FullyConnected 8, Switch 8 and a 2-D
[Ring 4, Switch 4].

The closed form of a lone message (upstream astra-network-analytical,
``BasicTopology::compute_communication_delay``) is

    hops * latency_d + bytes / bandwidth_d          (ns, truncated to whole ns)

where ``d`` is the first dimension in which the source and destination
coordinates differ (coordinate in dimension d = ``(id // prod(sizes[:d])) %
sizes[d]``, dimension 0 fastest), bandwidth is GB/s with 1 GB = 2^30 B (so
``bytes / (gbps * 2^30 / 1e9)`` ns), and hops is: Ring, the shorter way round;
FullyConnected, 1; Switch, 2 (up to the switch and down).  The analytical model
must give exactly that; any other model may add its own overheads (packet
headers, credits, ...) but can never be faster.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from astra_core.backend import NetworkBackend, Topology
from astra_core.config.network import NetworkConfig
from astra_core.errors import BackendUnavailable
from astra_core.plugins import backend_registry

REGISTRY = backend_registry()
BACKENDS = REGISTRY.names()

#: Models whose lone-message time is exactly the truncated closed form.
EXACT_MODELS = {"analytical"}

MIB = 1 << 20

#: Configs for backends whose default cost grows with message size (flit-level models):
#: coarse flits keep this suite's 12 MB messages affordable without changing any property
#: it checks (a flit of 64 KiB only adds overhead, so the lower bounds still bind).
CONTRACT_CONFIGS = {"garnetlike": {"flit_bytes": 65536, "packet_bytes": 1 << 20}}

NETWORKS = {
    "ring8": {"topology": ["Ring"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]},
    "fc8": {"topology": ["FullyConnected"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]},
    "sw8": {"topology": ["Switch"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]},
    # tests/data/reference/network/ring4_sw4.yml
    "ring4_sw4": {
        "topology": ["Ring", "Switch"],
        "npus_count": [4, 4],
        "bandwidth": [100.0, 50.0],
        "latency": [200.0, 500.0],
    },
}


def npus(net_key: str) -> int:
    return math.prod(NETWORKS[net_key]["npus_count"])


def make(name: str, net_key: str):
    """A fresh backend ``name`` on network ``net_key``, built through the registry."""
    network = NetworkConfig.from_dict(NETWORKS[net_key])
    try:
        return REGISTRY.create(name, Topology(network), CONTRACT_CONFIGS.get(name))
    except BackendUnavailable as exc:  # e.g. ns-3 not built here: not this suite's business
        pytest.skip(f"backend {name} cannot run here: {exc}")


def closed_form_ns(net_key: str, src: int, dst: int, size: int) -> float:
    """The ideal (untruncated) lone-message time, from the spec in the module docstring."""
    net = NETWORKS[net_key]
    stride = 1
    for kind, n, gbps, latency in zip(net["topology"], net["npus_count"], net["bandwidth"], net["latency"]):
        a, b = (src // stride) % n, (dst // stride) % n
        if a != b:
            hops = {"Ring": min((b - a) % n, (a - b) % n), "FullyConnected": 1, "Switch": 2}[kind]
            return hops * latency + size / (gbps * 2**30 / 1e9)
        stride *= n
    raise AssertionError(f"{src} and {dst} are the same NPU")


def check_lone_time(name: str, measured: float, expected_ns: int) -> None:
    if name in EXACT_MODELS:
        assert measured == expected_ns
    else:
        assert measured >= expected_ns


def lone_message_ns(backend, src: int, dst: int, size: int, send_at: int = 0) -> float:
    """Send one message at ``send_at`` on an otherwise idle backend; its time in flight."""
    arrivals = []

    def go(_):
        backend.send(src, dst, size, lambda arg: arrivals.append((arg, backend.now())), "m", tag=3)

    if send_at:
        backend.schedule(send_at, go)
    else:
        go(None)
    backend.run()
    assert [arg for arg, _ in arrivals] == ["m"]  # delivered exactly once
    return arrivals[0][1] - send_at


@pytest.fixture(params=BACKENDS)
def backend_name(request) -> str:
    return request.param


def test_the_builtin_analytical_backend_is_registered():
    # The suite below is only as good as the list it runs over.
    assert "analytical" in BACKENDS


@pytest.mark.parametrize("net_key", NETWORKS)
def test_fresh_backend_follows_the_protocol_and_starts_at_zero(backend_name, net_key):
    backend = make(backend_name, net_key)
    assert isinstance(backend, NetworkBackend)
    assert backend.now() == 0
    backend.run()  # nothing to do: returns at once, clock unchanged
    assert backend.now() == 0


# Derivation of the numbers below.  50 GB/s = 50 * 2^30 / 1e9 = 53.6870912 B/ns,
# so 1 MiB (2^20 B) takes 1e9 / (50 * 1024) = 19531.25 ns and 1000 B takes
# 18.626451... ns; at 100 GB/s 1 MiB takes 9765.625 ns.
LONE_MESSAGES = [
    # ring8 (500 ns, 50 GB/s)
    ("ring8", 0, 1, MIB, 20031),  # 1 hop: 500 + 19531.25 (upstream's P2P ring shift: 20031)
    ("ring8", 0, 7, MIB, 20031),  # the short way round: 1 hop, not 7
    ("ring8", 2, 0, MIB, 20531),  # 2 hops: 1000 + 19531.25
    ("ring8", 6, 1, MIB, 21031),  # clockwise 3, counter-clockwise 5: 3 hops
    ("ring8", 0, 4, MIB, 21531),  # opposite: 4 hops either way
    ("ring8", 0, 1, 0, 500),  # no payload: the latency alone
    ("ring8", 0, 1, 1000, 518),  # 518.626... truncated
    # fc8: one hop between any two NPUs
    ("fc8", 0, 1, MIB, 20031),
    ("fc8", 3, 7, MIB, 20031),
    ("fc8", 7, 0, 1000, 518),
    # sw8: up to the switch and down, 2 hops between any two NPUs
    ("sw8", 0, 1, MIB, 20531),
    ("sw8", 0, 4, MIB, 20531),
    ("sw8", 5, 2, 0, 1000),
    # ring4_sw4: id = c0 + 4 * c1; dim 0 Ring 4 (200 ns, 100 GB/s), dim 1 Switch 4 (500 ns, 50 GB/s)
    ("ring4_sw4", 0, 1, MIB, 9965),  # (0,0)->(1,0): 200 + 9765.625, truncated (not rounded)
    ("ring4_sw4", 0, 2, MIB, 10165),  # (0,0)->(2,0): 2 hops, 400 + 9765.625
    ("ring4_sw4", 0, 3, MIB, 9965),  # (0,0)->(3,0): 1 hop the short way
    ("ring4_sw4", 15, 0, MIB, 9965),  # (3,3)->(0,0): dim 0 differs first; 3->0 is 1 hop
    ("ring4_sw4", 1, 6, MIB, 9965),  # (1,0)->(2,1): both differ, dim 0 first
    ("ring4_sw4", 0, 4, MIB, 20531),  # (0,0)->(0,1): dim 1 switch, 1000 + 19531.25
    ("ring4_sw4", 5, 13, MIB, 20531),  # (1,1)->(1,3)
    ("ring4_sw4", 2, 10, 0, 1000),  # (2,0)->(2,2): switch latency alone
]


@pytest.mark.parametrize("net_key, src, dst, size, expected_ns", LONE_MESSAGES)
def test_lone_message_takes_latency_times_hops_plus_bytes_over_bandwidth(
    backend_name, net_key, src, dst, size, expected_ns
):
    measured = lone_message_ns(make(backend_name, net_key), src, dst, size)
    check_lone_time(backend_name, measured, expected_ns)


@pytest.mark.parametrize("net_key", NETWORKS)
def test_lone_message_closed_form_for_every_pair(backend_name, net_key):
    # Sizes: nothing, a few bytes, a page, 1 MiB, and a prime that never divides evenly.
    for size in (0, 3, 4096, MIB, 12_345_679):
        for src in range(npus(net_key)):
            for dst in range(npus(net_key)):
                if src == dst:
                    continue
                measured = lone_message_ns(make(backend_name, net_key), src, dst, size)
                expected = math.floor(closed_form_ns(net_key, src, dst, size))
                check_lone_time(backend_name, measured, expected)


def test_lone_message_time_counts_from_when_it_is_sent(backend_name):
    # Sent at t = 12345 ns instead of 0: the same 20031 ns in flight (ring8, 1 hop, 1 MiB).
    measured = lone_message_ns(make(backend_name, "ring8"), 0, 1, MIB, send_at=12345)
    check_lone_time(backend_name, measured, 20031)


@pytest.mark.parametrize("net_key", NETWORKS)
def test_messages_between_a_pair_arrive_in_send_order(backend_name, net_key):
    # FIFO per (src, dst) for messages no smaller than the ones sent before them.  (A
    # smaller message sent after a larger one may overtake it on the congestion-unaware
    # analytical model, as upstream: links are never shared there.)  Equal sizes sent
    # at the same time arrive at the same time and must still come out in send order.
    backend = make(backend_name, net_key)
    src, dst = 1, npus(net_key) - 2
    sizes = [0, 0, 1, 1000, 1000, 1000, MIB, MIB, 3 * MIB]
    arrivals: list[int] = []
    for i, size in enumerate(sizes):
        backend.send(src, dst, size, arrivals.append, i, tag=7)

    # Two more of the largest size, sent later from callbacks.
    def send_largest(i):
        backend.send(src, dst, 3 * MIB, arrivals.append, i, tag=7)

    backend.schedule(5, send_largest, len(sizes))
    backend.schedule(10, send_largest, len(sizes) + 1)
    backend.run()
    assert arrivals == list(range(len(sizes) + 2))


@pytest.mark.parametrize("net_key", NETWORKS)
def test_random_traffic_delivers_every_message_once_and_conserves_bytes(backend_name, net_key):
    backend = make(backend_name, net_key)
    n = npus(net_key)
    rng = random.Random(f"{net_key}-contract")
    sent: dict[int, tuple[int, int, int, float]] = {}  # id -> (src, dst, size, sent at)
    delivered: Counter[int] = Counter()
    delivered_bytes = 0
    clock: list[float] = []  # now() at every callback, in the order callbacks ran
    late: list[tuple[float, float]] = []  # (arrival, send + closed form) per message

    def on_delivered(msg):
        nonlocal delivered_bytes
        ident, size = msg
        clock.append(backend.now())
        delivered[ident] += 1
        delivered_bytes += size
        src, dst, _, at = sent[ident]
        late.append((backend.now() - at, math.floor(closed_form_ns(net_key, src, dst, size))))

    def burst(due):
        # A scheduled timer fires exactly at its due time, on any backend.
        assert backend.now() == due
        clock.append(backend.now())
        for _ in range(25):
            src, dst = rng.sample(range(n), 2)
            size = rng.choice([0, 1, 999, 4096, 65_536, MIB, 3 * MIB + 7])
            ident = len(sent)
            sent[ident] = (src, dst, size, backend.now())
            backend.send(src, dst, size, on_delivered, (ident, size), tag=ident % 5)
        if due < 40_000:
            step = rng.randrange(0, 9000)  # 0 included: a burst in the same time step
            backend.schedule(step, burst, due + step)

    burst(0)
    backend.run()

    assert len(sent) >= 100
    assert set(delivered) == set(sent)
    assert all(count == 1 for count in delivered.values())
    assert delivered_bytes == sum(size for _, _, size, _ in sent.values())
    assert all(later >= earlier for earlier, later in zip(clock, clock[1:])), "clock went back"
    # The analytical model has no congestion: each message takes its lone time even in a
    # crowd. Other models may delay messages that share links, never speed them up.
    for in_flight, ideal in late:
        check_lone_time(backend_name, in_flight, ideal)
    # Nothing left: a second run delivers nothing more.
    backend.run()
    assert sum(delivered.values()) == len(sent)


def test_schedule_zero_runs_before_time_moves(backend_name):
    backend = make(backend_name, "ring8")
    log: list[tuple[str, float]] = []

    def zero(tag):
        log.append((tag, backend.now()))
        if tag == "z1":
            backend.schedule(0, zero, "z2")  # chained zero delays stay at the same time

    def at50(_):
        log.append(("at50", backend.now()))
        backend.schedule(0, zero, "z1")

    backend.send(0, 1, MIB, lambda _: log.append(("msg", backend.now())))
    backend.schedule(51, lambda _: log.append(("at51", backend.now())))
    backend.schedule(50, at50)
    backend.schedule(0, zero, "z0")  # before run(): runs at t = 0, before anything else
    backend.run()

    assert log[:5] == [("z0", 0), ("at50", 50), ("z1", 50), ("z2", 50), ("at51", 51)]
    assert log[5][0] == "msg" and len(log) == 6
    check_lone_time(backend_name, log[5][1], 20031)  # ring8, 1 hop, 1 MiB


def test_callbacks_due_at_the_same_time_run_in_scheduling_order(backend_name):
    backend = make(backend_name, "fc8")
    log: list[tuple[str, float]] = []

    def record(tag):
        log.append((tag, backend.now()))
        if tag == "a":
            backend.schedule(0, record, "d")  # scheduled at t=10, after a, b, e and c were

    backend.schedule(10, record, "a")
    backend.schedule(10, record, "b")
    backend.schedule(3, lambda _: backend.schedule(7, record, "c"))  # scheduled at t=3 for t=10
    backend.schedule(10, record, "e")
    backend.schedule(9, record, "early")
    backend.schedule(11, record, "late")
    backend.run()

    assert log == [("early", 9), ("a", 10), ("b", 10), ("e", 10), ("c", 10), ("d", 10), ("late", 11)]


@pytest.mark.parametrize("delay", [-1, float("nan"), float("inf"), float("-inf")])
def test_a_negative_infinite_or_nan_delay_is_refused(backend_name, delay):
    # Every backend refuses NaN and inf rather than queue them (a NaN time silently breaks
    # the heap's order; an infinite one stops the clock at infinity).
    backend = make(backend_name, "ring8")
    ran = []
    with pytest.raises(ValueError, match="must be finite and >= 0|cannot schedule"):
        backend.schedule(delay, ran.append, "x")
    backend.schedule(5, ran.append, "ok")
    backend.run()
    assert ran == ["ok"] and backend.now() == 5


# -- optional capabilities (astra_core/backend.py): checked wherever a backend declares one ----


def test_declared_capabilities_keep_their_promises(backend_name):
    from astra_core.backend import (
        Counters,
        LinkStatistics,
        OwnsEventQueue,
        SymmetricTiming,
        counters,
        event_queue,
        is_symmetric,
        link_statistics,
    )

    backend = make(backend_name, "ring4_sw4")
    if isinstance(backend, SymmetricTiming):
        assert type(backend.symmetric) is bool and is_symmetric(backend) == backend.symmetric
    if isinstance(backend, OwnsEventQueue):
        queue = event_queue(backend)
        assert queue is not None
        seen = []
        backend.schedule(7, lambda _: seen.append((backend.now(), queue.now)))
    size = 3 * MIB
    backend.send(0, 13, size, lambda _: None, tag=1)
    backend.run()
    if isinstance(backend, OwnsEventQueue):
        assert seen == [(7, 7)]  # one clock: the backend's is the queue's
    if link_statistics(backend) is not None:
        assert isinstance(backend, LinkStatistics)
        links = backend.topology.links_count
        assert len(backend.link_bytes) == len(backend.link_busy_ns) == links
        # The message crossed at least one link with all its bytes, and no link was
        # busy longer than the run.
        assert max(backend.link_bytes) >= size
        assert max(backend.link_busy_ns) <= backend.now()
    if isinstance(backend, Counters):
        stats = counters(backend)
        assert stats and all(isinstance(v, (int, float)) and math.isfinite(v) for v in stats.values())


def test_progress_reports_move_forward_and_end_at_the_backends_time(backend_name):
    """set_progress: a backend that can report (OwnsEventQueue or ReportsProgress) calls
    the hook with its time in ns and its events, never going back; report_progress
    reports once more, at the backend's own time."""
    from astra_core.backend import report_progress, set_progress

    backend = make(backend_name, "ring4_sw4")
    reports: list[tuple[float, int, str]] = []
    if not set_progress(backend, lambda now_ns, events, note="": reports.append((now_ns, events, note))):
        pytest.skip(f"{backend_name} does not report progress")
    for k in range(40):
        backend.send(k % 16, (5 * k + 3) % 16, 256 * 1024, lambda _: None, tag=k)
    backend.run()
    report_progress(backend)
    set_progress(backend, None)
    assert reports and reports[-1][0] == backend.now() > 0
    assert [r[0] for r in reports] == sorted(r[0] for r in reports)
    assert [r[1] for r in reports] == sorted(r[1] for r in reports) and reports[-1][1] > 0
    count = len(reports)
    report_progress(backend)  # detached: nothing more
    assert len(reports) == count


def test_a_declared_lone_message_time_is_a_lower_bound_and_sharing_is_as_declared(backend_name):
    """LoneMessageTime: never above what the model gives a message alone (flow studies
    divide by it). LinkSharing: two messages over one link at once slow each other
    exactly when the backend says it models sharing."""
    from astra_core.backend import LinkSharing, lone_message_time, shares_links

    for size in (1, 4097, 3 * MIB):
        backend = make(backend_name, "sw8")
        lone = lone_message_time(backend)
        measured = lone_message_ns(backend, 1, 6, size)
        if lone is not None:
            bound = lone(1, 6, size, 3)  # lone_message_ns above sends on tag 3
            assert 0 < bound <= measured + 1e-6, (size, bound, measured)
    if not isinstance(backend, LinkSharing):
        return
    assert shares_links(backend) is backend.shares_links
    alone = lone_message_ns(make(backend_name, "sw8"), 1, 6, 3 * MIB)
    backend = make(backend_name, "sw8")
    arrivals = []
    for src in (1, 2):  # both into NPU 6 through its one link from the switch
        backend.send(src, 6, 3 * MIB, lambda _: arrivals.append(backend.now()), tag=src)
    backend.run()
    if backend.shares_links:  # one of them waits about a serialization of the other
        assert max(arrivals) - alone >= 0.9 * 3 * MIB / (50 * 2**30 / 1e9)
    else:
        assert arrivals == [alone, alone]


def test_declared_link_changes_slow_a_message_and_give_its_time_back(backend_name):
    """LinkChanges: every link at half its bandwidth slows a lone message by at least
    most of a serialization; the bandwidths given back, it takes its time alone again."""
    from astra_core.backend import link_changes, link_statistics

    backend = make(backend_name, "sw8")
    change = link_changes(backend)
    if change is None:
        pytest.skip(f"{backend_name} does not change links during a run")
    stats = link_statistics(backend)
    assert stats is not None  # link ids are those of its topology
    bandwidth = stats.topology.link_bandwidth
    alone = lone_message_ns(make(backend_name, "sw8"), 1, 6, 3 * MIB)
    change({link: bw / 2 for link, bw in enumerate(bandwidth)})
    assert lone_message_ns(backend, 1, 6, 3 * MIB) >= alone + 0.9 * 3 * MIB / (50 * 2**30 / 1e9)
    again = make(backend_name, "sw8")
    change = link_changes(again)
    change({link: bw / 2 for link, bw in enumerate(bandwidth)})
    change(dict(enumerate(bandwidth)))
    assert lone_message_ns(again, 1, 6, 3 * MIB) == alone
