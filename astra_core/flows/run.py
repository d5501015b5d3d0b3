"""Run a flow workload on any backend that models links, and measure each flow.

Flow ``i`` is one message of ``size_bytes`` from NPU ``src`` to ``dst`` sent
at its start time on its own queue pair (tag ``i``), so flows between the
same hosts are separate connections with their own per-flow ECMP path, as
in the HPCC artifact's simulations. Its flow completion time (FCT) runs
from the start to the arrival of its last byte.

Ideal FCT: the time the flow would take alone on the idle fabric, in the
backend's own framing: its :meth:`~astra_core.backend.LoneMessageTime.lone_message_ns`
(packets of its MTU with its headers store-and-forwarded over the route on
``ns3`` and ``flow``, the whole message per link on ``analytical-congestion``,
flits on ``garnetlike``), a lower bound on every flow's FCT. Given a
framing (``payload_bytes`` P, ``header_bytes`` H), or on a backend that offers
no lone-message time, it is the flow's packets store-and-forwarded over its
route at line rate (:func:`ideal_fct_ns`), which the ``ns3`` backend gives a
lone flow to the picosecond (tested); the HPCC artifact's "standalone FCT" is
the same idea with its 48-byte headers and an ACK's return. Slowdown = FCT /
ideal FCT, on a 1 ps grid (ns-3's and garnetlike's resolution): the FCT to
the nearest ps, the ideal down to a whole ps, so that rounding in float
arithmetic never puts a lone flow below 1.

Framing defaults ``P = 4096`` (the ``ns3`` backend's RoCE path MTU) and
``H = 82`` (Ethernet 38 bytes with preamble and inter-frame gap, IPv4 20, UDP
8, BTH 12, ICRC 4; IBTA RoCEv2 annex A17).

Flow studies need a backend that models link sharing
(:class:`~astra_core.backend.LinkSharing`): on one that does not, every flow
sees an idle fabric and a slowdown measures only its framing, so
:func:`check_link_sharing` refuses it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from astra_core.backend import lone_message_time, shares_links
from astra_core.errors import AstraError, ConfigError
from astra_core.flows.flowfile import FlowSpec
from astra_core.topology.physical import PhysicalTopology
from astra_core.topology.pipeline import pipeline_ns

#: Tags of background flows under a training step start here, clear of the
#: step's own tags (chunk ids: communicator group x 10^6 + k; ET node tags).
BACKGROUND_TAG_BASE = 1 << 48
#: RoCE path MTU the ns3 backend uses by default (bytes of payload per packet).
PAYLOAD_BYTES = 4096
#: Wire bytes per RoCEv2 packet besides its payload (see the module docstring).
HEADER_BYTES = 82
#: Slack (ns) for float noise when the ideal is put on the 1 ps grid: a backend
#: that meets its lone-message time to within 1e-6 ns still gives slowdown >= 1.
_GRID_SLACK_NS = 1e-6


class LinkSharingWarning(UserWarning):
    """A flow study on a backend that does not say whether it models link sharing."""


def check_link_sharing(backend: Any, backend_name: str, what: str) -> None:
    """Refuse a flow study (``what``: ``"flows run"``, ``"--background"``) on a
    backend that declares it does not model link sharing
    (:class:`~astra_core.backend.LinkSharing` False): its flows never slow each other
    (or a training step), so every slowdown would be an artifact of its framing and
    background traffic would change nothing. Raises ConfigError (one line); warns
    (:class:`LinkSharingWarning`) when the backend does not say."""
    sharing = shares_links(backend)
    if sharing is False:
        raise ConfigError(
            f"{what}: backend {backend_name} does not model link sharing (concurrent messages "
            "never slow each other), so flows would change nothing and FCT slowdowns would "
            "measure nothing; use one that does, e.g. --backend flow, ns3, garnetlike or "
            "analytical-congestion"
        )
    if sharing is None:
        warnings.warn(
            f"{what}: backend {backend_name} does not say whether it models link sharing "
            "(astra_core.backend.LinkSharing); FCT slowdowns may mean nothing",
            LinkSharingWarning,
            stacklevel=2,
        )


def check_framing(payload_bytes: int | None, header_bytes: int | None) -> None:
    """Raise ConfigError for a payload below 1 byte or a negative header (the
    ``--payload-bytes`` / ``--header-bytes`` of an ideal FCT); None means the
    backend's own framing."""
    if payload_bytes is not None and (isinstance(payload_bytes, bool) or payload_bytes < 1):
        raise ConfigError(f"--payload-bytes: must be >= 1 byte, got {payload_bytes}")
    if header_bytes is not None and (isinstance(header_bytes, bool) or header_bytes < 0):
        raise ConfigError(f"--header-bytes: must be >= 0 bytes, got {header_bytes}")


