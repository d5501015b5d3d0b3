"""Per-link statistics of backends that model links.

A backend exposes link statistics by having, after its run,

* ``topology``: a :class:`~astra_core.topology.physical.PhysicalTopology`
  (``link_src[i]``, ``link_dst[i]``, ``link_bandwidth[i]`` in bytes/ns,
  ``link_latency[i]`` in ns for each directed link ``i``);
* ``link_bytes[i]``: bytes that crossed link ``i``;
* ``link_busy_ns[i]``: ns during which link ``i`` was transmitting;
* optionally ``max_queue[i]``: the most messages that waited for link ``i``;
* optionally ``peak_flows[i]``: the most flows that crossed link ``i`` at once.

The congestion-aware analytical backend (``analytical-congestion``, with
``max_queue``) and the flow backend (``flow``, with ``peak_flows``) do; any
plugin backend can offer the same attributes and gets the same table and
plot. Utilization is busy time over the step time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from astra_core.results import RunResult

LINK_COLUMNS = (
    "link",
    "src",
    "dst",
    "kind",
    "bandwidth_bytes_per_ns",
    "latency_ns",
    "bytes",
    "busy_ns",
    "utilization",
    "max_queue",
    "peak_flows",
    "fault",
)


@dataclass(frozen=True)
class LinkStat:
    """One directed link after a run. ``kind``: ``npu-switch``, ``switch-npu``,
    ``switch-switch`` or ``npu-npu``; ``utilization``: busy_ns / step_ns (0..1);
    ``max_queue``, ``peak_flows``: -1 when the backend does not count them; ``fault``:
    ``""``, or how the run's faults touched the link's cable (:func:`link_faults`:
    ``degraded``, ``down for a while``; a cable down for the whole run has no links)."""

    link: int
    src: int
    dst: int
    kind: str
    bandwidth_bytes_per_ns: float
    latency_ns: float
    bytes: int
    busy_ns: float
    utilization: float
    max_queue: int
    peak_flows: int
    fault: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def link_stats(result: RunResult) -> list[LinkStat] | None:
    """Statistics of every directed link, or None if the backend keeps none."""
    links = result.links
    if links is None:
        return None
    topo = links.topology
    switches = topo.switches
    busy_ns, link_bytes, queues, flows = (
        links.link_busy_ns,
        links.link_bytes,
        links.max_queue,
        links.peak_flows,
    )
    step = result.step_ns
    marks = link_faults(result)[0]
    stats = []
    for i, (src, dst) in enumerate(zip(topo.link_src, topo.link_dst)):
        kind = f"{'switch' if src in switches else 'npu'}-{'switch' if dst in switches else 'npu'}"
        busy = busy_ns[i]
        stats.append(
            LinkStat(
                link=i,
                src=src,
                dst=dst,
                kind=kind,
                bandwidth_bytes_per_ns=float(topo.link_bandwidth[i]),
                latency_ns=float(topo.link_latency[i]),
                bytes=int(link_bytes[i]),
                busy_ns=float(busy),
                utilization=float(busy / step) if step else 0.0,
                max_queue=int(queues[i]) if queues is not None else -1,
                peak_flows=int(flows[i]) if flows is not None else -1,
                fault=marks.get((src, dst), ""),
            )
        )
    return stats


#: How links.png marks a link of a faulty cable (:func:`link_faults`).
DEGRADED, DOWN_A_WHILE = "degraded", "down for a while"


def link_faults(result: RunResult) -> tuple[dict[tuple[int, int], str], list[tuple[int, int]]]:
    """The faulty cables of ``result`` (:attr:`~astra_core.results.RunResult.faults`):
    per directed link ``(src, dst)`` still in the run's topology on a faulty cable,
    :data:`DEGRADED` (bandwidth cut, for the whole run or a while) or
    :data:`DOWN_A_WHILE` (down for part of the run; it wins over degraded); and the
    cables down for the whole run, gone from the run's topology, as node pairs ``(a, b)``
    in the faults' order."""
    marks: dict[tuple[int, int], str] = {}
    gone: list[tuple[int, int]] = []
    for fault in result.faults:
        a, b = fault.link
        if fault.down and fault.whole_run:
            gone.append((a, b))
            continue
        for pair in ((a, b), (b, a)):
            if marks.get(pair) != DOWN_A_WHILE:
                marks[pair] = DOWN_A_WHILE if fault.down else DEGRADED
    return marks, gone
