"""Degraded and failed cables of the physical network, for the whole run or from a
given time.

A fault names a cable between two nodes of the topology file (node ids as in
the file; ``astra topology show`` lists them):

* ``{link: [a, b], bandwidth: 0.5}``: both directions at half their bandwidth;
* ``{link: [a, b], down: true}``: the cable is gone; routes are recomputed over
  what remains (shortest paths, ECMP over the equal-cost ones);
* ``at_us`` (default 0): when the fault starts; ``until_us`` (default: never):
  when the cable is whole again (both at most 2^53 ns, :data:`MAX_INSTANT_US`).

A fault that holds for the whole run (``at_us`` 0, no ``until_us``) is taken
out of the topology before the run (:func:`apply_faults`): every backend runs
it. The others change the links *during* the run (:func:`fault_changes` gives
the changes, in time order, as directed link ids and their new bandwidths), on
a backend that can (:class:`astra_core.backend.LinkChanges`: ``flow`` and
``analytical-congestion``). What a change does to messages in flight is the
backend's (each backend's ``change_links`` says).

:func:`check_reachable` refuses, before a run, a job whose NPUs the cables down
at some time cut apart: one line naming the job, two NPUs that cannot reach
each other, the cables down and when.
"""

from __future__ import annotations

import math
import os
from array import array
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from astra_core.config.files import read_yaml, source_name
from astra_core.config.issues import Problems
from astra_core.config.limits import MAX_INSTANT_US
from astra_core.config.model import ConfigModel, int_in, number_in, validate_mapping
from astra_core.errors import ConfigError
from astra_core.events import kernel
from astra_core.topology.physical import PhysicalTopology

__all__ = [
    "LinkChange",
    "FaultsFile",
    "LinkFault",
    "apply_faults",
    "check_reachable",
    "fault_changes",
    "load_faults",
    "routing_without",
    "set_kernel_links",
    "timed_faults",
    "whole_run_faults",
]


class LinkFault(ConfigModel):
    """One faulty cable (module doc)."""

    link: list[Annotated[int, int_in(0)]]
    bandwidth: Annotated[float, number_in(minimum=0.0, maximum=1.0)] | None = None
    down: bool = False
    at_us: Annotated[float, number_in(minimum=0.0, maximum=MAX_INSTANT_US)] = 0.0
    until_us: Annotated[float, number_in(minimum=0.0, maximum=MAX_INSTANT_US)] | None = None

    @property
    def whole_run(self) -> bool:
        """Whether it holds from the start of the run to its end."""
        return self.at_us == 0 and self.until_us is None

    @property
    def factor(self) -> float:
        """The cable's bandwidth while the fault holds, as a fraction (0: down)."""
        return 0.0 if self.down else float(self.bandwidth or 1.0)

    def window(self) -> str:
        """When it holds, for messages: ``"from 20 us"``, ``"20-50 us"``."""
        if self.until_us is None:
            return f"from {self.at_us:g} us"
        return f"{self.at_us:g}-{self.until_us:g} us"


class FaultsFile(ConfigModel):
    """A faults file (``astra run --faults``): ``faults:``, a list of faults (module doc)."""

    faults: list[LinkFault] = Field(default_factory=list)


def load_faults(
    faults: str | os.PathLike | Sequence[LinkFault | Mapping[str, Any]] | None,
) -> list[LinkFault]:
    """The faults of a YAML file (``faults: [...]``) or of a list of :class:`LinkFault`
    or mappings shaped like them (none for None). Raises ConfigError, one line per
    problem naming the file (or ``faults``) and ``faults[i].key``."""
    if faults is None:
        return []
    if isinstance(faults, (str, os.PathLike)):
        source = source_name(faults)
        problems = Problems(source)
        data = read_yaml(faults, problems, aliases=False)
        problems.raise_if_any()
        return validate_mapping(FaultsFile, data, source).faults
    items = [f.model_dump() if isinstance(f, LinkFault) else f for f in faults]
    return validate_mapping(FaultsFile, {"faults": items}, "faults").faults


def _has_link(topology: PhysicalTopology, src: int, dst: int) -> bool:
    try:
        topology.link(src, dst)
    except KeyError:
        return False
    return True


