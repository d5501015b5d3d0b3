"""Running one NCCL collective on one rank: its lanes' messages and NCCL's time.

A rank's part of an NCCL collective ends when three things are true:

* every message of its lanes (:mod:`.schedule`) was sent and delivered, each
  send issued once the receives it forwards arrived and no more than the
  lane's window were in flight: this is what the network backend times, and
  what congestion on a packet backend slows down;
* every message it expects arrived;
* NCCL's predicted time for the operation has passed since it started
  (:meth:`.model.NcclModel.choose`: NCCL's cost model with the channels it
  launches for this size): the kernel's launch, its per-step synchronisation
  and the rate at which its channels copy and reduce, none of which a
  network model sees.

On a fabric as fast as the one NCCL was tuned for, the last one decides (and
astra then predicts what NCCL predicts for itself); a slower or congested
fabric shows through the first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from astra_core.events import kernel
from astra_core.system.collectives.nccl.schedule import Schedule
from astra_core.system.comm_types import CommType

if TYPE_CHECKING:
    from astra_core._astra_kernel import NcclPhase as _KernelNcclPhase

else:
    _KernelNcclPhase = kernel().NcclPhase

#: Tags of NCCL messages (the kernel's): ``TAG_BASE + stream id x LANES_PER_TAG + lane``,
#: 2^48 up, above every chunk tag of the native algorithms (stream ids, or group id x
#: 1e6 + k), room for 4096 lanes per stream.
TAG_BASE: int = kernel().NCCL_TAG_BASE
LANES_PER_TAG: int = kernel().NCCL_LANES_PER_TAG


@dataclass(frozen=True)
class NcclChoice:
    """What the NCCL model chose for one collective, as NCCL_DEBUG=INFO reports it.

    ``algorithm``: NCCL's name as ``NCCL_ALGO`` spells it (``Ring``, ``Tree``,
    ``NVLS``, ``NVLSTree``, ``CollNetDirect``, ``CollNetChain``; ``SendRecv``
    for an all-to-all, NCCL's grouped send/receive); ``protocol``: ``LL``,
    ``LL128`` or ``Simple``; ``channels``: the channels it launches for this
    size; ``predicted_ns``: NCCL's own predicted time of the operation
    (``ncclTopoGetAlgoTime``), ns; ``ranks``: the communicator's size.
    """

    algorithm: str
    protocol: str
    channels: int
    predicted_ns: int
    ranks: int


class NcclPhase(_KernelNcclPhase):
    """One rank's part of one NCCL collective (see the module docstring), run by the
    kernel (``astra_core/cpp/kernel.cc``).

    ``schedule``: its :class:`~.schedule.Schedule` (``lanes`` and ``recvs``: the same,
    frozen into tuples, :meth:`~.schedule.Schedule.frozen`); ``floor_ns``: NCCL's
    predicted duration; ``label``: algorithm, protocol and channels, for
    messages; ``choice``: the same as data (:class:`NcclChoice`), for reports.
    """

    name = "nccl"
    __slots__ = ("schedule", "label", "choice")

    def __init__(
        self,
        comm_type: CommType,
        rank: int,
        data_size: int,
        final_data_size: int,
        schedule: Schedule,
        lanes: tuple,
        recvs: tuple,
        floor_ns: int,
        label: str,
        choice: NcclChoice | None = None,
    ):
        super().__init__(comm_type, rank, data_size, final_data_size, lanes, recvs, floor_ns)
        self.schedule = schedule
        self.label = label
        self.choice = choice

    def waiting_for(self) -> str:
        """What the phase waits on, in one line (deadlock reports)."""
        arrived = self.arrived
        missing = sorted({src for j, (src, _, _) in enumerate(self.schedule.recvs) if not arrived[j]})
        unsent = sum(len(lane.sends) - k for lane, k in zip(self.schedule.lanes, self.next_sends))
        shown = ", ".join(str(r) for r in missing[:4]) or "-"
        return (
            f"NCCL {self.label} {self.comm_type.label}: {unsent} messages not sent; "
            f"waiting for rank(s) {shown}"
        )


class FoldedNcclPhase(NcclPhase):
    """A rank's part of an NCCL collective that rank symmetry *folds*
    (:mod:`astra_core.system.floor_fold`): it sends and receives nothing and ends
    when NCCL's predicted time has passed; ``on_start(phase)`` is told when it
    starts (the run checks afterwards that the members' messages would have been
    over by then). ``members``: the communicator's ranks."""

    __slots__ = ("members", "on_start")

    def __init__(
        self,
        comm_type: CommType,
        rank: int,
        data_size: int,
        final_data_size: int,
        members: tuple[int, ...],
        floor_ns: int,
        label: str,
        choice: NcclChoice | None,
        on_start,
    ):
        super().__init__(
            comm_type, rank, data_size, final_data_size, Schedule(), (), (), floor_ns, label, choice
        )
        self.members = members
        self.on_start = on_start

    def start(self) -> None:
        self.on_start(self)
        super().start()

    def waiting_for(self) -> str:
        return f"NCCL {self.label} {self.comm_type.label} (folded): waiting for NCCL's predicted time"
