"""The ``ns3`` network backend: RoCE on ns-3, driven from the caller's process.

Control flow. The system layer runs in the caller; ns-3 runs in a worker
process (:mod:`astra_ns3.process`) and owns the network's clock. This
object keeps the system layer's timers in astra's
:class:`~astra_core.events.EventQueue` (``events``) and steps the worker
in lock step: "start these messages now and run until the next timer is due,
or until messages complete, whichever comes first". The worker stops at the
first instant at which any message completes and returns every message that
completes at that instant (one batch); the callbacks run here and may send
and schedule more, which go out with the next step. No Python runs per
packet; the caller and the worker exchange one round trip per instant at
which the system layer has something to do.

Messages. Each ``send`` is a message on the RDMA RC queue pair of ``(src,
dst, tag)`` between the hosts of NPUs ``src`` and ``dst`` of the physical
topology (NPU rank r = the r-th non-switch node): the messages of one queue
pair go out in order, one after the other, with one congestion-control
state, while different queue pairs (other peers or other tags) share the
links concurrently. A queue pair follows the route
:meth:`PhysicalTopology.route` gives for ``(src, dst, tag)`` (its per-flow
ECMP choice; ACKs and CNPs take the route of ``(dst, src, tag)``). A message
has been delivered when its last packet has arrived. A message from an NPU to
itself is delivered at once.

Work and liveness. Every message adds ``ceil(bytes / payload_bytes)`` packets
x its route's links to the run's packet-hops; a run past the config's
``max_packet_hops`` is refused at the send that crosses it (with the
estimate and its projected wall time), before ns-3 spends hours on it. Every
request to the worker is watched: no progress for ``watchdog_s`` wall
seconds (a livelock at one instant, a stopped worker) is an error naming the
simulated time (:class:`astra_ns3.process.WorkerStalled`); heavy work at one
instant is not. With a progress hook (``progress``,
:class:`~astra_core.backend.ReportsProgress`: a progress line), the worker's
heartbeats are forwarded to it while a step runs: the simulated time, the
events (the system layer's plus ns-3's) and, while the time stands still,
what the worker does.

A worker is taken when ``run()`` has messages to move and given back when
``run()`` returns, with every message delivered; the next ``run()`` builds
the fabric afresh at the current time (the network is idle between runs).
After each run, :attr:`results` holds the counters and samples of every run
so far (:class:`astra_ns3.monitors.Ns3Results`).
"""

from __future__ import annotations

import sys
import time
from array import array
from collections.abc import Callable
from typing import Any

import numpy as np

from astra.plugin import (
    AstraError,
    ConfigError,
    EventQueue,
    PhysicalTopology,
    ProgressHook,
    WorkBudget,
    pipeline_ns,
)
from astra_ns3 import process, work
from astra_ns3.config import Ns3Config
from astra_ns3.liveness import Watchdog
from astra_ns3.monitors import Ns3Results

#: Worker step status codes (astra_ns3.worker).
_COMPLETIONS, _REACHED, _IDLE = 1, 0, 2
#: Wire bytes of a data packet besides its payload (cpp/roce.h kDataOverhead: Ethernet with
#: preamble, inter-frame gap and FCS 38, IPv4 20, UDP 8, BTH 12, ICRC 4).
DATA_OVERHEAD_BYTES = 82
#: Wall seconds between progress reports from step replies (beats report while a step runs).
REPORT_EVERY_S = 0.25


def cables_of(physical: PhysicalTopology, config: Ns3Config) -> list[tuple]:
    """One ``astra_ns3_add_cable`` argument tuple per cable (pair of opposite links).

    Raises ConfigError naming the topology for a link without its opposite or
    a cable whose two directions differ in latency (a point-to-point channel
    has one delay)."""
    cables = []
    for ab in range(physical.links_count):
        a, b = physical.link_src[ab], physical.link_dst[ab]
        try:
            ba = physical.link(b, a)
        except KeyError:
            raise ConfigError(
                f"{physical.source}: link {a} -> {b} has no link back; the ns3 "
                "backend models full-duplex cables"
            ) from None
        if ab > ba:
            continue
        lat_ab, lat_ba = physical.link_latency[ab], physical.link_latency[ba]
        if lat_ab != lat_ba:
            raise ConfigError(
                f"{physical.source}: cable {a} <-> {b} has latencies {lat_ab:g} and "
                f"{lat_ba:g} ns; the ns3 backend needs one latency per cable"
            )
        rate_ab = physical.link_bandwidth[ab] * 8e9  # bytes/ns -> bit/s
        rate_ba = physical.link_bandwidth[ba] * 8e9
        ecn_ab = config.marking(rate_ab / 1e9)
        ecn_ba = config.marking(rate_ba / 1e9)
        cables.append((ab, ba, a, b, rate_ab, rate_ba, round(lat_ab * 1000), *ecn_ab, *ecn_ba))
    return cables


_compile_checked = False


