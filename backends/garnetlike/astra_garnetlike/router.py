"""Router state machines: input-buffered VCs, credits, VC and switch allocation.

Every node of the topology is a router. A router has one input port per
incoming link (plus an injection port at an NPU, fed by its network
interface) and one output port per outgoing link (plus an ejection port at an
NPU). Each input port has ``virtual_networks x vcs_per_vnet`` virtual
channels (VCs), each a FIFO buffer of ``depth`` flits.

A flit's life at one router (times in ps, the clock of :mod:`.kernel`):

* it enters an input VC buffer when the upstream router sends it (the buffer
  slot was reserved by a credit), and *arrives* one serialization time plus
  the link latency later; it may win switch allocation
  ``router_pipeline_cycles`` after it arrived (buffer write, route
  computation, VC allocation, switch allocation: Garnet 2.0's pipeline lumped
  into one configurable depth);
* a head flit first needs an output VC of its packet's vnet and VC class that
  is free (VC allocation). With atomic allocation (Garnet) a VC is free once
  the credit of the previous packet's tail has come back, i.e. the VC is
  empty; otherwise as soon as the previous tail has been sent;
* switch allocation: an idle output port grants one requesting input VC,
  round robin, whose front flit is ready, whose input port is not already
  sending a flit (one flit per input port at a time, one per output port) and
  whose output VC has a credit. The flit then occupies the output link for one
  serialization time (``flit_bytes / bandwidth``);
* leaving the buffer frees its slot: the credit reaches the upstream router
  ``credit_delay_cycles`` plus the link latency later.

Nothing is evaluated per cycle. An output port is woken (:meth:`Clock.wake
<astra_garnetlike.kernel.Clock.wake>`) when a flit it may grant becomes ready,
when it finishes sending, or when a credit or a VC it waits for comes back
while it is blocked. Credits are lazy: the
upstream port keeps the return times of its credits in flight and counts
those due when it needs one, so a credit costs an event only when someone
waits for it. The same holds for VCs freed under atomic allocation.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from astra_garnetlike.kernel import INF

if TYPE_CHECKING:
    from astra_garnetlike.network import Message


class Packet:
    """A packet in flight: ``flits`` flits (head first, tail last) of one message.

    ``route[h]`` is the output port the packet takes at its ``h``-th router
    (the last one is the destination's ejection port); ``vcs[h]`` is the
    ``(lo, hi)`` range of VC indices it may use on the link of ``route[h]``.
    """

    __slots__ = ("msg", "flits", "route", "vcs", "created_ps", "payload")

    def __init__(self, msg: Message, flits: int, payload: int, route: tuple, vcs: tuple, created_ps: int):
        self.msg = msg
        self.flits = flits
        self.payload = payload
        self.route = route
        self.vcs = vcs
        self.created_ps = created_ps


class InputVC:
    """One virtual channel of an input port: a FIFO of flits, shown as their ready times (ps).

    ``pkt`` is the packet whose flits are at the front (None when idle),
    ``hop`` the index of its output port ``out`` in ``pkt.route``, ``left`` its
    flits not yet forwarded, ``out_vc`` the downstream VC it holds (-1: none
    yet). Packets queued behind it (non-atomic VC allocation) wait in
    ``waiting`` as ``(packet, hop)``. ``peak`` is the most flits ever held.
    """

    __slots__ = (
        "port",
        "index",
        "buf",
        "pkt",
        "hop",
        "left",
        "out",
        "out_vc",
        "waiting",
        "peak",
        "credit_times",
    )

    def __init__(self, port: InputPort, index: int):
        self.port = port
        self.index = index
        self.buf: deque[int] = deque()
        self.pkt: Packet | None = None
        self.hop = 0
        self.left = 0
        self.out: OutputPort | None = None
        self.out_vc = -1
        self.waiting: deque[tuple[Packet, int]] | None = None  # made when first needed
        self.peak = 0
        #: The upstream output port's return times of this VC's credits (set when linked).
        self.credit_times: deque[int] | None = None

    def start(self, pkt: Packet, hop: int) -> None:
        """Make ``pkt`` the front packet: route computation and a request to its output port."""
        self.pkt = pkt
        self.hop = hop
        self.left = pkt.flits
        out = self.out = pkt.route[hop]
        self.out_vc = -1
        out.requests.append(self)
        out.wake_at(self.buf[0])


class InputPort:
    """An input port: its VCs, the upstream output port that feeds it (None: the NI).

    ``busy_until`` (ps): the crossbar input is sending a flit until then.
    ``depth``: flits per VC buffer.
    """

    __slots__ = ("router", "name", "vcs", "depth", "upstream", "ni", "busy_until")

    def __init__(
        self,
        router: int,
        name: str,
        vcs_count: int,
        depth: int,
        upstream: OutputPort | None = None,
        ni: Any = None,
    ):
        self.router = router
        self.name = name
        self.depth = depth
        self.upstream = upstream
        self.ni = ni
        self.busy_until = 0
        self.vcs = [InputVC(self, i) for i in range(vcs_count)]


class OutputPort:
    """An output port and its link: switch allocation, VC allocation and credits.

    ``ser_ps``: one flit's serialization on the link; ``hop_ps``: from grant to
    ready at the next router (serialization + latency + pipeline);
    ``credit_ps``: from a flit leaving the downstream buffer to its credit
    being usable here (credit delay + latency). Per downstream VC:
    ``credits`` (usable now), ``credit_times`` (return times of credits in
    flight), ``free_at`` (when the VC can take a new packet; INF while held).
    ``flits``: flits granted so far.
    """

    __slots__ = (
        "clock",
        "events",
        "schedule",
        "router",
        "name",
        "link",
        "down",
        "down_vcs",
        "ser_ps",
        "hop_ps",
        "credit_ps",
        "atomic",
        "credits",
        "credit_times",
        "free_at",
        "requests",
        "rr",
        "busy_until",
        "wake_time",
        "blocked",
        "buckets",
        "run_bucket",
        "flits",
    )

    def __init__(
        self,
        clock,
        router: int,
        name: str,
        link: int,
        down: InputPort | None,
        ser_ps: int,
        latency_ps: int,
        pipeline_ps: int,
        credit_delay_ps: int,
        atomic: bool,
    ):
        self.clock = clock
        self.events = clock.events
        self.schedule = clock.events.schedule
        self.router = router
        self.name = name
        self.link = link
        self.down = down
        self.ser_ps = ser_ps
        self.hop_ps = ser_ps + latency_ps + pipeline_ps
        self.credit_ps = credit_delay_ps + latency_ps
        self.atomic = atomic
        vcs = len(down.vcs) if down is not None else 0
        self.down_vcs = down.vcs if down is not None else []
        self.credits = [down.depth] * vcs if down is not None else []
        self.credit_times: list[deque[int]] = [deque() for _ in range(vcs)]
        for vc, ivc in enumerate(self.down_vcs):
            ivc.credit_times = self.credit_times[vc]
        self.free_at: list[float] = [0] * vcs
        self.requests: list[InputVC] = []
        self.rr = 0
        self.busy_until = 0
        self.wake_time: float = INF
        self.blocked = False
        self.buckets = clock.buckets
        self.run_bucket = clock.run_bucket
        self.flits = 0

    def wake_at(self, time_ps: float) -> None:
        """Arbitrate at ``time_ps`` (not before the port is free, nor before now: a flit
        that was ready earlier is arbitrated now), unless already due sooner."""
        if time_ps < self.busy_until:
            time_ps = self.busy_until
        now = self.events.now
        if time_ps < now:
            time_ps = now
        if time_ps < self.wake_time:
            self.wake_time = time_ps
            self.clock.wake(self, time_ps)

    def fire(self, now: int) -> None:  # noqa: C901 - the hot path, written out for speed
        """Switch allocation at a wake-up: grant one flit, or sleep until one may be grantable.

        The hot path of the model (about one call per flit-hop): the grant is
        written out here rather than in helper methods, for speed.
        """
        if now != self.wake_time:
            return  # superseded by an earlier wake-up
        self.wake_time = INF
        reqs = self.requests
        n = len(reqs)
        if not n:
            return
        nxt = INF
        blocked = False
        i = self.rr
        if i >= n:
            i = 0
        tries = n
        while tries:
            tries -= 1
            ivc = reqs[i]
            buf = ivc.buf
            if buf:
                ready = buf[0]
                port = ivc.port
                if ready > now:
                    if ready < nxt:
                        nxt = ready
                elif port.busy_until > now:
                    if port.busy_until < nxt:
                        nxt = port.busy_until
                else:
                    vc = ivc.out_vc
                    if vc < 0:  # VC allocation for a head flit
                        lo, hi = ivc.pkt.vcs[ivc.hop]
                        free_at = self.free_at
                        soonest = INF
                        for v in range(lo, hi):
                            f = free_at[v]
                            if f <= now:
                                vc = v
                                break
                            if f < soonest:
                                soonest = f
                        if vc < 0:
                            if soonest == INF:
                                blocked = True
                            elif soonest < nxt:
                                nxt = soonest
                            i += 1
                            if i == n:
                                i = 0
                            continue
                        free_at[vc] = INF
                        ivc.out_vc = vc
                    all_credits = self.credits
                    credits = all_credits[vc]
                    if not credits:  # count the credits that have come back since
                        returning = self.credit_times[vc]
                        while returning and returning[0] <= now:
                            returning.popleft()
                            credits += 1
                        if not credits:
                            if not returning:
                                blocked = True
                            elif returning[0] < nxt:
                                nxt = returning[0]
                            i += 1
                            if i == n:
                                i = 0
                            continue
                    # -- grant: the front flit of ivc goes out on downstream VC vc
                    all_credits[vc] = credits - 1
                    buf.popleft()
                    done = now + self.ser_ps
                    self.busy_until = done
                    port.busy_until = done
                    if self.blocked:
                        self.blocked = False
                    self.flits += 1
                    pkt = ivc.pkt
                    down = self.down_vcs[vc]
                    dbuf = down.buf
                    ready = now + self.hop_ps
                    dbuf.append(ready)
                    held = len(dbuf)
                    if held > down.peak:
                        down.peak = held
                    left = ivc.left
                    if left == pkt.flits:  # the head: the next router learns of the packet
                        if down.pkt is None:
                            down.start(pkt, ivc.hop + 1)
                        elif down.waiting is None:
                            down.waiting = deque([(pkt, ivc.hop + 1)])
                        else:
                            down.waiting.append((pkt, ivc.hop + 1))
                    elif held == 1:  # a body flit the next router is waiting for
                        out = down.out
                        if ready < out.wake_time and out.busy_until < out.wake_time:
                            out.wake_at(ready)
                    left -= 1
                    if left:
                        ivc.left = left
                        self.rr = i + 1
                    else:  # the tail: release this VC's hold on the output VC
                        reqs.pop(i)
                        self.rr = i
                        ivc.out_vc = -1
                        if not self.atomic:
                            self.free_at[vc] = now
                        ivc.left = 0
                        if ivc.waiting:
                            ivc.start(*ivc.waiting.popleft())
                        else:
                            ivc.pkt = None
                    # the slot the flit left: its credit (a tail's: maybe its VC) goes upstream
                    up = port.upstream
                    if up is not None:
                        back = now + up.credit_ps
                        ivc.credit_times.append(back)
                        if not left and up.atomic:
                            up.free_at[ivc.index] = back
                        if up.blocked:
                            up.wake_at(back)
                    elif not left:  # an injection VC: the NI puts its next packet in
                        port.ni.departed(pkt, ivc, now)
                    # next arbitration: when the port is free and some front flit is ready
                    if left and buf and buf[0] <= done:  # streaming: this packet's next flit
                        soonest = done
                    else:
                        soonest = INF
                        for other in reqs:
                            if other.buf and other.buf[0] < soonest:
                                soonest = other.buf[0]
                        if soonest == INF:
                            return
                        if soonest < done:
                            soonest = done
                    self.wake_time = soonest  # (Clock.wake, written out)
                    bucket = self.buckets.get(soonest)
                    if bucket is None:
                        self.buckets[soonest] = [self]
                        self.schedule(soonest - now, self.run_bucket, soonest)
                    else:
                        bucket.append(self)
                    return
            i += 1
            if i == n:
                i = 0
        self.blocked = blocked
        if nxt < INF:
            self.wake_at(nxt)


def _returned(port: InputPort, ivc: InputVC, left: int, now: int, pkt: Packet) -> None:
    """A flit left ``ivc``: its credit (and, for a tail, maybe its VC) goes upstream."""
    up = port.upstream
    if up is not None:
        back = now + up.credit_ps
        ivc.credit_times.append(back)
        if not left and up.atomic:
            up.free_at[ivc.index] = back
        if up.blocked:
            up.wake_at(back)
    elif not left:
        port.ni.departed(pkt, ivc, now)


class EjectionPort(OutputPort):
    """An NPU's ejection port: flits leave the network into the NI, one per ``ser_ps``.

    No VCs or credits downstream: the NI always has room. When a packet's tail
    has been ejected, ``on_packet(packet)`` runs ``ser_ps`` later.
    """

    __slots__ = ("on_packet",)

    def __init__(self, clock, router: int, ser_ps: int, on_packet):
        super().__init__(clock, router, "eject", -1, None, ser_ps, 0, 0, 0, True)
        self.on_packet = on_packet

    def fire(self, now: int) -> None:
        if now != self.wake_time:
            return
        self.wake_time = INF
        reqs = self.requests
        n = len(reqs)
        if not n:
            return
        nxt = INF
        i = self.rr
        if i >= n:
            i = 0
        tries = n
        while tries:
            tries -= 1
            ivc = reqs[i]
            buf = ivc.buf
            if buf:
                ready = buf[0]
                port = ivc.port
                if ready > now:
                    if ready < nxt:
                        nxt = ready
                elif port.busy_until > now:
                    if port.busy_until < nxt:
                        nxt = port.busy_until
                else:
                    self._eject(i, ivc, buf, port, now)
                    return
            i += 1
            if i == n:
                i = 0
        if nxt < INF:
            self.wake_at(nxt)

    def _eject(self, i: int, ivc: InputVC, buf: deque, port: InputPort, now: int) -> None:
        buf.popleft()
        done = now + self.ser_ps
        self.busy_until = done
        port.busy_until = done
        self.flits += 1
        left = ivc.left - 1
        reqs = self.requests
        pkt = ivc.pkt
        if left:
            ivc.left = left
            self.rr = i + 1
        else:
            reqs.pop(i)
            self.rr = i
            ivc.left = 0
            if ivc.waiting:
                ivc.start(*ivc.waiting.popleft())
            else:
                ivc.pkt = None
            self.clock.call_in(self.ser_ps, self.on_packet, pkt)
        _returned(port, ivc, left, now, pkt)
        soonest = INF
        for other in reqs:
            if other.buf and other.buf[0] < soonest:
                soonest = other.buf[0]
        if soonest < INF:
            self.wake_at(soonest)
