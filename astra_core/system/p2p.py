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
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable
from typing import Any

from astra_core.system.clock import clock_of

Callback = Callable[[Any], None]


class _Entry:
    __slots__ = ("send_cb", "send_arg", "recv_cb", "recv_arg", "arrived", "sent", "not_before", "src", "dst")
    # the ranks whose in-flight time the message counts in: set when it is sent
    src: int
    dst: int

    def __init__(self) -> None:
        self.not_before: float | None = None
        self.send_cb: Callback | None = None
        self.send_arg: Any = None
        self.recv_cb: Callback | None = None
        self.recv_arg: Any = None
        self.arrived = False
        self.sent = False


class MessageMatcher:
    """Pairs messages across all ranks and hands them to the network backend.

    Per key, the messages that only one side has reached so far (sends no
    receive matched yet, or receives no send matched) wait in a queue, oldest
    first; the other side takes the oldest. A key's queue goes when it empties,
    so memory follows the messages in flight, not all messages ever sent.
    """

    def __init__(self, backend, npus: int) -> None:
        """``npus``: ranks are ``0 .. npus - 1``; raises IndexError on the first message
        of a rank beyond them."""
        self.backend = backend
        self._clock = clock_of(backend)
        self._waiting: dict[tuple, deque[_Entry]] = {}
        self.messages = 0
        self.bytes = 0
        # Per rank: how many of its messages are on the network now, and since when (ns).
        self._busy = [0] * npus
        self._since = [0.0] * npus
        # Per rank: start, end, start, end, ... of its closed in-flight intervals (None: none yet)
        self._logs: list[array | None] = [None] * npus

    def _took_off(self, src: int, dst: int, entry: _Entry) -> None:
        """``entry``'s message is on the network from now: count it for ``src`` and ``dst``.

        On the per-message path: two list reads and writes per rank; the clock is
        read only where a rank had nothing in flight."""
        entry.src = src
        entry.dst = dst
        busy = self._busy
        count = busy[src]
        if not count:
            self._since[src] = self._clock.now
        busy[src] = count + 1
        count = busy[dst]
        if not count:
            self._since[dst] = self._clock.now
        busy[dst] = count + 1

    @property
    def delivered(self) -> int:
        """Messages sent so far that have arrived (the progress line's fraction): each
        message in flight counts once at its sender and once at its receiver."""
        return self.messages - sum(self._busy) // 2

    @property
    def in_flight(self) -> dict[int, array]:
        """rank -> ``array('d')`` of start, end, start, end, ... (ns): the disjoint,
        time-ordered intervals in which at least one message the rank sends or receives
        was in flight (module docstring); touching intervals merged."""
        return {rank: log for rank, log in enumerate(self._logs) if log is not None}

    def _close(self, rank: int) -> None:
        """``rank`` has nothing in flight from now: log its interval (merged with the
        previous one when they touch)."""
        now = self._clock.now
        log = self._logs[rank]
        if log is None:
            log = self._logs[rank] = array("d")
        elif log[-1] == self._since[rank]:
            log[-1] = now
            return
        log.append(self._since[rank])
        log.append(now)

    def _entry(self, key: tuple, sending: bool) -> _Entry:
        """The entry of the next send (``sending``) or receive with ``key``: the
        oldest one only the other side has reached, else a new one that waits."""
        queue = self._waiting.get(key)
        if queue is not None and queue[0].sent is not sending:
            entry = queue.popleft()
            if not queue:
                del self._waiting[key]
            return entry
        entry = _Entry()
        if queue is None:
            self._waiting[key] = deque((entry,))
        else:
            queue.append(entry)
        return entry

    def send(
        self,
        src: int,
        dst: int,
        size: int,
        tag: int,
        on_sent: Callback | None,
        arg: Any,
        collective: bool = False,
        not_before_ns: float | None = None,
    ) -> None:
        """Send ``size`` bytes now; ``on_sent(arg)`` runs when they arrive.

        ``collective`` marks a collective chunk (its tag may carry a
        communicator group id; see :class:`MirroredMatcher`).
        ``not_before_ns``: the message counts as arrived, at both ends, no
        earlier than this time (a library's own cost the network does not see)."""
        entry = self._entry((tag, src, dst, size), True)
        entry.send_cb = on_sent
        entry.send_arg = arg
        entry.sent = True
        entry.not_before = not_before_ns
        self.messages += 1
        self.bytes += size
        # _took_off(src, dst, entry), inlined: this runs once per message
        entry.src = src
        entry.dst = dst
        busy = self._busy
        count = busy[src]
        if not count:
            self._since[src] = self._clock.now
        busy[src] = count + 1
        count = busy[dst]
        if not count:
            self._since[dst] = self._clock.now
        busy[dst] = count + 1
        self.backend.send(src, dst, size, self._arrived, entry, tag=tag)

    def recv(self, src: int, dst: int, size: int, tag: int, on_received: Callback, arg: Any) -> None:
        """Post a receive; ``on_received(arg)`` runs when the matching message is in."""
        entry = self._entry((tag, src, dst, size), False)
        if entry.arrived:
            self.backend.schedule(0, on_received, arg)
            return
        entry.recv_cb = on_received
        entry.recv_arg = arg

    def _arrived(self, entry: _Entry) -> None:
        if entry.not_before is not None:
            wait = entry.not_before - self.backend.now()
            entry.not_before = None
            if wait > 0:
                self.backend.schedule(wait, self._arrived, entry)
                return
        # entry's message is in: close the in-flight intervals it ends
        busy = self._busy
        src = entry.src
        busy[src] -= 1
        if not busy[src]:
            self._close(src)
        dst = entry.dst
        busy[dst] -= 1
        if not busy[dst]:
            self._close(dst)
        if entry.send_cb is not None:
            entry.send_cb(entry.send_arg)
        if entry.recv_cb is not None:
            entry.recv_cb(entry.recv_arg)
        else:
            entry.arrived = True

    def arrived_unreceived(self) -> list[tuple[int, int, int, int]]:
        """(src, dst, tag, bytes) of messages that arrived and that no receive
        matched, in the matcher's frame (representatives under rank symmetry)."""
        return [
            (src, dst, tag, size)
            for (tag, src, dst, size), queue in self._waiting.items()
            for entry in queue
            if entry.sent and entry.arrived
        ]


