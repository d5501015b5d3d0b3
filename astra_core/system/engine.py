"""Per-rank execution of an ET dependency graph (upstream ``Workload``).

A node is issued once all its parents are done, lowest node id first, and
only if its hardware slot is free: one CPU operation, one GPU compute kernel
and one GPU communication (collective, send, remote-memory access) at a time;
receives take no slot (upstream ``HardwareResource``). Where every collective
runs on NCCL, a communication node with attribute ``comm_stream`` = s > 0 takes
the slot of GPU stream s instead, so it runs beside the communication of other
streams, as NCCL kernels of different CUDA streams do (no upstream trace sets
it; ``astra gen llm`` puts the gradient reductions on a stream of their own,
:mod:`astra_core.workload.generators.llm_stage`). Upstream's per-dimension
queues keep one slot: two collectives in one queue could start in opposite
orders on two ranks and wait on each other.
On completion its children become ready and the rank tries to issue again.

Timing of each node type:

* COMP: ``duration_micros`` (at least 1 ns), or with ``roofline-enabled`` and
  a GPU node ``num_ops / min(local-mem-bw * num_ops / tensor_size, peak-perf)``;
  a GPU node runs slower while the rank's NCCL collectives are in flight, where
  the NCCL model's GPU was measured so (:mod:`.contention`);
  a communication node marked ``is_cpu_op`` (PyTorch's host-side ``c10d::``
  call that launches the GPU kernel) replays its duration on the CPU like any
  CPU op (upstream aborts: "Comm node should not be on CPU");
* COMM_COLL: the system layer's collective (BROADCAST replays its duration);
* COMM_SEND / COMM_RECV: matched by (src, dst, tag, size), done on arrival;
* MEM_LOAD / MEM_STORE: the remote-memory model;
* METADATA / INVALID: done at once (a METADATA node may define PyTorch
  process groups).

With system.json ``replay-only: 1`` every node, whatever its type, replays its
duration like a COMP node without roofline (upstream ``Workload::issue_replay``).

Statistics follow upstream: exposed communication = finish time - GPU compute
time.
"""

from __future__ import annotations

import json
from array import array
from collections import defaultdict
from functools import partial
from typing import TYPE_CHECKING, Protocol, cast

from astra_core.errors import TraceError
from astra_core.system.collectives.logical_topology import involved_members
from astra_core.system.comm_types import CHAKRA_COLLECTIVE_NAMES, ROOTED, CommType
from astra_core.system.contention import ComputeContention
from astra_core.system.rank import CommGroup, RankSystem
from astra_core.system.records import NodeRecords
from astra_core.workload.chakra import ETNode
from astra_core.workload.chakra_types import (
    COMM_COLL,
    COMM_GROUP_SIZE,
    COMM_GROUP_STRIDE,
    COMM_RECV,
    COMM_SEND,
    COMM_SMS,
    COMM_STREAM,
    COMP,
    MEM_LOAD,
    MEM_STORE,
    METADATA,
    NO_GROUP,
)
from astra_core.workload.et_peers import TemplatePeers
from astra_core.workload.graph import RankGraph
from astra_core.workload.streaming import StreamedNodes

if TYPE_CHECKING:
    from astra_core.backend import NetworkBackend
    from astra_core.system.context import RunContext
    from astra_core.system.p2p import MessageMatcher
    from astra_core.system.stream import DataSet

_COMM_NODES = frozenset((COMM_COLL, COMM_SEND, COMM_RECV))
BROADCAST = 5
_COLLECTIVES: dict[int | None, CommType] = {c.value: c for c in CommType}  # None: no comm_type
CPU, GPU_COMP, GPU_COMM = 0, 1, 2


def _slot(node: ETNode) -> int | None:
    if node.is_cpu_op:
        return CPU
    if node.type == COMP:
        return GPU_COMP
    if node.type == COMM_RECV:
        return None
    return GPU_COMM


def _stream_slot(node: ETNode) -> int | None:
    """:func:`_slot`, but a communication node takes its GPU stream's (``comm_stream``)."""
    slot = _slot(node)
    if slot == GPU_COMM and node.attrs:
        return GPU_COMM + node.attrs.get(COMM_STREAM, 0)  # the decoder checked it: an int >= 0
    return slot


