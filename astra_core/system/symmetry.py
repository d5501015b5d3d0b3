"""Rank symmetry: simulate one rank when every rank is provably the same.

When all ranks run byte-identical traces over a network whose message times
depend only on the offset between NPUs (the congestion-unaware model on
network.yml dimensions), and every collective algorithm in use picks its
peers by offset (ring and direct: rotations of each dimension; halving-
doubling: XOR within each power-of-two dimension), then every rank's timeline
is rank 0's, shifted. So only rank 0 is simulated: a message it sends to the
NPU at offset ``+δ`` also delivers, at the same time, the message that the NPU
at ``-δ`` sends to it (the *mirror* of ``δ``).

Anything that could break the symmetry falls back to simulating every rank:
traces that differ, point-to-point nodes, communicator groups smaller than the
network, double binary trees (ranks play different tree roles), mixed
algorithm families on one dimension, whole-network rings over several
dimensions, shared remote memory, or a backend that does not declare itself
translation-invariant (``symmetric = True``; the congestion-aware model shares
link state between ranks). ``Simulation(symmetry=False)`` (``--no-symmetry``)
turns the shortcut off; the tests compare both on every reference case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from astra_core.config.memory import MemoryType
from astra_core.system.comm_types import CommType
from astra_core.workload.graph import RankGraph

# Chakra node types (et_def.proto)
_MEM_LOAD, _MEM_STORE, _COMM_SEND, _COMM_RECV, _COMM_COLL = 2, 3, 5, 6, 7
_ROTATION = {"ring", "direct"}


@dataclass(frozen=True)
class Symmetry:
    """How rank 0 stands for all ranks: one group per network dimension.

    ``groups[d]`` is ``"rotation"`` (offsets add modulo the size) or ``"xor"``.
    """

    sizes: tuple[int, ...]
    groups: tuple[str, ...]

    def mirror(self, dst: int) -> int:
        """The NPU whose message to rank 0 mirrors rank 0's message to ``dst``."""
        src = 0
        stride = 1
        for size, group in zip(self.sizes, self.groups):
            c = (dst // stride) % size
            src += ((-c) % size if group == "rotation" else c) * stride
            stride *= size
        return src


def _signature(graph: RankGraph) -> int:
    """Hash of what decides a rank's timing: per node (in file order) its kind,
    duration and communication attributes, and the dependency structure by
    position. Node ids and names do not matter (Chakra numbers ids across ranks)."""
    items = []
    for node, children in zip(graph.nodes, graph.children):
        items.append((node.type, node.is_cpu_op, node.duration_micros, node.comm_type,
                      node.comm_size, node.comm_src, node.comm_dst, node.comm_tag,
                      node.involved_dim, node.pg_name, node.num_ops, node.tensor_size,
                      tuple(children)))
    return hash((tuple(items), tuple(graph.parent_counts)))


def _group_key(name: str) -> str:
    key = name.strip()
    return str(int(key)) if key.isdigit() else key


def find_symmetry(graphs: Sequence[RankGraph], sizes: Sequence[int], implementations,
                  comm_groups: dict, memory_type: MemoryType, backend) -> tuple[Symmetry | None, str]:
    """A :class:`Symmetry` if rank 0 can stand for every rank, else (None, why not).

    ``implementations`` maps each CommType to its per-dimension algorithm
    names (parsed system.json lists).
    """
    if not getattr(backend, "symmetric", False):
        return None, "the backend's timing is not the same for every rank"
    first = graphs[0]
    signature = _signature(first)
    seen = {id(first)}
    for graph in graphs:
        if id(graph) not in seen:
            seen.add(id(graph))
            if _signature(graph) != signature:
                return None, "the ranks' traces differ"
    if memory_type in (MemoryType.PER_NODE_MEMORY_EXPANSION, MemoryType.MEMORY_POOL):
        return None, "ranks share a remote memory"
    npus = 1
    for size in sizes:
        npus *= size
    full_groups = {_group_key(name) for name, members in comm_groups.items() if len(members) == npus}
    used: dict[int, set[str]] = {}
    whole_network = False
    for node in first.nodes:
        if node.type in (_COMM_SEND, _COMM_RECV) and not node.is_cpu_op:
            return None, "point-to-point nodes name absolute peers"
        if node.type != _COMM_COLL or node.is_cpu_op:
            continue
        if node.pg_name not in (None, "", "0") and _group_key(node.pg_name) not in full_groups:
            return None, f"node {node.id} uses communicator group '{node.pg_name}'"
        try:
            comm_type = CommType(node.comm_type)
        except ValueError:
            continue  # broadcast replays; unsupported types fail later anyway
        involved = node.involved_dim
        for d, name in enumerate(implementations[comm_type]):
            if involved is not None and d < len(involved) and not involved[d]:
                continue
            if name.kind.spans_all_dims:
                whole_network = True
                used.setdefault(0, set()).add(name.kind.base.value)
                break
            used.setdefault(d, set()).add(name.kind.base.value)
    if whole_network and len(sizes) > 1:
        return None, "a whole-network algorithm over several dimensions"
    groups = []
    for d, size in enumerate(sizes):
        algorithms = used.get(d, set())
        if algorithms <= _ROTATION:
            groups.append("rotation")
        elif algorithms == {"halvingDoubling"} and not size & (size - 1):
            groups.append("xor")
        else:
            return None, f"dimension {d} runs {', '.join(sorted(algorithms))}"
    return Symmetry(tuple(sizes), tuple(groups)), ""
