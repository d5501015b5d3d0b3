"""The contract between the system layer and a network backend.

The system layer (``astra_core.system``) knows a network only through
:class:`NetworkBackend`. A backend owns the simulated clock, times messages
between NPUs, and calls ``on_delivered`` when the last byte of a message has
arrived at its destination. Send/receive matching, chunking and collective state
live in the system layer, never in a backend.

Units: time in ns, sizes in bytes, bandwidth in GB/s only where an input file
says so (1 GB = 2^30 bytes, as upstream ASTRA-sim's network.yml).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from astra_core.config.network import NetworkConfig
from astra_core.topology.physical import PhysicalTopology


@runtime_checkable
class NetworkBackend(Protocol):
    """What every network model offers to the system layer (the hot path).

    Calls are plain method calls (never pluggy hooks): a simulation makes
    millions of them.
    """

    def now(self) -> float:
        """Current simulated time in ns."""

    def schedule(self, delay_ns: float, callback: Callable[[Any], None], arg: Any = None) -> None:
        """Run ``callback(arg)`` at ``now() + delay_ns``; ``delay_ns`` >= 0.

        Callbacks scheduled for the same time run in the order they were
        scheduled, and ``schedule(0, f)`` runs ``f`` before time moves.
        """

    def send(
        self,
        src: int,
        dst: int,
        size_bytes: int,
        on_delivered: Callable[[Any], None],
        arg: Any = None,
        *,
        tag: int = 0,
        dim: int | None = None,
    ) -> None:
        """Start moving ``size_bytes`` from NPU ``src`` to NPU ``dst`` now.

        ``on_delivered(arg)`` runs when the message has fully arrived. ``tag``
        identifies the stream for models that track flows; ``dim`` is the
        logical network dimension the system layer meant the message for
        (``None`` when unknown, e.g. point-to-point).
        """

    def run(self) -> None:
        """Process events until none remain."""


@dataclass
class Topology:
    """What a backend factory is given to build its network.

    ``network`` holds the logical dimensions from network.yml (dimension 0
    varies fastest in an NPU id, as upstream). ``physical`` is a physical
    topology (from ``--topology``) for backends that model links; NPU rank
    ``r`` is its ``r``-th host. ``extra`` carries further optional inputs.
    """

    network: NetworkConfig
    physical: PhysicalTopology | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def npus_count(self) -> int:
        return self.network.npus_count
