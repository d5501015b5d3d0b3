"""The ``ideal`` network: a non-blocking fabric whose only contention is at the NPUs.

No link inside the network is ever shared, so messages between different
pairs never slow each other down (as in astra's congestion-unaware
``analytical`` model). Unlike that model, each NPU has one port per network
dimension that transmits one message at a time at a constant bandwidth ``B``
(bytes/ns): messages an NPU sends on the same dimension leave one after the
other, first come first served. A message of ``S`` bytes that starts
transmitting at ``t`` arrives at

    t + S / B + latency          (ns, truncated to whole ns)

where ``B`` and ``latency`` are the dimension's (network.yml bandwidth, GB/s
with 1 GB = 2^30 B; hops x latency with upstream's hop counts: Ring the
shorter way round, FullyConnected 1, Switch 2), or the constants of an
:class:`IdealConfig` for every dimension. A lone message therefore takes
exactly the analytical model's time, and an NPU sending to several peers at
once (a direct all-to-all) pays for its single port.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import ConfigDict, StrictFloat

from astra.plugin import ConfigModel, EventQueue, Topology, between, load_model

BYTES_PER_GB = 1 << 30  # network.yml's GB (upstream ASTRA-sim)
HOPS = {"FullyConnected": 1, "Switch": 2}  # a Ring's hops are counted the shorter way round


class IdealConfig(ConfigModel):
    """Constants for every dimension; None (the default) keeps network.yml's
    per-dimension values.

    ``bandwidth_gbps``: GB/s (1 GB = 2^30 B), in (0, 1e9]. ``latency_ns``: ns
    per message, in [0, 1e12] (event times are float ns: whole ns stay exact).
    Numbers only (a string or a boolean is an error); an unknown key is an
    error. :func:`load_config` reads it from a file or a mapping.
    """

    # ConfigModel: unknown keys, inf and NaN are errors; frozen: a config never changes.
    model_config = ConfigDict(frozen=True, validate_assignment=False)

    bandwidth_gbps: Annotated[StrictFloat | None, between(0, 1e9, " GB/s", low_open=True)] = None
    latency_ns: Annotated[StrictFloat | None, between(0, 1e12, " ns")] = None


def load_config(config: Any) -> IdealConfig:
    """An :class:`IdealConfig` from None (defaults), an IdealConfig, a mapping of
    its keys, or a TOML (``.toml``) or YAML (any other name) file of them.

    Raises ConfigError, one line per problem naming the file (``<python>`` for a
    mapping) and the key::

        ideal.yml: latency_ns: must be in [0, 1e+12] ns, got -5
        ideal.yml: unknown key 'bandwidth'; did you mean 'bandwidth_gbps'?
    """
    return load_model(IdealConfig, config, "ideal backend config")


class IdealNetwork:
    """:class:`~astra_core.backend.NetworkBackend`: FIFO NIC port per (NPU, dimension).

    After a run, ``port_busy_ns[(npu, dim)]`` is how long that port transmitted.
    """

    name = "ideal"

    def __init__(self, topology: Topology, config: IdealConfig | None = None):
        config = config or IdealConfig()
        self.events = EventQueue()
        self.schedule = self.events.schedule  # the hot path: no wrapper
        self._dims = []  # (stride, npus, kind, latency_ns per hop, bytes per ns)
        stride = 1
        for dim in topology.network.dims:
            gbps = config.bandwidth_gbps or dim.bandwidth_gbps
            self._dims.append((stride, dim.npus, str(dim.kind), dim.latency_ns, gbps * BYTES_PER_GB / 1e9))
            stride *= dim.npus
        self._fixed_latency = config.latency_ns
        self._port_free_at: dict[tuple[int, int], float] = {}
        self.port_busy_ns: dict[tuple[int, int], float] = {}

    def now(self) -> float:
        return self.events.now

    def run(self) -> None:
        self.events.run()

    def send(
        self,
        src: int,
        dst: int,
        size_bytes: int,
        on_delivered: Callable[[Any], None],
        arg: Any = None,
        *,
        tag: int = 0,
    ) -> None:
        route = self._first_dim(src, dst)
        if route is None:  # to itself: nothing crosses the network
            self.events.schedule(0, on_delivered, arg)
            return
        d, hops = route
        _, _, _, hop_latency, bandwidth = self._dims[d]
        latency = self._fixed_latency if self._fixed_latency is not None else hops * hop_latency
        now = self.events.now
        port = (src, d)
        start = max(now, self._port_free_at.get(port, 0))
        transmit = size_bytes / bandwidth
        self._port_free_at[port] = start + transmit
        self.port_busy_ns[port] = self.port_busy_ns.get(port, 0) + transmit
        # Truncate the in-flight time to whole ns, as upstream's analytical model does.
        self.events.schedule_at(now + int(start - now + transmit + latency), on_delivered, arg)

    def _first_dim(self, src: int, dst: int) -> tuple[int, int] | None:
        """(first dimension where src and dst differ, hops in it), None if src == dst."""
        for d, (stride, npus, kind, _, _) in enumerate(self._dims):
            a, b = (src // stride) % npus, (dst // stride) % npus
            if a != b:
                if kind == "Ring":
                    return d, min((b - a) % npus, (a - b) % npus)
                return d, HOPS.get(kind, 1)
        return None


def create(topology: Topology, config: Any = None) -> IdealNetwork:
    """Backend factory: ``config`` is None, an IdealConfig, a mapping of its keys or the
    path of a TOML/YAML file of them (:func:`load_config`; raises ConfigError)."""
    return IdealNetwork(topology, load_config(config))
