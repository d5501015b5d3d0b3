"""Rank layout and communication groups of Megatron-style 5-D parallelism.

Ranks are numbered tensor-parallel first, then context-parallel, then
data-parallel, then pipeline (Megatron-LM's default order, ``tp-cp-ep-dp-pp``)::

    rank = t + T * (c + C * (d + D * p))    t < T, c < C (context), d < D, p < P

Expert parallelism (E) splits each data-parallel group into E-rank blocks
(Megatron-Core: expert-parallel ranks are taken from the data-parallel ones,
so the NPU count stays D x T x P x C). Groups of a rank:

* ``tp``: the T ranks of its tensor-parallel group (consecutive);
* ``cp``: the C ranks of its context-parallel ring (stride T);
* ``dp``: the ranks that reduce its gradients: the D x C ranks with its t and
  p (Megatron's data-parallel group with context parallelism; stride T);
* ``ep``: the E ranks of its block of the data-parallel group (stride T);
* ``edp``: expert data parallel, the D/E ranks holding the same experts (stride T*E);
* ``tp_ep``: the T x E ranks of its tensor-parallel groups over its ``ep`` block (the
  all-gather token dispatcher's);

With expert-tensor parallelism 1 (``etp``; Megatron-core's MoE parallel folding,
``--expert-tensor-parallel-size 1``: the experts' rank generator orders ranks
``tp-ep-dp`` with tp = 1) the expert groups are carved from the stage's T x C x D
ranks in rank order instead: ``ep`` is a block of E consecutive ranks, ``edp`` the
T C D / E ranks at the same place in each block (stride E), ``tp_ep`` the ``ep``
block;
* ``emb``: first and last pipeline stage with its t, c and d (tied embeddings).

A group of all NPUs needs no name; a group of one NPU means no communication.
When the network's dimension sizes are known and a group is exactly a range
of dimensions (stride = product of the lower dimensions, size = product of
the range) it is placed with ``involved_dim``; otherwise it gets a comm-group
id (``pg_name``) and an entry in the comm-group JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Layout", "Placement", "experts_folded"]

#: The groups that MoE parallel folding carves differently (``etp`` 1).
_EXPERT_ROLES = ("ep", "edp", "tp_ep")


def experts_folded(etp: int | None, tp: int, cp: int) -> bool:
    """MoE parallel folding: expert-tensor parallelism 1 with T x C > 1, so expert groups
    are carved from a stage's T x C x D ranks (Megatron-core's expert rank generator)."""
    return etp == 1 and tp * cp > 1


@dataclass(frozen=True)
class Placement:
    """How a collective of one role is issued by one rank.

    ``kind``: ``"all"`` (no attribute), ``"skip"`` (nothing to do), ``"dims"``
    (``value`` is the involved_dim tuple) or ``"group"`` (``value`` is the group id).
    """

    kind: str
    value: object = None


@dataclass
class Layout:
    """D x T x P x C ranks with E-way expert parallelism; ``dims`` = network dimension sizes or None."""

    dp: int
    tp: int
    pp: int
    ep: int = 1
    dims: Sequence[int] | None = None
    cp: int = 1
    etp: int | None = None  # expert-tensor parallelism: T (None) or 1 (folded)
    groups: dict[str, list[int]] = field(default_factory=dict)
    _ids: dict[tuple[int, ...], str] = field(default_factory=dict)
    _placed: dict[tuple, Placement] = field(default_factory=dict)

    @property
    def npus(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(t, d, p) of a rank."""
        t, rest = rank % self.tp, rank // (self.tp * self.cp)
        return t, rest % self.dp, rest // self.dp

    def context(self, rank: int) -> int:
        """c, the rank's position in its context-parallel ring."""
        return rank // self.tp % self.cp

    def rank(self, t: int, d: int, p: int, c: int = 0) -> int:
        return t + self.tp * (c + self.cp * (d + self.dp * p))

    def members(self, role: str, rank: int) -> tuple[int, ...]:
        """The ranks of ``rank``'s group of ``role`` (tp, cp, dp, ep, edp, tp_ep, emb, amax), in ring order."""
        t, d, p = self.coords(rank)
        c = self.context(rank)
        if role == "tp":
            return tuple(self.rank(i, d, p, c) for i in range(self.tp))
        if role == "cp":
            return tuple(self.rank(t, d, p, i) for i in range(self.cp))
        if role == "dp":
            return tuple(self.rank(t, i, p, j) for i in range(self.dp) for j in range(self.cp))
        if self.folded and role in _EXPERT_ROLES:
            return self._folded_members(role, self._stage_index(rank), p)
        if role == "ep":
            base = d // self.ep * self.ep
            return tuple(self.rank(t, base + i, p, c) for i in range(self.ep))
        if role == "edp":
            return tuple(self.rank(t, d % self.ep + self.ep * i, p, c) for i in range(self.dp // self.ep))
        if role == "tp_ep":  # the all-gather token dispatcher's group: tp fastest, ascending
            base = d // self.ep * self.ep
            return tuple(self.rank(j, base + i, p, c) for i in range(self.ep) for j in range(self.tp))
        if role == "emb":
            return (self.rank(t, d, 0, c), self.rank(t, d, self.pp - 1, c))
        if role == "amax":  # every rank of the pipeline stage (Megatron's amax reduction group)
            return tuple(
                self.rank(i, j, p, k) for j in range(self.dp) for k in range(self.cp) for i in range(self.tp)
            )
        raise ValueError(f"unknown group role {role!r}")

    @property
    def folded(self) -> bool:
        """Expert groups carved from the stage's T x C x D ranks (:func:`experts_folded`)."""
        return experts_folded(self.etp, self.tp, self.cp)

    def expert_index(self, rank: int) -> int:
        """``rank``'s index in its ``ep`` group (ascending ranks): of its data-parallel
        index, or, experts folded, of its place in its pipeline stage."""
        return (self._stage_index(rank) if self.folded else self.coords(rank)[1]) % self.ep

    def _stage_index(self, rank: int) -> int:
        """``rank``'s place among its pipeline stage's T x C x D ranks (t + T (c + C d))."""
        return rank % (self.tp * self.cp * self.dp)

    def _folded_members(self, role: str, index: int, p: int) -> tuple[int, ...]:
        """``ep`` / ``tp_ep`` (a block of E consecutive ranks of the stage) or ``edp`` (the
        ranks at the same place of every block) of the stage's rank ``index``."""
        size = self.tp * self.cp * self.dp
        stage = size * p
        if role == "edp":
            return tuple(stage + index % self.ep + self.ep * i for i in range(size // self.ep))
        base = index // self.ep * self.ep
        return tuple(stage + base + i for i in range(self.ep))

    def p2p_group(self, role: str) -> tuple[int, int] | None:
        """(stride, size) of the communicator a send or receive of peer role ``role`` runs
        on, the ``size`` ranks ``stride`` apart that hold its rank: a pipeline neighbour's
        (``next``, ``prev``) is its pipeline (T x C x D, P; Megatron-core's pipeline group),
        a context-parallel ring step's its CP group (T, C; Transformer Engine's
        ``cp_group``), a tensor-parallel ring step's its TP group (1, T). None when that
        is every NPU (the default group)."""
        stride, size = {
            "next": (self.tp * self.cp * self.dp, self.pp),
            "prev": (self.tp * self.cp * self.dp, self.pp),
            "cp_next": (self.tp, self.cp),
            "cp_prev": (self.tp, self.cp),
            "tp_next": (1, self.tp),
            "tp_prev": (1, self.tp),
        }[role]
        return None if stride * size == self.npus and stride == 1 else (stride, size)

    def cp_peer(self, rank: int, step: int) -> int:
        """The rank ``step`` places further round ``rank``'s context-parallel ring."""
        c = self.context(rank)
        return rank + self.tp * ((c + step) % self.cp - c)

    def tp_peer(self, rank: int, step: int) -> int:
        """The rank ``step`` places further round ``rank``'s tensor-parallel ring."""
        t = rank % self.tp
        return rank + (t + step) % self.tp - t

    def _stride_size(self, role: str) -> tuple[int, int]:
        if self.folded and role in _EXPERT_ROLES:
            return (self.ep, self.tp * self.cp * self.dp // self.ep) if role == "edp" else (1, self.ep)
        return {
            "tp": (1, self.tp),
            "cp": (self.tp, self.cp),
            "dp": (self.tp, self.dp * self.cp),
            "ep": (self.tp * self.cp, self.ep),
            "edp": (self.tp * self.cp * self.ep, self.dp // self.ep),
            "tp_ep": (1, self.tp * self.ep) if self.cp == 1 else (0, 0),
            "amax": (1, self.tp * self.cp * self.dp),
        }.get(role, (0, 0))

    def _dims_range(self, role: str) -> tuple[bool, ...] | None:
        stride, size = self._stride_size(role)
        if not self.dims or not stride:
            return None
        lower = 1
        for k1, d in enumerate(self.dims):
            if lower == stride:
                span = 1
                for k2 in range(k1, len(self.dims)):
                    span *= self.dims[k2]
                    if span == size:
                        return tuple(k1 <= i <= k2 for i in range(len(self.dims)))
                    if span > size:
                        return None
                return None
            lower *= d
        return None

    def group_key(self, role: str, rank: int) -> tuple:
        """What ``rank``'s group of ``role`` is known by: the coordinates its members
        share (every member has the same key, other groups other keys)."""
        t, d, p = self.coords(rank)
        c = self.context(rank)
        if self.folded and role in _EXPERT_ROLES:
            index = self._stage_index(rank)
            return (index % self.ep, p) if role == "edp" else (index // self.ep, p)
        keys = {
            "tp": (d, p, c),
            "cp": (t, d, p),
            "dp": (t, p),
            "ep": (t, d // self.ep, p, c),
            "edp": (t, d % self.ep, p, c),
            "tp_ep": (d // self.ep, p, c),
            "emb": (t, d, c),
            "amax": (p,),
        }
        if role not in keys:
            raise ValueError(f"unknown group role {role!r}")
        return keys[role]

    def placement(self, role: str, rank: int) -> Placement:
        """Where ``rank`` issues a collective of ``role``; registers comm groups as needed.
        Worked out once per group (a data-parallel group of D ranks is not listed D times)."""
        cache_key = (role, self.group_key(role, rank))
        placed = self._placed.get(cache_key)
        if placed is None:
            placed = self._placed[cache_key] = self._place(role, self.members(role, rank))
        return placed

    def add_ring_groups(self) -> None:
        """Register the context-parallel rings as communicator groups: Megatron-core runs a
        ring's sends and receives on its CP process group (``get_context_parallel_group``).
        No collective names them; they tell rank symmetry where the CP ranks lie
        (:func:`~astra_core.system.symmetry.find_symmetry`). Called after every rank's
        collectives are placed, so that their groups keep their ids."""
        if self.cp > 1:
            for rank in range(self.npus):
                self.placement("cp", rank)

    def _place(self, role: str, members: tuple[int, ...]) -> Placement:
        if len(members) == 1:
            return Placement("skip")
        if len(members) == self.npus and role != "emb":
            return Placement("all")
        involved = self._dims_range(role)
        if involved is not None:
            return Placement("dims", involved)
        key = members if role != "emb" else tuple(sorted(members))
        gid = self._ids.get(key)
        if gid is None:
            gid = str(len(self._ids) + 1)
            self._ids[key] = gid
            self.groups[gid] = list(key)
        return Placement("group", gid)
