"""The flow model's Python face: ``cpp/flow.cc``, a compiled network model on the
kernel's public interface, built on first use (:func:`astra.plugin.load`).

:mod:`astra_flow.network` describes the model; :class:`FlowLinks` holds one.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from astra.plugin import (
    KERNEL_HEADERS,
    EventQueue,
    kernel,
    kernel_api_address,
    link_changes,
    load,
    native_send_capsule,
)

#: The model's source and its functions.
SOURCE = Path(__file__).resolve().parent / "cpp" / "flow.cc"
_SIGNATURES = {
    "astra_flow_new": (
        "int64",
        ("int64", "object", "object", "int", "int64", "int64", "int64", "int64", "int64", "int64")
        + ("double", "double", "double", "int"),
    ),
    "astra_flow_native_send": ("int64", ("int64",)),
    "astra_flow_solve_step": ("int64", ()),
    "astra_flow_messages": ("int64", ("int64",)),
    "astra_flow_flows_solved": ("int64", ("int64",)),
    "astra_flow_link_counter": ("void", ("int64", "int", "int64")),
    "astra_flow_set_links": ("int", ("int64", "int64", "int64", "int64", "object", "int")),
    "astra_flow_lone_message_ns": ("double", ("int64", "int64", "int64", "int64", "int64")),
    "astra_flow_active_flows": ("int64", ("int64", "int64")),
    "astra_flow_fill_flows": ("void", ("int64", "int64", "int64", "int64", "int64", "int64")),
}


def _address(buffer: array) -> int:
    return buffer.buffer_info()[0]


class FlowLinks:
    """The flow backend's max-min fair queue pairs on the kernel's event queue
    ``events``.

    ``route(src, dst, bucket)`` (the kernel's ``ShortestPaths`` or a Python
    callable) gives the link ids of flow bucket ``flow_hash(src, dst, tag) %
    route_buckets``; ``bytes_per_ns[i]`` and ``latency_ns[i]`` describe link ``i``.
    Packets carry ``payload_bytes`` and ``header_bytes``; ACKs load the reverse
    routes at ``ack_weight`` of the data; a flow is capped at ``cap_bytes_per_ns``
    (0: none); rates are re-solved ``reallocation_delay_ns`` after flows stop. The
    queue's ``step_end`` becomes the model's re-solve (:attr:`solve`). Raises
    ValueError for links of different counts, a bandwidth that is not positive and
    finite, or settings out of range; NativeUnavailable when the model cannot be
    built. The model belongs to ``events`` (freed with it).
    """

    def __init__(
        self,
        events: EventQueue,
        route: Callable[[int, int, int], Sequence[int]],
        bytes_per_ns: Sequence[float],
        latency_ns: Sequence[float],
        route_buckets: int,
        payload_bytes: int,
        header_bytes: int,
        ack_weight: float,
        cap_bytes_per_ns: float,
        reallocation_delay_ns: float,
    ):
        if len(bytes_per_ns) != len(latency_ns):
            raise ValueError("one bandwidth and one latency per link")
        self._lib = lib = load("astra_flow", [SOURCE], _SIGNATURES, KERNEL_HEADERS)
        self._links = len(bytes_per_ns)
        self._events = events  # which owns the model, and keeps route
        bandwidth, latency = array("d", bytes_per_ns), array("d", latency_ns)
        keep_routes = not isinstance(route, kernel().ShortestPaths)  # the kernel's keeps its own
        self._handle = lib.astra_flow_new(
            kernel_api_address(), events, route, keep_routes, route_buckets, self._links,
            _address(bandwidth), _address(latency), payload_bytes, header_bytes,
            ack_weight, cap_bytes_per_ns, reallocation_delay_ns, isinstance(reallocation_delay_ns, int),
        )  # fmt: skip
        #: The model's send for the kernel's matcher (a capsule ``astra.native_send``).
        self.native_send = native_send_capsule(lib.astra_flow_native_send(self._handle))
        #: ``send(src, dst, size_bytes, on_delivered, arg=None, tag=0)``: a message from
        #: Python; ``on_delivered(arg)`` when it is in.
        self.send = partial(kernel().native_send, self.native_send)
        #: ``solve()``: re-solve the rates after this instant's changes.
        self.solve = kernel().step_call(lib.astra_flow_solve_step(), self._handle)
        events.step_end = self.solve

    @property
    def messages(self) -> int:
        """Messages sent so far."""
        return self._lib.astra_flow_messages(self._handle)

    @property
    def flows_solved(self) -> int:
        """Flows refilled over all re-solves (the solver's work)."""
        return self._lib.astra_flow_flows_solved(self._handle)

    def _counter(self, which: int, kind: str) -> list:
        out = array(kind, bytes(8 * self._links))
        self._lib.astra_flow_link_counter(self._handle, which, _address(out))
        return out.tolist()

    @property
    def link_bytes(self) -> list[float]:
        """Per link: data and ACK wire bytes that crossed it (counted when a flow goes
        idle or moves)."""
        return self._counter(0, "d")

    @property
    def link_busy_ns(self) -> list[float]:
        """Per link: ns its wire bytes took at its bandwidth when they were counted."""
        return self._counter(1, "d")

    @property
    def peak_flows(self) -> list[int]:
        """Per link: the most flows at once."""
        return self._counter(2, "q")

    @property
    def flows(self) -> list[tuple[tuple[int, ...], tuple[float, ...], float, float]]:
        """The active flows as ``(links, weights, cap, rate)`` (a queue pair's data and
        ACK links), by queue pair number."""
        total = array("q", [0])
        count = self._lib.astra_flow_active_flows(self._handle, _address(total))
        counts, caps, rates = array("q", [0] * count), array("d", [0.0] * count), array("d", [0.0] * count)
        links, weights = array("i", [0] * total[0]), array("d", [0.0] * total[0])
        self._lib.astra_flow_fill_flows(
            self._handle,
            _address(counts),
            _address(links),
            _address(weights),
            _address(caps),
            _address(rates),
        )
        out, at = [], 0
        for n, cap, rate in zip(counts, caps, rates):
            out.append((tuple(links[at : at + n]), tuple(weights[at : at + n]), cap, rate))
            at += n
        return out

    def set_links(self, links: Sequence[int], bytes_per_ns: Sequence[float], route: Any = None) -> None:
        """Links change bandwidth now (``bytes_per_ns[i]`` for link ``links[i]``; 0: down);
        with ``route``, the routing over the links up, which every queue pair's path
        follows from now. Raises what :func:`astra.plugin.link_changes` raises, and
        ValueError for a pair of NPUs left without a route."""
        changed, bandwidth = link_changes(self._links, links, bytes_per_ns)
        self._lib.astra_flow_set_links(
            self._handle, len(changed), _address(changed), _address(bandwidth), route, route is not None
        )

    def lone_message_ns(self, src: int, dst: int, size_bytes: int, tag: int = 0) -> float:
        """A message alone on the idle network, less 1 ps (0 to itself). Raises
        ValueError or IndexError for a route that cannot be taken."""
        return self._lib.astra_flow_lone_message_ns(self._handle, src, dst, size_bytes, tag)
