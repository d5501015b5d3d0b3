"""Deadlock detection: flits that stop moving are reported, never waited on forever.

Two ways a run can stop making progress, both caught:

* the event queue runs dry with messages undelivered (every router waits on a
  credit or VC that nobody will return): :meth:`Watchdog.report` at the end of
  ``run()``;
* other events keep the clock going (an open-loop traffic generator) while no
  flit crosses any link or leaves the network for ``deadlock_threshold_cycles``
  (at least four round trips of the slowest link, so a flit on its way or a
  credit coming back never looks stuck): the watchdog, an event every
  threshold while messages are in flight (as Garnet's
  ``garnet_deadlock_threshold`` check, per network rather than per VC). It is
  armed by whoever drives such a generator (:mod:`astra_garnetlike.noc`); in a
  simulation the system layer only waits on deliveries, so a deadlock always
  ends in the first case, and no watchdog event moves the clock past the
  last delivery.

The report is :class:`~astra_core.errors.SimulationDeadlock` with one line
naming the routers, ports and VCs involved: a cycle of VCs each waiting for
the next (its packet needs a credit or a VC held by the next one) when one
exists, else the blocked VCs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from astra.plugin import SimulationDeadlock
from astra_garnetlike.kernel import PS_PER_NS

if TYPE_CHECKING:
    from astra_garnetlike.network import GarnetNetwork
    from astra_garnetlike.router import InputVC

_SHOWN = 8


class Watchdog:
    """Periodic progress check of one network: :meth:`arm` starts it, it stops
    itself at a check that finds no message in flight."""

    def __init__(self, net: GarnetNetwork):
        self.net = net
        self.threshold_ps = max(
            net.config.deadlock_threshold_cycles * net.cycle_ps, 4 * net.max_round_trip_ps
        )
        self.armed = False
        self._progress = -1

    def arm(self) -> None:
        if not self.armed:
            self.armed = True
            self._progress = -1
            self.net.clock.call_in(self.threshold_ps, self._check)

    def _progress_now(self) -> int:
        net = self.net
        return net.flit_hops() + sum(port.flits for port in net.eject_ports)

    def _check(self, _arg) -> None:
        net = self.net
        if net.messages_sent == net.messages_delivered:
            self.armed = False
            return
        progress = self._progress_now()
        if progress == self._progress:
            self.report(stopped=False)
        self._progress = progress
        net.clock.call_in(self.threshold_ps, self._check)

    def report(self, *, stopped: bool) -> None:
        """Raise SimulationDeadlock naming the routers and VCs that wait on each other."""
        net = self.net
        stuck = [
            ivc for port in [*net.input_ports, *(ni.port for ni in net.nis)] for ivc in port.vcs if ivc.buf
        ]
        cycle = _find_cycle(stuck)
        now_ns = net.clock.now_ps / PS_PER_NS
        why = (
            "the event queue ran dry"
            if stopped
            else f"no flit moved for {self.threshold_ps / PS_PER_NS:g} ns = "
            f"{self.threshold_ps // net.cycle_ps} cycles"
        )
        shown = cycle or stuck
        parts = [_describe(net, ivc) for ivc in shown[:_SHOWN]]
        more = f"; and {len(shown) - _SHOWN} more" if len(shown) > _SHOWN else ""
        kind = "a cycle of VCs each waiting for the next" if cycle else "blocked VCs"
        undelivered = net.messages_sent - net.messages_delivered
        message = (
            f"garnetlike: deadlock at {now_ns:g} ns ({why}; {undelivered} message(s) "
            f"undelivered, {sum(len(v.buf) for v in stuck)} flits in buffers); "
            f"{kind}: {'; '.join(parts)}{more}"
        )
        waiting: dict[int, list[str]] = {}
        for ivc in stuck:
            waiting.setdefault(ivc.port.router, []).append(_describe(net, ivc))
        raise SimulationDeadlock(message, waiting)


def _waits_for(ivc: InputVC) -> list[InputVC]:
    """The downstream VCs whose progress ``ivc``'s front packet needs."""
    out = ivc.out
    if ivc.pkt is None or out is None or out.down is None:
        return []
    if ivc.out_vc >= 0:
        return [out.down_vcs[ivc.out_vc]]
    lo, hi = ivc.pkt.vcs[ivc.hop]
    return [out.down_vcs[v] for v in range(lo, hi)]


def _find_cycle(stuck: list[InputVC]) -> list[InputVC]:
    """A cycle in the wait-for graph among the stuck VCs (depth-first), or []."""
    members = {id(v) for v in stuck}
    state: dict[int, int] = {}  # 1 on the stack, 2 done
    for start in stuck:
        if state.get(id(start)):
            continue
        stack = [(start, iter(_waits_for(start)))]
        path = [start]
        state[id(start)] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[id(node)] = 2
                stack.pop()
                path.pop()
                continue
            if id(child) not in members:
                continue
            mark = state.get(id(child))
            if mark == 1:
                return path[path.index(child) :]
            if mark is None:
                state[id(child)] = 1
                stack.append((child, iter(_waits_for(child))))
                path.append(child)
    return []


def _describe(net: GarnetNetwork, ivc: InputVC) -> str:
    port = ivc.port
    where = f"{net.node_name(port.router)} ({port.name}, VC {ivc.index})"
    pkt = ivc.pkt
    if pkt is None:
        return f"{where} holds {len(ivc.buf)} flits"
    out = ivc.out
    link = out.name.replace("out to", "the link to")
    if ivc.out_vc >= 0:
        need = f"a credit for VC {ivc.out_vc} on {link}"
    elif out.down is not None:
        lo, hi = pkt.vcs[ivc.hop]
        vcs = f"VC {lo}" if hi - lo == 1 else f"VC {lo}-{hi - 1}"
        need = f"a free {vcs} on {link}"
    else:
        need = "ejection"
    return f"{where} holds packet {pkt.msg.src}->{pkt.msg.dst} ({len(ivc.buf)} flits) and waits for {need}"
