"""A rank's GPU compute slowed by the communication kernels running beside it.

NCCL runs a collective as a kernel of one thread block per channel, on the same
SMs as the step's GEMMs; a GEMM issued for the whole GPU then runs on the SMs
left and takes longer than alone, by more than the share of SMs taken (its waves
no longer fit). Measured on an H200 (``scripts/measure_overlap.py``,
``astra_core/config/measured/h200_overlap.json``): a kernel holding 8, 16, 24 or 32
SMs, moving about 20 GB/s per SM as NCCL's channels do inside an NVLink node,
slowed large BF16 and FP8 GEMMs by 12, 22, 21 and 35 % (the two GEMMs' mean); at
a tenth of that rate nearly as much, so it is the SMs held that count.

While one or more collectives of the rank are in flight, its running GPU
compute node progresses at ``1 / factor``, ``factor`` the GPU's measured
slowdown (:attr:`~astra_core.config.gpus.GPUSpec.nccl_compute_slowdown`) at the
SMs of the widest collective in flight, linear between the measured SM
counts, 1 at none, and the last measured factor beyond them. A collective holds
the SMs its node names (``comm_sms``: DeepEP's, HybridEP's and Transformer
Engine's userbuffers kernels, which take a configured number; 0 where the GEMMs
beside it were launched on the other SMs, which their own time already counts),
else its NCCL channels. Its end is re-planned each
time that factor changes. Point-to-point transfers and other collectives outside
the NCCL model do not slow compute (their SM footprint is not known: Transformer
Engine's tensor-parallel overlap copies with the copy engines, NCCL's
send/receive kernels hold few channels).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import cast

__all__ = ["ComputeContention", "slowdown"]


def slowdown(rows: Sequence[tuple[float, float]], sms: float) -> float:
    """The factor a GEMM's time grows by beside a kernel holding ``sms`` SMs, from
    measured ``rows`` of ``(sms, factor)`` sorted by SMs: linear between them and from
    ``(0, 1)`` to the first, the last factor beyond the last."""
    if sms <= 0 or not rows:
        return 1.0
    points = [(0.0, 1.0), *rows]
    i = bisect.bisect_left([p[0] for p in points], sms)
    if i >= len(points):
        return points[-1][1]
    (s0, f0), (s1, f1) = points[i - 1], points[i]
    return f0 + (f1 - f0) * (sms - s0) / (s1 - s0)


class _Running:
    """The compute node in progress: ``done(elapsed_ns)`` when it ends, the work it has
    left at full speed since ``since_ns``, the token of its planned end."""

    __slots__ = ("done", "work_ns", "since_ns", "started_ns", "token")

    def __init__(self, done: Callable[[float], None], work_ns: float, now: float):
        self.done, self.work_ns, self.since_ns, self.started_ns, self.token = done, work_ns, now, now, 0


class ComputeContention:
    """One rank's running GPU compute node and the communication beside it.

    ``rows``: the GPU's ``(sms, factor)`` measurements; ``register_event(delay_ns,
    callback, arg)`` and ``now()``: the rank's clock (:class:`~.rank.RankSystem`).
    """

    __slots__ = ("_rows", "_register", "_now", "_channels", "_factor", "_running", "_token")

    def __init__(
        self, rows: Sequence[tuple[float, float]], register_event: Callable, now: Callable[[], float]
    ):
        self._rows = tuple(rows)
        self._register = register_event
        self._now = now
        self._channels: dict[int, int] = {}  # in-flight collective (engine position) -> channels
        self._factor = 1.0  # the slowdown the channels in flight give
        self._running: _Running | None = None
        self._token = 0

    def compute(self, runtime_ns: float, done: Callable[[float], None]) -> None:
        """Run a compute node of ``runtime_ns`` alone; ``done(elapsed_ns)`` when it ends."""
        self._running = _Running(done, float(runtime_ns), self._now())
        self._plan()

    def collective_started(self, key: int, channels: int) -> None:
        """A collective of ``channels`` channels (NCCL's choice) began on this rank."""
        self._channels[key] = channels
        self._update()

    def collective_finished(self, key: int) -> None:
        if self._channels.pop(key, None) is not None:
            self._update()

    def _update(self) -> None:
        factor = slowdown(self._rows, max(self._channels.values(), default=0))
        if factor == self._factor:
            return
        running = self._running
        if running is not None:  # the work done at the old pace, the rest at the new
            now = self._now()
            running.work_ns = max(0.0, running.work_ns - (now - running.since_ns) / self._factor)
            running.since_ns = now
        self._factor = factor
        if running is not None:
            self._plan()

    def _plan(self) -> None:
        running = cast(_Running, self._running)
        self._token += 1
        running.token = self._token
        self._register(max(0, round(running.work_ns * self._factor)), self._ended, self._token)

    def _ended(self, token: int) -> None:
        running = self._running
        if running is None or running.token != token:
            return  # re-planned since
        self._running = None
        running.done(self._now() - running.started_ns)
