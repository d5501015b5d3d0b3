"""Write a generated LLM step (:class:`~astra_core.workload.generators.llm.LLMWorkload`) as Chakra ET.

Ranks of one pipeline stage share their node list; they differ only in
their collectives' group (``pg_name`` or ``involved_dim``, from the
:class:`~astra_core.workload.generators.layout.Layout`) and their send/receive
peers, so every node is serialized once per distinct value and the framed
bytes are joined per rank. Gradient reductions get the highest node ids of
their rank (issued last among ready nodes, see ``llm_stage.StageProgram.grad_coll``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from copy import deepcopy
from pathlib import Path
from typing import Any

from astra_core.outputs import write_bytes
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra_types import COMM_GROUP_SIZE, COMM_GROUP_STRIDE, COMM_SMS, COMM_STREAM
from astra_core.workload.network_fit import GENERATED_DIMS_ATTR
from astra_core.workload.trace_set import staged_trace_set
from astra_core.workload.trace_size import TraceSetSize, check_trace_set
from astra_core.workload.writer import CHAKRA_VERSION, encode_varint, make_attr, make_node

__all__ = ["llm_metadata", "node_order", "peer_rank", "write_llm"]


def node_order(nodes) -> dict[int, int]:
    """Node ids of a stage's nodes: program order, gradient reductions (``late``) last."""
    order = [i for i, n in enumerate(nodes) if not n.late] + [i for i, n in enumerate(nodes) if n.late]
    return {idx: new for new, idx in enumerate(order)}


def peer_rank(layout, n, rank: int) -> int:
    """The peer of ``rank``'s send or receive ``n``. Pipeline sends and receives go to the
    neighbouring stage's rank; interleaved 1F1B wraps from the last stage to the first
    (stage is the outermost coordinate of a rank). Context- and tensor-parallel ones go
    round their rings."""
    if n.role in ("cp_next", "cp_prev"):  # round the context-parallel ring
        return layout.cp_peer(rank, 1 if n.role == "cp_next" else -1)
    if n.role in ("tp_next", "tp_prev"):  # round the tensor-parallel ring
        return layout.tp_peer(rank, 1 if n.role == "tp_next" else -1)
    stride = layout.tp * layout.cp * layout.dp  # one pipeline stage
    return (rank + (stride if n.role == "next" else -stride)) % layout.npus


def p2p_group_attrs(layout, role: str) -> dict[str, Any]:
    """The attributes that name the communicator of a send or receive of peer role
    ``role`` (:meth:`~.layout.Layout.p2p_group`); none for every NPU."""
    group = layout.p2p_group(role)
    return {} if group is None else {COMM_GROUP_STRIDE: group[0], COMM_GROUP_SIZE: group[1]}


def node_fields(n, q: int) -> tuple[float, dict[str, Any]]:
    """(duration in ns, attributes but the group's) of compute node or collective ``n``
    (:class:`~.llm_stage.StageNode`) on a rank of expert-parallel index ``q``: a node
    that differs by index (unbalanced routing) takes index ``q``'s figures, an
    all-to-all its bytes to and from each member (``send_bytes`` / ``recv_bytes``), a
    collective on a GPU stream of its own its ``comm_stream``, one whose kernels hold SMs
    of their own (DeepEP, HybridEP, userbuffers) their number (``comm_sms``; 0 for SMs the
    compute leaves free, :data:`~.llm_stage.RESERVED_SMS`)."""
    if n.type == pb.COMP_NODE:
        duration, flops, nbytes = n.by_ep[q] if n.by_ep is not None else (n.duration_ns, n.flops, n.nbytes)
        return duration, {"num_ops": int(flops), "tensor_size": int(nbytes)}
    attrs: dict[str, Any] = {"comm_type": n.comm_type, "comm_size": n.size}
    if n.stream:
        attrs[COMM_STREAM] = n.stream
    if n.sms:
        attrs[COMM_SMS] = max(n.sms, 0)
    if n.by_ep is not None:
        send, recv = n.by_ep[q]
        attrs.update(comm_size=sum(send), send_bytes=list(send), recv_bytes=list(recv))
    return n.duration_ns, attrs


