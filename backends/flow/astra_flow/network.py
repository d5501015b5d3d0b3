"""The ``flow`` network backend: messages as max-min fair flows over physical routes.

Queue pairs. Each ``send`` is a message on the queue pair of ``(src, dst,
tag)``, as on the ``ns3`` backend (an RDMA RC queue pair): the messages of
one queue pair go out one after the other, and a queue pair with messages to
send is one flow over the route :meth:`PhysicalTopology.route` gives for
``(src, dst, tag)`` (the same per-flow ECMP choice as the other backends).

Rates. Active flows share every link max-min fairly
(:mod:`astra_flow.maxmin`), re-solved once per instant at which flows start,
and ``reallocation_delay_ns`` after flows stop (sooner if one starts), only
for the flows the change can affect. A flow uses its
route's links at its rate and, if ``ack_bytes`` > 0, the links of the
reverse route ``(dst, src, tag)`` at ``ack_weight`` times its rate (its
ACKs). An optional ``flow_rate_cap_gbps`` caps every flow.

Timing of a message of ``B`` payload bytes in ``n = max(1, ceil(B / P))``
packets (``P`` = ``payload_bytes``, ``H`` = ``header_bytes``): its
``W = B + n H`` wire bytes drain from the queue pair at the flow's rate
(changing whenever the allocation does); the next message of the queue pair
starts draining then. The message is delivered a pipeline tail later: its
lone store-and-forward time over the route
(:mod:`astra_core.topology.pipeline`: latencies plus the packets' chain
through the links) less the ``W / r_b`` it would drain in at the
bottleneck ``b`` (the slowest link). A lone message therefore takes exactly
the packet-level pipeline time, as the ``ns3`` backend gives it.

Statistics for ``--plots`` (:mod:`astra_core.report.links`): per directed
link, ``link_bytes`` (data and ACK wire bytes that crossed it),
``link_busy_ns`` (those bytes at the link's rate: the time it was busy) and
``peak_flows`` (the most flows crossing it at once).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from astra_core.backend import Topology
from astra_core.events import EventQueue
from astra_core.topology.physical import PhysicalTopology
from astra_core.topology.pipeline import pipeline_ns, pipeline_terms
from astra_flow.config import FlowConfig, load_config
from astra_flow.maxmin import Flow, MaxMinSolver

_INF = float("inf")
#: Gbps (10^9 bit/s) in bytes/ns.
_BYTES_PER_NS_PER_GBPS = 0.125
#: Idle queue pairs kept for their next message (a ring reuses its pairs step after
#: step); past this many, idle ones are dropped (an all-to-all has a million).
_IDLE_QUEUE_PAIRS = 1 << 16


def _on_ps_grid(now: float, delay: float) -> float:
    """``now + delay`` rounded to a whole ps (never before ``now``): events that exact
    arithmetic puts at one instant stay at one instant whatever the rounding of the
    rates that led to them, so that ties keep their order from run to run."""
    return max(round(now + delay, 3), now)


class QueuePair(Flow):
    """One flow of the model: the queue pair ``key = (src, dst, tag)``.

    ``messages``: (payload bytes, callback, arg), the head draining;
    ``remaining``: wire bytes of the head left at time ``since``;
    ``version``: bumps whenever its drain event is replaced; ``drain_at``: when the
    head finishes draining at the current rate; ``event_at``: the time of its live
    drain event (inf: none), never after ``drain_at``;
    ``latency_ns``: the route's total latency; ``bottleneck_ns_per_b``: 1 /
    its slowest link's rate; ``terms``: its :func:`pipeline_terms`;
    ``route``/``reverse``: link ids;
    ``wire_sent``: wire bytes drained since the flow became active; ``tail_size``,
    ``tail_ns``: the last message size whose pipeline tail was computed, and that tail.
    """

    __slots__ = (
        "key",
        "messages",
        "remaining",
        "since",
        "version",
        "drain_at",
        "event_at",
        "latency_ns",
        "bottleneck_ns_per_b",
        "terms",
        "route",
        "reverse",
        "wire_sent",
        "tail_size",
        "tail_ns",
    )


class FlowNetwork:
    """:class:`~astra_core.backend.NetworkBackend` of max-min fair flows (module docstring).

    ``topology`` is the physical topology; ``config`` a :class:`FlowConfig`.
    After a run: ``link_bytes``, ``link_busy_ns``, ``peak_flows`` per link,
    ``messages``, and ``solver.flows_solved`` (flows refilled by re-solves).
    """

    name = "flow"

    def __init__(self, physical: PhysicalTopology, config: FlowConfig | None = None):
        self.config = config = config or FlowConfig()
        self.topology = physical
        #: Flows share links max-min fairly (astra_core.backend.LinkSharing).
        self.shares_links = True
        self.events = EventQueue()
        self.events.step_end = self._solve
        self.schedule = self.events.schedule  # hot path: no wrapper call
        self.solver = MaxMinSolver(physical.link_bandwidth)
        links = physical.links_count
        self.link_bytes = [0.0] * links
        self.messages = 0
        self._payload = config.payload_bytes
        self._header = config.header_bytes
        self._ack_weight = config.ack_weight if config.ack_bytes else 0.0
        self._cap = config.flow_rate_cap_gbps * _BYTES_PER_NS_PER_GBPS
        self._ns_per_byte = [1 / bw for bw in physical.link_bandwidth]
        #: per sequence of link speeds (ns per byte) along a route: (bottleneck, pipeline terms)
        self._speeds: dict[tuple[float, ...], tuple[float, tuple]] = {}
        self._qps: dict[tuple[int, int, int], QueuePair] = {}  # active queue pairs
        self._idle: dict[tuple[int, int, int], QueuePair] = {}  # kept for reuse
        self._reallocation_delay = config.reallocation_delay_ns
        self._reallocation_due = False

    # -- NetworkBackend ------------------------------------------------------------------
    def now(self) -> float:
        return self.events.now

    def send(
        self,
        src: int,
        dst: int,
        size_bytes: int,
        on_delivered: Callable[[Any], None],
        arg: Any = None,
        *,
        tag: int = 0,
    ) -> None:
        self.messages += 1
        if src == dst:
            self.events.schedule(0, on_delivered, arg)
            return
        key = (src, dst, tag)
        qp = self._qps.get(key)
        if qp is not None:
            qp.messages.append((size_bytes, on_delivered, arg))
            return
        qp = self._idle.pop(key, None) or self._queue_pair(key)
        self._qps[key] = qp
        qp.messages.append((size_bytes, on_delivered, arg))
        payload = self._payload  # _wire_bytes, inlined (once per message)
        qp.remaining = size_bytes + max(1, -(-size_bytes // payload)) * self._header
        qp.since = self.events.now
        self.solver.add(qp)
        self.events.step_pending = True

    def run(self) -> None:
        self.events.run()

    def lone_message_ns(self, src: int, dst: int, size_bytes: int, tag: int = 0) -> float:
        """A message alone on the idle network (:class:`~astra_core.backend.LoneMessageTime`):
        the route's latencies plus its packets' store-and-forward pipeline in this
        config's framing, less 1 ps, since the drain and the tail are each rounded to the
        nearest ps (:func:`_on_ps_grid`: at most 0.5 ps early each). 0 to itself."""
        if src == dst:
            return 0.0
        _, _, latency, _, terms = self._path(self.topology.route(src, dst, tag), ())
        return latency + pipeline_ns(terms, size_bytes, self._payload, self._header) - 1e-3

    @property
    def peak_flows(self) -> list[int]:
        """Per link: the most flows that crossed it at once."""
        return self.solver.peak_flows

    @property
    def link_busy_ns(self) -> list[float]:
        """Per link: ns it was busy (its wire bytes at its rate)."""
        return [b / bw for b, bw in zip(self.link_bytes, self.topology.link_bandwidth)]

    # -- the model -----------------------------------------------------------------------
    def _wire_bytes(self, size: int) -> int:
        packets = max(1, -(-size // self._payload))
        return size + packets * self._header

    def _queue_pair(self, key: tuple[int, int, int]) -> QueuePair:
        src, dst, tag = key
        physical = self.topology
        route = physical.route(src, dst, tag)
        reverse = physical.route(dst, src, tag) if self._ack_weight else ()
        path = self._path(route, reverse)
        qp = QueuePair(path[0], path[1], self._cap)
        qp.key = key
        qp.messages = deque()
        qp.version = 0
        qp.drain_at = 0.0
        qp.event_at = _INF
        qp.route = route
        qp.reverse = reverse
        qp.wire_sent = 0
        qp.latency_ns, qp.bottleneck_ns_per_b, qp.terms = path[2:]
        qp.tail_size = -1  # the last message size whose tail was computed, and that tail
        qp.tail_ns = 0.0
        return qp

    def _path(self, route: tuple[int, ...], reverse: tuple[int, ...]) -> tuple:
        """(links, weights, latency ns, bottleneck ns/byte, pipeline terms) of a route.

        Routes of one fabric share a few sequences of link speeds (a fat-tree's
        by hop count): their bottleneck and pipeline terms are computed once each."""
        ns_per_byte, latency = self._ns_per_byte, self.topology.link_latency
        per_byte = tuple([ns_per_byte[link] for link in route])
        speeds = self._speeds.get(per_byte)
        if speeds is None:
            speeds = self._speeds[per_byte] = (max(per_byte), pipeline_terms(per_byte))
        if reverse:
            weights = dict.fromkeys(route, 1.0)
            for link in reverse:
                weights[link] = weights.get(link, 0.0) + self._ack_weight
            links, shares = tuple(weights), tuple(weights.values())
        else:
            links, shares = route, (1.0,) * len(route)
        return (links, shares, sum([latency[link] for link in route]), *speeds)

    def _tail_ns(self, qp: QueuePair, size: int) -> float:
        """Pipeline tail of a message of ``size`` payload bytes (module docstring); a queue
        pair's messages mostly repeat one size, so the last tail is kept."""
        if size != qp.tail_size:
            lone = pipeline_ns(qp.terms, size, self._payload, self._header)
            qp.tail_ns = qp.latency_ns + lone - self._wire_bytes(size) * qp.bottleneck_ns_per_b
            qp.tail_size = size
        return qp.tail_ns

    def _reallocate(self, _: Any) -> None:
        self._reallocation_due = False
        self.events.step_pending = True

    def _solve(self) -> None:
        self.solver.solve(self._rate_changed)

    def _rate_changed(self, qp: QueuePair, old_rate: float) -> None:
        now = self.events.now
        if old_rate:
            qp.remaining -= old_rate * (now - qp.since)
        qp.since = now
        self._drain_at(qp, _on_ps_grid(now, max(qp.remaining, 0.0) / qp.rate))

    def _drain_at(self, qp: QueuePair, when: float) -> None:
        """The head of ``qp`` drains at ``when`` (ns). A drain event is queued only when it
        must come sooner than the live one: a later drain (the rate fell, as it does for
        every flow on a link each time another joins) is found when the live event fires
        (:meth:`_drained` moves it on). So a queue pair holds one event per rise of its
        rate, not one per change: a link with n flows starting one after the other would
        otherwise queue n^2 / 2 stale events (about 1 GB for 20,000 flows)."""
        qp.drain_at = when
        if qp.event_at <= when:
            return
        qp.event_at = when
        qp.version += 1
        self.events.schedule_at(when, self._drained, (qp, qp.version))

    def _drained(self, event: tuple[QueuePair, int]) -> None:
        qp, version = event
        if version != qp.version:
            return  # a sooner drain event replaced this one
        events = self.events
        now = events.now
        if qp.drain_at > now:  # the rate fell since this event was queued
            qp.event_at = _INF
            self._drain_at(qp, qp.drain_at)
            return
        qp.event_at = _INF
        size, on_delivered, arg = qp.messages.popleft()
        tail = qp.tail_ns if size == qp.tail_size else self._tail_ns(qp, size)
        # _on_ps_grid and _wire_bytes, inlined (once per message each)
        due = round(now + tail, 3)
        events.schedule_at(due if due >= now else now, on_delivered, arg)
        payload, header = self._payload, self._header
        qp.wire_sent += size + max(1, -(-size // payload)) * header
        qp.version += 1
        if qp.messages:
            size = qp.messages[0][0]
            qp.remaining = size + max(1, -(-size // payload)) * header
            qp.since = now
            due = round(now + qp.remaining / qp.rate, 3)
            self._drain_at(qp, due if due >= now else now)
            return
        del self._qps[qp.key]
        self.solver.remove(qp)
        if len(self._idle) < _IDLE_QUEUE_PAIRS:
            self._idle[qp.key] = qp
        else:
            self.solver.release(qp)
        if not self._reallocation_delay:
            events.step_pending = True
        elif not self._reallocation_due:
            self._reallocation_due = True
            events.schedule(self._reallocation_delay, self._reallocate)
        link_bytes, wire = self.link_bytes, qp.wire_sent
        qp.wire_sent = 0
        for link in qp.route:
            link_bytes[link] += wire
        if qp.reverse:
            acks = wire * self._ack_weight
            for link in qp.reverse:
                link_bytes[link] += acks


def create(topology: Topology, config: Any = None) -> FlowNetwork:
    """Backend factory: ``config`` is None, a FlowConfig, a mapping or a TOML/YAML path.

    Uses ``topology.physical`` if given, else the links of network.yml's
    dimensions (:func:`astra_core.topology.logical.from_network`). Raises
    ConfigError for a bad config."""
    from astra_core.topology.logical import from_network

    physical = topology.physical if topology.physical is not None else from_network(topology.network)
    return FlowNetwork(physical, load_config(config))
