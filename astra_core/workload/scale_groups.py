"""Where the collectives of a job scaled to more data-parallel replicas run (``astra scale``).

A collective of old rank ``(t, c, d, p)`` names its ranks by a comm group
(``pg_name``), by network dimensions (``involved_dim``, decoded with the
dimensions the traces were generated for) or by nothing (every rank). Its
replicas, seen from ``d``, are one of:

* ``d`` alone (tensor, context and embedding groups): replica ``d'`` alone;
* every replica (data-parallel gradients, the amax group): every new replica;
* ``d``'s block of ``ep`` consecutive replicas (Megatron-core's expert-parallel
  group): ``d'``'s block;
* the replicas ``x`` with ``x mod ep = d mod ep`` (expert data parallel: the
  ranks holding the same experts): those of ``d'`` among the new replicas.

Any other set is refused. The new ranks are then placed as ``astra gen llm``
places a group (:meth:`astra_core.workload.generators.layout.Layout.placement`):
every rank of the job needs no attribute; a group that is exactly a range of
the new network dimensions gets ``involved_dim`` (the embedding group, first and
last pipeline stage, never does); any other group gets a comm-group id, numbered
as first asked for over the ranks in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import product

from astra_core.errors import ConfigError
from astra_core.workload.et_decode import ETNode

__all__ = ["WITHIN", "ALL", "Placed", "Placer", "dims_members"]

#: Replica kinds of a group (module doc).
WITHIN, ALL, BLOCK, SAME_EXPERTS = "within", "all", "block", "same-experts"


def dims_members(dims: Sequence[int], involved: Sequence[bool], rank: int) -> tuple[int, ...]:
    """The ranks that differ from ``rank`` only in the ``involved`` network dimensions of
    sizes ``dims`` (dimension 0 varies fastest), sorted."""
    strides, digits, stride = [], [], 1
    for size in dims:
        strides.append(stride)
        digits.append(rank // stride % size)
        stride *= size
    base = rank - sum(digits[k] * strides[k] for k, on in enumerate(involved) if on)
    axes = [range(0, dims[k] * strides[k], strides[k]) for k, on in enumerate(involved) if on]
    return tuple(sorted(base + sum(offsets) for offsets in product(*axes)))


def _dims_mask(dims: Sequence[int], members: tuple[int, ...]) -> tuple[bool, ...] | None:
    """The range of network dimensions that holds exactly ``members`` (sorted), or None."""
    n = len(dims)
    for k1 in range(n):
        for k2 in range(k1, n):
            mask = tuple(k1 <= k <= k2 for k in range(n))
            if dims_members(dims, mask, members[0]) == members:
                return mask
    return None


@dataclass(frozen=True)
class Placed:
    """A scaled collective: its new attributes and its replica kind (module doc)."""

    changes: Mapping[str, object]
    kind: str


class Placer:
    """The collectives of a scaled job, placed as ``astra gen llm`` places them (module doc).

    ``old`` and ``new`` are :class:`astra_core.workload.scale.Layout` s (ranks in
    Megatron's order, ``ep`` included), ``groups`` the old comm groups, ``old_dims`` the
    network dimensions the traces were generated for (None: their ``involved_dim`` lists
    are kept as they are) and ``new_dims`` those of the new job (None: no ``involved_dim``)."""

    def __init__(self, old, new, groups: Mapping[str, Sequence[int]], old_dims, new_dims):
        self.old, self.new, self.groups = old, new, groups
        self.old_dims, self.new_dims = old_dims, new_dims
        self.ids: dict[tuple[int, ...], str] = {}
        self._shapes: dict[tuple, tuple[str, list[tuple[int, int, int]]]] = {}
        self._cache: dict[tuple, Placed] = {}
        self._masks: dict[tuple[int, ...], tuple[bool, ...] | None] = {}

    def place(self, node: ETNode, old_rank: int, new_rank: int) -> Placed | None:
        """Where new rank ``new_rank`` runs collective ``node`` of ``old_rank``; None keeps it as
        it is (``involved_dim`` of traces that do not record their dimensions). Raises
        ConfigError for a comm group the groups lack or replicas it cannot scale."""
        if node.pg_name:
            key: tuple = ("pg", node.pg_name)
        elif node.involved_dim is not None:
            if self.old_dims is None:
                return None
            key = ("dims", tuple(node.involved_dim))
        else:
            key = ("all",)
        shape = self._shapes.get((key, old_rank))
        if shape is None:
            shape = self._shapes[(key, old_rank)] = self._shape(key, old_rank)
        kind, base = shape
        d, e = self.new.coords(new_rank)[2], self.old.ep
        # the new replicas depend on d' only through this (a group is worked out once)
        where = {WITHIN: d, ALL: -1, BLOCK: d // e, SAME_EXPERTS: d % e}[kind]
        placed = self._cache.get((key, old_rank, where))
        if placed is None:
            reps = {
                WITHIN: [d],
                ALL: range(self.new.dp),
                BLOCK: range(d // e * e, d // e * e + e),
                SAME_EXPERTS: range(d % e, self.new.dp, e),
            }[kind]
            ranks = tuple(sorted(self.new.rank(t, c, x, p) for t, c, p in base for x in reps))
            placed = self._cache[(key, old_rank, where)] = Placed(self._attrs(ranks), kind)
        return placed

    def _shape(self, key: tuple, rank: int) -> tuple[str, list[tuple[int, int, int]]]:
        """The replica kind of old ``rank``'s group ``key`` and its ``(t, c, p)`` (module doc).
        Raises ConfigError for a comm group the groups lack or replicas it cannot scale."""
        if key[0] == "pg":
            members: Sequence[int] | None = self.groups.get(key[1])
            if members is None:
                raise ConfigError(
                    f"astra scale: a collective uses comm group {key[1]!r}, which the comm groups lack"
                )
        elif key[0] == "dims":
            members = dims_members(self.old_dims, key[1], rank)
        else:
            members = range(self.old.npus)
        old, e = self.old, self.old.ep
        coords = [old.coords(m) for m in members]
        base = sorted({(t, c, p) for t, c, _, p in coords})
        reps = sorted({d for _, _, d, _ in coords})
        d = old.coords(rank)[2]
        if len(reps) == 1:
            kind = WITHIN
        elif len(reps) == old.dp:
            kind = ALL
        elif e > 1 and reps == list(range(d // e * e, d // e * e + e)):
            kind = BLOCK
        elif e > 1 and reps == list(range(d % e, old.dp, e)):
            kind = SAME_EXPERTS
        else:
            kind = ""
        if not kind or len(members) != len(base) * len(reps):
            what = f"comm group {key[1]}" if key[0] == "pg" else f"the group of involved_dim {key[1]}"
            raise ConfigError(
                f"astra scale: {what} of rank {rank} spans {len(reps)} of the {old.dp} data-parallel "
                "replicas; only groups within one replica, over all of them, over an expert-parallel "
                "block or over the replicas holding the same experts can be scaled"
            )
        return kind, base

    def add_ring_groups(self) -> None:
        """Number the new job's context-parallel rings as groups after its collectives' groups,
        as ``astra gen llm`` does (:meth:`~astra_core.workload.generators.layout.Layout.add_ring_groups`)."""
        new = self.new
        if new.cp > 1:
            for rank in range(new.npus):
                t, _, d, p = new.coords(rank)
                self._attrs(tuple(new.rank(t, c, d, p) for c in range(new.cp)))

    def _attrs(self, members: tuple[int, ...]) -> dict[str, object]:
        """``pg_name`` and ``involved_dim`` of a collective over ``members`` (module doc)."""
        embedding = len({self.new.coords(m)[3] for m in members}) > 1
        if len(members) == self.new.npus and not embedding:
            return {"pg_name": None, "involved_dim": None}
        if self.new_dims and not embedding:
            if members not in self._masks:
                self._masks[members] = _dims_mask(self.new_dims, members)
            mask = self._masks[members]
            if mask is not None:
                return {"pg_name": None, "involved_dim": mask}
        if members not in self.ids:
            self.ids[members] = str(len(self.ids) + 1)
        return {"pg_name": self.ids[members], "involved_dim": None}
