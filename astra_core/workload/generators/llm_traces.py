"""A generated LLM step as in-memory rank traces, node for node what its files would hold.

:func:`llm_traces` gives each rank the :class:`~astra_core.workload.et_decode.ETNode`
list that reading its ``.et`` file back (:func:`~astra_core.workload.chakra.read_workload`)
would give, without serializing and parsing it: the nodes of one pipeline stage are
made once and shared by its ranks (compute nodes) or by the ranks of one group
(collectives, per ``pg_name`` or ``involved_dim``); sends and receives are each rank's
own (:class:`~astra_core.workload.et_peers.PeerNode`: the shared node with its peers,
made when read). Every rank is a template's nodes (those of its stage and groups, sends
and receives without peers) and the peer of each of its peer roles
(:class:`~astra_core.workload.et_peers.TemplatePeers`,
:class:`~astra_core.workload.et_peers.RolePeers`).
``astra.simulate`` takes the list as its workload; a step of thousands of ranks then
skips writing and reading gigabytes of traces.
"""

from __future__ import annotations

import dataclasses
from array import array
from copy import deepcopy
from typing import cast

from astra_core.collector import few_passes, paused
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra_types import COMM_SMS, COMM_STREAM
from astra_core.workload.et_decode import ETNode, RankTrace
from astra_core.workload.et_peers import GroupTemplate, RolePeers, TemplatePeers, renames
from astra_core.workload.generators.llm_writer import (
    llm_metadata,
    node_fields,
    node_order,
    p2p_group_attrs,
    peer_rank,
)
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
    with few_passes(), paused():  # hundreds of thousands of nodes and no reference cycle
        traces = [
            RankTrace(f"{label}.{rank}.et", _rank_nodes(wl, rank, cache), CHAKRA_VERSION, metadata, rank)
            for rank in range(wl.layout.npus)
        ]
    wl.layout.add_ring_groups()
    return traces, {str(k): list(v) for k, v in wl.layout.groups.items()}


def _rank_nodes(wl, rank: int, cache: dict) -> list[ETNode]:  # a TemplatePeers, a Sequence
    """Rank ``rank``'s nodes, in file order (see the module docstring): a template's nodes
    with the rank's own sends' and receives' peers (:class:`TemplatePeers`). Ranks of a
    stage whose collectives share their groups share a template; their graph structure,
    signature and NCCL communicators are then the template's
    (:func:`~astra_core.workload.graph.shape_key`). A template of other groups is the
    stage's first nodes with its own collectives; where those groups differ only in name
    it times as the stage's first template
    (:class:`~astra_core.workload.et_peers.GroupTemplate`)."""
    layout = wl.layout
    p = layout.coords(rank)[2]
    stage = cache.get(("stage", p))
    nodes = wl.stages[p]
    if stage is None:
        roles = list(dict.fromkeys(n.role for n in nodes if n.type == pb.COMM_COLL_NODE))
        colls = [i for i, n in enumerate(nodes) if n.type == pb.COMM_COLL_NODE]
        peers = [i for i, n in enumerate(nodes) if n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)]
        routed = [i for i, n in enumerate(nodes) if n.by_ep is not None]
        slots = {idx: i for i, idx in enumerate(peers)}
        stage = cache[("stage", p)] = (node_order(nodes), roles, colls, peers, routed, slots)
    ids, roles, coll_slots, peer_slots, routed, slots = stage
    # the placements in the order the nodes first name them: the layout numbers new groups
    # as they are first asked for, as the writer does
    places = {role: layout.placement(role, rank) for role in roles}
    q = layout.expert_index(rank) if routed else 0  # nodes that differ by expert-parallel index
    shape = (p, q, tuple((role, place.kind, str(place.value)) for role, place in places.items()))
    template = cache.get(("template", shape))
    if template is None:
        template = cache[("template", shape)] = _template(
            nodes, (p, q), ids, places, coll_slots, routed, cache, layout
        )
    return cast("list[ETNode]", TemplatePeers(template, slots, _own_peers(wl, p, rank, peer_slots, cache)))


