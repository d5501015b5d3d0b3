"""A collective phase as data, and the executor that runs it with upstream's timing.

A :class:`Plan` says what one rank does in one phase of one chunk:

* ``messages``: ``(dst, src, bytes)`` in send order; with each send the rank
  posts a receive of the same size from ``src`` (ring-style algorithms pair
  every send with a receive);
* ``window``: how many packets are in flight at once (1 for ring and
  halving-doubling, ``n - 1`` or ``W`` for direct);
* ``packets``: ``(reduce, bytes)`` per packet: ``window`` packets at the start
  and one per received message. Each packet moves ``bytes`` between NPU and
  memory (``endpoint-delay``; 10 ns on a communicator-group ring) and, if
  ``reduce``, then reduces them (``mem_write + 2 mem_read``); when it is done,
  it frees a send slot;
* ``barrier``: messages from this index on wait until that many messages have
  been received (the second round of a direct all-reduce).

:class:`WindowedPhase` executes a plan exactly as upstream ASTRA-sim's ``Ring``
family does (``Ring.cc``, ``AllToAll.cc``, ``HalvingDoubling.cc``): a freed slot
sends the oldest unsent message; the phase ends when every message is sent and
every slot is free again. The executor is the simulation kernel's
(``astra_core/cpp/kernel.cc``): its messages, packets and local-memory steps run
without a Python call; the algorithm modules only build plans.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from astra_core.events import kernel
from astra_core.system.comm_types import CommType

if TYPE_CHECKING:
    from astra_core._astra_kernel import WindowedPhase as _KernelPhase

else:
    _KernelPhase = kernel().WindowedPhase


@dataclass
class Plan:
    """One rank's phase as data; sizes in bytes. See the module docstring."""

    messages: Sequence[tuple[int, int, int]]
    window: int
    packets: Sequence[tuple[bool, int]]
    final_data_size: int
    barrier: int | None = None
    fast: bool = False
    peers: Sequence[int] = ()  # the ring's members (a range along a dimension), not copied


@lru_cache(maxsize=4096)
def packets(
    comm_type: CommType, count: int, window: int, non_zero_per_cycle: int, size: int
) -> tuple[tuple[bool, int], ...]:
    """``count`` packets of ``size`` bytes with upstream's reduce flags (cached:
    every rank of a phase has the same)."""
    flags = upstream_packet_flags(count, window, non_zero_per_cycle, reduce_rule(comm_type))
    return tuple((flag, size) for flag in flags)


def upstream_packet_flags(
    count: int, window: int, non_zero_per_cycle: int, reduces: Callable[[bool], bool]
) -> list[bool]:
    """Which of ``count`` packets reduce, in upstream's packet-cycle accounting.

    Packets come in cycles of ``window`` "zero-latency" ones (never reduced)
    followed by ``non_zero_per_cycle`` others, which reduce when
    ``reduces(toggle)`` holds; ``toggle`` flips at every new cycle (so an
    all-reduce reduces in its first cycle only). Source: upstream
    ``Ring::insert_packet``.
    """
    flags = []
    zero = non_zero = 0
    toggle = False
    for _ in range(count):
        if zero == 0 and non_zero == 0:
            zero, non_zero, toggle = window, non_zero_per_cycle, not toggle
        if zero > 0:
            zero -= 1
            flags.append(False)
        else:
            non_zero -= 1
            flags.append(reduces(toggle))
    return flags


def reduce_rule(comm_type: CommType) -> Callable[[bool], bool]:
    """Upstream: a reduce-scatter always reduces, an all-reduce in its first cycle."""
    if comm_type is CommType.REDUCE_SCATTER:
        return lambda toggle: True
    if comm_type is CommType.ALL_REDUCE:
        return lambda toggle: toggle
    return lambda toggle: False


class WindowedPhase(_KernelPhase):
    """Executes a :class:`Plan` on one rank (ring, direct, halving-doubling): the
    kernel's executor with the plan and the algorithm's ``name`` kept for reports.
    A :class:`~astra_core.system.collectives.base.CollectivePhase` in all but its
    class: ``start()`` (STREAM_INIT), then the kernel drives it; ``received()`` and
    ``general()`` are its PACKET_RECEIVED and GENERAL events."""

    __slots__ = ("plan", "name")

    def __init__(self, name: str, comm_type: CommType, rank: int, data_size: int, plan: Plan):
        super().__init__(
            comm_type,
            rank,
            data_size,
            plan.messages,
            plan.window,
            plan.packets,
            plan.final_data_size,
            plan.barrier,
            plan.fast,
        )
        self.name = name
        self.plan = plan

    def waiting_for(self) -> str:
        """What the phase waits on, in one line (deadlock reports)."""
        plan = self.plan
        left = len(plan.messages) - self.sent
        expected = ", ".join(str(src) for _, src, _ in plan.messages[self.received_count : self.sent][:4])
        return (
            f"{self.name} {self.comm_type.label} over ranks {list(plan.peers)}: {left} of "
            f"{len(plan.messages)} messages not sent; waiting for rank(s) {expected or '-'}"
        )