def _render(wl, rank: int, cache: dict) -> bytes:
    """The framed Node messages of ``rank``; rank-independent nodes are serialized once."""
    layout = wl.layout
    p = layout.coords(rank)[2]
    ids = cache.get(("ids", p))
    if ids is None:
        ids = cache[("ids", p)] = node_order(wl.stages[p])
    parts = []
    places: dict = {}  # role -> this rank's placement
    place: Any = None  # a collective's placement: set below before its attributes use it
    q = layout.expert_index(rank)
    for idx, n in enumerate(wl.stages[p]):
        if n.type == pb.COMP_NODE:
            key: tuple = (p, idx) if n.by_ep is None else (p, idx, q)
        elif n.type == pb.COMM_COLL_NODE:
            place = places.get(n.role)
            if place is None:
                place = places[n.role] = layout.placement(n.role, rank)
            key = (p, idx, place.kind, place.value) + (() if n.by_ep is None else (q,))
        else:
            # a send or receive: its node without peers once per stage, each peer attribute
            # once per rank (a serialized message is the concatenation of its fields)
            peer = peer_rank(layout, n, rank)
            src, dst = (rank, peer) if n.type == pb.COMM_SEND_NODE else (peer, rank)
            payload = cache.get((p, idx, "without peers"))
            if payload is None:
                payload = cache[(p, idx, "without peers")] = make_node(
                    ids[idx],
                    n.name,
                    n.type,
                    data_deps=[ids[d] for d in n.deps],
                    duration_micros=int(round(n.duration_ns / 1000)),
                    comm_tag=n.tag,
                    comm_size=n.size,
                    **p2p_group_attrs(layout, n.role),
                ).SerializeToString()
            payload += _peer_attr(cache, "comm_src", src) + _peer_attr(cache, "comm_dst", dst)
            parts.append(encode_varint(len(payload)) + payload)
            continue
        data = cache.get(key)
        if data is None:
            duration_ns, attrs = node_fields(n, q)
            if n.type == pb.COMM_COLL_NODE:
                if place.kind == "dims":
                    attrs["involved_dim"] = list(place.value)
                elif place.kind == "group":
                    attrs["pg_name"] = place.value
            msg = make_node(
                ids[idx],
                n.name,
                n.type,
                data_deps=[ids[d] for d in n.deps],
                duration_micros=int(round(duration_ns / 1000)),
                **attrs,
            )
            payload = msg.SerializeToString()
            data = cache[key] = encode_varint(len(payload)) + payload
        parts.append(data)
    return b"".join(parts)


def _peer_attr(cache: dict, name: str, rank: int) -> bytes:
    """The serialized ``attr`` field ``name = rank`` of a Node (cached)."""
    data = cache.get((name, rank))
    if data is None:
        data = cache[(name, rank)] = pb.Node(attr=[make_attr(name, rank)]).SerializeToString()
    return data


def _size(wl, head_bytes: int) -> TraceSetSize:
    """The trace set's size: each pipeline stage's first rank rendered, times the ranks of
    a stage (they differ only in group ids and peers). Rendered on a copy of the layout,
    so that comm-group ids are still numbered in rank order when the files are written."""
    stride = wl.layout.tp * wl.layout.cp * wl.layout.dp  # ranks of one pipeline stage
    copy = dataclasses.replace(wl, layout=deepcopy(wl.layout))
    cache: dict = {}
    nbytes = sum(head_bytes + len(_render(copy, p * stride, cache)) for p in range(wl.config.pp))
    return TraceSetSize(
        wl.layout.npus, stride * sum(map(len, wl.stages)), max(map(len, wl.stages)), stride * nbytes
    )


