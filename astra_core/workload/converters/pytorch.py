"""Convert PyTorch execution traces (+ Kineto) to Chakra ET (``astra convert pytorch``).

Each rank's host trace (:mod:`.pytorch_trace`) becomes a list of *units*, in
the order the host thread started them (``rf_id``):

* a ``c10d::`` collective (``allreduce_``, ``allgather_``, ``_allgather_base_``,
  ``reduce_scatter_``, ``_reduce_scatter_base_``, ``alltoall_``,
  ``alltoall_base_``, ``broadcast_``, ``barrier``, and their ``coalesced``
  forms) becomes a COMM_COLL node with its Chakra type and byte size in
  ASTRA-sim's convention (upstream ``Ring.cc``): an all-gather's is each
  rank's input (not the gathered output), an all-reduce's, reduce-scatter's
  and all-to-all's the full input;
  ``c10d::barrier`` is NCCL's one-float all-reduce; a collective or
  send/receive of an empty tensor moves nothing and replays its host time
  as a CPU-side op;
  ``c10d::send`` / ``c10d::recv_`` become COMM_SEND / COMM_RECV with peer and tag;
* every other outermost operator becomes a COMP node with its measured
  duration (Kineto ``dur`` of the operator, 0 without Kineto); an operator
  that encloses a collective (e.g. DDP's gradient hook) is split into its
  children. Communication back-ends' own ranges (``gloo:*``, ``nccl:*``)
  start on the host but end asynchronously, so the trace nests later
  operators inside them; they are looked through.

Dependencies follow the trace: host operators run in program order; a
collective is issued after the operator before it, and collectives run in
program order (as NCCL/gloo require); the first later operator that touches
a collective's tensors (same storage) waits for it. On GPU traces
(``cuda`` tensors or Kineto kernels) host operators are CPU nodes
(``is_cpu_op``) and their kernels' time becomes a GPU COMP node in stream
order; on CPU-only traces (e.g. gloo) the host operators are the NPU's
compute.

Process groups come from the ``## process_group:init ##`` node; a collective
names a non-default group (pg_name) when the trace says which (NCCL's
``record_param_comms``); groups other than the default are written to a
comm-group JSON.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astra_core.errors import TraceError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.converters.pytorch_trace import (
    HostNode,
    HostTrace,
    KinetoTimes,
    read_host_trace,
    read_kineto,
    tensors_in,
)
from astra_core.workload.graph import TraceWarning
from astra_core.workload.trace_set import staged_trace_set
from astra_core.workload.trace_size import check_npus
from astra_core.workload.writer import make_node, write_rank_trace

__all__ = ["PytorchConversion", "convert_host_trace", "convert_pytorch_traces"]

# c10d op -> (Chakra collective, index of the argument whose bytes are the size): the
# input tensors (all-gathers: argument 1, after the outputs; reduce-scatter and
# all-to-all: 1; all-reduce, broadcast: 0, in place)
_COLLECTIVES = {
    "allreduce_": (pb.ALL_REDUCE, 0),
    "allreduce_coalesced_": (pb.ALL_REDUCE, 0),
    "allgather_": (pb.ALL_GATHER, 1),
    "_allgather_base_": (pb.ALL_GATHER, 1),
    "allgather_coalesced_": (pb.ALL_GATHER, 1),
    "allgather_into_tensor_coalesced_": (pb.ALL_GATHER, 1),
    "reduce_scatter_": (pb.REDUCE_SCATTER, 1),
    "_reduce_scatter_base_": (pb.REDUCE_SCATTER, 1),
    "reduce_scatter_tensor_coalesced_": (pb.REDUCE_SCATTER, 1),
    "alltoall_": (pb.ALL_TO_ALL, 1),
    "alltoall_base_": (pb.ALL_TO_ALL, 1),
    "broadcast_": (pb.BROADCAST, 0),
    "barrier": (pb.ALL_REDUCE, 0),
}
# c10d::barrier passes a dummy tensor; NCCL's barrier all-reduces one float
# (ProcessGroupNCCL::barrier: at::zeros({1}, kFloat)), so it is written as that.
_BARRIER_BYTES = 4
# _ZERO_BYTES: any other collective or send/receive of no bytes (empty tensors) is
# written as a CPU-side op (is_cpu_op) replaying its host time: a GPU-side
# communication node needs comm_size > 0 (upstream reads it as uint64; 0 is no message).
_P2P = {"send": pb.COMM_SEND_NODE, "recv_": pb.COMM_RECV_NODE, "recv_any_source_": pb.COMM_RECV_NODE}
_TRANSPARENT = ("gloo:", "nccl:", "mpi:", "ucc:", "## ", "[pytorch|profiler")


def _c10d(node: HostNode) -> str | None:
    if node.name.startswith("c10d::"):
        op = node.name[6:]
        if op in _COLLECTIVES or op in _P2P:
            return op
    return None


def _transparent(node: HostNode) -> bool:
    return node.name.startswith(_TRANSPARENT)


def _bytes(value) -> int:
    return sum(t[3] * t[4] for t in tensors_in(value))


@dataclass
class _Unit:
    node: HostNode
    comm: str | None  # c10d op name, or None for compute
    storages: frozenset = frozenset()
    host_us: float = 0.0
    gpu_us: float = 0.0


class _Units:
    """Splits a host trace into units (see the module docstring)."""

    def __init__(self, trace: HostTrace, times: KinetoTimes | None):
        self.trace = trace
        self.times = times
        self._has_comm: dict[int, bool] = {}

    def has_comm(self, node: HostNode) -> bool:
        known = self._has_comm.get(node.id)
        if known is None:
            known = _c10d(node) is not None or any(self.has_comm(c) for c in node.children)
            self._has_comm[node.id] = known
        return known

    def walk(self, node: HostNode):
        if _transparent(node):
            for child in node.children:
                yield from self.walk(child)
        elif _c10d(node) is not None:
            yield self._make(node, _c10d(node))
            for child in node.children:  # later operators nested in the async back-end range
                if _transparent(child):
                    for grandchild in child.children:
                        yield from self.walk(grandchild)
        elif self.has_comm(node):
            for child in node.children:
                yield from self.walk(child)
        else:
            yield self._make(node, None)

    def _make(self, node: HostNode, comm: str | None) -> _Unit:
        storages: set[int]  # storage ids of the tensors
        storages, gpu, stack = set(), 0.0, [node]
        while stack:
            n = stack.pop()
            if not _transparent(n):
                storages.update(t[1] for t in tensors_in(n.inputs))
                storages.update(t[1] for t in tensors_in(n.outputs))
                if self.times:
                    gpu += self.times.gpu_us.get(n.rf_id, 0.0)
            if comm is None or n is node:
                stack.extend(c for c in n.children if comm is None)
        host = self.times.host_us.get(node.rf_id, 0.0) if self.times else 0.0
        return _Unit(node, comm, frozenset(storages), host, gpu)

    def units(self) -> list[_Unit]:
        tops = []
        for root_id in self.trace.roots:
            root = self.trace.nodes[root_id]
            if "thread" in root.name:
                tops.extend(root.children)
        tops.sort(key=lambda n: n.rf_id)
        out = []
        for top in tops:
            out.extend(self.walk(top))
        return out


def _group_names(trace: HostTrace) -> dict[str, list[int]]:
    """Non-default process groups: pg_name -> global ranks."""
    out = {}
    for g in trace.process_groups:
        if isinstance(g, dict) and str(g.get("pg_name", "0")) != "0" and g.get("ranks"):
            out[str(g["pg_name"])] = [int(r) for r in g["ranks"]]
    return out


def _seq_of(unit: _Unit) -> int | None:
    """NCCL's sequence number of a collective (its record_param_comms' second input), else None."""
    stack = list(unit.node.children)
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.name == "record_param_comms" and isinstance(n.inputs, list) and len(n.inputs) > 4:
            seq = n.inputs[1]
            return seq if isinstance(seq, int) and not isinstance(seq, bool) else None
    return None


def _waited_seq(unit: _Unit) -> int | None:
    """The sequence number a top-level ``record_param_comms(..., "wait", ...)`` waits for."""
    args = unit.node.inputs
    if (
        unit.node.name == "record_param_comms"
        and isinstance(args, list)
        and "wait" in args[:5]
        and isinstance(args[0], int)
    ):
        return args[0]
    return None


def _pg_of(unit: _Unit, trace: HostTrace) -> str | None:
    """The pg_name a collective names through record_param_comms (NCCL traces), else None."""
    backend_ids = {
        g.get("backend_id"): str(g.get("pg_name")) for g in trace.process_groups if isinstance(g, dict)
    }
    stack = list(unit.node.children)
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.name == "record_param_comms" and isinstance(n.inputs, list):
            for v in n.inputs:
                if isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v):
                    return v[0]  # (pg_name, pg_desc), PyTorch >= 2.3
                if isinstance(v, int) and not isinstance(v, bool) and v in backend_ids:
                    return backend_ids[v]
    return None


def convert_host_trace(
    trace: HostTrace, times: KinetoTimes | None, rank: int, group_ids: dict[str, str]
) -> tuple[list[pb.Node], dict]:
    """Nodes of one rank and a summary dict. ``group_ids`` maps pg_name -> comm-group id."""
    units = _Units(trace, times).units()
    gpu_trace = bool(times and times.gpu_us) or any(
        str(t[5]).startswith("cuda") for u in units for t in tensors_in(u.node.inputs)
    )
    rank_nodes = _RankNodes(trace, rank, group_ids, gpu_trace)
    for u in units:
        if u.comm is None:
            rank_nodes.add_compute(u)
        else:
            rank_nodes.add_comm(u, u.comm)
    return rank_nodes.nodes, rank_nodes.summary


class _RankNodes:
    """One rank's Chakra nodes, built unit by unit (:func:`convert_host_trace`),
    with the last host, GPU and communication node each new node follows and the
    communication nodes still to be waited for."""

    def __init__(self, trace: HostTrace, rank: int, group_ids: dict[str, str], gpu_trace: bool):
        self.trace = trace
        self.rank = rank
        self.group_ids = group_ids
        self.gpu_trace = gpu_trace
        self.groups = _group_names(trace)
        self.nodes: list[pb.Node] = []
        self.host_last: int | None = None
        self.gpu_last: int | None = None
        self.comm_last: int | None = None
        self.pending: list[tuple[int, frozenset]] = []  # (comm node id, storages) not yet waited for
        self.by_seq: dict[int, int] = {}  # NCCL sequence number -> collective node id
        self.waited: list[int] = []  # collectives an explicit wait makes the next compute wait for
        self.warned = False  # about collectives that name no process group
        self.summary = {"compute_us": 0.0, "collectives": 0, "p2p": 0, "comm_bytes": 0, "compute_nodes": 0}

    def add(self, name, ntype, deps, **kw) -> int:
        nid = len(self.nodes)
        self.nodes.append(
            make_node(nid, name, ntype, data_deps=[d for d in dict.fromkeys(deps) if d is not None], **kw)
        )
        return nid

    def waits(self, storages: frozenset) -> list[int]:
        """The pending communication nodes that touch ``storages``, no longer pending."""
        hit = [nid for nid, st in self.pending if st & storages]
        if hit:
            self.pending[:] = [(nid, st) for nid, st in self.pending if nid not in hit]
        return hit

    def add_compute(self, u: _Unit) -> None:
        """A compute unit: a host node, and on GPU traces its kernels' GPU node."""
        n = u.node
        seq = _waited_seq(u)
        if seq is not None and seq in self.by_seq:
            self.waited.append(self.by_seq[seq])
            self.pending[:] = [(nid, st) for nid, st in self.pending if nid != self.by_seq[seq]]
        consumed = self.waits(u.storages) + self.waited
        self.waited = []
        if self.gpu_trace:
            self.host_last = self.add(
                n.name, pb.COMP_NODE, [self.host_last], duration_micros=round(u.host_us), is_cpu_op=True
            )
            if u.gpu_us:
                self.gpu_last = self.add(
                    n.name + " [GPU]",
                    pb.COMP_NODE,
                    [self.host_last, self.gpu_last, *consumed],
                    duration_micros=round(u.gpu_us),
                    is_cpu_op=False,
                )
            elif consumed:
                host_deps = self.nodes[self.host_last].data_deps
                host_deps.extend(c for c in consumed if c not in host_deps)
        else:
            self.host_last = self.add(
                n.name,
                pb.COMP_NODE,
                [self.host_last, *consumed],
                duration_micros=round(u.host_us),
                is_cpu_op=False,
            )
        self.summary["compute_us"] += u.host_us + u.gpu_us
        self.summary["compute_nodes"] += 1

    def add_comm(self, u: _Unit, op: str) -> None:
        """A send, receive or collective, after the last node of each kind."""
        deps = [self.host_last, self.gpu_last, self.comm_last]
        if op in _P2P:
            nid, size = self._add_p2p(u, _P2P[op], deps)
        else:
            nid, size = self._add_collective(u, op, deps)
        self.comm_last = nid
        self.summary["comm_bytes"] += size
        self.pending.append((nid, u.storages))

    def _add_p2p(self, u: _Unit, kind: int, deps: list[int | None]) -> tuple[int, int]:
        n = u.node
        args = n.inputs if isinstance(n.inputs, list) else []
        try:
            peer, tag = int(args[2]), int(args[3])
        except (IndexError, TypeError, ValueError):
            raise TraceError(
                f"{self.trace.path}: node {n.id} ({n.name}): cannot read the peer rank and tag"
            ) from None
        size = _bytes(args[:1])
        src, dst = (self.rank, peer) if kind == pb.COMM_SEND_NODE else (peer, self.rank)
        ends = {"comm_src": src, "comm_dst": dst, "comm_tag": tag}
        if size > 0:
            nid = self.add(n.name, kind, deps, **ends, comm_size=size, is_cpu_op=False)
        else:  # an empty tensor moves nothing: replay the host time (see _ZERO_BYTES)
            nid = self.add(n.name, kind, deps, **ends, is_cpu_op=True, duration_micros=round(u.host_us))
        self.summary["p2p"] += 1
        return nid, size

    def _add_collective(self, u: _Unit, op: str, deps: list[int | None]) -> tuple[int, int]:
        n = u.node
        ctype, arg = _COLLECTIVES[op]
        args = n.inputs if isinstance(n.inputs, list) else []
        size = _bytes(args[arg : arg + 1]) if len(args) > arg else 0
        if size <= 0 and op == "barrier":
            size = _BARRIER_BYTES
        pg = _pg_of(u, self.trace)
        if size > 0:
            attrs: dict[str, Any] = {"comm_type": ctype, "comm_size": size, "is_cpu_op": False}
        else:  # an empty tensor moves nothing: replay the host time (see _ZERO_BYTES)
            attrs = {"comm_type": ctype, "is_cpu_op": True, "duration_micros": round(u.host_us)}
        if pg is not None and pg in self.group_ids:
            attrs["pg_name"] = self.group_ids[pg]
        elif pg is None and self.groups and not self.warned:
            warnings.warn(
                f"{self.trace.path}: the trace does not say which process group each "
                f"collective uses; assuming the default group of all ranks",
                TraceWarning,
                stacklevel=4,  # convert_host_trace's caller
            )
            self.warned = True
        if ctype == pb.BROADCAST or size <= 0:
            attrs["duration_micros"] = round(u.host_us)
        nid = self.add(n.name, pb.COMM_COLL_NODE, deps, **attrs)
        self.summary["collectives"] += 1
        seq = _seq_of(u)
        if seq is not None:
            self.by_seq[seq] = nid
        return nid, size


