"""Where each job's ranks run: the NPU of every rank, by policy or as listed.

The cluster is ``npus`` NPUs in nodes of ``per_node`` (the network's first
dimension, an NVSwitch domain of a GPU server); NPU ``n`` is GPU ``n %
per_node`` of node ``n // per_node``, and GPUs of the same index across nodes
share a *rail* (their NICs hang off the same rail switch). Jobs are placed in
spec order, those with an NPU list first (so that a policy never takes an NPU
a list names); each takes free NPUs only:

* ``packed``: the lowest-numbered free NPUs, rank ``r`` on the ``r``-th of them
  (consecutive ranks share nodes: a tensor-parallel group stays in one);
* ``spread``: one free NPU per node round the nodes (rank ``r`` on node
  ``r % nodes`` where it has a free GPU), so the job crosses as many nodes as
  it can;
* ``rail-aligned``: rank ``r`` on GPU ``r % per_node`` of the job's
  ``r // per_node``-th node, the nodes taken in order among those where every
  GPU index the job needs there is free (rank ``r`` always on rail
  ``r % per_node``);
* ``random``: a sample of the free NPUs drawn with the job's ``seed``
  (Python's ``random.Random(seed).sample``, reproducible);
* a list: rank ``r`` on the ``r``-th NPU listed.

Every problem is one ConfigError naming the job and the key.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from astra_core.errors import ConfigError

__all__ = ["place_jobs"]


def _packed(free: list[int], ranks: int) -> list[int]:
    return free[:ranks]


def _spread(free: list[int], ranks: int, per_node: int) -> list[int]:
    by_node: dict[int, list[int]] = {}
    for npu in free:
        by_node.setdefault(npu // per_node, []).append(npu)
    columns = [by_node[n] for n in sorted(by_node)]
    out: list[int] = []
    depth = 0
    while len(out) < ranks:
        row = [col[depth] for col in columns if depth < len(col)]
        out += row[: ranks - len(out)]
        depth += 1
    return out


def _rail_aligned(free: set[int], ranks: int, per_node: int, nodes: int) -> list[int] | None:
    out: list[int] = []
    node = 0
    for block in range(0, ranks, per_node):
        gpus = range(min(per_node, ranks - block))
        while node < nodes and any(node * per_node + g not in free for g in gpus):
            node += 1
        if node == nodes:
            return None
        out += [node * per_node + g for g in gpus]
        node += 1
    return out


def place_jobs(
    jobs: Sequence[tuple[str, int, str | list[int], int]], npus: int, per_node: int
) -> list[list[int]]:
    """The NPU of every rank of each job, in job order.

    ``jobs``: ``(name, ranks, placement, seed)`` per job (placement a policy name or
    an NPU list); ``npus``: the cluster's NPUs, in nodes of ``per_node``. Raises
    ConfigError naming the job: an NPU list of the wrong length, out of range,
    repeating an NPU or sharing one with another job; more ranks than free NPUs;
    no room for a rail-aligned job.
    """
    placed: list[list[int] | None] = [None] * len(jobs)
    owner: dict[int, str] = {}
    order = sorted(range(len(jobs)), key=lambda i: not isinstance(jobs[i][2], list))
    for i in order:
        name, ranks, how, seed = jobs[i]
        where = f"job {name}: placement"
        free = [n for n in range(npus) if n not in owner]
        if isinstance(how, list):
            npus_of = _listed(where, how, ranks, npus, owner)
        elif ranks > len(free):
            raise ConfigError(
                f"{where}: {ranks} ranks, but only {len(free)} of the cluster's {npus} NPUs are free"
            )
        elif how == "packed":
            npus_of = _packed(free, ranks)
        elif how == "spread":
            npus_of = _spread(free, ranks, per_node)
        elif how == "random":
            npus_of = sorted(random.Random(seed).sample(free, ranks))
        else:
            found = _rail_aligned(set(free), ranks, per_node, npus // per_node)
            if found is None:
                raise ConfigError(
                    f"{where}: rail-aligned: no free nodes hold GPUs 0..{min(ranks, per_node) - 1} "
                    f"for its {ranks} ranks ({per_node} GPUs per node)"
                )
            npus_of = found
        for npu in npus_of:
            owner[npu] = name
        placed[i] = npus_of
    return [p for p in placed if p is not None]


def _listed(where: str, listed: list[int], ranks: int, npus: int, owner: dict[int, str]) -> list[int]:
    """An NPU list, checked: one NPU per rank, each on the cluster, none twice or taken."""
    if len(listed) != ranks:
        raise ConfigError(f"{where}: lists {len(listed)} NPUs for its {ranks} ranks")
    seen: set[int] = set()
    for npu in listed:
        if npu >= npus:
            raise ConfigError(f"{where}: NPU {npu} is not on the cluster (NPUs 0..{npus - 1})")
        if npu in seen:
            raise ConfigError(f"{where}: NPU {npu} is listed twice")
        if npu in owner:
            raise ConfigError(f"{where}: NPU {npu} is also placed for job {owner[npu]}")
        seen.add(npu)
    return list(listed)