def llm_metadata(wl) -> list[tuple[str, Any]]:
    """The trace set's GlobalMetadata attributes: ``astra_llm`` (the plan and its FLOPs as
    JSON, which ``astra run`` reports MFU from) and, with ``dims``, the network dimensions
    the ``involved_dim`` lists mean."""
    cfg = wl.config
    summary = {
        "generator": "astra gen llm",
        "model": cfg.model.name,
        "gpu": cfg.gpu.name,
        "dp": cfg.dp,
        "tp": cfg.tp,
        "pp": cfg.pp,
        "ep": cfg.ep,
        "cp": cfg.cp,
        "cp_comm_type": cfg.cp_comm_type,
        "tp_comm_overlap": cfg.tp_comm_overlap,
        "microbatches": wl.microbatches,
        "micro_batch": cfg.micro_batch,
        "schedule": cfg.schedule,
        "zero": cfg.zero,
        "sequence_parallel": cfg.sequence_parallel,
        "seq_len": cfg.sequence_length,
        "recompute": cfg.recompute,
        "virtual_stages": cfg.virtual_stages,
        "first_stage_layers": cfg.first_stage_layers,
        "last_stage_layers": cfg.last_stage_layers,
        "account_for_embedding": cfg.account_for_embedding,
        "account_for_loss": cfg.account_for_loss,
        "pipeline_layout": cfg.pipeline_layout,
        "attention": cfg.attention,
        "precision": cfg.precision,
        "fp8_recipe": cfg.fp8_recipe,
        "fp8_attention": cfg.fp8_attention,
        "ddp": cfg.ddp,
        "moe_routing": cfg.moe_routing,
        "moe_routing_seed": cfg.moe_routing_seed,
        "moe_capacity_factor": cfg.moe_capacity_factor,
        "moe_pad_to_capacity": cfg.moe_pad_to_capacity,
        "moe_token_dispatcher": cfg.moe_token_dispatcher,
        "moe_flex_dispatcher_backend": cfg.moe_flex_dispatcher_backend
        if cfg.moe_token_dispatcher == "flex"
        else None,
        "moe_grouped_gemm": cfg.moe_grouped_gemm if cfg.model.experts else None,
        "moe_a2a_overlap": cfg.moe_a2a_overlap,
        "moe_flex_sms": cfg.moe_flex_sms,
        "recompute_modules": list(cfg.recompute_modules) if cfg.recompute == "selective" else [],
        "mtp_layers": cfg.mtp_layers,
        "etp": cfg.etp if cfg.etp is not None else cfg.tp,
        "grad_bytes": cfg.grad_bytes,
        "bucket_bytes": cfg.bucket_bytes,
        "npus": wl.layout.npus,
        "model_flops": sum(wl.model_flops.values()),
        "hardware_flops": sum(wl.flops.values()),
        "peak_tflops": cfg.gpu.dense_tflops(cfg.precision),
        "memory_bytes": [round(m.peak_bytes) for m in wl.memory],
        "hbm_bytes": round(cfg.gpu.hbm_bytes),
    }
    attrs: list[tuple[str, Any]] = [("astra_llm", json.dumps(summary))]
    if cfg.dims:  # involved_dim lists only mean this on these dimensions (network_fit checks)
        attrs.append((GENERATED_DIMS_ATTR, list(cfg.dims)))
    return attrs


def write_llm(
    wl,
    prefix: str | os.PathLike,
    comm_groups_path: str | os.PathLike | None = None,
    on_written: Callable[[int], None] | None = None,
) -> tuple[list[Path], Path | None]:
    """Write ``<prefix>.<rank>.et`` for all D x T x P ranks and the comm-group JSON when needed;
    ``on_written(rank)`` after each rank's file (a progress display).

    Returns (trace paths, comm-group path or None). Raises ConfigError when the
    set passes astra's limits (:func:`~astra_core.workload.trace_size.check_trace_set`,
    estimated from one rendered rank per pipeline stage, before anything is
    written) or the output cannot be written. All files or none are written
    (:func:`~astra_core.workload.trace_set.staged_trace_set`).
    """
    prefix = os.fspath(prefix)
    meta = pb.GlobalMetadata(version=CHAKRA_VERSION, attr=[make_attr(k, v) for k, v in llm_metadata(wl)])
    head = meta.SerializeToString()
    head = encode_varint(len(head)) + head
    check_trace_set(f"gen llm: {wl.layout.npus:,} NPUs", _size(wl, len(head)), prefix)
    cache: dict = {}
    with staged_trace_set(prefix) as stage:
        for rank in range(wl.layout.npus):
            write_bytes(stage.trace(rank), head + _render(wl, rank, cache))
            if on_written is not None:
                on_written(rank)
        wl.layout.add_ring_groups()
        groups_path = Path(comm_groups_path or f"{prefix}.comm_groups.json") if wl.layout.groups else None
        if groups_path is not None:
            stage.later(groups_path, (json.dumps(wl.layout.groups) + "\n").encode())
    return [Path(f"{prefix}.{rank}.et") for rank in range(wl.layout.npus)], groups_path
