"""Does a workload fit the network and compute model it is about to run on?

The reader checks what one file can say about itself; this module checks
what needs the run's other inputs, before the first event:

- **generated-for dimensions**: traces that astra's generators made for given
  network dimensions (``astra gen llm --dims``, ``astra convert text --dims``)
  record them in the GlobalMetadata attribute :data:`GENERATED_DIMS_ATTR`; their
  ``involved_dim`` lists only mean what they meant on exactly those dimensions.
- **involved_dim** naming a dimension the network lacks (a ``True`` past the
  last dimension): upstream ignores entries past the network's dimensions, so
  such a collective silently runs on fewer dimensions than the trace asks for.
  A shorter list is valid (missing entries count as involved) but suspicious,
  and so is one that involves no dimension at all (the collective moves
  nothing): a :class:`~astra_core.workload.graph.TraceWarning` each, once.
- **roofline**: a GPU compute node with ``tensor_size`` but no ``num_ops``
  has operational intensity 0, so upstream's roofline time is 0/0 (NaN, cast
  to an integer: undefined); astra rejects it (upstream ``Workload::issue_comp``;
  ``tensor_size`` 0 is upstream's "skip this node" and stays valid).

Every problem is one :class:`~astra_core.errors.TraceError` line naming the
file and the first few ET nodes, counting the rest.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence

from astra_core.errors import TraceError
from astra_core.workload.chakra_types import COMM_COLL, COMP, NO_GROUP
from astra_core.workload.graph import RankGraph, TraceWarning, peerless, timing_key

__all__ = ["GENERATED_DIMS_ATTR", "check_network_fit", "generated_dims"]

#: GlobalMetadata attribute (int64_list): the network dimension sizes a generator
#: placed the trace's groups on, e.g. [8, 2, 4].
GENERATED_DIMS_ATTR = "astra_network_dims"

_SHOWN = 3  # nodes named in one error line
_RANK_SUFFIX = re.compile(r"\.\d+\.et\Z")
_Involved = tuple[RankGraph, int, tuple[bool, ...]]  # (graph, node id, involved_dim)


def generated_dims(graph: RankGraph) -> list[int] | None:
    """The dimension sizes the trace says it was generated for, or None."""
    value = graph.metadata.get(GENERATED_DIMS_ATTR)
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return value
    return None


def _prefix(path: str) -> str:
    return _RANK_SUFFIX.sub("", path) or "workload"


def _dims_text(dims: Sequence[int]) -> str:
    return "x".join(str(d) for d in dims)


def _bits(involved: Sequence[bool]) -> str:
    return "[" + ", ".join("1" if b else "0" for b in involved) + "]"


def check_network_fit(
    graphs: Sequence[RankGraph], npus_per_dim: Sequence[int], *, roofline: bool = False
) -> None:
    """Check every rank's graph against the network's dimension sizes.

    ``graphs[r]`` is rank r's graph (ranks sharing a graph are checked once);
    ``npus_per_dim`` the network's NPUs per dimension (network.yml
    ``npus_count``); ``roofline``: whether system.json enables the roofline
    compute model. Raises :class:`TraceError` (one line) for a trace generated
    for other dimensions, an ``involved_dim`` naming a dimension the network
    lacks, or, under the roofline model, a GPU compute node with
    ``tensor_size`` but no ``num_ops``. Warns (:class:`TraceWarning`, once
    each) when an ``involved_dim`` is shorter than the network's dimension
    list, or involves none of its dimensions. CPU-side collectives (replayed)
    and collectives on a comm group (``pg_name``, which overrides
    ``involved_dim``) are not checked for ``involved_dim``.
    """
    dims = list(npus_per_dim)
    distinct, ranks = _distinct(graphs)
    _check_generated_for(distinct, dims)
    too_long, roofline_bad, short, idle = _misfits(distinct, len(dims), roofline)
    if too_long:
        raise TraceError(_too_long_line(too_long, ranks, dims))
    if roofline_bad:
        raise TraceError(
            _nodes_line(
                roofline_bad,
                ranks,
                "roofline compute node has tensor_size but no num_ops "
                "(operational intensity 0: no roofline time; give num_ops, or a duration with roofline-enabled 0)",
            )
        )
    if short is not None:
        _warn_short(*short, dims)
    if idle is not None:
        _warn_idle(*idle)


def _distinct(graphs: Sequence[RankGraph]) -> tuple[list[RankGraph], dict[int, int]]:
    """The distinct graphs in rank order, and how many ranks share each (by graph id).
    Ranks made from one template differ only in peers, and ranks made from templates that
    time alike only in peers and the names of their collectives' groups, neither of which
    is read here (a collective on a named group is not checked): the first such graph
    stands for them (:func:`~astra_core.workload.graph.timing_key`)."""
    distinct: dict[int, RankGraph] = {}
    ranks: dict[int, int] = {}  # graph id -> ranks sharing its timing
    for graph in graphs:
        first = distinct.setdefault(timing_key(graph.nodes), graph)
        ranks[id(first)] = ranks.get(id(first), 0) + 1
    return list(distinct.values()), ranks


def _check_generated_for(graphs: list[RankGraph], dims: list[int]) -> None:
    """Raise TraceError for the first trace generated for other dimensions than ``dims``."""
    for graph in graphs:
        made_for = generated_dims(graph)
        if made_for is not None and made_for != dims:
            raise TraceError(
                f"workload {_prefix(graph.path)} was generated for dims {_dims_text(made_for)}, "
                f"network has {dims}"
            )


def _misfits(
    graphs: list[RankGraph], ndims: int, roofline: bool
) -> tuple[list[_Involved], list[tuple[RankGraph, int]], tuple[RankGraph, int, int] | None, _Involved | None]:
    """One pass over every node: ``(too_long, roofline_bad, short, idle)``, the
    collectives whose involved_dim names a dimension past ``ndims`` and the
    roofline nodes without num_ops (all, in file order), then the first
    collective with a short involved_dim and the first involving no dimension."""
    too_long: list[_Involved] = []
    roofline_bad: list[tuple[RankGraph, int]] = []
    short: tuple[RankGraph, int, int] | None = None  # (graph, node id, entries)
    idle: _Involved | None = None
    for graph in graphs:
        for node in peerless(graph.nodes):  # peers are not read here
            kind = node.type
            if kind == COMM_COLL:
                involved = node.involved_dim
                if involved is None or node.is_cpu_op or node.pg_name not in NO_GROUP:
                    continue  # CPU-side collectives are replayed; a comm group overrides involved_dim
                if len(involved) > ndims and any(involved[ndims:]):
                    too_long.append((graph, node.id, involved))
                elif len(involved) < ndims:
                    if short is None:
                        short = (graph, node.id, len(involved))
                elif idle is None and not any(involved):
                    idle = (graph, node.id, involved)
            elif kind == COMP and roofline and not node.num_ops and node.tensor_size and not node.is_cpu_op:
                roofline_bad.append((graph, node.id))
    return too_long, roofline_bad, short, idle


def _too_long_line(too_long: list[_Involved], ranks: dict[int, int], dims: list[int]) -> str:
    ndims = len(dims)
    involved = too_long[0][2]
    highest = max(d for d, on in enumerate(involved) if on)
    return _nodes_line(
        too_long,
        ranks,
        f"involved_dim {_bits(involved)} names dimension {highest}, "
        f"the network has {ndims} dimension{'s' if ndims > 1 else ''} {dims}",
    )


def _warn_short(graph: RankGraph, node_id: int, length: int, dims: list[int]) -> None:
    warnings.warn(
        f"{graph.path or 'trace'}: node {node_id}: involved_dim has {length} entr{'y' if length == 1 else 'ies'}, the network "
        f"has {len(dims)} dimensions {dims}: the missing ones count as involved",
        TraceWarning,
        stacklevel=3,  # check_network_fit's caller
    )


def _warn_idle(graph: RankGraph, node_id: int, involved: tuple[bool, ...]) -> None:
    warnings.warn(
        f"{graph.path or 'trace'}: node {node_id}: involved_dim {_bits(involved)} involves no "
        "dimension: the collective moves no data",
        TraceWarning,
        stacklevel=3,  # check_network_fit's caller
    )


def _nodes_line(items: list[tuple], ranks: dict[int, int], problem: str) -> str:
    """``FILE: nodes 3, 7, 9 (and 12 more nodes; 5 more ranks): PROBLEM``.

    ``items`` are (graph, node id, ...) in file order; the first graph's file
    is named, its first few nodes listed; ``ranks`` counts the ranks sharing
    each graph, so the other ranks with a bad node are counted.
    """
    first = items[0][0]
    here = [item[1] for item in items if item[0] is first]
    bad_graphs = {id(item[0]) for item in items}
    other_ranks = sum(ranks[g] for g in bad_graphs) - 1
    ids = ", ".join(str(i) for i in here[:_SHOWN])
    extra = []
    if len(here) > _SHOWN:
        extra.append(f"{len(here) - _SHOWN} more nodes")
    if other_ranks:
        extra.append(f"{other_ranks} more rank{'s' if other_ranks > 1 else ''}")
    tail = f" (and {'; '.join(extra)})" if extra else ""
    return f"{first.path or 'trace'}: node{'s' if len(here) > 1 else ''} {ids}{tail}: {problem}"
