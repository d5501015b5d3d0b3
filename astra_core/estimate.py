"""What a run would cost its backend, found without simulating that backend.

The system layer runs once on a cheap network (the ``analytical`` backend,
with rank symmetry where it applies: one rank may stand for many) behind a
:class:`MessageTally` that notes every message it is given. Which messages a
step sends (sources, destinations, sizes) comes from the workload and the
system layer, never from the network's timing, so the tally is the chosen
backend's message list. The backend's :class:`~astra_core.backend.WorkModel`
then prices each message: ``per_link(size) x hops(src, dst)`` (packets x
route links on ``ns3``, flits x links on ``garnetlike``, one flow on
``flow``). Under rank symmetry a representative's message stands for one
message per rank of its class, each moved by that rank's translation
(:mod:`astra_core.system.symmetry`); its hops are summed over the class once
per NPU pair.

The projected wall time is ``messages x message_s + units / rate`` from the
model's measured speeds. Where the model fast-forwards steady flows (ns3,
:class:`FastForwardWork`), the units are those it is expected to simulate,
from the messages of each NPU pair (:func:`pair_messages`); the run's wall
time lies between the projection over the model's ``spread`` and the
projection of the most it may simulate times the ``spread``, and the units
of every packet give what the run would cost packet by packet.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, cast, runtime_checkable

from astra_core.backend import WorkModel, event_queue, is_symmetric, wall_time_text

#: A run projected to take longer than this (wall seconds) says so before it starts.
SHOW_ESTIMATE_S = 30.0
#: The estimate made before a run stops after this many wall seconds and gives what it
#: counted by then, a lower bound: where rank symmetry does not apply the pass costs
#: about what the analytical model's run does (tens of us per message), which would be
#: a sizable share of a message-bound garnetlike or ns3 run. ``astra run --estimate``
#: has no such limit.
PRE_RUN_PASS_S = 10.0
#: Messages between two looks at the clock while a pass has a deadline.
CHECK_EVERY = 4096


@runtime_checkable
class FastForwardWork(Protocol):
    """What a :class:`~astra_core.backend.WorkModel` whose backend skips the steady part
    of long flows (``fast_forward``) adds: ``spread``, the factor by which a run's wall
    time may stand from the projection either way on the machine its speeds were
    measured on, ``run_s``, the wall seconds a run costs whatever it sends, and
    ``simulated_work``. Its runs are given between bounds with fast-forward on or off."""

    spread: float
    run_s: float

    def simulated_work(self, pairs: Mapping[tuple[int, int], Sequence[tuple[int, int]]]) -> tuple[int, int]:
        """(expected, most) units the backend simulates of the messages ``pairs`` lists as
        ``(bytes, count)`` per ``(src, dst)`` NPU pair."""
        ...


class PassStopped(Exception):
    """The estimate's pass ran past its deadline (:data:`PRE_RUN_PASS_S`)."""


class MessageTally:
    """A :class:`~astra_core.backend.NetworkBackend` that times messages on ``inner``, the
    analytical backend, and counts them by (source, destination, bytes): the messages a
    step sends. The counting is the kernel's model's own (``start_tally``), so a
    message still costs no Python call.

    It keeps ``inner``'s clock, its event queue (the system layer's fast path) and
    its rank symmetry. With a ``deadline`` (a :func:`time.perf_counter` value), the
    pass raises :class:`PassStopped` once past it (the clock is read every
    :data:`CHECK_EVERY` messages)."""

    def __init__(self, inner: Any, deadline: float | None = None):
        self.inner = inner
        self.deadline = deadline
        self.symmetric = is_symmetric(inner)
        events = event_queue(inner)
        if events is not None:
            self.events = events
        self.schedule = inner.schedule
        self.now = inner.now
        self.run = inner.run
        inner.start_tally(CHECK_EVERY, None if deadline is None else self._check)
        self.send = inner.send

    def _check(self) -> None:
        if time.perf_counter() > cast(float, self.deadline):
            raise PassStopped

    @property
    def counts(self) -> dict[tuple[int, int, int], int]:
        """(src, dst, bytes) -> messages sent so far."""
        return self.inner.tally()