class TieOrderMatters(Exception):
    """Raised inside a rank-symmetric run when a rank's choice of what to issue
    may depend on the order of events at the same simulated time.

    The full run orders such events by when they were scheduled, which is
    not the same for every rank of a class (senders are processed in rank
    order), so the ranks may part ways: :class:`Simulation` starts again
    without symmetry. Internal: never reaches the user.
    """


class _TieWatch:
    """Per rank, which node got each slot at the current simulated time.

    A rank chooses what to issue once per instant, after every event already
    queued for that instant (:meth:`RankEngine.complete` defers the pass), so
    the order of those events cannot change its choice. What can is an event
    of the same instant that comes *after* a pass gave a slot away (a message
    of zero delay sent in that instant, a receive matched at once): had it
    come first, a node it readied with a lower id would have taken the slot,
    or the slot it freed would have gone to a node still waiting. Only such a
    late event is a race; anything else keeps a symmetric run symmetric."""

    __slots__ = ("time", "given")

    def __init__(self) -> None:
        self.time: float | None = None
        self.given: dict[int, int] = {}  # slot -> id of the node that got it at this time

    def event(self, now: float) -> None:
        if now != self.time:
            self.time = now
            self.given.clear()

    def issued(self, slot: int, node_id: int) -> None:
        self.given[slot] = node_id

    def late(self, slot: int | None, node_id: int | None = None) -> bool:
        """Could this event, had it come before the pass, have changed who got
        ``slot``? ``node_id``: the node it readied (None: it freed the slot)."""
        given = None if slot is None else self.given.get(slot)
        return given is not None and (node_id is None or node_id < given)


class EngineListener(Protocol):
    """What a :class:`RankEngine` tells the code that runs it (the Simulation)."""

    def rank_finished(self, rank: int) -> None:
        """Rank ``rank`` finished its last node."""

    def record_collective(self, rank: int, node: ETNode, dataset: DataSet) -> None:
        """Rank ``rank`` issued collective ``node``; ``dataset`` times its chunks."""

    def describe_wait(self, engine: RankEngine, rank: int, node: ETNode) -> str:
        """What running ``node`` of ``rank`` (``engine`` runs it, or under rank
        symmetry its representative) waits on, for a deadlock report."""


