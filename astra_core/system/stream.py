"""Streams (one chunk's journey through its phases) and datasets (one collective).

A collective of ``S`` bytes is split into chunks; each chunk is a
:class:`Stream` that runs its phases (one per involved network dimension, e.g.
reduce-scatter on dim 0, all-reduce on dim 1, all-gather on dim 0) one after
another. A :class:`DataSet` counts its streams and notifies the rank engine
when the last one finishes. Mirrors upstream ``StreamBaseline``/``DataSet``.
The stream is the kernel's (``astra_core/cpp/kernel.cc``), as are the queues
that schedule it (:class:`~astra_core.system.rank.RankSystem`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from astra_core.events import kernel
from astra_core.system.collectives.base import PhaseAlgorithm, PhasePort


class Phase:
    """One step of a stream: an algorithm on one logical dimension (and its queue)."""

    __slots__ = ("dim", "algorithm")

    def __init__(self, dim: int, algorithm: PhaseAlgorithm):
        self.dim = dim
        self.algorithm = algorithm


class DataSet:
    """One collective on one rank: finished when all its streams are.

    ``on_finished(dataset)`` is called synchronously when the last stream
    leaves its last phase (upstream ``DataSet::notify_stream_finished``).
    ``nccl_choice``: the NCCL model's algorithm, protocol and channels
    (:class:`~astra_core.system.collectives.nccl.phase.NcclChoice`) when the
    collective runs on it, else None.
    """

    __slots__ = (
        "total_streams",
        "finished_streams",
        "on_finished",
        "start_ns",
        "finish_ns",
        "phase_times",
        "nccl_choice",
    )

    def __init__(self, total_streams: int, start_ns: float):
        self.total_streams = total_streams
        self.finished_streams = 0
        self.on_finished: Callable[[DataSet], None] | None = None
        self.start_ns = start_ns
        self.finish_ns: float | None = None
        # per phase of every chunk: (dim, type, start, end) as the kernel logs it
        # (system.records.PhaseTimes reads it)
        self.phase_times = bytearray()
        # what the NCCL model chose (nccl.phase.NcclChoice), for an NCCL collective
        self.nccl_choice = None

    def stream_finished(self, now: float) -> None:
        self.finished_streams += 1
        if self.finished_streams == self.total_streams:
            self.finish_ns = now
            on_finished, self.on_finished = self.on_finished, None  # called once: let it go
            if on_finished is not None:
                on_finished(self)


if TYPE_CHECKING:

    class Stream:
        """One chunk of a collective moving through its phases on one rank.

        ``stream_id`` is the message tag shared by all ranks for this chunk.
        ``priority`` orders streams waiting for the same queue (higher first).
        """

        owner: PhasePort
        dataset: DataSet
        stream_id: int
        priority: int
        phases_to_go: list[Phase]
        phase: Phase | None
        algorithm: PhaseAlgorithm | None
        current_queue_id: int
        initialized: bool
        phase_start_ns: float

        def __init__(
            self, owner: PhasePort, dataset: DataSet, stream_id: int, phases: list[Phase], priority: int
        ) -> None: ...

        def init(self) -> None:
            """The stream got a slot on its queue: start the current phase."""

else:
    Stream = kernel().Stream