@dataclass(frozen=True)
class Estimate:
    """A run's cost on ``backend``, before simulating it.

    ``messages`` and ``bytes``: what every rank of the step sends (and any
    background flows). With a work model (``unit`` not None): ``budgeted``
    units the backend's limit ``limit_key`` counts (e.g. data packet-hops),
    ``work`` units it moves in all (data and ACK packet-hops), ``rate`` its
    speed (units per wall s, measured where ``rate_source`` says),
    ``message_s`` its cost per message (s), ``wall_s`` the projected wall
    time (s). Where the model fast-forwards steady flows (:class:`FastForwardWork`):
    ``simulated`` the units it is expected to simulate, ``low_s`` and ``high_s`` the
    wall time's bounds (s), ``packet_s`` the projection packet by packet (s).
    ``peak_memory_bytes`` where the model can tell. ``pass_s``: wall seconds this estimate took;
    ``symmetric``: its pass ran one rank per class. ``partial``: the pass was
    stopped at its deadline, so every figure is a lower bound.
    """

    backend: str
    messages: int
    bytes: int
    unit: str | None = None
    budgeted: int = 0
    work: int = 0
    rate: float = 0.0
    rate_source: str = ""
    message_s: float = 0.0
    wall_s: float | None = None
    simulated: int | None = None
    low_s: float | None = None
    high_s: float | None = None
    packet_s: float | None = None
    peak_memory_bytes: int | None = None
    limit: int | None = None
    limit_key: str = ""
    pass_s: float = 0.0
    symmetric: bool = False
    partial: bool = False

    @property
    def over_limit(self) -> bool:
        """True when the budgeted units pass the backend's work limit."""
        return self.limit is not None and self.budgeted > self.limit

    def line(self) -> str:
        """One line: ``ns3 estimate: 2,552,448 messages, 1.2e+11 B, 3.1e+07 packet-hops ->
        about 2.6 min (...)``."""
        text = f"{self.backend} estimate: {self.messages:,} messages, {self.bytes:.3g} B"
        if self.partial:
            text = (
                f"{self.backend} estimate (its pass stopped after {self.pass_s:.0f} s: lower bounds): "
                f"at least {self.messages:,} messages, {self.bytes:.3g} B"
            )
        if self.unit is None or self.wall_s is None:
            return text + " (the backend gives no work model: no wall time projected)"
        text += f", {self.work:.3g} {self.unit}"
        if self.budgeted != self.work:
            text += f" ({self.budgeted:.3g} counted against {self.limit_key})"
        text += f" -> about {wall_time_text(self.wall_s)} of wall time"
        if self.low_s is not None and self.high_s is not None:
            text += f" (between {wall_time_text(self.low_s)} and {wall_time_text(self.high_s)}"
            if self.packet_s is not None:
                text += (
                    f": fast-forward simulates about {self.simulated:.3g} of the {self.unit}; "
                    f"{wall_time_text(self.packet_s)} packet by packet"
                )
            text += ")"
        if self.peak_memory_bytes is not None:
            text += f", peak memory about {self.peak_memory_bytes / 2**30:.2g} GiB"
        return text

    def lines(self) -> list[str]:
        """:meth:`line` and how it was found (for ``astra run --estimate``)."""
        out = [self.line()]
        if self.unit is not None:
            per_message = f" and {self.message_s * 1e6:.3g} µs per message" if self.message_s else ""
            out.append(f"speed: {self.rate:.3g} {self.unit}/s{per_message} ({self.rate_source})")
            if self.over_limit:
                out.append(
                    f"the run is past the limit {self.limit_key} = {self.limit:.3g}: it would be refused"
                )
        how = "one rank per class of identical ranks" if self.symmetric else "every rank"
        out.append(f"estimated in {self.pass_s:.2f} s (the system layer on the analytical model, {how})")
        return out

    def as_dict(self) -> dict[str, Any]:
        """Plain data (for ``--json``)."""
        return asdict(self)


def _no_hops(src: int, dst: int) -> int:
    return 0


def tally_work(
    counts: dict[tuple[int, int, int], int], symmetry: Any, model: WorkModel | None
) -> tuple[int, int, int, int]:
    """(messages, bytes, budgeted units, all units) of the tallied messages over every
    rank: under ``symmetry`` (a :class:`~astra_core.system.symmetry.Symmetry`, or None)
    each counted message stands for one per rank of its sender's class. Without a
    ``model``, messages and bytes only."""
    hops_of = model.hops if model is not None else _no_hops
    members: dict[int, list[tuple[int, ...]]] = {}
    if symmetry is not None:
        for rep, ranks in symmetry.classes().items():
            members[rep] = [symmetry.from_representative(r)[1] for r in ranks]
    pair_hops: dict[tuple[int, int], tuple[int, int]] = {}  # (src, dst) -> (ranks, hops over them)
    per_link: dict[int, tuple[int, int]] = {}
    messages = size_total = budgeted = work = 0
    for (src, dst, size), count in counts.items():
        pair = pair_hops.get((src, dst))
        if pair is None:
            if symmetry is None:
                pair = (1, hops_of(src, dst))
            else:
                deltas = members[symmetry.representative(src)]
                shift = symmetry.shift
                pair = (len(deltas), sum(hops_of(shift(src, d), shift(dst, d)) for d in deltas))
            pair_hops[(src, dst)] = pair
        units = per_link.get(size)
        if units is None:
            units = per_link[size] = model.per_link(size) if model is not None else (0, 0)
        ranks, hops = pair
        messages += count * ranks
        size_total += count * ranks * size
        budgeted += count * units[0] * hops
        work += count * units[1] * hops
    return messages, size_total, budgeted, work