def _template(
    nodes, stage: tuple[int, int], ids: dict, places: dict, colls: list, routed: list, cache: dict, layout
):
    """The nodes of stage ``stage`` = (its number, the expert-parallel index) with the
    groups ``places``, sends and receives without peers: the stage's first nodes for that
    index (made once) with their collectives made anew."""
    p, q = stage
    base = cache.get(("base", p, q))
    if base is None and ("base", p) in cache:  # another expert-parallel index: its routed nodes differ
        base = cache[("base", p, q)] = list(cache[("base", p)])
        for idx in routed:
            base[idx] = _node_at(nodes, idx, ids, places, stage, cache, layout)
    elif base is None:
        base = cache[("base", p, q)] = cache[("base", p)] = [
            _node_at(nodes, i, ids, places, stage, cache, layout) for i in range(len(nodes))
        ]
    # templates of one stage and expert index whose groups differ only in name time alike
    timing = (
        p,
        q,
        tuple((r, x.kind, None if x.kind == "group" else str(x.value)) for r, x in places.items()),
    )
    first: tuple[GroupTemplate, dict] | None = cache.get(("timing", timing))
    names = None if first is None else _renames(first[1], places)
    template = GroupTemplate(base, None if first is None or names is None else first[0], names)
    cache.setdefault(("timing", timing), (template, places))
    by_role = cache.get(("collectives", p))
    if by_role is None:  # role -> positions of the stage's collectives of that role
        by_role = cache[("collectives", p)] = {}
        for idx in colls:
            by_role.setdefault(nodes[idx].role, []).append(idx)
    for role, positions in by_role.items():  # each role's nodes made once per group
        place = places[role]
        kind = ("role", p, q if routed else 0, role, place.kind)
        group = (*kind, str(place.value))
        made = cache.get(group)
        if made is None and place.kind == "group" and kind in cache:  # another group's, renamed
            made = _in_group(cache[kind], str(place.value))
        elif made is None:
            made = [_node_at(nodes, idx, ids, places, stage, cache, layout) for idx in positions]
            cache.setdefault(kind, made)
        cache[group] = made
        for idx, node in zip(positions, made):
            template[idx] = node
    return template


def _in_group(nodes: list[ETNode], pg_name: str) -> list[ETNode]:
    """Copies of ``nodes`` that name the group ``pg_name`` (a copy and one field set: a
    step of 1,024 ranks makes a hundred thousand of them)."""
    made = []
    for node in nodes:
        copy = node.copy()
        copy.pg_name = pg_name
        made.append(copy)
    return made


def _renames(first: dict, places: dict) -> dict[str, str] | None:
    """Each group the placements ``first`` of a template's roles name -> the one
    ``places`` names for the same role; None unless that is one to one (two roles of one
    group in one template, of two in the other: the template then times on its own)."""
    return renames(
        (str(place.value), str(places[role].value)) for role, place in first.items() if place.kind == "group"
    )


def _own_peers(wl, p: int, rank: int, peer_slots: list[int], cache: dict) -> RolePeers:
    """Rank ``rank``'s peers per send or receive of stage ``p``: each peer role's rank
    worked out once (:func:`~.llm_writer.peer_rank`)."""
    found = cache.get(("peers", p))
    if found is None:  # per send or receive its role's number and whether it sends; a node per role
        nodes = wl.stages[p]
        node_of = {nodes[i].role: nodes[i] for i in peer_slots}
        number = {role: k for k, role in enumerate(node_of)}
        role_of = array("q", [number[nodes[i].role] for i in peer_slots])
        sends = bytes(nodes[i].type == pb.COMM_SEND_NODE for i in peer_slots)
        found = cache[("peers", p)] = (list(node_of.values()), role_of, sends)
    roles, role_of, sends = found
    return RolePeers(rank, role_of, sends, tuple(peer_rank(wl.layout, n, rank) for n in roles))


def _node_at(
    nodes, idx: int, ids: dict[int, int], places: dict, stage: tuple[int, int], cache: dict, layout
) -> ETNode:
    """Node ``idx`` of a stage (``stage``: its number and the rank's expert-parallel
    index) with the groups ``places`` (made once per group): a send or receive without
    peers (:func:`_rank_nodes` gives each rank its own), with its communicator's stride
    and size in ``layout``."""
    n = nodes[idx]
    kind = n.type
    p, q = stage
    if kind == pb.COMP_NODE:  # most nodes: made once per stage (and expert-parallel index)
        duration_ns, fields = node_fields(n, q)
        return ETNode(
            ids[idx], n.name, kind, [ids[d] for d in n.deps], (), int(round(duration_ns / 1000)), **fields
        )
    if kind != pb.COMM_COLL_NODE:  # a send or receive: its communicator's attributes shared
        group = cache.get(("p2p", n.role))
        if group is None:
            group = cache[("p2p", n.role)] = p2p_group_attrs(layout, n.role)
        duration = int(round(n.duration_ns / 1000))
        deps = [ids[d] for d in n.deps]
        return ETNode(
            ids[idx], n.name, kind, deps, (), duration, comm_tag=n.tag, comm_size=n.size, attrs=group or None
        )
    # a collective is asked for again for each template of its group
    place = places.get(n.role)
    key: tuple = (p, idx) if place is None else (p, idx, place.kind, str(place.value))
    if n.by_ep is not None:
        key += (q,)
    node = cache.get(key)
    if node is None:
        duration_ns, fields = node_fields(n, q)
        attrs = {k: fields.pop(k) for k in ("send_bytes", "recv_bytes", COMM_STREAM, COMM_SMS) if k in fields}
        if attrs:
            fields["attrs"] = attrs
        if place is not None and place.kind == "dims":
            fields["involved_dim"] = tuple(bool(v) for v in place.value)
        elif place is not None and place.kind == "group":
            fields["pg_name"] = str(place.value)
        deps = [ids[d] for d in n.deps]
        node = cache[key] = ETNode(ids[idx], n.name, kind, deps, (), int(round(duration_ns / 1000)), **fields)
    return node