def ideal_fct_ns(
    topology: PhysicalTopology,
    route: Sequence[int],
    size_bytes: int,
    payload_bytes: int = PAYLOAD_BYTES,
    header_bytes: int = HEADER_BYTES,
) -> float:
    """Lone-flow completion time (ns) of ``size_bytes`` over ``route`` (link ids, at
    least one): latencies plus :func:`~astra_core.topology.pipeline.pipeline_ns`."""
    latency = sum(topology.link_latency[link] for link in route)
    ns_per_byte = [1 / topology.link_bandwidth[link] for link in route]
    return latency + pipeline_ns(ns_per_byte, size_bytes, payload_bytes, header_bytes)


@dataclass
class FlowResult:
    """One flow's outcome; times in ns."""

    src: int
    dst: int
    size_bytes: int
    start_ns: int
    fct_ns: float
    ideal_fct_ns: float

    @property
    def slowdown(self) -> float:
        """FCT / ideal FCT (>= 1 on a backend that keeps its lone-message time)."""
        return self.fct_ns / self.ideal_fct_ns


@dataclass
class FlowRun:
    """Every flow's result, in input order, with the backend that ran them."""

    backend_name: str
    flows: list[FlowResult]
    wall_s: float
    backend: Any = field(repr=False, default=None)


def start_flows(
    backend, flows: Sequence[FlowSpec], on_done: Callable[[int], None], tag_base: int = 0
) -> None:
    """Schedule every flow's message on ``backend`` at its start time (ns from the
    backend's current time); ``on_done(i)`` runs when flow ``i`` has arrived.
    Flow ``i`` uses tag ``tag_base + i``."""

    def start(i: int) -> None:
        f = flows[i]
        backend.send(f.src, f.dst, f.size_bytes, on_done, i, tag=tag_base + i)

    now = backend.now()
    for i, f in enumerate(flows):
        backend.schedule(f.start_ns - now if f.start_ns > now else 0, start, i)


def flow_results(
    flows: Sequence[FlowSpec],
    finish: Sequence[float | None],
    topology: PhysicalTopology,
    backend_name: str,
    tag_base: int = 0,
    payload_bytes: int | None = None,
    header_bytes: int | None = None,
    backend: Any = None,
) -> list[FlowResult]:
    """Each flow's result from its arrival time (ns) ``finish[i]``, on the 1 ps grid
    (module docstring). The ideal is ``backend``'s lone-message time when it offers
    one and no framing is given, else :func:`ideal_fct_ns` with the given framing
    (default :data:`PAYLOAD_BYTES`, :data:`HEADER_BYTES`). Raises AstraError
    naming the first few flows that never arrived."""
    missing = [i for i, t in enumerate(finish) if t is None]
    if missing:
        shown = ", ".join(f"{i} ({flows[i].src} -> {flows[i].dst})" for i in missing[:5])
        raise AstraError(
            f"backend {backend_name}: {len(missing)} of {len(flows)} flows never "
            f"arrived: {shown}{', ...' if len(missing) > 5 else ''}"
        )
    lone = lone_message_time(backend) if payload_bytes is None and header_bytes is None else None
    payload = PAYLOAD_BYTES if payload_bytes is None else payload_bytes
    header = HEADER_BYTES if header_bytes is None else header_bytes
    results = []
    for i, f in enumerate(flows):
        if lone is not None:
            ideal = lone(f.src, f.dst, f.size_bytes, tag_base + i)
        else:
            route = topology.route(f.src, f.dst, tag_base + i)
            ideal = ideal_fct_ns(topology, route, f.size_bytes, payload, header)
        fct = finish[i] - f.start_ns  # type: ignore[operator]  # None raised above
        grid = math.floor((ideal + _GRID_SLACK_NS) * 1000) / 1000
        results.append(
            FlowResult(
                f.src,
                f.dst,
                f.size_bytes,
                f.start_ns,
                round(fct * 1000) / 1000,
                grid if grid > 0 else ideal,  # below 1 ps (no latency): kept as it is
            )
        )
    return results
