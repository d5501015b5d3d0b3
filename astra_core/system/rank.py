"""The per-rank system layer: chunking collectives into streams and scheduling them.

One :class:`RankSystem` per NPU, mirroring upstream ``Sys``:

* **Event buckets.** Events a rank registers for the same tick are batched and
  run together when the first of them comes due (upstream
  ``Sys::register_event``/``call_events``); this fixes the order of
  same-time events across ranks, which the reproduced timings depend on.
* **Collectives.** A collective of ``S`` bytes becomes
  ``preferred-dataset-splits`` chunks (streams). Each stream gets one phase per
  involved dimension: the collective itself on every dimension in order
  (all-gather: highest dimension first), or for an all-reduce with
  ``localBWAware``: reduce-scatter up the dimensions, all-reduce on the last
  one, all-gather back down.
* **Scheduling.** Streams wait in a ready list, then in one queue per
  dimension; at most ``active-chunks-per-dimension`` run per queue (no limit
  where every collective runs on NCCL alone: NCCL runs a collective whole as
  soon as its GPU stream issues it, and the engine issues one per stream). Waiting
  streams are ordered by priority: LIFO gives later collectives priority,
  FIFO earlier ones, EXPLICIT the ET node's ``comm_priority`` (higher first,
  equal ones in issue order; upstream ``Sys::get_priority``); already running
  streams are never overtaken.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from astra_core.config.collective_impl import NCCL, CollectiveAlgorithm
from astra_core.config.limits import MAX_INT32
from astra_core.errors import ConfigError
from astra_core.events import kernel
from astra_core.system.clock import clock_of
from astra_core.system.collectives import DimTopology, build_logical_dims
from astra_core.system.collectives.logical_topology import RingTopology, involved_members
from astra_core.system.collectives.uneven import uneven_of
from astra_core.system.comm_types import CONFIGURABLE, ROOTED, CommType
from astra_core.system.stream import DataSet, Phase, Stream

if TYPE_CHECKING:
    from astra_core.backend import NetworkBackend
    from astra_core.system.collectives.base import PhaseAlgorithm
    from astra_core.system.collectives.nccl.model import NcclModel
    from astra_core.system.collectives.uneven import Uneven
    from astra_core.system.context import RunContext
    from astra_core.system.p2p import MessageMatcher
    from astra_core.workload.chakra import ETNode

#: Upstream reads comm_priority as uint32 and passes it on as a C int
#: (Workload::issue_comm -> Sys::generate_*), so values >= 2^31 wrap negative.
_INT32_WRAP = 1 << 32


def group_algorithm(algorithms: Sequence[CollectiveAlgorithm]) -> str:
    """The algorithm a communicator group smaller than the network runs on the
    ring of its members: the configured one when system.json lists one
    algorithm (a ``one*`` form runs its base algorithm), else ring (upstream
    ``CommunicatorGroup::get_collective_plan``).  Names as in
    :data:`~astra_core.system.collectives.ALGORITHMS`, or ``plugin:NAME``."""
    if len(algorithms) != 1:
        return "ring"
    name = algorithms[0]
    return name.kind.base.value if name.plugin_name is None else str(name)


class CommGroup:
    """A communicator group as one rank sees it (upstream ``CommunicatorGroup``).

    A group spanning every NPU runs on the full logical topology; any other
    group runs over the ring of its members, in the order the comm-group file
    lists them, with :func:`group_algorithm`. Its streams are tagged
    ``id * 1_000_000 + k``.
    """

    __slots__ = ("group_id", "members", "next_stream_id", "_dims")

    def __init__(self, group_id: int, members: list[int]):
        self.group_id = group_id
        self.members = members
        self.next_stream_id = group_id * 1_000_000
        self._dims: dict[tuple[str, int | None], list[DimTopology]] = {}

    def dims(
        self,
        rank: int,
        comm_type: CommType = CommType.ALL_REDUCE,
        algorithms: Sequence[CollectiveAlgorithm] = (),
        source: str = "system.json",
    ) -> list[DimTopology]:
        """The one logical dimension ``comm_type`` runs on for ``rank``.

        Raises ConfigError (naming ``source``) for doubleBinaryTree, which
        needs a tree, not a ring (upstream casts the ring to a tree).
        """
        algorithm = group_algorithm(algorithms)
        window = algorithms[0].window if len(algorithms) == 1 else None
        dims = self._dims.get((algorithm, window))
        if dims is None:
            if algorithm == "doubleBinaryTree":
                shown = ", ".join(str(m) for m in self.members[:4])
                more = ", ..." if len(self.members) > 4 else ""
                raise ConfigError(
                    f"{source}: {comm_type.label}-implementation: doubleBinaryTree cannot run "
                    f"on a communicator group smaller than the network ({len(self.members)} "
                    f"NPUs: {shown}{more}), which runs on a ring of its members (upstream "
                    "reads that ring as a tree); use ring, direct or halvingDoubling, or list "
                    "one algorithm per dimension (the group then runs a ring)"
                )
            ring = RingTopology(rank, list(self.members), local=True)
            dims = self._dims[(algorithm, window)] = [
                DimTopology(algorithm, -1 if window is None else window, ring=ring)
            ]
        return dims


class RankSystem:
    """System layer of one NPU: streams, queues and the NPU<->memory model.

    Times in ns (integers, as upstream ticks), sizes in bytes.
    """

    def __init__(self, rank: int, context: RunContext, backend: NetworkBackend, matcher: MessageMatcher):
        self.id = rank
        self.context = context
        #: The port a phase sends and receives its chunk's messages through
        #: (``send(src, dst, size, tag, ...)``, ``recv(src, dst, size, tag, ...)``).
        self.matcher = matcher
        self.backend = backend
        self._clock = clock_of(backend)
        system = context.system
        self.endpoint_delay_ns = int(system.endpoint_delay_ns)
        bw = system.local_mem_bw_gbps  # GB/s, 1 GB = 1e9 B (upstream Sys.cc) = bytes/ns
        self.local_mem_bytes_per_ns = float(bw) if bw else 0.0
        self.lifo = system.scheduling_policy == "LIFO"
        self.explicit = system.scheduling_policy == "EXPLICIT"
        self.splits = max(1, int(system.preferred_dataset_splits))
        # on NCCL alone, what runs at once is one collective per GPU stream, not a queue's limit
        self.queue_threshold = (
            MAX_INT32 if context.nccl_only else max(1, int(system.active_chunks_per_dimension))
        )
        self.local_bw_aware = system.collective_optimization == "localBWAware"
        dim_sizes = context.dim_sizes
        self.dims_by_type: dict[CommType, list[DimTopology]] = {
            comm_type: build_logical_dims(rank, dim_sizes, context.implementations[comm_type], system.source)
            for comm_type in CONFIGURABLE
        }
        self.priority_counter = 0
        self.next_stream_id = 0
        #: The rank's events batched per tick and its local-memory timing, in the kernel
        #: (upstream ``Sys::register_event`` / ``call_events``).
        self.events = kernel().RankEvents(
            rank, self._clock, self.endpoint_delay_ns, self.local_mem_bytes_per_ns
        )
        #: ``register_event(delay_ns, callback, arg=None)``: run ``callback(arg)`` after
        #: ``delay_ns``, batched per tick: the first event of a tick queues one event that runs
        #: the tick's events in the order they were registered, also those registered for the
        #: tick while they run (upstream ``Sys``).
        self.register_event: Callable[..., None] = self.events.register_event
        # The stream queues, one per dimension, in the kernel (see the module docstring).
        self.events.configure_queues(len(dim_sizes), self.queue_threshold)
        #: ``proceed_to_next_phase(stream)``: finish the stream's current phase and queue its
        #: next one, or retire it (upstream ``Sys::proceed_to_next_vnet_baseline``).
        self.proceed_to_next_phase: Callable[[Stream], None] = self.events.proceed_to_next_phase

    # -- clock --------------------------------------------------------------
    def now(self) -> float:
        return self._clock.now

    def schedule_last(self, callback: Callable[[Any], None]) -> None:
        """Run ``callback(None)`` at the current time, after every event already
        queued for it (the backend's queue runs same-time events in the order
        they were scheduled)."""
        self._clock.schedule(0, callback, None)

    # -- local memory ---------------------------------------------------------
    def reduction_delay_ns(self, size: int) -> int:
        """Time to reduce ``size`` received bytes: one write and two reads.

        Each access takes ``bytes / local-mem-bw`` truncated to whole ns
        (upstream ``PacketBundle::call`` with ``Sys::mem_read/mem_write``);
        without a local-mem-bw each access costs upstream's fallback 10 ns.
        """
        return self.events.reduction_delay_ns(size)

    # -- messages -------------------------------------------------------------
    def send_collective(self, dst: int, size: int, tag: int) -> None:
        """Send ``size`` bytes of the chunk tagged ``tag`` to rank ``dst``."""
        self.matcher.send(self.id, dst, size, tag, None, None, collective=True)

    def recv_collective(self, src: int, size: int, tag: int, on_received: Callable[[Any], None]) -> None:
        """Expect ``size`` bytes of chunk ``tag`` from ``src``; ``on_received(None)`` on arrival."""
        self.matcher.recv(src, self.id, size, tag, on_received, None)

    # -- collectives ------------------------------------------------------------
    def generate_collective(
        self,
        comm_type: CommType,
        size: int,
        involved_dims: Sequence[bool] | None,
        group: CommGroup | None,
        node: ETNode | None = None,
        trace: str = "the trace",
    ) -> DataSet:
        """Split a collective into streams and queue them; returns its DataSet.

        ``involved_dims[d]`` says whether dimension ``d`` takes part (missing
        entries count as involved). A size that does not divide into
        ``preferred-dataset-splits`` chunks gets a smaller last chunk (upstream
        underflows there). A collective with nothing to do (zero bytes or no
        involved dimension with more than one NPU) finishes at once.
        ``node`` is the ET node that issues it: its ``comm_priority`` orders
        the chunks under EXPLICIT scheduling, its ``send_bytes`` / ``recv_bytes``
        make an all-to-all uneven (:mod:`.collectives.uneven`), and error messages
        name it and ``trace``, its file.

        Raises ConfigError (naming system.json, this rank and the node) when
        system.json has no ``<type>-implementation`` for this collective, as
        upstream's ``CollectiveImplLookup::get_collective_impl`` throws, and
        TraceError for an uneven all-to-all the node does not describe right.
        """
        dims, involved_dims = self._collective_dims(comm_type, involved_dims, group, node)
        active = [
            d
            for d in range(len(dims))
            if dims[d].nodes > 1 and (involved_dims is None or d >= len(involved_dims) or involved_dims[d])
        ]
        dataset = DataSet(0, self.now())
        if size <= 0 or not active:
            dataset.total_streams = 1
            self.register_event(0, lambda _: dataset.stream_finished(self.now()))
            return dataset
        uneven = None
        if node is not None and node.attrs:
            uneven = uneven_of(node, self.id, self._nccl_members(comm_type, dims, active), trace)
        if node is not None and uneven is not None:  # the NCCL model's grouped sends, one stream
            streams = [self._uneven_stream(comm_type, size, dims, active[0], group, dataset, uneven, node)]
        else:
            # NCCL and custom collectives chunk their buffer themselves (upstream: one
            # stream for a custom collective, Sys::generate_collective)
            splits = 1 if self.context.phases[dims[0].algorithm].whole_buffer else self.splits
            streams = self._streams(
                comm_type, size, splits, dims, active, group, dataset, self._priority(node)
            )
        dataset.total_streams = len(streams)
        # an algorithm that chose among options says what it chose (the NCCL model)
        dataset.nccl_choice = getattr(streams[0].phases_to_go[0].algorithm, "choice", None)
        self.events.add_streams(streams)
        return dataset

    def _collective_dims(
        self,
        comm_type: CommType,
        involved_dims: Sequence[bool] | None,
        group: CommGroup | None,
        node: ETNode | None,
    ) -> tuple[list[DimTopology], Sequence[bool] | None]:
        """The logical dimensions a collective runs on and which of them take part
        (None: all): the network's, its communicator group's ring, or one ring of
        the communicator's members for NCCL, rooted and custom collectives."""
        context = self.context
        custom = context.custom.get(comm_type)
        if comm_type in ROOTED:  # NCCL's broadcast / reduce (the engine checks NCCL is on)
            return [self._members_ring(NCCL, group)], None
        if custom is not None:
            return [self._members_ring(custom, group)], None
        if not context.implementations[comm_type]:
            self._no_implementation(comm_type, node)
        if group is None:
            dims = self.dims_by_type[comm_type]
            if dims[0].algorithm == NCCL and involved_dims is not None:
                # NCCL's communicator is the ranks that differ from this one only on the
                # involved dimensions, not the whole network its one logical ring spans
                members = involved_members(self.id, context.dim_sizes, involved_dims)
                return [DimTopology(NCCL, ring=RingTopology(self.id, members, local=True))], None
            return dims, involved_dims
        if len(group.members) == context.npus_count:
            return self.dims_by_type[comm_type], None
        return group.dims(self.id, comm_type, context.implementations[comm_type], context.system.source), None

    def _members_ring(self, algorithm: str, group: CommGroup | None) -> DimTopology:
        """One dimension running ``algorithm`` on the ring of ``group``'s members
        (every NPU without a group)."""
        members = list(group.members) if group is not None else list(range(self.context.npus_count))
        return DimTopology(algorithm, ring=RingTopology(self.id, members, local=True))

    def _priority(self, node: ETNode | None) -> int:
        """The next collective's chunk priority (see the module's scheduling notes)."""
        if self.explicit:
            priority = node.comm_priority if node is not None else 0
            return priority - _INT32_WRAP if priority >= _INT32_WRAP // 2 else priority
        priority = self.priority_counter
        self.priority_counter += 1 if self.lifo else -1
        return priority

    def _streams(
        self,
        comm_type: CommType,
        size: int,
        splits: int,
        dims: list[DimTopology],
        active: list[int],
        group: CommGroup | None,
        dataset: DataSet,
        priority: int,
    ) -> list[Stream]:
        """``size`` bytes in ``splits`` chunks (a smaller last one when they do not
        divide), each a stream with one phase per active dimension."""
        chunk = size // splits if size >= splits else size
        streams = []
        remaining = size
        while remaining > 0:
            this_chunk = min(chunk, remaining)
            remaining -= this_chunk
            phases = self._phases(comm_type, dims, active, this_chunk)
            streams.append(Stream(self, dataset, self._stream_id(group), phases, priority))
        return streams

    def _uneven_stream(
        self,
        comm_type: CommType,
        size: int,
        dims: list[DimTopology],
        d: int,
        group: CommGroup | None,
        dataset: DataSet,
        uneven: Uneven,
        node: ETNode,
    ) -> Stream:
        """The one stream of an uneven all-to-all on dimension ``d`` (:mod:`.collectives.uneven`)
        that ``node`` issues, its bytes checked against those of the
        members that issued it before."""
        members = tuple(cast(RingTopology, dims[d].ring).members)
        stream_id = self._stream_id(group)
        self.context.uneven_book.check(tuple(sorted(members)), stream_id, uneven)
        algorithm = cast("NcclModel", self.context.nccl).phase(comm_type, self.id, members, size, uneven)
        return Stream(self, dataset, stream_id, [Phase(d, algorithm)], self._priority(node))

    def _stream_id(self, group: CommGroup | None) -> int:
        """The next chunk's stream id: this rank's count, or its communicator group's."""
        if group is None:
            stream_id = self.next_stream_id
            self.next_stream_id += 1
        else:
            stream_id = group.next_stream_id
            group.next_stream_id += 1
        return stream_id

    @staticmethod
    def _nccl_members(
        comm_type: CommType, dims: list[DimTopology], active: list[int]
    ) -> tuple[int, ...] | None:
        """The members of the one NCCL communicator an all-to-all runs on, or None."""
        if comm_type is not CommType.ALL_TO_ALL or len(active) != 1 or dims[active[0]].algorithm != NCCL:
            return None
        return tuple(sorted(cast(RingTopology, dims[active[0]].ring).members))

    def _no_implementation(self, comm_type: CommType, node: ETNode | None) -> None:
        label = comm_type.label
        where = f"rank {self.id}" + (f" node {node.id} ({node.name})" if node is not None else "")
        raise ConfigError(
            f"{self.context.system.source}: no {label}-implementation, but {where} "
            f'issues collective {comm_type.name}; add "{label}-implementation" '
            "with one algorithm per network dimension"
        )

    def _phases(
        self, comm_type: CommType, dims: list[DimTopology], active: list[int], chunk: int
    ) -> list[Phase]:
        order = active[::-1] if comm_type is CommType.ALL_GATHER else active
        if comm_type is not CommType.ALL_REDUCE or not self.local_bw_aware:
            plan = [(comm_type, d) for d in order]
        else:
            plan = (
                [(CommType.REDUCE_SCATTER, d) for d in order[:-1]]
                + [(CommType.ALL_REDUCE, order[-1])]
                + [(CommType.ALL_GATHER, d) for d in reversed(order[:-1])]
            )
        phases = []
        data = chunk
        build = self.context.phases.build
        for phase_type, d in plan:
            algorithm = build(phase_type, self.id, dims[d], data)
            phases.append(Phase(d, algorithm))
            data = algorithm.final_data_size
        return phases

    @property
    def active_streams(self) -> list[list[Stream]]:
        """Per dimension: the streams on its queue, running ones first."""
        return self.events.active_streams()

    # -- diagnostics ---------------------------------------------------------------
    def waiting_streams(self) -> list[str]:
        """What each unfinished stream of this rank waits on (deadlock reports)."""
        lines = []
        for queue in self.active_streams:
            for stream in queue:
                state = (
                    cast("PhaseAlgorithm", stream.algorithm).waiting_for()  # on a queue: set
                    if stream.initialized
                    else "queued behind another chunk"
                )
                lines.append(f"chunk tag {stream.stream_id}: {state}")
        return lines
