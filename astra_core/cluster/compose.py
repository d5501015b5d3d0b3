"""Several jobs' traces as one run's: every job rank on its NPU, talking to its own NPUs.

:func:`compose` turns each job's per-rank traces (rank ``r`` of the job runs on
NPU ``placement[r]`` of the cluster) into the cluster's per-NPU traces:

* a send's and a receive's peers become the peers' NPUs;
* every collective gets an explicit communicator group of NPUs: its comm group
  (``pg_name``) mapped through the placement, the ranks sharing its position on
  the dimensions it does not span (``involved_dim``, over the job's own ``dims``),
  or all of the job's ranks. A group of every NPU runs on the full logical
  topology, any other on its members (:class:`~astra_core.system.rank.CommGroup`;
  the NCCL model places them on their nodes);
* a job of every NPU in rank order runs its traces and comm groups unchanged, so
  alone on the cluster it gives exactly its ``astra run`` result;
* GPU compute nodes take longer on slow NPUs and stragglers (:mod:`.hardware`);
* ``iterations`` repeat the trace (:mod:`astra_core.workload.iterations`) and a
  start time ``start_us`` becomes a CPU node of that duration every node without
  a parent waits for, appended last (the iteration ends keep their positions);
* NPUs no job holds get an empty trace.

Raises ConfigError naming the job for what cannot be mapped: a comm group the
job does not define, a collective over dimensions without the job's ``dims``, or
process groups defined inside the traces (PyTorch's METADATA nodes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from astra_core.cluster.hardware import ComputeSlowness
from astra_core.errors import ConfigError
from astra_core.system.memory_guard import check_nodes_fit
from astra_core.workload.chakra_types import COMM_COLL, COMM_RECV, COMM_SEND, COMP, METADATA
from astra_core.workload.et_decode import ETNode, RankTrace
from astra_core.workload.iterations import NODE_BYTES, repeat_traces, repeated_nodes
from astra_core.workload.network_fit import GENERATED_DIMS_ATTR

__all__ = ["GroupIds", "JobTraces", "compose", "job_dims"]


@dataclass
class JobTraces:
    """One job as :func:`compose` takes it: ``traces[r]`` of job rank ``r``, its comm
    groups (id -> job ranks), the logical ``dims`` its traces were made for (None:
    not given), its NPUs (``placement[r]``), ``iterations`` and ``start_us``."""

    name: str
    traces: list[RankTrace]
    groups: Mapping[str, Sequence[int]]
    dims: list[int] | None
    placement: list[int]
    iterations: int = 1
    start_us: int = 0
    #: its traces on the cluster and the groups they use, once composed (the run of all
    #: jobs and its run alone share them)
    composed: tuple[list[RankTrace], dict[str, tuple[int, ...]]] | None = None


class GroupIds:
    """Communicator group ids of a cluster: NPU tuples numbered "1", "2", ... as first seen.

    One numbering serves the run of all jobs and each job's run alone, so a group
    has the same id, its streams the same tags and its flows the same ECMP routes
    (``flow_hash(src, dst, tag)``) in both: a job's messages take the same links
    with or without the others.
    """

    def __init__(self) -> None:
        self.ids: dict[tuple[int, ...], str] = {}

    def id_of(self, npus: tuple[int, ...], used: dict[str, tuple[int, ...]]) -> str:
        gid = self.ids.get(npus)
        if gid is None:
            gid = self.ids[npus] = str(len(self.ids) + 1)
        used[gid] = npus
        return gid


def _dim_members(rank: int, involved: Sequence[bool], dims: Sequence[int]) -> list[int]:
    """The job ranks in ``rank``'s group over the ``involved`` dimensions (dimension 0
    varies fastest, as network.yml numbers NPUs)."""
    coords, rest = [], rank
    for size in dims:
        coords.append(rest % size)
        rest //= size
    members = [0]
    stride = 1
    for k, size in enumerate(dims):
        if involved[k]:
            members = [m + stride * c for c in range(size) for m in members]
        else:
            members = [m + stride * coords[k] for m in members]
        stride *= size
    return sorted(members)


def _collective_members(job: JobTraces, rank: int, node: ETNode) -> list[int]:
    """The job ranks a collective of job rank ``rank`` runs over."""
    if node.pg_name:
        members = job.groups.get(node.pg_name)
        if members is None:
            raise ConfigError(
                f"job {job.name}: rank {rank}'s collective node {node.id} ({node.name}) uses comm group "
                f"{node.pg_name!r}, which its comm_groups do not define"
            )
        return list(members)
    involved = node.involved_dim
    if involved is None or all(involved):
        return list(range(len(job.traces)))
    if job.dims is None:
        raise ConfigError(
            f"job {job.name}: rank {rank}'s collective node {node.id} ({node.name}) spans some network "
            "dimensions (involved_dim); give the job's dims (the dimensions its traces were made for)"
        )
    if len(involved) != len(job.dims):
        raise ConfigError(
            f"job {job.name}: rank {rank}'s collective node {node.id} ({node.name}) names "
            f"{len(involved)} dimensions, but the job's dims have {len(job.dims)}"
        )
    return _dim_members(rank, involved, job.dims)


def _mapped_nodes(
    job: JobTraces, rank: int, nodes: list[ETNode], ids: GroupIds, used: dict[str, tuple[int, ...]]
) -> list[ETNode]:
    """Job rank ``rank``'s nodes with peers and groups on the cluster's NPUs."""
    where = job.placement
    out = []
    for node in nodes:
        kind = node.type
        if kind == COMM_COLL:
            npus = tuple(where[m] for m in _collective_members(job, rank, node))
            node = node.replaced(pg_name=ids.id_of(npus, used), involved_dim=None)
        elif kind in (COMM_SEND, COMM_RECV):
            src, dst = (_peer_npu(job, rank, node, peer) for peer in (node.comm_src, node.comm_dst))
            node = node.replaced(comm_src=src, comm_dst=dst)
        elif kind == METADATA and node.inputs_values:
            raise ConfigError(
                f"job {job.name}: rank {rank}'s node {node.id} defines process groups (PyTorch "
                "METADATA); a cluster run needs them as a comm_groups file"
            )
        out.append(node)
    return out


def _peer_npu(job: JobTraces, rank: int, node: ETNode, peer: int | None) -> int | None:
    """The cluster NPU of job rank ``peer`` (None stays None); ConfigError naming the job,
    rank and node for a peer that is not one of the job's ranks."""
    if peer is None:
        return None
    if not 0 <= peer < len(job.placement):
        kind = "send" if node.type == COMM_SEND else "receive"
        raise ConfigError(
            f"job {job.name}: rank {rank}'s {kind} node {node.id} ({node.name}) names rank {peer}, "
            f"but the job has ranks 0..{len(job.placement) - 1}"
        )
    return job.placement[peer]


