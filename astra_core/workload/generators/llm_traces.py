"""A generated LLM step as in-memory rank traces, node for node what its files would hold.

:func:`llm_traces` gives each rank the :class:`~astra_core.workload.et_decode.ETNode`
list that reading its ``.et`` file back (:func:`~astra_core.workload.chakra.read_workload`)
would give, without serializing and parsing it: the nodes of one pipeline stage are
made once and shared by its ranks (compute nodes), by the ranks of one group
(collectives, per ``pg_name`` or ``involved_dim``), or copied per rank with its own peers
(sends and receives). ``astra.simulate`` takes the list as its workload; a step of
thousands of ranks then skips writing and reading gigabytes of traces.
"""

from __future__ import annotations

import dataclasses
from copy import deepcopy
from typing import Any

from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.et_decode import ETNode, RankTrace
from astra_core.workload.generators.llm_writer import llm_metadata, node_order, peer_rank
from astra_core.workload.writer import CHAKRA_VERSION

__all__ = ["llm_traces"]


def llm_traces(wl, label: str = "gen-llm") -> tuple[list[RankTrace], dict[str, list[int]]]:
    """(one :class:`RankTrace` per rank, the comm groups ``{pg_name: ranks}``) of the
    generated step ``wl`` (:class:`~astra_core.workload.generators.llm.LLMWorkload`).
    Each trace's ``path`` is ``<label>.<rank>.et`` (named in messages, never opened).
    The layout is used on a copy, as :func:`~.llm_writer.write_llm` leaves it."""
    wl = dataclasses.replace(wl, layout=deepcopy(wl.layout))
    metadata = dict(llm_metadata(wl))
    cache: dict = {}
    traces = [
        RankTrace(f"{label}.{rank}.et", _rank_nodes(wl, rank, cache), CHAKRA_VERSION, metadata, rank)
        for rank in range(wl.layout.npus)
    ]
    return traces, {str(k): list(v) for k, v in wl.layout.groups.items()}


def _rank_nodes(wl, rank: int, cache: dict) -> list[ETNode]:
    """Rank ``rank``'s nodes, in file order (see the module docstring)."""
    layout = wl.layout
    p = layout.coords(rank)[2]
    ids = cache.get(("ids", p))
    if ids is None:
        ids = cache[("ids", p)] = node_order(wl.stages[p])
    out: list[ETNode] = []
    places: dict = {}
    place: Any = None  # a collective's placement: set below before its attributes use it
    for idx, n in enumerate(wl.stages[p]):
        if n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
            template = cache.get((p, idx))
            if template is None:
                template = cache[(p, idx)] = _node(n, ids, idx, comm_tag=n.tag, comm_size=n.size)
            peer = peer_rank(layout, n, rank)
            node = template.copy()
            node.comm_src, node.comm_dst = (rank, peer) if n.type == pb.COMM_SEND_NODE else (peer, rank)
            out.append(node)
            continue
        key: tuple = (p, idx)
        if n.type == pb.COMM_COLL_NODE:
            place = places.get(n.role)
            if place is None:
                place = places[n.role] = layout.placement(n.role, rank)
            key = (p, idx, place.kind, str(place.value))
        node = cache.get(key)
        if node is None:
            attrs: dict[str, Any] = {}
            if n.type == pb.COMP_NODE:
                attrs = {"num_ops": int(n.flops), "tensor_size": int(n.nbytes)}
            elif n.type == pb.COMM_COLL_NODE:
                attrs = {"comm_type": n.comm_type, "comm_size": n.size}
                if place.kind == "dims":
                    attrs["involved_dim"] = tuple(bool(v) for v in place.value)
                elif place.kind == "group":
                    attrs["pg_name"] = str(place.value)
            node = cache[key] = _node(n, ids, idx, **attrs)
        out.append(node)
    return out


def _node(n, ids: dict[int, int], idx: int, **fields: Any) -> ETNode:
    return ETNode(
        ids[idx],
        n.name,
        n.type,
        data_deps=[ids[d] for d in n.deps],
        duration_micros=int(round(n.duration_ns / 1000)),
        **fields,
    )