@dataclass
class PytorchConversion:
    """Result of :func:`convert_pytorch_traces`: written paths and one summary line per rank."""

    paths: list[Path]
    comm_groups_path: Path | None
    summaries: list[str] = field(default_factory=list)
    stats: list[dict] = field(default_factory=list)


def convert_pytorch_traces(
    et_files: list[str | os.PathLike],
    kineto_files: list[str | os.PathLike] | None,
    prefix: str | os.PathLike,
    comm_groups_path: str | os.PathLike | None = None,
) -> PytorchConversion:
    """Convert one host trace per rank (rank = position in ``et_files``), each optionally
    joined with its Kineto trace, to ``<prefix>.<rank>.et``.

    Raises TraceError for unreadable or malformed traces and for a Kineto
    list whose length differs from the host-trace list, ConfigError for more
    ranks than astra's limit or an output that cannot be written. All files or
    none are written (:func:`~astra_core.workload.trace_set.staged_trace_set`). Warns without Kineto
    traces: compute nodes then take 0 ns.
    """
    if not et_files:
        raise TraceError("no execution trace given (--et)")
    if kineto_files and len(kineto_files) != len(et_files):
        raise TraceError(
            f"{len(et_files)} execution traces but {len(kineto_files)} Kineto traces: "
            f"give one --kineto per --et, in the same rank order"
        )
    traces = [read_host_trace(p) for p in et_files]
    times = [read_kineto(p) for p in kineto_files] if kineto_files else [None] * len(traces)
    if not kineto_files:
        warnings.warn(
            "no Kineto trace (--kineto): the host traces carry no operator durations, "
            "so every compute node takes 0 ns and the step is communication alone; "
            "record a Kineto trace beside each execution trace for compute times",
            stacklevel=2,
        )
    names = sorted({name for t in traces for name in _group_names(t)}, key=lambda s: (len(s), s))
    group_ids: dict[str, str] = {}  # pg_name -> comm-group id
    members: dict[str, list[int]] = {}  # comm-group id -> global ranks
    for name in names:
        gid = name if name.isdigit() and int(name) > 0 else str(len(group_ids) + 1 + len(names))
        group_ids[name] = gid
        for t in traces:
            if name in _group_names(t):
                members[gid] = _group_names(t)[name]
    prefix = os.fspath(prefix)
    check_npus("--et", len(et_files))
    result = PytorchConversion([], None)
    with staged_trace_set(prefix) as stage:
        for rank, (trace, kineto) in enumerate(zip(traces, times)):
            nodes, summary = convert_host_trace(trace, kineto, rank, group_ids)
            write_rank_trace(
                stage.trace(rank), nodes, {"source": os.fspath(et_files[rank]), "schema": trace.schema}
            )
            result.paths.append(Path(f"{prefix}.{rank}.et"))
            result.stats.append(summary)
            result.summaries.append(
                f"{len(nodes)} nodes: {summary['compute_nodes']} compute ({summary['compute_us'] / 1e3:.3f} ms), "
                f"{summary['collectives']} collectives, {summary['p2p']} send/recv, "
                f"{summary['comm_bytes']} bytes communicated"
            )
        if members:
            result.comm_groups_path = Path(comm_groups_path or f"{prefix}.comm_groups.json")
            stage.later(result.comm_groups_path, (json.dumps(members, indent=1) + "\n").encode())
    return result