def _check(topology: PhysicalTopology, faults: Sequence[LinkFault]) -> None:
    """Raise ConfigError (naming ``faults[i]``) for a cable that is not in the topology, a
    fault that neither slows nor removes it, one that ends before it starts, or two faults
    of one cable at the same time."""
    for i, fault in enumerate(faults):
        where = f"faults[{i}]"
        if len(fault.link) != 2:
            raise ConfigError(f"{where}: link: expected two node ids [a, b], got {fault.link}")
        a, b = fault.link
        if not (_has_link(topology, a, b) or _has_link(topology, b, a)):
            raise ConfigError(f"{where}: link: no cable between nodes {a} and {b} in {topology.source}")
        if fault.down == (fault.bandwidth is not None) or fault.bandwidth == 0.0:
            raise ConfigError(f"{where}: give either down: true or a bandwidth fraction in (0, 1]")
        if fault.until_us is not None and fault.until_us <= fault.at_us:
            raise ConfigError(f"{where}: until_us: {fault.until_us:g} is not after at_us {fault.at_us:g}")
        for j, other in enumerate(faults[:i]):
            if {a, b} == set(other.link) and _overlap(fault, other):
                raise ConfigError(
                    f"{where}: cable {a}-{b} is also faulty in faults[{j}] at the same time "
                    f"({other.window()}); give one fault per cable at a time"
                )


def _overlap(x: LinkFault, y: LinkFault) -> bool:
    x_end = x.until_us if x.until_us is not None else float("inf")
    y_end = y.until_us if y.until_us is not None else float("inf")
    return x.at_us < y_end and y.at_us < x_end


def whole_run_faults(faults: Sequence[LinkFault]) -> list[LinkFault]:
    """The faults that hold for the whole run."""
    return [f for f in faults if f.whole_run]


def timed_faults(faults: Sequence[LinkFault]) -> list[LinkFault]:
    """The faults that start after the run starts or end before it ends."""
    return [f for f in faults if not f.whole_run]


def apply_faults(topology: PhysicalTopology, faults: Sequence[LinkFault]) -> PhysicalTopology:
    """``topology`` with the cables of ``faults`` that hold for the whole run slowed or
    removed (the timed ones are checked, not applied: :func:`fault_changes`). Raises
    ConfigError naming ``faults[i]`` for a bad fault (:func:`_check`)."""
    _check(topology, faults)
    scale: dict[tuple[int, int], float] = {}
    for fault in whole_run_faults(faults):
        a, b = fault.link
        scale[(a, b)] = scale[(b, a)] = fault.factor
    if not scale:
        return topology
    links = []
    for i, (src, dst) in enumerate(zip(topology.link_src, topology.link_dst)):
        factor = scale.get((src, dst), 1.0)
        if factor:
            links.append((src, dst, topology.link_bandwidth[i] * factor, topology.link_latency[i]))
    return PhysicalTopology(
        topology.nodes_count,
        topology.switches,
        links,
        source=f"{topology.source} with {len(scale) // 2} faults",
        check_connected=False,
    )


@dataclass(frozen=True)
class LinkChange:
    """Links that change at ``at_ns``: ``bytes_per_ns[link]`` is directed link ``link``'s
    bandwidth from then on (0: down)."""

    at_ns: float
    bytes_per_ns: dict[int, float]


def _cable_links(topology: PhysicalTopology, fault: LinkFault) -> list[int]:
    a, b = fault.link
    return [topology.link(s, d) for s, d in ((a, b), (b, a)) if _has_link(topology, s, d)]


def fault_changes(topology: PhysicalTopology, faults: Sequence[LinkFault]) -> list[LinkChange]:
    """The link changes of the timed faults of ``faults`` on ``topology`` (the topology
    with the whole-run faults applied: :func:`apply_faults`), in time order; the changes
    of one instant are one :class:`LinkChange`. Raises ConfigError naming ``faults[i]``
    for a bad fault or a timed fault of a cable a whole-run fault already removed."""
    ends: list[tuple[float, int, float]] = []  # (ns, link, bandwidth)
    starts: list[tuple[float, int, float]] = []
    for i, fault in enumerate(faults):
        if fault.whole_run:
            continue
        links = _cable_links(topology, fault)
        if not links:
            raise ConfigError(
                f"faults[{i}]: link: cable {fault.link[0]}-{fault.link[1]} is down for the whole run"
            )
        for link in links:
            bandwidth = topology.link_bandwidth[link]
            starts.append((fault.at_us * 1000.0, link, bandwidth * fault.factor))
            if fault.until_us is not None:
                ends.append((fault.until_us * 1000.0, link, bandwidth))
    by_time: dict[float, dict[int, float]] = {}
    for at, link, bandwidth in ends + starts:  # a fault starting as another ends wins
        by_time.setdefault(at, {})[link] = bandwidth
    return [LinkChange(t, by_time[t]) for t in sorted(by_time)]