class MirroredMatcher(MessageMatcher):
    """Matching for a run where representatives stand for classes of ranks.

    A message a representative sends to ``dst`` is timed by the backend as
    usual; when it arrives, the sender's callback runs and the message is
    delivered to ``dst``'s representative as if from the sender translated
    the same way (see :mod:`astra_core.system.symmetry`); a communicator
    group's chunk tag is translated with it.
    """

    def __init__(self, backend, symmetry, npus: int) -> None:
        super().__init__(backend, npus)
        self.symmetry = symmetry
        self._to_rep: dict[int, tuple[int, tuple[int, ...]]] = {}

    def send(
        self,
        src: int,
        dst: int,
        size: int,
        tag: int,
        on_sent: Callback | None,
        arg: Any,
        collective: bool = False,
        not_before_ns: float | None = None,
    ) -> None:
        sym = self.symmetry
        target = self._to_rep.get(dst)
        if target is None:
            target = self._to_rep[dst] = sym.to_representative(dst)
        rep, delta = target
        if collective:
            tag = sym.shift_tag(tag, delta)
        entry = self._entry((tag, sym.shift(src, delta), rep, size), True)
        entry.sent = True
        self.messages += 1
        self.bytes += size
        # dst's representative receives the mirrored message at the same times
        self._took_off(src, rep, entry)
        self.backend.send(
            src, dst, size, self._mirrored_arrival, (entry, on_sent, arg, not_before_ns), tag=tag
        )

    def _mirrored_arrival(self, payload: tuple) -> None:
        entry, on_sent, arg, not_before = payload
        if not_before is not None:
            wait = not_before - self.backend.now()
            if wait > 0:
                self.backend.schedule(wait, self._mirrored_arrival, (entry, on_sent, arg, None))
                return
        if on_sent is not None:
            on_sent(arg)
        self._arrived(entry)