def _say_if_compiling() -> None:
    """If the first backend of this process will compile the C++ model, say so on stderr
    (it takes a while). Checked once per process: the check runs the compiler for its
    version and hashes the sources."""
    global _compile_checked
    from astra_ns3 import build

    if _compile_checked:
        return
    _compile_checked = True
    if build.needs_compiling():
        sys.stderr.write(
            f"ns3 backend: compiling the C++ model for this machine, once "
            f"(about 10 s; cached in {build.cache_dir()})\n"
        )


def _describe_send(src: int, dst: int, size: int, packets: int, links: int) -> str:
    return f"message NPU {src} -> NPU {dst} of {size} B: {packets} packets x {links} links"


class Ns3Network:
    """:class:`~astra_core.backend.NetworkBackend` on a packet-level RoCE model in ns-3."""

    name = "ns3"

    def __init__(self, physical: PhysicalTopology, config: Ns3Config, *, config_source: str = "<python>"):
        self.physical = physical
        self.config = config
        #: Packets queue at shared switch ports (astra_core.backend.LinkSharing).
        self.shares_links = True
        self._cables = cables_of(physical, config)
        self._switches = [node in physical.switches for node in range(physical.nodes_count)]
        self._settings = config.native_settings()
        #: The system layer's timers, and the clock (the worker's time is copied in).
        self.events = EventQueue()
        self.schedule = self.events.schedule  # NetworkBackend.schedule, the hot path
        self._undelivered: dict[int, tuple[Callable[[Any], None], Any]] = {}
        # The next step's new queue pairs (id, src host, dst host, route, ACK route) and
        # messages (id, queue pair, bytes: int64 triples).
        self._new_qps: list[tuple] = []
        self._new = array("q")
        # Per message of this run: (src NPU, dst NPU, bytes, tag) and the time it was sent.
        self._sent = array("q")
        self._sent_ns = array("d")
        # (src, dst, tag) -> (queue pair, links of its route), this run
        self._qps: dict[tuple[int, int, int], tuple[int, int]] = {}
        self._worker: process.WorkerProcess | None = None
        self._offset = 0.0
        # ns-3 events of finished fabrics, and of the current one at its last reply
        self._events_before = 0
        self._fabric_events = 0
        self._report_at = 0.0  # wall time (monotonic) of the next progress report between beats
        self._progress: ProgressHook | None = None
        self.results = Ns3Results(physical)
        self.messages = 0
        #: Packet-hops of the messages sent so far; a run past max_packet_hops is refused.
        self.budget = WorkBudget(
            "ns3",
            "packet-hops",
            work.PACKET_HOPS_PER_S,
            config.max_packet_hops,
            "max_packet_hops",
            config_source,
        )
        _say_if_compiling()
        process.prestart()  # the worker loads the model while the caller sets up the run

    # -- NetworkBackend ---------------------------------------------------------------
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
            self.schedule(0, on_delivered, arg)
            return
        flow = len(self._sent_ns)
        key = (src, dst, tag)
        known = self._qps.get(key)
        if known is None:
            physical = self.physical
            route = physical.route(src, dst, tag)
            known = self._qps[key] = (len(self._qps), len(route))
            self._new_qps.append(
                (known[0], physical.hosts[src], physical.hosts[dst], route, physical.route(dst, src, tag))
            )
        qp, hops = known
        packets = max(1, -(-size_bytes // self.config.payload_bytes))
        self.budget.add(packets * hops, _describe_send, src, dst, size_bytes, packets, hops)
        self._sent.extend((src, dst, size_bytes, tag))
        self._sent_ns.append(self.events.now)
        self._undelivered[flow] = (on_delivered, arg)
        self._new.extend((flow, qp, size_bytes))

    def lone_message_ns(self, src: int, dst: int, size_bytes: int, tag: int = 0) -> float:
        """A message alone on the idle fabric (:class:`~astra_core.backend.LoneMessageTime`):
        the route's latencies plus its data packets (``payload_bytes`` each, with
        :data:`DATA_OVERHEAD_BYTES`) store-and-forwarded at line rate, which the model
        gives a lone flow to the picosecond (tests/flows/test_run.py) where each packet's
        serialization is a whole number of ps; ns-3 keeps every serialization in whole
        ps, so 1 ps per packet and per link is taken off (at most 1 ppm of a message of
        full packets). HPCC's INT and PINT's digest only add to it. 0 to itself."""
        if src == dst:
            return 0.0
        physical = self.physical
        route = physical.route(src, dst, tag)
        latency = sum(physical.link_latency[link] for link in route)
        ns_per_byte = [1 / physical.link_bandwidth[link] for link in route]
        payload = self.config.payload_bytes
        rounding = (max(1, -(-size_bytes // payload)) + len(route)) * 1e-3
        return latency + pipeline_ns(ns_per_byte, size_bytes, payload, DATA_OVERHEAD_BYTES) - rounding

    def run(self) -> None:
        events = self.events
        try:
            while True:
                due = events.next_time()
                if due is not None and due <= events.now:
                    events.run(until_ns=events.now)
                elif self._undelivered:
                    self._step()
                elif due is not None:
                    events.run(until_ns=due)  # moves the clock to it
                else:
                    break
        except BaseException:
            self._abandon()
            raise
        self._finish()

    # -- lock step with the worker ----------------------------------------------------------
    def _ps(self, t_ns: float) -> int:
        return round((t_ns - self._offset) * 1000)

    def _step(self) -> None:
        events = self.events
        worker = self._worker
        if worker is None:
            worker = self._worker = process.acquire(self.config.watchdog_s)
            self._offset = events.now
            try:
                worker.request(
                    ("setup", self._settings, self._switches, self._cables),
                    "ok",
                    offset_ns=self._offset,
                    sent_ns=events.now,
                )
            except BaseException:
                self._worker = None
                raise
        due = events.next_time()
        until = self._ps(due) if due is not None else -1
        _, status, now_ps, done, (_, self._fabric_events, _, _) = worker.request(
            ("step", self._ps(events.now), until, self._new_qps, self._new.tobytes()),
            "step",
            offset_ns=self._offset,
            sent_ns=events.now,
            on_beat=self._on_beat if self._progress is not None else None,
            context=self._oldest_undelivered,
        )
        self._new_qps = []
        del self._new[:]
        if self._progress is not None and time.monotonic() >= self._report_at:
            self._report(self._offset + now_ps / 1000, self._fabric_events)
        if status == _COMPLETIONS:
            t = self._offset + now_ps / 1000
            if t > events.now:
                events.now = t
            undelivered = self._undelivered
            for flow in done:
                callback, arg = undelivered.pop(flow)
                callback(arg)
        elif status == _REACHED:
            events.run(until_ns=due)
        else:
            raise AstraError(
                f"ns3 backend: the network went idle at t={events.now:.0f} ns with "
                f"{len(self._undelivered)} message(s) undelivered"
            )

    def _finish(self) -> None:
        worker, self._worker = self._worker, None
        if worker is None:
            return
        _, raw, shape = worker.request(("finish",), "finish", offset_ns=self._offset, sent_ns=self.events.now)
        raw["flows"] = np.frombuffer(worker.receive_raw(), dtype=np.int64).reshape(shape)
        process.release(worker)
        self._events_before += self._fabric_events
        self._fabric_events = 0
        self.results.add_run(raw, self._sent, self._offset)
        self._sent = array("q")
        self._sent_ns = array("d")
        self._qps = {}
        monitor = self.config.monitor
        if monitor.output_dir:
            self.results.write(monitor.output_dir, monitor.format)

    def _oldest_undelivered(self) -> str:
        """The message that has waited longest, for a stalled worker's error."""
        if not self._undelivered:
            return "no message undelivered"
        flow = min(self._undelivered)  # ids count up in the order of sending
        src, dst, size, tag = self._sent[4 * flow : 4 * flow + 4]
        sent = self._sent_ns[flow]
        count = len(self._undelivered)
        return (
            f"{count:,} message{'s' if count != 1 else ''} undelivered, the oldest NPU {src} -> NPU {dst} "
            f"of {size} B (tag {tag}) sent at t = {sent:.3f} ns"
        )

    # -- progress (ReportsProgress) ---------------------------------------------------------
    @property
    def progress(self) -> ProgressHook | None:
        """The progress hook: called on the worker's beats, between steps (every
        :data:`REPORT_EVERY_S` wall seconds) and every
        :data:`~astra_core.events.PROGRESS_EVERY` events of the system layer."""
        return self._progress

    @progress.setter
    def progress(self, hook: ProgressHook | None) -> None:
        self._progress = hook
        self.events.progress = None if hook is None else self._on_events

    def report_progress(self) -> None:
        """Report the time and every event run so far, now."""
        self._report(self.events.now, self._fabric_events)

    def _on_events(self, now_ns: float, events: int, note: str = "") -> None:
        """The system layer's event queue reports: add ns-3's events."""
        self._report(now_ns, self._fabric_events, note)

    def _on_beat(self, watchdog: Watchdog) -> None:
        """A heartbeat of the worker inside its event loop: forward it to the progress line."""
        beat = watchdog.last
        if beat is not None:
            self._report(self._offset + beat.now_ps / 1000, beat.events, watchdog.note())

    def _report(self, now_ns: float, fabric_events: int, note: str = "") -> None:
        progress = self._progress
        if progress is not None:
            self._report_at = time.monotonic() + REPORT_EVERY_S
            progress(now_ns, self.events.events_processed + self._events_before + fabric_events, note)

    def _abandon(self) -> None:
        """After an error mid-run: the worker's state is unknown, end it."""
        worker, self._worker = self._worker, None
        self._new_qps = []
        self._new = array("q")
        self._undelivered.clear()
        self._sent = array("q")
        self._sent_ns = array("d")
        self._qps = {}
        if worker is not None:
            worker.close()

    # -- summaries ------------------------------------------------------------------------
    @property
    def stats(self) -> dict[str, float]:
        """Totals over every run: drops, PFC pauses, CNPs, ECN marks, packet-hops, ... ."""
        return self.results.totals()