def routing_without(topology: PhysicalTopology, down: Collection[int]) -> Any:
    """The default routing of ``topology`` over its links but ``down`` (link ids kept):
    a kernel ``ShortestPaths``, what the kernel's models take as ``route``. Raises
    ConfigError for a topology with a router of its own (network.yml's dimensions)."""
    if not topology.default_routing:
        raise ConfigError(
            f"{topology.source}: links can go down during a run only on a topology file's routing"
        )
    return kernel().ShortestPaths(
        topology.nodes_count,
        sorted(topology.switches),
        topology.link_src,
        topology.link_dst,
        topology.link_latency,
        sorted(down),
    )


def link_changes(n_links: int, links: Sequence[int], bytes_per_ns: Sequence[float]) -> tuple[array, array]:
    """The arguments of a compiled model's ``set_links`` over ``n_links`` links as the
    arrays it reads: link ids (int32) and bandwidths (bytes/ns, doubles). Raises
    IndexError for a link id out of range, ValueError for a bandwidth that is negative
    or not finite, or for sequences of different lengths."""
    if len(links) != len(bytes_per_ns):
        raise ValueError("set_links: one bandwidth per link")
    for link, bandwidth in zip(links, bytes_per_ns):
        if not 0 <= link < n_links:
            raise IndexError(f"set_links: no link {link} (links are 0..{n_links - 1})")
        if not (bandwidth >= 0 and math.isfinite(bandwidth)):
            raise ValueError(f"set_links: link {link}: bandwidth must be >= 0 and finite")
    return array("i", links), array("d", bytes_per_ns)


def set_kernel_links(
    model: Any, topology: PhysicalTopology, down: set[int], bytes_per_ns: Mapping[int, float]
) -> None:
    """Change links of a compiled network model on ``topology`` (flow's
    ``FlowLinks``, analytical-congestion's ``CongestionLinks``: their ``set_links``) now: ``bytes_per_ns[link]`` is link
    ``link``'s bandwidth (0: down). ``down``, the links down so far, is updated in place;
    when it changes the model gets the routing over the links up (:func:`routing_without`;
    the topology's own when none is down). Raises what ``set_links`` raises (IndexError,
    ValueError) and ConfigError as :func:`routing_without`."""
    before = frozenset(down)
    for link, bandwidth in bytes_per_ns.items():
        (down.add if bandwidth == 0 else down.discard)(link)
    route = None
    if down != before:
        route = routing_without(topology, down) if down else topology.kernel_route
    model.set_links(list(bytes_per_ns), [float(b) for b in bytes_per_ns.values()], route)


def _reachable(topology: PhysicalTopology, start: int, down: Collection[int], backward: bool) -> set[int]:
    """The nodes ``start`` reaches (``backward``: that reach it) over the links not down."""
    ends = topology.link_src if backward else topology.link_dst
    adjacency = topology.in_links if backward else topology.out_links
    seen, stack = {start}, [start]
    while stack:
        node = stack.pop()
        for link in adjacency[node]:
            nxt = ends[link]
            if link not in down and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def check_reachable(
    topology: PhysicalTopology, who: str, npus: Sequence[int], faults: Sequence[LinkFault]
) -> None:
    """Raise ConfigError, starting with ``who`` (``"job a"``), unless every NPU of ``npus``
    (ranks of ``topology``, the topology with the whole-run faults applied) reaches every
    other at every time, over the links the timed faults leave up."""
    if not npus:
        return
    down: set[int] = set()
    whole = [f"{f.link[0]}-{f.link[1]}" for f in whole_run_faults(faults) if f.down]
    timed = [f for f in timed_faults(faults) if f.down]
    nodes = [topology.hosts[n] for n in npus]
    for change in [LinkChange(0.0, {})] + fault_changes(topology, timed):
        for link, bandwidth in change.bytes_per_ns.items():
            (down.add if bandwidth == 0 else down.discard)(link)
        cut = _cut(topology, nodes, down)
        if cut is None:
            continue
        names = whole + [
            f"{f.link[0]}-{f.link[1]} {f.window()}"
            for f in timed
            if f.at_us * 1000.0 <= change.at_ns and (f.until_us is None or change.at_ns < f.until_us * 1000.0)
        ]
        raise ConfigError(
            f"{who}: the cables down ({', '.join(names)}) cut NPU {npus[nodes.index(cut)]} off from "
            f"NPU {npus[0]}; place the job elsewhere or keep a path up"
        )


def _cut(topology: PhysicalTopology, nodes: list[int], down: Collection[int]) -> int | None:
    """A node of ``nodes`` that ``nodes[0]`` cannot reach, or that cannot reach it."""
    forward = _reachable(topology, nodes[0], down, False)
    backward = _reachable(topology, nodes[0], down, True)
    return next((node for node in nodes if node not in forward or node not in backward), None)
