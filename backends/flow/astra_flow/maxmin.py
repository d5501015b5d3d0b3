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
and the flows at or above ``s0`` held at a changed link (whose rate that
link's filling set). The others keep their rates and their share of every
link; the set grows, and the members are filled again, only where that could
be wrong: by the flows held at a link that a member whose rate moved
crosses, and by every flow on a member's bottleneck link if a fixed flow
there is faster than the member (max-min allows no faster flow on a flow's
bottleneck).

Two shortcuts need no filling: new flows that can take the capacity their
links have spare, split among the new flows of each link, without a faster
flow on the link each fills (then no other rate changes); and a single member
(its tightest link). ``tests/backends/flow/test_maxmin.py`` checks the rates
against progressive filling from scratch after every change.

The solver is C++ (``cpp/maxmin.cc``, built on first use by
:func:`astra_core.native.load`: compiled and cached, or JIT-compiled by cppyy
where no compiler works); this module holds its Python face. Its iteration
orders are the insertion orders the method defines (a link's flows in the
order they joined, changed links ascending), so rates never depend on hashing.

Units are the caller's (bytes/ns here); capacities must be positive.
"""

from __future__ import annotations

import weakref
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path

from astra_core.native import NativeLibrary, load

SOURCES = (Path(__file__).resolve().parent / "cpp" / "maxmin.cc",)
#: The C functions of cpp/maxmin.cc: name -> (result, arguments).
SIGNATURES = {
    "astra_maxmin_create": ("int64", ("int", "int64")),
    "astra_maxmin_destroy": ("void", ("int64",)),
    "astra_maxmin_add_new": ("int", ("int64", "int", "int64", "int64", "double")),
    "astra_maxmin_free_flow": ("void", ("int64", "int")),
    "astra_maxmin_add": ("void", ("int64", "int")),
    "astra_maxmin_remove": ("void", ("int64", "int")),
    "astra_maxmin_solve": ("int", ("int64", "int64", "int64", "int64")),
    "astra_maxmin_flows_solved": ("int64", ("int64",)),
    "astra_maxmin_links": ("void", ("int64", "int64", "int64")),
}


def library() -> NativeLibrary:
    """The solver's C++ library, built on first use (raises NativeUnavailable)."""
    return load("astra_maxmin", SOURCES, SIGNATURES)


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
    (the work done). Raises NativeUnavailable when the C++ cannot be built.
    """

    def __init__(self, capacities: Iterable[float]):
        self.capacity = list(capacities)
        self._lib = lib = library()
        self._capacity = array("d", self.capacity)
        self._h = h = lib.astra_maxmin_create(len(self.capacity), self._capacity.buffer_info()[0])
        weakref.finalize(self, lib.astra_maxmin_destroy, h)
        self._add = lib.astra_maxmin_add
        self._add_new = lib.astra_maxmin_add_new
        self._remove = lib.astra_maxmin_remove
        self._flows: list[Flow | None] = []  # by the solver's number
        self._grow(64)

    def _grow(self, size: int) -> None:
        """Result buffers for ``size`` flows (a solve reports each flow at most twice:
        placed at once, then refilled)."""
        size *= 2
        self._ids = array("i", bytes(4 * size))
        self._old = array("d", bytes(8 * size))
        self._new = array("d", bytes(8 * size))
        self._buffers = tuple(b.buffer_info()[0] for b in (self._ids, self._old, self._new))

    # -- changes --------------------------------------------------------------------------
    def add(self, flow: Flow) -> None:
        """Start ``flow`` (rate 0 until the next ``solve``)."""
        flow.rate = 0.0
        if flow._id >= 0:
            self._add(self._h, flow._id)
            return
        links, weights = array("i", flow.links), array("d", flow.weights)
        flow._id = n = self._add_new(
            self._h, len(links), links.buffer_info()[0], weights.buffer_info()[0], flow.cap
        )
        if n < len(self._flows):
            self._flows[n] = flow
            return
        self._flows.append(flow)
        if 2 * n >= len(self._ids):
            self._grow(len(self._ids))

    def remove(self, flow: Flow) -> None:
        """Stop ``flow``; the capacity it used is free from the next ``solve``."""
        self._remove(self._h, flow._id)

    def release(self, flow: Flow) -> None:
        """Forget a removed ``flow`` (its number may go to another flow)."""
        self._lib.astra_maxmin_free_flow(self._h, flow._id)
        self._flows[flow._id] = None
        flow._id = -1

    # -- solving --------------------------------------------------------------------------
    def solve(self, on_rate: Callable[[Flow, float], None]) -> None:
        """Re-solve after the recorded changes (see the module docstring)."""
        n = self._lib.astra_maxmin_solve(self._h, *self._buffers)
        flows, ids, old, new = self._flows, self._ids, self._old, self._new
        for i in range(n):
            flow = flows[ids[i]]
            flow.rate = new[i]  # type: ignore[union-attr]  # a reported flow is known
            on_rate(flow, old[i])  # type: ignore[arg-type]

    @property
    def flows_solved(self) -> int:
        return self._lib.astra_maxmin_flows_solved(self._h)

    def _links(self) -> tuple[array, array]:
        used, peak = array("d", bytes(8 * len(self.capacity))), array("q", bytes(8 * len(self.capacity)))
        self._lib.astra_maxmin_links(self._h, used.buffer_info()[0], peak.buffer_info()[0])
        return used, peak

    @property
    def used(self) -> list[float]:
        return list(self._links()[0])

    @property
    def peak_flows(self) -> list[int]:
        return list(self._links()[1])
