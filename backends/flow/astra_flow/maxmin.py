"""Weighted max-min fair rates by progressive filling, re-solved incrementally.

Each flow crosses a set of links; on link ``l`` it uses ``weight x rate``
of the link's capacity (weight 1 for its data, a small weight for the ACKs
its data causes on the reverse path). Max-min fairness (Bertsekas and
Gallager, *Data Networks*, 2nd ed., section 6.5.2, progressive filling): all
rates rise together from zero; when a link fills, the flows crossing it
freeze at the current level; an optional per-flow cap freezes its flow at
the cap. The result is the allocation in which no flow can go faster
without slowing a flow that is no faster.

Incremental re-solving uses the structure of progressive filling: the
filling below level ``s`` is the same with or without a change if no link the
change touches fills below ``s``. Removing a flow of rate ``r`` therefore
changes no flow slower than ``r``; adding flows changes no flow slower than
``min over their links of capacity / (weight of every flow on it)`` (a link
cannot fill below that level). A re-solve takes that level ``s0``, keeps every
flow slower than ``s0`` at its rate, and refills (the *members*) the new flows
and every flow at or above ``s0`` the change reaches: those held at a changed
link, and in turn those held at a link a member crosses (a member's new rate
moves that link's capacity left first). The others keep their rates and their
share of every link, but where a link fills below the rate of a fixed flow
crossing it: max-min allows no faster flow on a flow's bottleneck, so that flow
joins the filling there (it crosses no link that filled before, which would
have taken it in itself). The members are filled again, with more of them, only
where that could still be wrong: the flows held at a link that a member whose
rate moved crosses.

Bundles. The solver keeps flows in bundles: the flows held at one link (or at
their cap) at one rate. A bundle records, per link its flows cross, how many
do, their weight there and the capacity they take, so filling freezes a whole
bundle when its link fills and takes its share from its other links in one
step per link; a flow is handled alone only when its bottleneck moves (part
of a bundle crosses a link that fills sooner) and when it starts or stops.
After each solve, bundles held at one link at one rate merge (the flows that
moved to a link join the bundle already held there).
Each bundle has a clock (generalized processor sharing's virtual time, Parekh
and Gallager, IEEE/ACM ToN 1993): the work each of its flows has done, rising
at the bundle's rate; a flow is done when the clock reaches its tag, so a new
rate moves one clock, not every flow's remaining work.

Ties. A flow whose rate is the level of several full links is held at the
lowest numbered of them, levels being compared with their last 23 mantissa
bits cleared (a relative band of about 1e-9), so which link holds a flow does
not depend on how sums round (but for the rare pair of levels astride a band's
edge); the flow model's last-round lead reads it.

A shortcut needs no filling: new flows that can take the capacity their links
have spare, split among the new flows of each link, without a faster flow on
the link each fills (then no other rate changes).
``astra_flow/tests/test_maxmin.py`` checks the rates against progressive
filling from scratch after every change.

The solver is C++, a public header of the simulation kernel
(``astra_core/cpp/include/astra_maxmin.h``), which the flow model
(``cpp/flow.cc``) calls without Python; this module is its Python face for
the tests and for other models, through the solver's C face (``cpp/maxmin.cc``,
built on first use by :func:`astra.plugin.load`). Its iteration orders are
its lists' own (a bundle's flows and links in the order they joined, but where
a removal moved the last into its place; changed links ascending), never a
hash table's, so rates never depend on hashing.

Units are the caller's (bytes/ns here); capacities must be positive.
"""

from __future__ import annotations

import math
import weakref
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path

from astra.plugin import KERNEL_HEADERS, load

#: The solver's C face (``cpp/maxmin.cc``) and its functions.
SOURCE = Path(__file__).resolve().parent / "cpp" / "maxmin.cc"
_SIGNATURES = {
    "astra_maxmin_new": ("int64", ("int64", "int64")),
    "astra_maxmin_free": ("void", ("int64",)),
    "astra_maxmin_add_new": ("int64", ("int64", "int64", "int64", "int64", "double")),
    "astra_maxmin_add": ("void", ("int64", "int64")),
    "astra_maxmin_remove": ("void", ("int64", "int64")),
    "astra_maxmin_release": ("void", ("int64", "int64")),
    "astra_maxmin_solve": ("int64", ("int64",)),
    "astra_maxmin_changes": ("void", ("int64", "int64", "int64", "int64")),
    "astra_maxmin_held_at": ("int64", ("int64", "int64")),
    "astra_maxmin_flows_solved": ("int64", ("int64",)),
    "astra_maxmin_link_counter": ("void", ("int64", "int", "int64")),
}


def _address(buffer: array) -> int:
    return buffer.buffer_info()[0]


def _check_flow(flow: Flow, links: int) -> None:
    """ValueError unless ``flow`` has one positive finite weight per link, at least one
    link, each of ``links`` once, and a finite cap >= 0."""
    if len(flow.links) != len(flow.weights) or not flow.links:
        raise ValueError("a flow needs one weight per link and at least one link")
    seen: set[int] = set()
    for link, weight in zip(flow.links, flow.weights):
        if not 0 <= link < links:
            raise ValueError(f"a flow crosses link {link} of {links}")
        if not (weight > 0 and math.isfinite(weight)):
            raise ValueError(f"a flow's weight on link {link} must be positive and finite")
        if link in seen:
            raise ValueError(f"a flow crosses link {link} twice")
        seen.add(link)
    if not (flow.cap >= 0 and math.isfinite(flow.cap)):
        raise ValueError("a flow's cap must be finite and at least 0 (0: none)")


