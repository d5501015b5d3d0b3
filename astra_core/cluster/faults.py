"""Degraded and failed cables of the physical network, for the whole run.

A cluster spec may list ``faults``, each a cable between two nodes of the
topology file (node ids as in the file; ``astra topology show`` lists them):

* ``{link: [a, b], bandwidth: 0.5}``: both directions at half their bandwidth;
* ``{link: [a, b], down: true}``: the cable is gone; every route is recomputed
  over what remains (shortest paths, ECMP over the equal-cost ones).

:func:`apply_faults` gives the topology with them, and :func:`check_reachable`
refuses a job whose NPUs the failed cables cut apart, in one line naming the
job, two NPUs that cannot reach each other and the cables that are down.
Faults hold from the start of the run to its end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from astra_core.config.model import ConfigModel, int_in, number_in
from astra_core.errors import ConfigError
from astra_core.topology.physical import PhysicalTopology

__all__ = ["LinkFault", "apply_faults", "check_reachable"]


class LinkFault(ConfigModel):
    """One faulty cable (module doc)."""

    link: list[Annotated[int, int_in(0)]]
    bandwidth: Annotated[float, number_in(minimum=0.0, maximum=1.0)] | None = None
    down: bool = False


def _has_link(topology: PhysicalTopology, src: int, dst: int) -> bool:
    try:
        topology.link(src, dst)
    except KeyError:
        return False
    return True


def apply_faults(topology: PhysicalTopology, faults: Sequence[LinkFault]) -> PhysicalTopology:
    """``topology`` with ``faults``' cables slowed or removed. Raises ConfigError
    (naming ``faults[i]``) for a cable that is not in the topology, or a fault that
    neither slows nor removes it."""
    scale: dict[tuple[int, int], float] = {}
    for i, fault in enumerate(faults):
        where = f"faults[{i}]"
        if len(fault.link) != 2:
            raise ConfigError(f"{where}: link: expected two node ids [a, b], got {fault.link}")
        a, b = fault.link
        if not (_has_link(topology, a, b) or _has_link(topology, b, a)):
            raise ConfigError(f"{where}: link: no cable between nodes {a} and {b} in {topology.source}")
        if fault.down == (fault.bandwidth is not None) or fault.bandwidth == 0.0:
            raise ConfigError(f"{where}: give either down: true or a bandwidth fraction in (0, 1]")
        factor = 0.0 if fault.down else float(fault.bandwidth or 1.0)
        scale[(a, b)] = scale[(b, a)] = factor
    links = []
    for i, (src, dst) in enumerate(zip(topology.link_src, topology.link_dst)):
        factor = scale.get((src, dst), 1.0)
        if factor:
            links.append((src, dst, topology.link_bandwidth[i] * factor, topology.link_latency[i]))
    return PhysicalTopology(
        topology.nodes_count,
        topology.switches,
        links,
        source=f"{topology.source} with {len(faults)} faults",
        check_connected=False,
    )


def _reachable(topology: PhysicalTopology, start: int) -> set[int]:
    seen, stack = {start}, [start]
    while stack:
        node = stack.pop()
        for link in topology.out_links[node]:
            nxt = topology.link_dst[link]
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def check_reachable(
    topology: PhysicalTopology, job: str, npus: Sequence[int], faults: Sequence[LinkFault]
) -> None:
    """Raise ConfigError unless every NPU of ``npus`` (ranks of the topology) reaches
    every other over ``topology``."""
    nodes = [topology.hosts[n] for n in npus]
    for start in nodes[:1]:
        seen = _reachable(topology, start)
        cut = [n for n, node in zip(npus, nodes) if node not in seen]
        if cut:
            down = ", ".join(f"{f.link[0]}-{f.link[1]}" for f in faults if f.down)
            raise ConfigError(
                f"job {job}: the cables down ({down}) cut NPU {cut[0]} off from NPU {npus[0]}; "
                "place the job elsewhere or keep a path up"
            )
