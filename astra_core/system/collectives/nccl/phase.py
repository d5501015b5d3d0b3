"""Running one NCCL collective on one rank: its lanes' messages and NCCL's time.

A rank's part of an NCCL collective ends when three things are true:

* every message of its lanes (:mod:`.schedule`) was sent and delivered, each
  send issued once the receives it forwards arrived and no more than the
  lane's window were in flight: this is what the network backend times, and
  what congestion on a packet backend slows down;
* every message it expects arrived;
* NCCL's own predicted time for the operation has passed since it started
  (:meth:`.tuning.Tuning.time_us` with the channels NCCL launches for this
  size): the kernel's launch, its per-step synchronisation and the rate at
  which its channels copy and reduce, none of which a network model sees.

On a fabric as fast as the one NCCL was tuned for, the last one decides (and
astra then predicts what NCCL predicts for itself); a slower or congested
fabric shows through the first.
"""

from __future__ import annotations

from astra_core.system.collectives.base import CollectiveAlgorithm
from astra_core.system.collectives.nccl.schedule import Lane

#: Tags of NCCL messages: above every chunk tag of the native algorithms
#: (stream ids, or group id x 1e6 + k), 64 lanes per stream.
TAG_BASE = 1 << 48
LANES_PER_TAG = 64


class NcclPhase(CollectiveAlgorithm):
    """One rank's part of one NCCL collective (see the module docstring).

    ``lanes``: its :class:`~.schedule.Lane` list; ``floor_ns``: NCCL's
    predicted duration; ``label``: algorithm and protocol, for reports.
    """

    name = "nccl"
    __slots__ = ("lanes", "floor_ns", "label", "_next", "_delivered", "_arrived", "_open",
                 "_floor_passed", "_tag")

    def __init__(self, comm_type, rank: int, data_size: int, final_data_size: int,
                 lanes: list[Lane], floor_ns: int, label: str):
        super().__init__(comm_type, rank, data_size)
        self.final_data_size = final_data_size
        self.lanes = lanes
        self.floor_ns = floor_ns
        self.label = label
        self._next = [0] * len(lanes)
        self._delivered = [0] * len(lanes)
        self._arrived = [[False] * len(lane.recvs) for lane in lanes]
        self._open = sum(2 * len(lane.sends) + len(lane.recvs) for lane in lanes) + 1
        self._floor_passed = False
        self._tag = 0

    def start(self) -> None:
        stream = self.stream
        owner = stream.owner
        self._tag = TAG_BASE + stream.stream_id * LANES_PER_TAG
        matcher = owner.sim.matcher
        for i, lane in enumerate(self.lanes):
            tag = self._tag + i
            for j, (src, size) in enumerate(lane.recvs):
                matcher.recv(src, self.rank, size, tag, self._received, (i, j))
        owner.register_event(self.floor_ns, self._floor)
        for i in range(len(self.lanes)):
            self._issue(i)

    def _issue(self, i: int) -> None:
        lane = self.lanes[i]
        sends = lane.sends
        k = self._next[i]
        arrived = self._arrived[i]
        matcher = self.stream.owner.sim.matcher
        tag = self._tag + i
        while k < len(sends) and k - self._delivered[i] < lane.window:
            dst, size, needs = sends[k]
            if needs and not all(arrived[j] for j in needs):
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

    def _received(self, where: tuple[int, int]) -> None:
        i, j = where
        self._arrived[i][j] = True
        self._open -= 1
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
        lines = []
        for i, lane in enumerate(self.lanes):
            missing = [lane.recvs[j][0] for j, ok in enumerate(self._arrived[i]) if not ok]
            if missing or self._next[i] < len(lane.sends):
                shown = ", ".join(str(r) for r in sorted(set(missing))[:4])
                lines.append(f"lane {i}: {len(lane.sends) - self._next[i]} of {len(lane.sends)} "
                             f"messages not sent; waiting for rank(s) {shown or '-'}")
        what = "; ".join(lines[:2]) or "NCCL's predicted time"
        return f"NCCL {self.label} {self.comm_type.label}: {what}"