class Flow:
    """A flow of the solver: ``links`` with ``weights`` (same length; a link
    appears once), an optional ``cap`` (same unit as rates; 0 = none), and its
    current ``rate`` (0 until solved, > 0 after). Subclass it to carry payload."""

    __slots__ = ("links", "weights", "cap", "rate", "_id")

    def __init__(self, links: tuple[int, ...], weights: tuple[float, ...], cap: float = 0.0):
        self.links = links
        self.weights = weights
        self.cap = cap
        self.rate = 0.0
        self._id = -1  # the solver's number for it, from its first add


class MaxMinSolver:
    """Max-min fair rates of the flows on ``capacities`` (one per link, > 0).

    ``add(flow)`` and ``remove(flow)`` record changes; ``solve(on_rate)``
    re-solves the flows those changes can affect and calls
    ``on_rate(flow, old_rate)`` for every flow whose rate changed (new flows
    have ``old_rate`` 0), with ``flow.rate`` already the new rate. A flow
    belongs to the first solver it is added to; ``release(flow)`` lets the
    solver reuse its slot once it is removed for good. Per link: ``used`` is
    the capacity its flows take (sum of weight x rate) and ``peak_flows`` the
    most flows at once; ``flows_solved`` counts refilled flows over all solves
    (the work done). Raises NativeUnavailable when the solver cannot be built,
    ValueError for a capacity that is not positive and finite, a flow that
    :func:`_check_flow` refuses, or a change that does not fit the flow's state.
    """

    def __init__(self, capacities: Iterable[float]):
        self.capacity = list(capacities)
        if not all(c > 0 and math.isfinite(c) for c in self.capacity):
            raise ValueError("every link's capacity must be positive and finite")
        self._lib = lib = load("astra_maxmin", [SOURCE], _SIGNATURES, KERNEL_HEADERS)
        caps = array("d", self.capacity)
        self._handle = lib.astra_maxmin_new(len(caps), _address(caps))
        weakref.finalize(self, lib.astra_maxmin_free, self._handle)
        self._flows: list[Flow | None] = []  # by the solver's number
        self._active: set[int] = set()

    # -- changes --------------------------------------------------------------------------
    def add(self, flow: Flow) -> None:
        """Start ``flow`` (rate 0 until the next ``solve``)."""
        flow.rate = 0.0
        if flow._id >= 0:
            if flow._id in self._active:
                raise ValueError(f"flow {flow._id} is already active")
            self._lib.astra_maxmin_add(self._handle, flow._id)
            self._active.add(flow._id)
            return
        _check_flow(flow, len(self.capacity))
        links, weights = array("i", flow.links), array("d", flow.weights)
        n = self._lib.astra_maxmin_add_new(
            self._handle, len(links), _address(links), _address(weights), flow.cap
        )
        flow._id = n
        self._active.add(n)
        if n < len(self._flows):
            self._flows[n] = flow
        else:
            self._flows.append(flow)

    def remove(self, flow: Flow) -> None:
        """Stop ``flow``; the capacity it used is free from the next ``solve``."""
        if flow._id not in self._active:
            raise ValueError(f"flow {flow._id} is not active")
        self._lib.astra_maxmin_remove(self._handle, flow._id)
        self._active.discard(flow._id)

    def release(self, flow: Flow) -> None:
        """Forget a removed ``flow`` (its number may go to another flow)."""
        if flow._id in self._active:
            raise ValueError(f"flow {flow._id} is still active")
        self._lib.astra_maxmin_release(self._handle, flow._id)
        self._flows[flow._id] = None
        flow._id = -1

    # -- solving --------------------------------------------------------------------------
    def solve(self, on_rate: Callable[[Flow, float], None]) -> None:
        """Re-solve after the recorded changes (see the module docstring)."""
        count = self._lib.astra_maxmin_solve(self._handle)
        ids, old, new = array("q", [0] * count), array("d", [0.0] * count), array("d", [0.0] * count)
        self._lib.astra_maxmin_changes(self._handle, _address(ids), _address(old), _address(new))
        flows = self._flows
        for n, before, after in zip(ids, old, new):
            flow = flows[n]
            flow.rate = after  # type: ignore[union-attr]  # a reported flow is known
            on_rate(flow, before)  # type: ignore[arg-type]

    def bottleneck(self, flow: Flow) -> int:
        """The link whose filling set ``flow``'s rate (-1: its cap, or not solved
        yet); of several full links at its rate, the lowest numbered."""
        return self._lib.astra_maxmin_held_at(self._handle, flow._id)

    @property
    def flows_solved(self) -> int:
        return self._lib.astra_maxmin_flows_solved(self._handle)

    @property
    def used(self) -> list[float]:
        out = array("d", [0.0] * len(self.capacity))
        self._lib.astra_maxmin_link_counter(self._handle, 0, _address(out))
        return out.tolist()

    @property
    def peak_flows(self) -> list[int]:
        out = array("q", [0] * len(self.capacity))
        self._lib.astra_maxmin_link_counter(self._handle, 1, _address(out))
        return out.tolist()
