"""A generated LLM step as in-memory rank traces, node for node what its files would hold.

:func:`llm_traces` gives each rank the :class:`~astra_core.workload.et_decode.ETNode`
list that reading its ``.et`` file back (:func:`~astra_core.workload.chakra.read_workload`)
would give, without serializing and parsing it: the nodes of one pipeline stage are
made once and shared by its ranks (compute nodes) or by the ranks of one group
(collectives, per ``pg_name`` or ``involved_dim``); sends and receives are each rank's
own (:class:`~astra_core.workload.et_peers.PeerNode`: the shared node with its peers).
Ranks of one stage and the same groups are one template's nodes with their own peers,
kept as the peers alone (:class:`~astra_core.workload.et_peers.TemplatePeers`).
``astra.simulate`` takes the list as its workload; a step of thousands of ranks then
skips writing and reading gigabytes of traces.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Sequence
from copy import deepcopy
from typing import Any, cast

from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.et_decode import ETNode, RankTrace
from astra_core.workload.et_peers import TemplatePeers, with_peers
from astra_core.workload.generators.llm_writer import llm_metadata, node_fields, node_order, peer_rank
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
    wl.layout.add_ring_groups()
    return traces, {str(k): list(v) for k, v in wl.layout.groups.items()}


def _rank_nodes(wl, rank: int, cache: dict) -> list[ETNode]:  # or TemplatePeers, a Sequence
    """Rank ``rank``'s nodes, in file order (see the module docstring). Ranks of a stage
    whose collectives share their groups differ only in peers: the first is the template
    of the others (:class:`TemplatePeers`: the template with their own sends' and
    receives' peers); their graph structure, signature and NCCL communicators are then the
    template's (:func:`~astra_core.workload.graph.shape_key`). A template of other groups
    is the stage's first nodes with its own collectives."""
    layout = wl.layout
    p = layout.coords(rank)[2]
    stage = cache.get(("stage", p))
    nodes = wl.stages[p]
    if stage is None:
        roles = list(dict.fromkeys(n.role for n in nodes if n.type == pb.COMM_COLL_NODE))
        colls = [i for i, n in enumerate(nodes) if n.type == pb.COMM_COLL_NODE]
        peers = [i for i, n in enumerate(nodes) if n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)]
        routed = [i for i, n in enumerate(nodes) if n.by_ep is not None]
        stage = cache[("stage", p)] = (node_order(nodes), roles, colls, peers, routed)
    ids, roles, coll_slots, peer_slots, routed = stage
    # the placements in the order the nodes first name them: the layout numbers new groups
    # as they are first asked for, as the writer does
    places = {role: layout.placement(role, rank) for role in roles}
    q = layout.expert_index(rank) if routed else 0  # nodes that differ by expert-parallel index
    shape = (p, q, tuple((role, place.kind, str(place.value)) for role, place in places.items()))
    own = _own_peers(wl, p, rank, peer_slots, cache)
    template = cache.get(("template", shape))
    if template is not None:
        slots = cache.get(("slots", p))
        if slots is None:
            slots = cache[("slots", p)] = {idx: i for i, idx in enumerate(peer_slots)}
        return cast("list[ETNode]", TemplatePeers(template, slots, own))
    base = cache.get(("base", p, q))  # the stage's first nodes: only its collectives differ
    out: list[ETNode]
    remake: Sequence[int] = coll_slots
    if base is not None:
        out = list(base)
    elif ("base", p) in cache:  # another expert-parallel index's nodes: its routed nodes differ too
        out = cache[("base", p, q)] = list(cache[("base", p)])
        remake = (*routed, *coll_slots)
    else:
        out = cache[("base", p, q)] = cache[("base", p)] = [
            _node_at(nodes, i, ids, places, (p, q), cache) for i in range(len(nodes))
        ]
        remake = ()
    for idx in remake:
        out[idx] = _node_at(nodes, idx, ids, places, (p, q), cache)
    cache[("template", shape)] = out
    for i, idx in enumerate(peer_slots):
        out[idx] = with_peers(out[idx], own[2 * i], own[2 * i + 1])
    return out


def _own_peers(wl, p: int, rank: int, peer_slots: list[int], cache: dict) -> array:
    """Rank ``rank``'s ``(src, dst)`` per send or receive of stage ``p`` (flat int64):
    each peer role's rank worked out once (:func:`~.llm_writer.peer_rank`)."""
    found = cache.get(("peers", p))
    if found is None:  # per send or receive (its role, whether it sends); a node per role
        nodes = wl.stages[p]
        kinds = [(nodes[i].role, nodes[i].type == pb.COMM_SEND_NODE) for i in peer_slots]
        found = cache[("peers", p)] = (kinds, {role: nodes[i] for i, (role, _) in zip(peer_slots, kinds)})
    kinds, roles = found
    by_role = {role: peer_rank(wl.layout, n, rank) for role, n in roles.items()}
    own = array("q")
    for role, sends in kinds:
        peer = by_role[role]
        own.extend((rank, peer) if sends else (peer, rank))
    return own


def _node_at(
    nodes, idx: int, ids: dict[int, int], places: dict, stage: tuple[int, int], cache: dict
) -> ETNode:
    """Node ``idx`` of a stage (``stage``: its number and the rank's expert-parallel
    index) with the groups ``places`` (made once per group): a send or receive without
    peers (:func:`_rank_nodes` gives each rank its own)."""
    n = nodes[idx]
    p, q = stage
    place = places.get(n.role) if n.type == pb.COMM_COLL_NODE else None
    key: tuple = (p, idx) if place is None else (p, idx, place.kind, str(place.value))
    if n.by_ep is not None:
        key += (q,)
    node = cache.get(key)
    if node is None:
        duration_ns = n.duration_ns
        fields: dict[str, Any] = {}
        if n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
            fields = {"comm_tag": n.tag, "comm_size": n.size}
        elif n.type == pb.COMP_NODE or place is not None:
            duration_ns, fields = node_fields(n, q)
            uneven = {k: fields.pop(k) for k in ("send_bytes", "recv_bytes") if k in fields}
            if uneven:
                fields["attrs"] = uneven
            if place is not None and place.kind == "dims":
                fields["involved_dim"] = tuple(bool(v) for v in place.value)
            elif place is not None and place.kind == "group":
                fields["pg_name"] = str(place.value)
        node = cache[key] = ETNode(
            ids[idx],
            n.name,
            n.type,
            data_deps=[ids[d] for d in n.deps],
            duration_micros=int(round(duration_ns / 1000)),
            **fields,
        )
    return node
