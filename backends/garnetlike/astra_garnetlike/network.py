"""The garnetlike network backend: NPUs' network interfaces over a network of routers.

A message of ``B`` bytes from NPU ``src`` to NPU ``dst`` is split by the
source's network interface (NI) into packets of at most ``packet_bytes``,
each of ``ceil(payload / flit_bytes)`` flits (one head-tail flit for an empty
packet). The NI holds ``vcs_per_vnet`` injection VCs per vnet, each taking
one packet at a time; packets wait in the NI (unbounded) for a free one. The
packets cross the routers of :mod:`.router` along the route of
:mod:`.routing` and leave through the destination's ejection port, one flit
per cycle. A message is delivered when its last packet's tail has been
ejected and every earlier message from the same source to the same
destination has been delivered (the receiving NI reorders: packets of
different messages may overtake each other on different VCs).

Zero-load latency of a packet of ``F`` flits over ``H`` links whose flit
serialization is ``s_i = flit_bytes / bandwidth_i`` and latency ``L_i``, with
pipeline ``P`` and a cycle ``c`` (all links alike: ``s``, ``L``)::

    T = (H + 1) * P + H * (s + L) + c + (F - 1) * s

i.e. every router on the path (H + 1 of them) holds the head ``P``, every
link delays it ``s + L``, ejection into the NI takes a cycle, and the other
``F - 1`` flits follow one serialization apart. In the NoC mode (``s = c``,
``L = link_latency - 1`` cycles) this is ``(H + 1) * P + H * link_latency + F``
cycles: hops x (router pipeline + link latency), plus the ejecting router's
pipeline, plus the serialization of the packet's ``F`` flits (the last of them
into the NI).

Model sources: Garnet 2.0 (Agarwal, Krishna, Peh, Jha, ISPASS 2009; Bharadwaj
et al.'s gem5 Garnet 2.0 documentation) for VCs per vnet, credits, the
pipeline and separable round-robin allocation; Dally & Towles, *Principles
and Practices of Interconnection Networks* (2004) for flow control, routing
and deadlock avoidance. Differences from Garnet: time is continuous (links
of any bandwidth serialize a flit in ``flit_bytes / bandwidth`` ns rather than
in whole cycles through SerDes units), the NI-router links are part of the
router (injection adds no link traversal), and allocation is done per output
port when it is idle rather than by a per-cycle separable allocator (same
constraints: one flit per input and per output port at a time, round robin).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from itertools import repeat
from typing import Any

from astra.plugin import (
    ConfigError,
    NetworkConfig,
    PhysicalTopology,
    ProgressHook,
    Topology,
    WorkBudget,
    from_network,
)
from astra_garnetlike.config import FLIT_HOPS_PER_S, GarnetConfig, load_config
from astra_garnetlike.deadlock import Watchdog
from astra_garnetlike.kernel import PS_PER_NS, Clock, ns_to_ps
from astra_garnetlike.router import EjectionPort, InputPort, OutputPort, Packet
from astra_garnetlike.routing import ANY, HIGH, LOW, Routing


class Message:
    """One message between two NPUs, from send to delivery."""

    __slots__ = (
        "src",
        "dst",
        "size",
        "on_delivered",
        "arg",
        "vnet",
        "route",
        "vcs",
        "packets",
        "packets_to_make",
        "bytes_left",
        "packets_left",
        "packets_out",
        "seq",
        "sent_ps",
        "injected_ps",
        "done_ps",
    )

    def __init__(
        self,
        src: int,
        dst: int,
        size: int,
        on_delivered,
        arg,
        vnet: int,
        route: tuple,
        vcs: tuple,
        packets: int,
        seq: int,
        sent_ps: int,
    ):
        self.src = src
        self.dst = dst
        self.size = size
        self.on_delivered = on_delivered
        self.arg = arg
        self.vnet = vnet
        self.route = route
        self.vcs = vcs
        self.packets = packets
        self.packets_to_make = packets
        self.packets_left = packets
        self.packets_out = 0
        self.bytes_left = size
        self.seq = seq
        self.sent_ps = sent_ps
        self.injected_ps = -1  # when its last flit left the source NI
        self.done_ps = -1


class NetworkInterface:
    """An NPU's NI (or, with ``ni_ports = "per_link"``, its NI port for one link):
    packetization into its injection VCs, one packet per VC at a time."""

    __slots__ = (
        "rank",
        "port",
        "queues",
        "vcs_per_vnet",
        "flit_bytes",
        "packet_bytes",
        "pipeline_ps",
        "clock",
        "packets_sent",
    )

    def __init__(self, rank: int, port: InputPort, config: GarnetConfig, pipeline_ps: int, clock):
        self.rank = rank
        self.port = port
        self.queues: list[deque[Message]] = [deque() for _ in range(config.virtual_networks)]
        self.vcs_per_vnet = config.vcs_per_vnet
        self.flit_bytes = config.flit_bytes
        self.packet_bytes = config.packet_bytes
        self.pipeline_ps = pipeline_ps
        self.clock = clock
        self.packets_sent = 0

    def enqueue(self, msg: Message) -> None:
        """Queue a message and fill this vnet's idle injection VCs."""
        self.queues[msg.vnet].append(msg)
        base = msg.vnet * self.vcs_per_vnet
        now = self.clock.events.now
        for ivc in self.port.vcs[base : base + self.vcs_per_vnet]:
            if ivc.pkt is None:
                self.refill(ivc, now)
                if not self.queues[msg.vnet]:
                    break

    def departed(self, pkt: Packet, ivc, now: int) -> None:
        """The tail of ``pkt`` has left injection VC ``ivc``: note it, then refill the VC."""
        msg = pkt.msg
        msg.packets_out += 1
        if msg.packets_out == msg.packets:
            msg.injected_ps = now
        self.refill(ivc, now)

    def refill(self, ivc, now: int) -> None:
        """Put the next packet of the vnet's queue into the idle injection VC ``ivc``."""
        queue = self.queues[ivc.index // self.vcs_per_vnet]
        if not queue:
            return
        msg = queue[0]
        payload = min(self.packet_bytes, msg.bytes_left)
        msg.bytes_left -= payload
        msg.packets_to_make -= 1
        if not msg.packets_to_make:
            queue.popleft()
        flits = max(1, -(-payload // self.flit_bytes))
        pkt = Packet(msg, flits, payload, msg.route, msg.vcs, now)
        self.packets_sent += 1
        ivc.buf.extend(repeat(now + self.pipeline_ps, flits))
        if flits > ivc.peak:
            ivc.peak = flits
        ivc.start(pkt, 0)


class GarnetNetwork:
    """:class:`~astra_core.backend.NetworkBackend` with credit-based flow control.

    Build with :func:`create` (from a backend :class:`Topology`) or directly
    from a :class:`PhysicalTopology`; ``network`` is network.yml's dimensions
    when ``physical`` was built from them (for dimension-order routing and
    datelines). After a run: ``link_flits[i]`` flits crossed link ``i``;
    :attr:`stats` summarizes; :meth:`check_credits` verifies conservation.
    Raises ConfigError for a config that does not fit the topology (e.g. the
    dateline scheme with one VC per vnet) and
    :class:`~astra_core.errors.SimulationDeadlock` from :meth:`run` when
    flits stop moving.
    """

    name = "garnetlike"

    def __init__(
        self,
        physical: PhysicalTopology,
        config: GarnetConfig | None = None,
        *,
        network: NetworkConfig | None = None,
        ordered: bool = True,
    ):
        self.config = config = config or GarnetConfig()
        self.ordered = ordered
        #: Called with each packet whose tail has reached its destination NI (or None).
        self.packet_hook: Callable[[Packet], None] | None = None
        self.physical = physical
        #: Flits compete for links, VCs and credits (astra_core.backend.LinkSharing).
        self.shares_links = True
        self.clock = Clock()
        self._queue = self.clock.events  # in ps: the backend API converts to ns
        self._progress: ProgressHook | None = None
        self.routing = Routing(
            physical, config.routing, config.deadlock_avoidance == "dateline", network, config.up_down_root
        )
        if self.routing.uses_classes and config.vcs_per_vnet < 2:
            raise ConfigError(
                f"{config.source}: vcs_per_vnet: the dateline scheme on the wrap-around links of "
                f"{physical.source} needs >= 2 VCs per virtual network, got {config.vcs_per_vnet} "
                "(or set deadlock_avoidance = 'none')"
            )
        self.cycle_ps = config.cycle_ps
        self.pipeline_ps = config.router_pipeline_cycles * self.cycle_ps
        self._build()
        self._route_cache: dict[tuple, tuple[tuple, tuple]] = {}
        self._next_seq: dict[int, int] = {}
        self._next_delivery: dict[int, int] = {}
        self._held: dict[tuple[int, int], Message] = {}
        self.messages_sent = 0
        self.messages_delivered = 0
        self.bytes_delivered = 0
        self.packets_delivered = 0
        self.packet_latency_ps = 0
        self.watchdog = Watchdog(self)
        #: Flit-hops the messages sent so far will take; a run past max_flit_hops is refused.
        self.budget = WorkBudget(
            "garnetlike", "flit-hops", FLIT_HOPS_PER_S, config.max_flit_hops, "max_flit_hops", config.source
        )
        self._packet_flits = -(-config.packet_bytes // config.flit_bytes)

    # -- construction ------------------------------------------------------------------------
    def _build(self) -> None:
        physical, config, clock = self.physical, self.config, self.clock
        vcs = config.virtual_networks * config.vcs_per_vnet
        credit_delay_ps = config.credit_delay_cycles * self.cycle_ps
        self.link_ports: list[OutputPort] = []
        self.input_ports: list[InputPort] = []
        self.max_round_trip_ps = 0
        for link in range(physical.links_count):
            src, dst = physical.link_src[link], physical.link_dst[link]
            bandwidth = physical.link_bandwidth[link]  # bytes/ns
            ser_ps = max(1, math.ceil(config.flit_bytes * PS_PER_NS / bandwidth - 1e-9))
            latency_ps = round(physical.link_latency[link] * PS_PER_NS)
            # A buffer slot is reserved when a flit is sent and free again when its credit is back.
            round_trip = ser_ps + 2 * latency_ps + self.pipeline_ps + credit_delay_ps
            self.max_round_trip_ps = max(self.max_round_trip_ps, round_trip)
            depth = config.buffer_depth_flits
            if config.buffers_cover_round_trip:
                depth = max(depth, -(-round_trip // ser_ps))
            port_in = InputPort(dst, f"in from {self.node_name(src)}", vcs, depth)
            port_out = OutputPort(
                clock,
                src,
                f"out to {self.node_name(dst)}",
                link,
                port_in,
                ser_ps,
                latency_ps,
                self.pipeline_ps,
                credit_delay_ps,
                config.atomic_vc_allocation,
            )
            port_in.upstream = port_out
            self.input_ports.append(port_in)
            self.link_ports.append(port_out)
        # NI ports: one injection and one ejection port per NPU (Garnet's NI), or one pair
        # per link of the NPU, so that it can use all its links at once.
        self.nis: list[NetworkInterface] = []
        self.eject_ports: list[EjectionPort] = []
        self._ni_of_link: dict[int, NetworkInterface] = {}
        self._eject_of_link: dict[int, EjectionPort] = {}
        packet_flits = max(1, -(-config.packet_bytes // config.flit_bytes))
        per_link = config.ni_ports == "per_link"
        incoming: list[list[int]] = [[] for _ in range(physical.nodes_count)]
        for link, dst in enumerate(physical.link_dst):
            incoming[dst].append(link)
        for rank, node in enumerate(physical.hosts):
            outs = physical.out_links[node]
            ins = incoming[node] if per_link else []
            for links in [[link] for link in outs] if per_link else [outs]:
                name = (
                    f"injection to {self.node_name(physical.link_dst[links[0]])}" if per_link else "injection"
                )
                port = InputPort(node, name, vcs, packet_flits)
                ni = port.ni = NetworkInterface(rank, port, config, self.pipeline_ps, clock)
                self.nis.append(ni)
                self._ni_of_link.update((link, ni) for link in links)
            for links in [[link] for link in ins] if per_link else [[]]:
                eject = EjectionPort(clock, node, self.cycle_ps, self._on_packet)
                self.eject_ports.append(eject)
                self._eject_of_link.update((link, eject) for link in links)
            if not per_link:
                self._eject_of_link[-1 - rank] = eject

    def node_name(self, node: int) -> str:
        """'NPU r' or 'switch n' for a node id."""
        rank = self.physical.rank_of_node.get(node)
        return f"NPU {rank}" if rank is not None else f"switch {node}"

    # -- NetworkBackend ----------------------------------------------------------------------
    def now(self) -> float:
        """Simulated time in ns."""
        return self._queue.now / PS_PER_NS

    def schedule(self, delay_ns: float, callback: Callable[[Any], None], arg: Any = None) -> None:
        """Run ``callback(arg)`` after ``delay_ns`` (resolution 1 ps)."""
        self.clock.call_in(ns_to_ps(delay_ns), callback, arg)

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
        """Inject a message now; ``on_delivered(arg)`` runs when it has arrived, in order per pair."""
        npus = self.physical.npus_count
        if not (0 <= src < npus and 0 <= dst < npus):
            raise ValueError(f"send {src} -> {dst}: NPU ids are 0..{npus - 1}")
        self.messages_sent += 1
        if src == dst:
            self.clock.call_in(0, on_delivered, arg)
            self.messages_delivered += 1
            return
        vnet = tag % self.config.virtual_networks
        route, vcs = self._route(src, dst, tag, vnet)
        pair = src * npus + dst
        seq = self._next_seq.get(pair, 0)
        self._next_seq[pair] = seq + 1
        packet_bytes = self.config.packet_bytes
        packets = max(1, -(-size_bytes // packet_bytes))
        full, rest = divmod(size_bytes, packet_bytes)
        flits = full * self._packet_flits + (-(-rest // self.config.flit_bytes) if rest else 0)
        self.budget.add(
            max(flits, 1) * (len(route) - 1),
            self._describe_send,
            src,
            dst,
            size_bytes,
            max(flits, 1),
            len(route) - 1,
        )
        msg = Message(
            src, dst, size_bytes, on_delivered, arg, vnet, route, vcs, packets, seq, self._queue.now
        )
        self._ni_of_link[route[0].link].enqueue(msg)

    def lone_message_ns(self, src: int, dst: int, size_bytes: int, tag: int = 0) -> float:
        """A lower bound on a message's time alone on the idle network
        (:class:`~astra_core.backend.LoneMessageTime`): one flit's zero-load latency
        over its ``H`` links (``(H + 1)`` router pipelines, each link's serialization
        and latency, one ejection cycle; astra_garnetlike/tests/test_zero_load.py)
        plus ``F - 1`` periods of its slowest stage (link or ejection port) for the
        message's other flits, all in whole ps. Exact for one packet on equal links;
        packets waiting for injection VCs or credits only add to it. 0 to itself."""
        if src == dst:
            return 0.0
        config = self.config
        ports = [self.link_ports[link] for link in self.routing.links(src, dst, tag)]
        full, rest = divmod(size_bytes, config.packet_bytes)
        flits = max(1, full * self._packet_flits + (-(-rest // config.flit_bytes) if rest else 0))
        period = max([port.ser_ps for port in ports] + [self.cycle_ps])
        # hop_ps: a flit's serialization, the link's latency and the next router's pipeline
        head = self.pipeline_ps + sum(port.hop_ps for port in ports) + self.cycle_ps
        return (head + (flits - 1) * period) / PS_PER_NS

    # -- progress (astra_core.backend.ReportsProgress) ---------------------------------------
    @property
    def progress(self) -> ProgressHook | None:
        """The progress hook, called every :data:`~astra_core.events.PROGRESS_EVERY`
        events with the time in ns (the clock counts ps)."""
        return self._progress

    @progress.setter
    def progress(self, hook: ProgressHook | None) -> None:
        self._progress = hook
        self._queue.progress = None if hook is None else self._on_events

    def _on_events(self, now_ps: float, events: int, note: str = "") -> None:
        if self._progress is not None:
            self._progress(now_ps / PS_PER_NS, events, note)

    def report_progress(self) -> None:
        """Report the time and the events run so far, now."""
        if self._progress is not None:
            self._progress(self.now(), self._queue.events_processed)

    def run(self) -> None:
        """Process events until none remain; SimulationDeadlock if messages are stuck."""
        self.clock.run()
        if self.messages_sent != self.messages_delivered:
            self.watchdog.report(stopped=True)

    @staticmethod
    def _describe_send(src: int, dst: int, size: int, flits: int, links: int) -> str:
        return f"message NPU {src} -> NPU {dst} of {size} B: {flits} flits x {links} links"

    # -- routes and deliveries ---------------------------------------------------------------
    def _route(self, src: int, dst: int, tag: int, vnet: int) -> tuple[tuple, tuple]:
        links = self.routing.links(src, dst, tag)
        key = (links, vnet)
        cached = self._route_cache.get(key)
        if cached is None:
            ports = self.link_ports
            eject = self._eject_of_link.get(links[-1]) or self._eject_of_link[-1 - dst]
            route = tuple(ports[link] for link in links) + (eject,)
            v = self.config.vcs_per_vnet
            base = vnet * v
            half = v // 2
            ranges = {LOW: (base, base + half), HIGH: (base + half, base + v), ANY: (base, base + v)}
            vcs = tuple(ranges[c] for c in self.routing.classes(links))
            cached = self._route_cache[key] = (route, vcs)
        return cached

    def _on_packet(self, pkt: Packet) -> None:
        """A packet's tail has reached the destination NI."""
        self.packets_delivered += 1
        now = self._queue.now
        self.packet_latency_ps += now - pkt.created_ps
        if self.packet_hook is not None:
            self.packet_hook(pkt)
        msg = pkt.msg
        msg.packets_left -= 1
        if msg.packets_left:
            return
        msg.done_ps = now
        if not self.ordered:
            self.messages_delivered += 1
            self.bytes_delivered += msg.size
            msg.on_delivered(msg.arg)
            return
        pair = msg.src * self.physical.npus_count + msg.dst
        expected = self._next_delivery.get(pair, 0)
        if msg.seq != expected:
            self._held[(pair, msg.seq)] = msg  # an earlier message of this pair is still on its way
            return
        while True:
            self.messages_delivered += 1
            self.bytes_delivered += msg.size
            expected += 1
            msg.on_delivered(msg.arg)
            msg = self._held.pop((pair, expected), None)
            if msg is None:
                break
        self._next_delivery[pair] = expected

    # -- inspection --------------------------------------------------------------------------
    @property
    def link_flits(self) -> list[int]:
        """Flits that crossed each link (index = physical link id)."""
        return [port.flits for port in self.link_ports]

    def flit_hops(self) -> int:
        """Flits moved over links so far (the model's unit of work)."""
        return sum(port.flits for port in self.link_ports)

    def ejected_flits(self) -> int:
        """Flits that have left the network into NIs so far."""
        return sum(port.flits for port in self.eject_ports)

    def check_credits(self) -> list[str]:
        """Credit conservation problems (empty when every credit is accounted for).

        For every link and VC: credits held + credits in flight + flits
        buffered downstream == depth, and no VC ever held more flits than its
        depth.
        """
        problems = []
        for port in self.link_ports:
            down = port.down
            for vc, ivc in enumerate(down.vcs):
                total = port.credits[vc] + len(port.credit_times[vc]) + len(ivc.buf)
                if total != down.depth:
                    problems.append(
                        f"{self.node_name(port.router)} {port.name} VC {vc}: "
                        f"{total} credits+flits, depth {down.depth}"
                    )
                if ivc.peak > down.depth:
                    problems.append(
                        f"{self.node_name(down.router)} {down.name} VC {vc}: held "
                        f"{ivc.peak} flits, depth {down.depth}"
                    )
        return problems

    @property
    def stats(self) -> dict[str, float]:
        """Totals of the run: messages, packets, flit-hops, average packet latency (ns)."""
        packets = self.packets_delivered
        return {
            "messages": self.messages_delivered,
            "packets": packets,
            "bytes": self.bytes_delivered,
            "flit_hops": self.flit_hops(),
            "avg_packet_latency_ns": self.packet_latency_ps / packets / PS_PER_NS if packets else 0.0,
        }


def create(topology: Topology, config: Any = None) -> GarnetNetwork:
    """Backend factory: the physical topology if given, else network.yml's dimensions.

    ``config``: None (defaults), a :class:`GarnetConfig`, a mapping of keys or
    the path of a TOML/YAML file (see :mod:`astra_garnetlike.config`).
    """
    cfg = load_config(config)
    if topology.physical is not None:
        return GarnetNetwork(topology.physical, cfg)
    return GarnetNetwork(from_network(topology.network), cfg, network=topology.network)
