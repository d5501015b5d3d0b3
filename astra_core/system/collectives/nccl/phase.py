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

from astra_core.system.collectives.base import CollectivePhase
from astra_core.system.collectives.nccl.schedule import Schedule

#: Tags of NCCL messages: above every chunk tag of the native algorithms
#: (stream ids, or group id x 1e6 + k), room for 4096 lanes per stream.
TAG_BASE = 1 << 48
LANES_PER_TAG = 4096


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


class NcclPhase(CollectivePhase):
    """One rank's part of one NCCL collective (see the module docstring).

    ``schedule``: its :class:`~.schedule.Schedule`; ``floor_ns``: NCCL's
    predicted duration; ``label``: algorithm, protocol and channels, for
    messages; ``choice``: the same as data (:class:`NcclChoice`), for reports.
    """

    name = "nccl"
    __slots__ = (
        "schedule",
        "floor_ns",
        "label",
        "choice",
        "_next",
        "_delivered",
        "_arrived",
        "_open",
        "_tag",
        "_waiters",
        "_blocked_on",
    )

    def __init__(
        self,
        comm_type,
        rank: int,
        data_size: int,
        final_data_size: int,
        schedule: Schedule,
        floor_ns: int,
        label: str,
        choice: NcclChoice | None = None,
    ):
        super().__init__(comm_type, rank, data_size)
        self.final_data_size = final_data_size
        self.schedule = schedule
        self.floor_ns = floor_ns
        self.label = label
        self.choice = choice
        lanes = schedule.lanes
        self._next = [0] * len(lanes)
        self._delivered = [0] * len(lanes)
        self._arrived = [False] * len(schedule.recvs)
        self._open = sum(2 * len(lane.sends) for lane in lanes) + len(schedule.recvs) + 1
        self._tag = 0
        # receive index -> lanes whose next send waits for it; each lane waits on one at most
        self._waiters: dict[int, list[int]] = {}
        self._blocked_on = [-1] * len(lanes)

    def start(self) -> None:
        owner = self.stream.owner
        self._tag = TAG_BASE + self.stream.stream_id * LANES_PER_TAG
        matcher = owner.matcher
        for j, (src, size, lane) in enumerate(self.schedule.recvs):
            matcher.recv(src, self.rank, size, self._tag + lane, self._received, j)
        owner.register_event(self.floor_ns, self._floor)
        for i in range(len(self.schedule.lanes)):
            self._issue(i)

    def _issue(self, i: int) -> None:
        lane = self.schedule.lanes[i]
        sends = lane.sends
        k = self._next[i]
        arrived = self._arrived
        matcher = self.stream.owner.matcher
        tag = self._tag + i
        while k < len(sends) and k - self._delivered[i] < lane.window:
            dst, size, needs = sends[k]
            missing = next((j for j in needs if not arrived[j]), -1)
            if missing >= 0:
                if self._blocked_on[i] != missing:
                    self._blocked_on[i] = missing
                    self._waiters.setdefault(missing, []).append(i)
                break
            k += 1
            self._next[i] = k
            self._open -= 1
            matcher.send(self.rank, dst, size, tag, self._sent, i, collective=True)
        self._next[i] = k

    def _sent(self, i: int) -> None:
        self._delivered[i] += 1
        self._open -= 1
        self._issue(i)
        self._check()

    def _received(self, j: int) -> None:
        self._arrived[j] = True
        self._open -= 1
        for i in self._waiters.pop(j, ()):
            self._blocked_on[i] = -1
            self._issue(i)
        self._check()

    def _floor(self, _arg=None) -> None:
        self._open -= 1
        self._check()

    def _check(self) -> None:
        if self._open == 0:
            self._open = -1
            self.exit()

    def waiting_for(self) -> str:
        missing = sorted({src for j, (src, _, _) in enumerate(self.schedule.recvs) if not self._arrived[j]})
        unsent = sum(len(lane.sends) - k for lane, k in zip(self.schedule.lanes, self._next))
        shown = ", ".join(str(r) for r in missing[:4]) or "-"
        return (
            f"NCCL {self.label} {self.comm_type.label}: {unsent} messages not sent; "
            f"waiting for rank(s) {shown}"
        )