def _delayed(nodes: list[ETNode], start_us: int) -> list[ETNode]:
    """``nodes`` with a CPU node of ``start_us`` appended that every parentless node waits for."""
    if not start_us or not nodes:
        return nodes
    ids = {n.id for n in nodes}
    start = max(ids) + 1
    out = [
        n
        if any(d in ids for d in (*n.data_deps, *n.ctrl_deps))
        else n.replaced(ctrl_deps=(*n.ctrl_deps, start))
        for n in nodes
    ]
    out.append(ETNode(start, "astra.job_start", COMP, duration_micros=start_us, is_cpu_op=True))
    return out


def _slowed(nodes: list[ETNode], npu: int, per_iteration: int, slow: ComputeSlowness) -> list[ETNode]:
    """``nodes`` (a trace repeated from ``per_iteration`` nodes) with each GPU compute node's
    time multiplied by NPU ``npu``'s factor in its iteration (:mod:`.hardware`)."""
    out = []
    for pos, node in enumerate(nodes):
        if node.type == COMP and not node.is_cpu_op and node.duration_micros:
            factor = slow.factor(npu, pos // (per_iteration + 1))
            if factor != 1.0:
                node = node.replaced(duration_micros=node.duration_micros * factor)
        out.append(node)
    return out


def _whole_cluster(job: JobTraces, npus: int) -> bool:
    return len(job.placement) == npus and job.placement == list(range(npus))


def _job_traces(
    job: JobTraces, npus: int, ids: GroupIds, used: dict[str, tuple[int, ...]], slow: ComputeSlowness | None
) -> list[RankTrace]:
    """The job's traces on its NPUs (``RankTrace.rank`` = the NPU)."""
    if job.iterations > 1:
        what = f"job {job.name}: iterations {job.iterations}"
        # every rank's copy is its own once mapped onto the cluster's NPUs
        own = sum(len(t.nodes) for t in job.traces) * job.iterations
        check_nodes_fit(own + repeated_nodes(job.traces, job.iterations), NODE_BYTES, what, "iterations")
    repeated = repeat_traces(job.traces, job.iterations) if job.iterations > 1 else job.traces
    unchanged = _whole_cluster(job, npus)
    out = []
    for rank, trace in enumerate(repeated):
        nodes = trace.nodes if unchanged else _mapped_nodes(job, rank, list(trace.nodes), ids, used)
        if slow is not None:
            nodes = _slowed(list(nodes), job.placement[rank], len(job.traces[rank].nodes), slow)
        if job.start_us:
            nodes = _delayed(list(nodes), job.start_us)
        metadata = trace.metadata
        if not unchanged:  # made for the job's dims, not the cluster's
            metadata = {k: v for k, v in metadata.items() if k != GENERATED_DIMS_ATTR}
        out.append(RankTrace(trace.path, nodes, trace.version, metadata, job.placement[rank]))
    return out


def compose(
    jobs: Sequence[JobTraces], npus: int, ids: GroupIds | None = None, slow: ComputeSlowness | None = None
) -> tuple[list[RankTrace], dict[str, tuple[int, ...]]]:
    """The cluster's ``npus`` per-NPU traces and the communicator groups they use
    (module doc), group ids from ``ids`` (one :class:`GroupIds` for every run of
    the same cluster), GPU compute slowed by ``slow`` (:mod:`.hardware`)."""
    if len(jobs) == 1 and _whole_cluster(jobs[0], npus):  # traces and groups as they are
        job = jobs[0]
        groups = {gid: tuple(m) for gid, m in job.groups.items()}
        return _job_traces(job, npus, GroupIds(), {}, slow), groups
    ids = ids or GroupIds()
    used: dict[str, tuple[int, ...]] = {}
    traces = [RankTrace("(no job)", [], rank=n) for n in range(npus)]
    for job in jobs:
        if job.composed is None:
            mine: dict[str, tuple[int, ...]] = {}
            job.composed = (_job_traces(job, npus, ids, mine, slow), mine)
        for trace in job.composed[0]:
            traces[trace.rank or 0] = trace
        used.update(job.composed[1])
    return traces, used


def job_dims(dims: list[int] | None, traces: Sequence[RankTrace], name: str) -> list[int] | None:
    """A job's ``dims`` (read from ``"8x4"`` or a list; default: the dims its traces say they were
    generated for, ``astra gen llm --dims``), checked against its rank count and
    against those."""
    ranks = len(traces)
    made_for = traces[0].metadata.get(GENERATED_DIMS_ATTR) if traces else None
    if dims is None:
        return list(made_for) if isinstance(made_for, list) else None
    text = "x".join(str(d) for d in dims)
    if math.prod(dims) != ranks:
        raise ConfigError(f"job {name}: dims {text} do not multiply to its {ranks} ranks")
    if isinstance(made_for, list) and made_for != dims:
        shown = "x".join(str(d) for d in made_for)
        raise ConfigError(f"job {name}: dims {text}, but its traces were generated for {shown}")
    return dims
