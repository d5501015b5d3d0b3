"""A job's traces for a larger data-parallel degree, from those of a smaller one (``astra scale``).

The ranks are laid out as Megatron-LM numbers them (and ``astra gen llm``
writes them): rank ``t + T (c + C (d + D p))`` for tensor rank ``t`` of ``T``,
context rank ``c`` of ``C``, data-parallel rank ``d`` of ``D`` and pipeline
stage ``p`` of ``P``. Going from ``D`` to ``D'`` data-parallel replicas, new rank
``(t, c, d', p)`` runs the trace of old rank ``(t, c, d' mod D, p)`` with:

* its sends' and receives' peers moved to the same replica ``d'`` (a peer ``k``
  replicas away stays ``k`` away, modulo ``D'``);
* each communicator group (comm group) rebuilt: a group within one replica is
  the same ranks of replica ``d'``; a group over every replica (data-parallel
  gradients, the embedding group) spans all ``D'``; groups are numbered as the
  generator numbers them, first seen over the ranks in order;
* a data-parallel all-gather's size (each rank's shard of a whole) times
  ``D / D'``; every other size kept (an all-reduce's or reduce-scatter's input
  is the whole gradient either way);
* ``astra gen llm``'s metadata: ``dp``, ``npus`` and the step's FLOPs scaled, and
  the generated-for dimensions replaced by ``dims``.

Weak scaling: every rank keeps its micro-batches, so the global batch grows
by ``D' / D``. A trace made with ZeRO 1-3 (its optimizer works on a ``1 / D``
shard) is refused, and so is a group over only some of the replicas: neither
has one right answer at another ``D``. ``tests/workload/test_scale.py`` checks
that scaling ``astra gen llm``'s traces gives exactly the traces it generates at
the larger size.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from astra_core.errors import ConfigError
from astra_core.workload.chakra_types import COMM_COLL, COMM_RECV, COMM_SEND
from astra_core.workload.et_decode import ETNode, RankTrace
from astra_core.workload.network_fit import GENERATED_DIMS_ATTR

__all__ = ["LLM_METADATA", "Layout", "scale_dp"]

#: The GlobalMetadata attribute ``astra gen llm`` describes its step in (JSON).
LLM_METADATA = "astra_llm"
_ALL_GATHER = 2


@dataclass(frozen=True)
class Layout:
    """Megatron's rank order for ``tp x cp x dp x pp`` ranks (module doc)."""

    tp: int
    cp: int
    dp: int
    pp: int

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


def _check_layout(old: Layout, ranks: int, new_dp: int, metadata: Mapping) -> None:
    if old.npus != ranks:
        raise ConfigError(
            f"astra scale: tp {old.tp} x cp {old.cp} x dp {old.dp} x pp {old.pp} = {old.npus} ranks, "
            f"but the workload has {ranks}"
        )
    if new_dp < old.dp:
        raise ConfigError(f"astra scale: --dp-to {new_dp} is below the traces' data-parallel size {old.dp}")
    llm = metadata.get(LLM_METADATA)
    if isinstance(llm, str) and json.loads(llm).get("zero"):
        raise ConfigError(
            "astra scale: the traces use ZeRO (their optimizer works on a 1/dp shard); "
            "generate them at the larger size instead"
        )


class _Groups:
    """The new communicator groups, numbered as first seen (the generator's order)."""

    def __init__(self, old: Mapping[str, Sequence[int]], old_layout: Layout, new_layout: Layout):
        self.old, self.old_layout, self.new_layout = old, old_layout, new_layout
        self.ids: dict[tuple[int, ...], str] = {}
        self._spans: dict[str, bool] = {}

    def spans_replicas(self, gid: str) -> bool:
        """Whether old group ``gid`` spans every replica (False: one replica)."""
        known = self._spans.get(gid)
        if known is not None:
            return known
        reps = {self.old_layout.coords(m)[2] for m in self.old[gid]}
        if len(reps) not in (1, self.old_layout.dp):
            raise ConfigError(
                f"astra scale: comm group {gid} spans {len(reps)} of the {self.old_layout.dp} data-parallel "
                "replicas; only groups within one replica or over all of them can be scaled"
            )
        self._spans[gid] = len(reps) > 1
        return self._spans[gid]

    def new_id(self, gid: str, replica: int) -> str:
        """The new group of old group ``gid`` as seen from new replica ``replica``."""
        members = self.old.get(gid)
        if members is None:
            raise ConfigError(
                f"astra scale: a collective uses comm group {gid!r}, which the comm groups lack"
            )
        old, new = self.old_layout, self.new_layout
        if self.spans_replicas(gid):
            base = {(t, c, p) for t, c, _, p in map(old.coords, members)}
            ranks = sorted(new.rank(t, c, d, p) for t, c, p in base for d in range(new.dp))
        else:
            ranks = sorted(new.rank(t, c, replica, p) for t, c, _, p in map(old.coords, members))
        key = tuple(ranks)
        if key not in self.ids:
            self.ids[key] = str(len(self.ids) + 1)
        return self.ids[key]


def _peer(old: Layout, new: Layout, peer: int | None, here_old: int, here_new: int) -> int | None:
    if peer is None:
        return None
    t, c, d, p = old.coords(peer)
    offset = d - here_old
    return new.rank(t, c, (here_new + offset) % new.dp, p)


def _scaled_nodes(
    nodes: Sequence[ETNode], old: Layout, new: Layout, rank: int, groups: _Groups
) -> list[ETNode]:
    """Old rank ``rank``'s nodes for the new rank of replica ``d'`` (module doc)."""
    t, c, d_new, p = new.coords(rank)
    d_old = d_new % old.dp
    out = []
    for node in nodes:
        changes: dict = {}
        if node.type in (COMM_SEND, COMM_RECV):
            changes["comm_src"] = _peer(old, new, node.comm_src, d_old, d_new)
            changes["comm_dst"] = _peer(old, new, node.comm_dst, d_old, d_new)
        elif node.type == COMM_COLL and node.pg_name:
            changes["pg_name"] = groups.new_id(node.pg_name, d_new)
            if node.comm_type == _ALL_GATHER and groups.spans_replicas(node.pg_name):
                changes["comm_size"] = node.comm_size * old.dp // new.dp
        out.append(node.replaced(**changes) if changes else node)
    return out


def _metadata(metadata: Mapping, old: Layout, new: Layout, dims: Sequence[int] | None) -> dict:
    out = dict(metadata)
    llm = out.get(LLM_METADATA)
    if isinstance(llm, str):
        info = json.loads(llm)
        factor = new.dp / old.dp
        info.update(dp=new.dp, npus=new.npus)
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
    match the traces, a smaller ``new_dp``, ZeRO traces, a group over some replicas
    only, or generated-for dimensions without ``dims``."""
    metadata = traces[0].metadata if traces else {}
    _check_layout(layout, len(traces), new_dp, metadata)
    new = Layout(layout.tp, layout.cp, new_dp, layout.pp)
    numbering = _Groups(groups, layout, new)
    out = []
    metadata_of: dict[int, dict] = {}  # ranks that share their metadata share the new one
    for rank in range(new.npus):
        t, c, d, p = new.coords(rank)
        source = traces[layout.rank(t, c, d % layout.dp, p)]
        nodes = _scaled_nodes(list(source.nodes), layout, new, rank, numbering)
        key = id(source.metadata)
        if key not in metadata_of:
            metadata_of[key] = _metadata(source.metadata, layout, new, dims)
        meta = metadata_of[key]
        out.append(RankTrace(source.path, nodes, source.version, meta, rank))
    return out, {gid: list(members) for members, gid in numbering.ids.items()}
