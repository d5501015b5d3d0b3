"""A job's traces for a larger data-parallel degree, from those of a smaller one (``astra scale``).

The ranks are laid out as Megatron-LM numbers them (and ``astra gen llm``
writes them): rank ``t + T (c + C (d + D p))`` for tensor rank ``t`` of ``T``,
context rank ``c`` of ``C``, data-parallel rank ``d`` of ``D`` and pipeline
stage ``p`` of ``P``; expert parallelism (``E``) takes its ranks from blocks of
``E`` consecutive replicas. Going from ``D`` to ``D'`` data-parallel replicas,
new rank ``(t, c, d', p)`` runs the trace of old rank ``(t, c, d' mod D, p)`` with:

* its sends' and receives' peers moved to the same replica ``d'`` (a peer ``k``
  replicas away stays ``k`` away, modulo ``D'``), a pipeline neighbour's communicator
  (``comm_group_stride`` T x C x D) made the new job's pipeline;
* each collective's ranks rebuilt for the larger job and placed as the
  generator places them (:mod:`astra_core.workload.scale_groups`): a group within
  one replica is the same ranks of replica ``d'``, one over every replica spans
  all ``D'``, an expert-parallel one ``d'``'s block and an expert-data-parallel one
  the replicas holding ``d'``'s experts;
* an all-gather over every replica (each rank's shard of a whole) resized by
  ``D / D'``; every other size kept (an all-reduce's or reduce-scatter's input
  is the whole gradient either way);
* ``astra gen llm``'s metadata: ``dp``, ``npus``, the step's FLOPs and Megatron's
  default gradient bucket scaled, and the generated-for dimensions replaced by ``dims``.

Weak scaling: every rank keeps its micro-batches, so the global batch grows
by ``D' / D``. Refused, because their traces at ``D'`` hold what those at ``D``
lack: ZeRO 1-3 (the optimizer works on a ``1 / D`` shard), one replica (no
data-parallel communication to scale), ``E = D`` (no expert-gradient reduction),
and Megatron's default gradient bucket (``max(40M, 1M x D)`` elements) that
grows with ``D'`` while the traces fill one. ``tests/workload/test_scale.py``
checks that scaling ``astra gen llm``'s traces gives exactly the traces it
generates at the larger size.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from astra_core.errors import ConfigError
from astra_core.workload.chakra_types import (
    COMM_COLL,
    COMM_GROUP_STRIDE,
    COMM_RECV,
    COMM_SEND,
    CollectiveType,
)
from astra_core.workload.et_decode import ETNode, RankTrace
from astra_core.workload.generators.llm import megatron_bucket_bytes
from astra_core.workload.network_fit import GENERATED_DIMS_ATTR
from astra_core.workload.scale_groups import ALL, WITHIN, Placer

__all__ = ["LLM_METADATA", "Layout", "scale_dp"]

#: The GlobalMetadata attribute ``astra gen llm`` describes its step in (JSON).
LLM_METADATA = "astra_llm"
_ALL_GATHER = int(CollectiveType.ALL_GATHER)
_REDUCTIONS = (int(CollectiveType.ALL_REDUCE), int(CollectiveType.REDUCE_SCATTER))


@dataclass(frozen=True)
class Layout:
    """Megatron's rank order for ``tp x cp x dp x pp`` ranks, ``ep``-way expert parallel (module doc)."""

    tp: int
    cp: int
    dp: int
    pp: int
    ep: int = 1

    @property
    def npus(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    def coords(self, rank: int) -> tuple[int, int, int, int]:
        """``(t, c, d, p)`` of ``rank``."""
        t, rest = rank % self.tp, rank // self.tp
        c, rest = rest % self.cp, rest // self.cp
        return t, c, rest % self.dp, rest // self.dp

    def rank(self, t: int, c: int, d: int, p: int) -> int:
        return t + self.tp * (c + self.cp * (d + self.dp * p))


def _llm_info(metadata: Mapping) -> dict:
    llm = metadata.get(LLM_METADATA)
    return json.loads(llm) if isinstance(llm, str) else {}


def _check_layout(old: Layout, ranks: int, new_dp: int, info: Mapping) -> None:
    if old.npus != ranks:
        raise ConfigError(
            f"astra scale: tp {old.tp} x cp {old.cp} x dp {old.dp} x pp {old.pp} = {old.npus} ranks, "
            f"but the workload has {ranks}"
        )
    if new_dp < old.dp:
        raise ConfigError(f"astra scale: --dp-to {new_dp} is below the traces' data-parallel size {old.dp}")
    if info.get("zero"):
        raise ConfigError(
            "astra scale: the traces use ZeRO (their optimizer works on a 1/dp shard); "
            "generate them at the larger size instead"
        )
    if old.dp == 1:
        raise ConfigError(
            "astra scale: the traces have one data-parallel replica, so no data-parallel "
            "communication to scale; generate them with dp 2 or more"
        )
    if old.ep > 1 and old.ep == old.dp:
        raise ConfigError(
            f"astra scale: the traces' expert-parallel size ep {old.ep} equals their dp, so they hold no "
            f"expert-gradient reduction; generate them at dp {new_dp} instead"
        )
    if new_dp % old.ep:
        raise ConfigError(
            f"--dp-to: must be a multiple of the traces' expert-parallel size ep {old.ep}, got {new_dp}"
        )


def _new_bucket(info: Mapping, old: Layout, new_dp: int) -> int | None:
    """The gradient bucket [bytes] ``astra gen llm`` uses at ``new_dp`` where it differs from the
    traces' (Megatron's default, :func:`~astra_core.workload.generators.llm.megatron_bucket_bytes`),
    else None. Raises ConfigError for traces of ``astra gen llm`` that do not record their bucket."""
    if not info or info.get("ddp", "megatron") != "megatron":
        return None
    if megatron_bucket_bytes(new_dp, 1) == megatron_bucket_bytes(old.dp, 1):
        return None
    bucket, grad_bytes = info.get("bucket_bytes"), info.get("grad_bytes")
    if not isinstance(bucket, int) or not isinstance(grad_bytes, int):
        raise ConfigError(
            "astra scale: the traces' metadata does not record their gradient bucket, and Megatron's "
            f"default one grows past dp 40; generate them at dp {new_dp} instead"
        )
    if bucket != megatron_bucket_bytes(old.dp, grad_bytes):
        return None  # a bucket given with --bucket-mb stays
    return megatron_bucket_bytes(new_dp, grad_bytes)


class _Scaler:
    """Old ranks' nodes for the new ranks (module doc); :attr:`placer` numbers the new groups."""

    def __init__(self, old: Layout, new: Layout, placer: Placer, bucket: tuple[int, int] | None):
        self.old, self.new, self.placer = old, new, placer
        self.bucket = bucket  # (old, new) gradient bucket [bytes] where Megatron's default grows

    def nodes(self, nodes: Sequence[ETNode], old_rank: int, rank: int) -> list[ETNode]:
        """Old rank ``old_rank``'s nodes for new rank ``rank`` (module doc)."""
        old, new = self.old, self.new
        d_old, d_new = old.coords(old_rank)[2], new.coords(rank)[2]
        out = []
        for node in nodes:
            changes: dict = {}
            if node.type in (COMM_SEND, COMM_RECV):
                changes["comm_src"] = _peer(old, new, node.comm_src, d_old, d_new)
                changes["comm_dst"] = _peer(old, new, node.comm_dst, d_old, d_new)
                if node.attrs.get(COMM_GROUP_STRIDE) == old.tp * old.cp * old.dp:  # a pipeline's
                    changes["attrs"] = {**node.attrs, COMM_GROUP_STRIDE: new.tp * new.cp * new.dp}
            elif node.type == COMM_COLL:
                placed = self.placer.place(node, old_rank, rank)
                if placed is not None:
                    changes.update(placed.changes)
                    if node.comm_type == _ALL_GATHER and placed.kind == ALL:
                        changes["comm_size"] = node.comm_size * old.dp // new.dp
                    if placed.kind != WITHIN:
                        self._check_bucket(node, old_rank)
            out.append(node.replaced(**changes) if changes else node)
        return out

    def _check_bucket(self, node: ETNode, old_rank: int) -> None:
        """Refuse a full gradient bucket of the default size when that size grows (module doc)."""
        if self.bucket is None or node.comm_type not in _REDUCTIONS:
            return
        old_bucket, new_bucket = self.bucket
        if node.comm_size == old_bucket:
            raise ConfigError(
                f"astra scale: rank {old_rank}'s node {node.id} ({node.name}) reduces a full gradient bucket "
                f"of Megatron's default max(40M, 1M x dp) elements: {old_bucket} bytes at dp {self.old.dp}, "
                f"{new_bucket} at dp {self.new.dp}; generate the traces at dp {self.new.dp}, "
                "or with --bucket-mb"
            )


def _peer(old: Layout, new: Layout, peer: int | None, here_old: int, here_new: int) -> int | None:
    if peer is None:
        return None
    t, c, d, p = old.coords(peer)
    offset = d - here_old
    return new.rank(t, c, (here_new + offset) % new.dp, p)


def _metadata(
    metadata: Mapping, old: Layout, new: Layout, dims: Sequence[int] | None, bucket: int | None
) -> dict:
    out = dict(metadata)
    llm = out.get(LLM_METADATA)
    if isinstance(llm, str):
        info = json.loads(llm)
        factor = new.dp / old.dp
        info.update(dp=new.dp, npus=new.npus)
        if bucket is not None:
            info["bucket_bytes"] = bucket
        for key in ("model_flops", "hardware_flops"):
            if key in info:
                info[key] = info[key] * factor
        out[LLM_METADATA] = json.dumps(info)
    if GENERATED_DIMS_ATTR in out:
        if dims is None:
            raise ConfigError(
                "astra scale: the traces were generated for network dimensions "
                f"{out[GENERATED_DIMS_ATTR]}; give --dims for the larger job"
            )
        if math.prod(dims) != new.npus:
            raise ConfigError(f"astra scale: --dims {dims} must multiply to the {new.npus} ranks")
        out[GENERATED_DIMS_ATTR] = list(dims)
    return out


def scale_dp(
    traces: Sequence[RankTrace],
    groups: Mapping[str, Sequence[int]],
    layout: Layout,
    new_dp: int,
    dims: Sequence[int] | None = None,
) -> tuple[list[RankTrace], dict[str, list[int]]]:
    """``traces`` (one per rank of ``layout``) and their comm ``groups`` for ``new_dp``
    data-parallel replicas (module doc). Raises ConfigError for a layout that does not
    match the traces, a smaller ``new_dp``, the traces the module doc says are refused,
    a group over other replicas, or generated-for dimensions without ``dims``."""
    metadata = traces[0].metadata if traces else {}
    info = _llm_info(metadata)
    _check_layout(layout, len(traces), new_dp, info)
    new = Layout(layout.tp, layout.cp, new_dp, layout.pp, layout.ep)
    bucket = _new_bucket(info, layout, new_dp)
    old_dims = metadata.get(GENERATED_DIMS_ATTR)
    placer = Placer(layout, new, groups, list(old_dims) if old_dims else None, dims)
    scaler = _Scaler(layout, new, placer, None if bucket is None else (info["bucket_bytes"], bucket))
    out = []
    metadata_of: dict[int, dict] = {}  # ranks that share their metadata share the new one
    for rank in range(new.npus):
        t, c, d, p = new.coords(rank)
        old_rank = layout.rank(t, c, d % layout.dp, p)
        source = traces[old_rank]
        nodes = scaler.nodes(list(source.nodes), old_rank, rank)
        key = id(source.metadata)
        if key not in metadata_of:
            metadata_of[key] = _metadata(source.metadata, layout, new, dims, bucket)
        out.append(RankTrace(source.path, nodes, source.version, metadata_of[key], rank))
    placer.add_ring_groups()
    return out, {gid: list(members) for members, gid in placer.ids.items()}