class RankEngine:
    """Runs one rank's trace on its :class:`RankSystem`. Times in ns.

    ``context``: the run's shared inputs and models; ``backend`` and ``matcher``:
    the network and the message matcher of this attempt at the run; ``listener``
    hears of finished ranks and issued collectives; ``symmetric``: this engine
    stands for a class of ranks (it then watches for ties whose order matters).
    """

    def __init__(
        self,
        rank: int,
        graph: RankGraph,
        context: RunContext,
        backend: NetworkBackend,
        matcher: MessageMatcher,
        listener: EngineListener,
        *,
        symmetric: bool = False,
    ):
        self.rank = rank
        self.graph = graph
        self.context = context
        self.matcher = matcher
        self.listener = listener
        self.sys = RankSystem(rank, context, backend, matcher)
        self._slot = _stream_slot if context.nccl_only else _slot
        nodes = graph.nodes
        if isinstance(nodes, TemplatePeers):  # a simulated rank reads its nodes from a list
            nodes = nodes.as_list()
        self.nodes: list[ETNode] | StreamedNodes = nodes
        self.pending_parents = graph.parent_counts[:]
        # A streamed trace: nodes are held decoded from ready to complete (and ids
        # read without decoding); otherwise every node is in memory.
        self._streamed = streamed = isinstance(nodes, StreamedNodes)
        self._ids: array | None = cast(StreamedNodes, nodes).ids if streamed else None
        self.ready: list[tuple[int, int]] = []  # (id, position)
        for pos in graph.roots:
            self._readied(pos)
        self.slots: defaultdict[int, int] = defaultdict(int)  # slot -> nodes running on it
        self.done = 0
        self.started: dict[int, float] = {}  # position -> start time of running nodes
        self.records = NodeRecords()  # (position, start, end) per completed node
        self.comm_intervals = array("d")  # start, end, start, end, ... of comm nodes
        self.memory_intervals: list[tuple[float, float]] = []  # (start, end) of remote-memory accesses
        self.gpu_compute_ns = 0
        self.cpu_compute_ns = 0
        self.finish_ns: float | None = None
        self._issuing = False
        self._issue_again = False
        self._pass_due = False  # an issue pass is queued for the current instant
        self._blocked: list[int] | None = None  # deadlock report: positions never issued
        # Under rank symmetry: watch for an event that comes after an issue pass in its instant.
        self._ties = _TieWatch() if symmetric else None
        # This rank's view of the communicator groups it uses (METADATA nodes add more),
        # made on first use: a job of 8,192 ranks has thousands of groups, and one
        # CommGroup of each for every rank took more memory than the machine had.
        self.groups: dict[str, CommGroup] = {}
        #: a send's communicator (:meth:`_p2p_communicator`) per (pg_name, involved_dim,
        #: comm_group_stride, comm_group_size)
        self._p2p_groups: dict[tuple, tuple[tuple[int, ...] | None, frozenset[int]]] = {}
        # GPU compute slowed beside the NCCL model's collectives, where its GPU was measured
        rows = context.nccl.gpu.nccl_compute_slowdown if context.nccl is not None else ()
        self.contention = ComputeContention(rows, self.sys.register_event, self.sys.now) if rows else None

    # -- issuing --------------------------------------------------------------
    def start(self) -> None:
        if self._ties is not None:
            self._ties.event(self.sys.now())
        self.issue_ready()
        self._check_finished()

    def issue_ready(self) -> None:
        """Issue every ready node whose slot is free, lowest id first.

        Runs at start and once per instant in which nodes complete, after
        every event already queued for that instant (:meth:`complete`).
        Upstream issues after each completion instead, so its choice can hang
        on the order of same-time events; no reference case differs.

        Not re-entrant: a node that completes at once (METADATA) marks the
        pass for a repeat instead of starting a nested one, so nodes are always
        considered in id order, as upstream's ``issue_dep_free_nodes``.
        """
        if self._issuing:
            self._issue_again = True
            return
        self._issuing = True
        try:
            again = True
            while again:
                self._issue_again = False
                ready = self.ready
                candidates = sorted(ready)
                ready.clear()
                slots = self.slots
                nodes = self.nodes
                ties = self._ties
                for item in candidates:
                    pos = item[1]
                    slot = self._slot(nodes[pos])
                    if slot is not None and slots[slot]:
                        ready.append(item)
                    else:
                        if ties is not None and slot is not None:
                            ties.issued(slot, item[0])
                        self.issue(pos, slot)
                again = self._issue_again
        finally:
            self._issuing = False

    def issue(self, pos: int, slot: int | None) -> None:
        node = self.nodes[pos]
        if slot is not None:
            self.slots[slot] += 1
        now = self.sys.now()
        self.started[pos] = now
        kind = node.type
        if (
            kind == COMP
            or (node.is_cpu_op and kind in (COMM_COLL, COMM_SEND, COMM_RECV))
            or self.context.system.replay_only
        ):  # replay-only: every node (issue_replay)
            self._issue_compute(pos, node)
        elif kind == COMM_COLL:
            self._issue_collective(pos, node)
        elif kind == COMM_SEND:
            self._issue_send(pos, node)
        elif kind == COMM_RECV:
            self._issue_recv(pos, node)
        elif kind in (MEM_LOAD, MEM_STORE):
            self._issue_memory(pos, node)
        else:
            if kind == METADATA:
                self._define_groups(node)
            self.complete(pos)

    def _issue_compute(self, pos: int, node: ETNode) -> None:
        system = self.context.system
        if system.roofline_enabled and not node.is_cpu_op and not system.replay_only:
            if not node.tensor_size:
                self.complete(pos)  # upstream: tensor_size 0 under roofline = invalid node
                return
            runtime = system.roofline_time_ns(node.num_ops, node.tensor_size)
        else:
            runtime = node.duration_micros * 1000 if node.duration_micros else 1
        if node.is_cpu_op:
            self.cpu_compute_ns += runtime
        elif self.contention is not None:
            self.contention.compute(runtime, partial(self._computed, pos))
            return
        else:
            self.gpu_compute_ns += runtime
        self.sys.register_event(runtime, self.complete, pos)

    def _computed(self, pos: int, elapsed_ns: float) -> None:
        """A GPU compute node done after ``elapsed_ns``, slowed where communication ran beside it."""
        self.gpu_compute_ns += round(elapsed_ns)
        self.complete(pos)

    def _issue_collective(self, pos: int, node: ETNode) -> None:
        comm_type = _COLLECTIVES.get(node.comm_type)
        if comm_type in ROOTED and self.context.nccl is None:
            comm_type = None  # only the NCCL model runs broadcast and reduce
        if comm_type is None:
            if node.comm_type == BROADCAST:
                runtime = node.duration_micros * 1000 if node.duration_micros else 1
                self.sys.register_event(runtime, self.complete, pos)
                return
            names = cast("dict[int | None, str]", CHAKRA_COLLECTIVE_NAMES)  # None (no comm_type) misses
            name = names.get(node.comm_type, f"code {node.comm_type}")
            raise TraceError(
                f"rank {self.rank}: node {node.id} ({node.name}): collective "
                f"{name} is not supported (supported: ALL_REDUCE, ALL_GATHER, "
                "REDUCE_SCATTER, ALL_TO_ALL, BROADCAST as replay; BROADCAST and "
                'REDUCE with an "nccl" implementation)'
            )
        group = self._group_of(node)
        dataset = self.sys.generate_collective(
            comm_type, node.comm_size, node.involved_dim, group, node=node, trace=self._trace_name()
        )
        contention, choice = self.contention, dataset.nccl_choice
        # the SMs its kernels hold: the node's own count (DeepEP, HybridEP, userbuffers; 0:
        # SMs the compute leaves free), else NCCL's channels
        sms = node.attrs.get(COMM_SMS) if node.attrs else None
        if sms is None:
            sms = choice.channels if choice else None
        if contention is not None and sms:
            contention.collective_started(pos, sms)

            def finished(_ds, pos=pos, contention=contention) -> None:
                contention.collective_finished(pos)
                self.complete(pos)

            dataset.on_finished = finished
        else:
            dataset.on_finished = lambda _ds, pos=pos: self.complete(pos)
        self.listener.record_collective(self.rank, node, dataset)

    def _group_of(self, node: ETNode) -> CommGroup | None:
        name = node.pg_name
        if name in NO_GROUP:
            return None
        key = name.strip()
        if key.isdigit():
            key = str(int(key))
        group = self.groups.get(key)
        if group is None:
            members = self.context.comm_groups.get(key)
            if members is not None:
                group = self.groups[key] = CommGroup(int(key), list(members))
        if group is None:
            raise TraceError(
                f"rank {self.rank}: node {node.id} ({node.name}): communicator "
                f"group '{name}' is not defined (give --comm-groups)"
            )
        if self.rank not in group.members:
            raise TraceError(
                f"rank {self.rank}: node {node.id} ({node.name}): rank is not a "
                f"member of communicator group '{name}' {list(group.members)}"
            )
        return group

    def _define_groups(self, node: ETNode) -> None:
        """PyTorch process groups carried by a METADATA node (upstream issue_metadata).

        Raises TraceError naming the trace, node and rank when a group names a
        rank that is not one of the run's NPUs (upstream indexes past its NPU table)."""
        text = node.inputs_values
        if not text or len(text) < 4:
            return
        try:
            entries = json.loads(text[2:-2])
        except ValueError:
            return
        npus = self.context.npus_count
        for entry in entries if isinstance(entries, list) else []:
            try:
                pg = int(entry["pg_name"])
                ranks = list(entry["ranks"]) or list(range(npus))
            except (KeyError, TypeError, ValueError):
                continue
            bad = next((r for r in ranks if type(r) is not int or not 0 <= r < npus), None)
            if bad is not None:
                raise TraceError(
                    f"{self._trace_name()}: rank {self.rank}: node {node.id} ({node.name}): METADATA process group "
                    f"'{pg}' names rank {bad!r}, not one of the {npus} NPUs (0..{npus - 1})"
                )
            self.groups[str(pg)] = CommGroup(pg + 1, ranks)

    def _trace_name(self) -> str:
        """This rank's trace file, for messages."""
        return self.graph.path or f"rank {self.rank}'s trace"

    def _issue_send(self, pos: int, node: ETNode) -> None:
        dst = self._p2p_peer(node, sending=True)
        nccl = self.context.nccl_p2p
        not_before = None
        if nccl is not None:
            members = self._p2p_communicator(node, dst)
            not_before = self.sys.now() + nccl.p2p_ns(self.rank, dst, node.comm_size, members)
        self.matcher.send(
            self.rank, dst, node.comm_size, node.comm_tag or 0, self.complete, pos, not_before_ns=not_before
        )

    def _p2p_communicator(self, node: ETNode, dst: int) -> tuple[int, ...] | None:
        """The ranks of the communicator a send to ``dst`` runs on: its ``pg_name`` group,
        the ranks its ``involved_dim`` dimensions join, the ``comm_group_size`` ranks
        ``comm_group_stride`` apart that hold this one, or None for every NPU (the
        default group). Raises TraceError for a stride or size that names no group of
        the NPUs, or when ``dst`` is not in it."""
        involved = None if node.involved_dim is None else tuple(node.involved_dim)
        key = (node.pg_name, involved, node.attrs.get(COMM_GROUP_STRIDE), node.attrs.get(COMM_GROUP_SIZE))
        found = self._p2p_groups.get(key)
        if found is None:
            group = self._group_of(node)
            if group is not None:
                members: tuple[int, ...] | None = tuple(group.members)
            elif involved is not None:
                members = tuple(involved_members(self.rank, self.context.dim_sizes, involved))
            elif key[2] is not None or key[3] is not None:
                members = self._strided_group(node, key[2], key[3])
            else:
                members = None
            found = self._p2p_groups[key] = (members, frozenset(members or ()))
        members, inside = found
        if members is not None and dst not in inside:
            raise TraceError(
                f"rank {self.rank}: node {node.id} ({node.name}): COMM_SEND to rank {dst}, "
                f"which is not in its communicator {list(members)[:16]}"
            )
        return members

    def _strided_group(self, node: ETNode, stride: object, size: object) -> tuple[int, ...]:
        """The ``size`` ranks ``stride`` apart that hold this rank. Raises TraceError
        unless both are integers >= 1 and every such rank is one of the NPUs."""
        npus = self.context.npus_count
        if type(stride) is int and type(size) is int and stride >= 1 and size >= 1:
            base = self.rank - (self.rank // stride % size) * stride
            if base + (size - 1) * stride < npus:
                return tuple(base + k * stride for k in range(size))
        raise TraceError(
            f"rank {self.rank}: node {node.id} ({node.name}): {COMM_GROUP_STRIDE} {stride!r} and "
            f"{COMM_GROUP_SIZE} {size!r} name no group of the {npus} NPUs (integers >= 1, the "
            "ranks that far apart that hold this one)"
        )

    def _issue_recv(self, pos: int, node: ETNode) -> None:
        src = self._p2p_peer(node, sending=False)
        self.matcher.recv(src, self.rank, node.comm_size, node.comm_tag or 0, self.complete, pos)

    def _p2p_peer(self, node: ETNode, sending: bool) -> int:
        """The other rank of a send/receive node, checked. Raises TraceError."""
        kind, peer_key, own_key = (
            ("COMM_SEND", "comm_dst", "comm_src") if sending else ("COMM_RECV", "comm_src", "comm_dst")
        )
        peer, own = getattr(node, peer_key), getattr(node, own_key)
        where = f"rank {self.rank}: node {node.id} ({node.name}): {kind}"
        if peer is None:
            raise TraceError(f"{where} has no {peer_key}")
        if own is not None and own != self.rank:
            raise TraceError(f"{where} with {own_key} {own} found in rank {self.rank}'s trace")
        if not 0 <= peer < self.context.npus_count or peer == self.rank:
            raise TraceError(f"{where}: peer rank {peer} is not another NPU of the {self.context.npus_count}")
        return peer

    def _issue_memory(self, pos: int, node: ETNode) -> None:
        memory = self.context.memory
        if not memory.enabled:
            raise TraceError(
                f"rank {self.rank}: node {node.id} ({node.name}): remote memory "
                "access needs a memory config other than NO_MEMORY_EXPANSION (--memory)"
            )
        delay = memory.access_done_delay(self.rank, node.tensor_size, self.sys.now())
        self.sys.register_event(int(delay), self.complete, pos)

    # -- completion -------------------------------------------------------------
    def complete(self, pos: int) -> None:
        """Node ``pos`` is done: free its slot, ready its children, and queue one
        issue pass for this instant behind the events already queued for it
        (a rank's choice then does not depend on the order of same-time events,
        which follows rank numbers; see :mod:`astra_core.system.symmetry`)."""
        node = self.nodes[pos]
        slot = self._slot(node)
        if slot is not None:
            self.slots[slot] -= 1
        now = self.sys.now()
        start = self.started.pop(pos)
        self.records.add(pos, start, now)
        if node.type in _COMM_NODES:
            self.comm_intervals.extend((start, now))
        elif node.type == MEM_LOAD or node.type == MEM_STORE:
            self.memory_intervals.append((start, now))
        self.done += 1
        counts = self.pending_parents
        nodes = self.nodes
        ties = None if self._issuing else self._ties  # completing as it is issued: part of the pass
        if ties is not None:
            ties.event(now)
            if ties.late(slot) and any(self._slot(nodes[p]) == slot for _, p in self.ready):
                self._order_matters(cast(int, slot))
        for child in self.graph.children[pos]:
            counts[child] -= 1
            if counts[child] == 0:
                self._readied(child)
                if ties is not None and ties.late(self._slot(nodes[child]), self.ready[-1][0]):
                    self._order_matters(cast(int, self._slot(nodes[child])))
        if self._streamed:
            # self._streamed: nodes is a StreamedNodes (no cast: a call per node)
            nodes.release(pos)  # type: ignore[union-attr]
        if self._issuing:  # completed as it was issued: the pass under way looks again
            self._issue_again = True
        elif not self._pass_due:
            self._pass_due = True
            self.sys.schedule_last(self._deferred_pass)
        self._check_finished()

    def _deferred_pass(self, _: object = None) -> None:
        self._pass_due = False
        self.issue_ready()

    def _readied(self, pos: int) -> None:
        if self._streamed:
            # self._streamed: nodes is a StreamedNodes and _ids its ids (no cast: a call per node)
            self.nodes.hold(pos)  # type: ignore[union-attr]
            self.ready.append((self._ids[pos], pos))  # type: ignore[index]
        else:
            self.ready.append((self.nodes[pos].id, pos))

    def _order_matters(self, slot: int) -> None:
        """Stop a symmetric run whose outcome may hang on the order of same-time events."""
        names = {CPU: "CPU", GPU_COMP: "GPU compute", GPU_COMM: "GPU communication"}
        names[slot] = names.get(slot, f"GPU communication stream {slot - GPU_COMM}")
        raise TieOrderMatters(
            f"rank {self.rank} at t={self.sys.now():.0f} ns: an event came after its "
            f"{names[slot]} slot was given in the same instant and could have changed who got it"
        )

    def _check_finished(self) -> None:
        if self.finish_ns is None and self.done == len(self.nodes):
            self.finish_ns = self.sys.now()
            self.listener.rank_finished(self.rank)

    # -- diagnostics --------------------------------------------------------------
    def waiting(self, rank: int | None = None) -> list[str]:
        """What this unfinished rank waits on, one line per node (deadlock report).

        ``rank``: under rank symmetry, a rank this engine's rank stands for;
        the lines then name that rank's own nodes (same positions in its
        trace) and its peers, groups and chunk tags (see
        :meth:`Simulation.describe_wait`). Default: this engine's rank.
        """
        rank = self.rank if rank is None else rank
        graph = self.graph if rank == self.rank else self.context.graphs[rank]
        nodes = graph.nodes
        lines = []
        for pos in sorted(self.started):
            node = nodes[pos]
            what = self.listener.describe_wait(self, rank, node)
            lines.append(f"node {node.id} ({node.name}) {what}")
        if not self.started:
            if self._blocked is None:  # the same for every rank this engine stands for
                self._blocked = [p for p, c in enumerate(self.pending_parents) if c > 0]
            blocked = self._blocked
            cyclic = graph.cyclic_ids
            if cyclic:
                sample = ", ".join(str(i) for i in cyclic[:6])
                lines.append(
                    f"nodes {sample}{' ...' if len(cyclic) > 6 else ''} depend on each "
                    f"other in a cycle of data dependencies ({len(blocked)} node(s) "
                    "can never run)"
                )
            elif blocked:
                sample = ", ".join(str(nodes[p].id) for p in blocked[:5])
                lines.append(f"{len(blocked)} node(s) wait on parents that never finished, e.g. {sample}")
        return lines