def flows_work(flows: Sequence[Any], model: WorkModel | None) -> tuple[int, int, int, int]:
    """(messages, bytes, budgeted units, all units) of background flows
    (:class:`~astra_core.flows.flowfile.FlowSpec`: ``src``, ``dst``, ``size_bytes``)."""
    messages = len(flows)
    size_total = sum(f.size_bytes for f in flows)
    if model is None:
        return messages, size_total, 0, 0
    budgeted = work = 0
    for f in flows:
        units, hops = model.per_link(f.size_bytes), model.hops(f.src, f.dst)
        budgeted += units[0] * hops
        work += units[1] * hops
    return messages, size_total, budgeted, work


def pair_messages(
    counts: dict[tuple[int, int, int], int], symmetry: Any, flows: Sequence[Any] = ()
) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """``(src, dst) -> [(bytes, count), ...]``: the tallied messages of every rank (under
    ``symmetry`` each counted message stands for one per rank of its sender's class, moved
    by that rank's translation) and the background ``flows``, by NPU pair."""
    pairs: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    members: dict[int, list[tuple[int, ...]]] = {}
    for (src, dst, size), count in counts.items():
        if symmetry is None:
            pairs[(src, dst)].append((size, count))
            continue
        rep = symmetry.representative(src)
        if rep not in members:
            members[rep] = [symmetry.from_representative(r)[1] for r in symmetry.classes()[rep]]
        for delta in members[rep]:
            pairs[(symmetry.shift(src, delta), symmetry.shift(dst, delta))].append((size, count))
    for f in flows:
        pairs[(f.src, f.dst)].append((f.size_bytes, 1))
    return pairs


def _skipping(model: WorkModel, counts, symmetry, flows, messages: int, work: int) -> dict[str, Any] | None:
    """The projection of a :class:`FastForwardWork` model (module docstring): ``wall_s``,
    ``low_s`` and ``high_s`` for :class:`Estimate`, and with fast-forward on
    ``simulated`` and ``packet_s``; None for another model."""
    if not isinstance(model, FastForwardWork):
        return None
    fixed, rate = model.run_s + messages * model.message_s, model.rate
    if not model.fast_forward:
        wall = fixed + work / rate
        return {"wall_s": wall, "low_s": wall / model.spread, "high_s": wall * model.spread}
    expected, most = model.simulated_work(pair_messages(counts, symmetry, flows))
    wall = fixed + expected / rate
    return {
        "wall_s": wall,
        "simulated": expected,
        "low_s": wall / model.spread,
        "high_s": (fixed + most / rate) * model.spread,
        "packet_s": fixed + work / rate,
    }


def price_run(
    backend: str,
    model: WorkModel | None,
    run_pass: Callable[[], tuple[dict[tuple[int, int, int], int], Any, bool]],
    flows: Sequence[Any] = (),
) -> Estimate:
    """The :class:`Estimate` of a run on ``backend`` priced by ``model`` (None: messages and
    bytes only). ``run_pass()`` runs the system layer on a :class:`MessageTally` and
    returns its counts, the run's symmetry (None: every rank ran) and whether it was
    stopped before the end (then every figure is a lower bound)."""
    started = time.perf_counter()
    counts, symmetry, partial = run_pass()
    messages, size_total, budgeted, work = tally_work(counts, symmetry, model)
    extra = flows_work(flows, model)
    messages, size_total = messages + extra[0], size_total + extra[1]
    budgeted, work = budgeted + extra[2], work + extra[3]
    if model is None:
        passed = time.perf_counter() - started
        return Estimate(
            backend, messages, size_total, pass_s=passed, symmetric=symmetry is not None, partial=partial
        )
    packet_s = messages * model.message_s + work / model.rate
    skipping = _skipping(model, counts, symmetry, flows, messages, work)
    passed = time.perf_counter() - started
    return Estimate(
        backend,
        messages,
        size_total,
        unit=model.unit,
        budgeted=budgeted,
        work=work,
        rate=model.rate,
        rate_source=model.rate_source,
        message_s=model.message_s,
        **(skipping or {"wall_s": packet_s}),
        peak_memory_bytes=model.peak_memory_bytes(messages),
        limit=model.limit,
        limit_key=model.limit_key,
        pass_s=passed,
        symmetric=symmetry is not None,
        partial=partial,
    )
