"""Matching sends with receives (upstream analytical ``CallbackTracker``).

A message is identified by ``(tag, src, dst, size)`` and its order among
messages with that key: the k-th send matches the k-th receive. When a
message arrives, the sender's callback runs, then the receiver's if a receive
was posted; otherwise the arrival is remembered and a later receive completes
after zero delay (``schedule(0, ...)``), as upstream's ``sim_recv``.

The matcher also keeps, per rank, when at least one of its messages was on
the network (:attr:`MessageMatcher.in_flight`): a message is in flight, for
its sender and its receiver alike, from the moment it is handed to the
backend (its first byte leaves) until it counts as arrived, whether or not
the receiver has posted its receive yet. A receive posted before its message
was sent is therefore *waiting*, not in flight, until the sender sends.

The matcher is the simulation kernel's (``astra_core/cpp/kernel.cc``): per key,
the messages only one side has reached wait in a queue, oldest first, and a
key's queue goes when it empties, so memory follows the messages in flight.
A backend that offers ``native_send`` on the kernel's clock (both analytical
models, or a compiled third-party model: docs/plugins.md) gets a message without
a Python call; any other backend gets ``backend.send(src, dst, size,
on_delivered, arg, tag=tag)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from astra_core.events import kernel
from astra_core.system.clock import clock_of

if TYPE_CHECKING:
    from collections.abc import Callable

    Callback = Callable[[Any], None]

    from astra_core._astra_kernel import MessageMatcher as _KernelMatcher

else:
    _KernelMatcher = kernel().MessageMatcher


class MessageMatcher(_KernelMatcher):
    """Pairs messages across all ranks and hands them to the network backend.

    ``npus``: ranks are ``0 .. npus - 1``; a message of a rank beyond them raises
    IndexError.

    * ``send(src, dst, size, tag, on_sent, arg, collective=False, not_before_ns=None)``:
      send ``size`` bytes now; ``on_sent(arg)`` runs when they arrive (None: nothing).
      ``collective`` marks a collective chunk (its tag may carry a communicator group
      id; see :class:`MirroredMatcher`). ``not_before_ns``: the message counts as
      arrived, at both ends, no earlier than this time (a library's own cost the network
      does not see).
    * ``recv(src, dst, size, tag, on_received, arg)``: ``on_received(arg)`` runs when the
      matching message is in (after zero delay if it already is, upstream ``sim_recv``).
    * ``messages``, ``bytes``: sent so far; ``delivered``: sent messages that have
      arrived (the progress line's fraction).
    * ``in_flight``: rank -> ``array('d')`` of start, end, start, end, ... (ns), the
      disjoint, time-ordered intervals in which at least one message the rank sends or
      receives was in flight (module docstring); touching intervals merged.
    * ``arrived_unreceived()``: (src, dst, tag, bytes) of messages that arrived and that
      no receive matched, in the matcher's frame (representatives under rank symmetry).
    """

    def __init__(self, backend: Any, npus: int) -> None:
        super().__init__(backend, clock_of(backend), npus)


class MirroredMatcher(MessageMatcher):
    """Matching for a run where representatives stand for classes of ranks.

    A message a representative sends to ``dst`` is timed by the backend as
    usual; when it arrives, the sender's callback runs and the message is
    delivered to ``dst``'s representative as if from the sender translated
    the same way (see :mod:`astra_core.system.symmetry`); a communicator
    group's chunk tag is translated with it. The API is :class:`MessageMatcher`'s.
    """

    def __init__(self, backend: Any, symmetry: Any, npus: int) -> None:
        _KernelMatcher.__init__(self, backend, clock_of(backend), npus, symmetry)
