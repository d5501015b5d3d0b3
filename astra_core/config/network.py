"""network.yml: the multi-dimensional topology, as upstream's analytical backend reads it.

Upstream source: astra-network-analytical ``common/network-parser/NetworkParser``
(bundled in astra-sim as ``extern/network_backend/analytical``).  It reads four
keys, each a list with one entry per network dimension (dimension 0 first):

``topology``
    ``Ring``, ``FullyConnected`` or ``Switch`` (exact, case-sensitive names;
    anything else exits with "Topology name ... not supported").  The number of
    entries defines the number of dimensions.
``npus_count``
    NPUs in each dimension, integers ``> 1`` ("should be larger than 1");
    their product is at most 2^20 (:data:`~astra_core.config.limits.MAX_NPUS`).
``bandwidth``
    Per-link bandwidth in GB/s with **1 GB = 2^30 bytes** (upstream
    ``bw_GBps_to_Bpns``: ``bw * 2^30 / 1e9`` bytes per ns), in
    ``[1e-6, 1e12]`` (:mod:`astra_core.config.limits`; upstream: ``> 0``).
``latency``
    Per-link latency in ns, in ``[0, 1e12]``.

All four lists must have as many entries as ``topology`` (upstream
``check_validity``).  Upstream silently ignores any other key; here an unknown
key is an error, because no backend reads one.  The total NPU count is the
product of ``npus_count``; NPU ids are laid out dimension 0 fastest.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from astra_core.config.files import expect_mapping, read_yaml, source_name
from astra_core.config.issues import (
    PYTHON_SOURCE,
    Problems,
    as_choice,
    as_int,
    as_number,
    show,
)
from astra_core.config.limits import MAX_NPUS, MAX_RATE, MIN_RATE, as_delay, npus_limit_message

#: 1 GB in network.yml is 2^30 bytes (upstream NetworkFunction ``bw_GBps_to_Bpns``).
BYTES_PER_GB = 1 << 30
#: ns per second; bandwidth GB/s -> bytes/ns divides by this.
NS_PER_S = 1_000_000_000


class TopologyKind(str, Enum):
    """A topology building block of one dimension (upstream ``TopologyBuildingBlock``)."""

    RING = "Ring"
    FULLY_CONNECTED = "FullyConnected"
    SWITCH = "Switch"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Dimension:
    """One network dimension.

    ``kind``: building block; ``npus``: NPUs along this dimension (>= 2);
    ``bandwidth_gbps``: per-link bandwidth in GB/s (1 GB = 2^30 B);
    ``latency_ns``: per-link latency in ns.
    """

    kind: TopologyKind
    npus: int
    bandwidth_gbps: float
    latency_ns: float

    def __post_init__(self) -> None:
        # Coerce the obvious spellings; NetworkConfig reports anything invalid.
        if not isinstance(self.kind, TopologyKind) and self.kind in {k.value for k in TopologyKind}:
            object.__setattr__(self, "kind", TopologyKind(self.kind))
        for name in ("bandwidth_gbps", "latency_ns"):
            value = getattr(self, name)
            if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() < 1024:
                object.__setattr__(self, name, float(value))  # larger: NetworkConfig reports it

    @property
    def bandwidth_bytes_per_ns(self) -> float:
        """Link bandwidth in bytes/ns: GB/s * 2^30 / 1e9, as upstream."""
        return self.bandwidth_gbps * BYTES_PER_GB / NS_PER_S


def _dimension_problems(index: int, dim: Any) -> list[tuple[str, str]]:
    """Range checks of one Dimension, keyed by the network.yml key path."""
    if not isinstance(dim, Dimension):
        return [(f"dims[{index}]", f"expected a Dimension, got {show(dim)}")]
    problems: list[tuple[str, str]] = []
    if not isinstance(dim.kind, TopologyKind):
        _, err = as_choice(dim.kind, [k.value for k in TopologyKind])
        problems.append((f"topology[{index}]", err or "invalid"))
    _, err = _npus_check(dim.npus)
    if err:
        problems.append((f"npus_count[{index}]", err))
    _, err = _bandwidth_check(dim.bandwidth_gbps)
    if err:
        problems.append((f"bandwidth[{index}]", err))
    _, err = as_delay(dim.latency_ns)
    if err:
        problems.append((f"latency[{index}]", err))
    return problems


#: The keys a network.yml may have (upstream's four).
KNOWN_KEYS = ("topology", "npus_count", "bandwidth", "latency")


@dataclass(frozen=True)
class NetworkConfig:
    """The network of a run: one :class:`Dimension` per network dimension.

    Build from a file with :func:`load_network`, from a dict shaped like
    network.yml with :meth:`from_dict`, or directly::

        NetworkConfig(dims=(Dimension(TopologyKind.RING, 4, 100.0, 200.0),))

    Every path validates and raises one :class:`ConfigError` listing all problems.
    """

    dims: tuple[Dimension, ...]
    source: str = field(default=PYTHON_SOURCE, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", tuple(self.dims))
        problems = Problems(self.source)
        if not self.dims:
            problems.add("topology", "needs at least one dimension")
        for index, dim in enumerate(self.dims):
            problems.extend(_dimension_problems(index, dim))
        if not problems:
            problems.extend(_total_npus_problems([dim.npus for dim in self.dims]))
        problems.raise_if_any()

    @property
    def dims_count(self) -> int:
        """Number of network dimensions."""
        return len(self.dims)

    @property
    def npus_count(self) -> int:
        """Total NPUs: the product of the per-dimension NPU counts."""
        return math.prod(dim.npus for dim in self.dims)

    @property
    def npus_per_dim(self) -> tuple[int, ...]:
        return tuple(dim.npus for dim in self.dims)

    def to_dict(self) -> dict[str, list[Any]]:
        """The network.yml mapping for this config (round-trips via from_dict)."""
        return {
            "topology": [dim.kind.value for dim in self.dims],
            "npus_count": [dim.npus for dim in self.dims],
            "bandwidth": [dim.bandwidth_gbps for dim in self.dims],
            "latency": [dim.latency_ns for dim in self.dims],
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = PYTHON_SOURCE) -> NetworkConfig:
        """Validate a network.yml-shaped mapping; raise one ConfigError if bad."""
        problems = Problems(source)
        config = _parse(data, problems)
        problems.raise_if_any()
        assert config is not None
        return config


def _parse_list(data: Mapping[str, Any], key: str, dims: int | None, problems: Problems) -> list[Any] | None:
    if key not in data:
        problems.missing(key)
        return None
    value = data[key]
    if not isinstance(value, list):
        problems.add(key, f"expected a list (one entry per dimension), got {show(value)}")
        return None
    if dims is not None and len(value) != dims:
        problems.add(key, f"expected {dims} entries (one per dimension), got {len(value)}")
        return None
    return value


def _parse_items(key: str, items: Iterable[Any], check, problems: Problems) -> list[Any] | None:
    parsed: list[Any] = []
    ok = True
    for index, item in enumerate(items):
        value, err = check(item)
        if err:
            problems.add(f"{key}[{index}]", err)
            ok = False
        parsed.append(value)
    return parsed if ok else None


def _parse(data: Any, problems: Problems) -> NetworkConfig | None:
    mapping = expect_mapping(data, problems)
    if mapping is None:
        return None
    for key in mapping:
        if key not in KNOWN_KEYS:
            problems.unknown(str(key), KNOWN_KEYS)

    topology = _parse_list(mapping, "topology", None, problems)
    dims = len(topology) if topology is not None else None
    if topology is not None and not topology:
        problems.add("topology", "needs at least one dimension")
        dims = None
    kinds = npus = bandwidths = latencies = None
    if topology:
        kinds = _parse_items(
            "topology",
            topology,
            lambda v: as_choice(v, [k.value for k in TopologyKind]),
            problems,
        )
    raw = _parse_list(mapping, "npus_count", dims, problems)
    if raw is not None:
        npus = _parse_items("npus_count", raw, _npus_check, problems)
    raw = _parse_list(mapping, "bandwidth", dims, problems)
    if raw is not None:
        bandwidths = _parse_items("bandwidth", raw, _bandwidth_check, problems)
    raw = _parse_list(mapping, "latency", dims, problems)
    if raw is not None:
        latencies = _parse_items("latency", raw, as_delay, problems)
    if npus is not None:
        problems.extend(_total_npus_problems(npus))
    if problems or kinds is None or npus is None or bandwidths is None or latencies is None:
        return None
    dims_tuple = tuple(
        Dimension(TopologyKind(k), n, b, lat) for k, n, b, lat in zip(kinds, npus, bandwidths, latencies)
    )
    return NetworkConfig(dims=dims_tuple, source=problems.source)


def _npus_check(value: Any) -> tuple[int | None, str | None]:
    # Upstream: "npus_count (...) should be larger than 1".
    npus, err = as_int(value, minimum=2)
    if npus is not None and npus > MAX_NPUS:  # (npus is None exactly when err is not)
        if npus.bit_length() > 64:  # too long to print in full
            return None, f"must be <= {MAX_NPUS:,}, got {show(npus)}"
        return None, npus_limit_message(npus)
    return npus, err


def _total_npus_problems(npus: list[int]) -> list[tuple[str, str]]:
    """The whole network's NPU count (the product) against the limit."""
    total = math.prod(npus)
    if len(npus) > 1 and total > MAX_NPUS:
        return [("npus_count", f"{show(npus)} is {npus_limit_message(total)}")]
    return []


def _bandwidth_check(value: Any) -> tuple[float | None, str | None]:
    # GB/s; MIN_RATE keeps bytes / bandwidth finite, MAX_RATE keeps * 2^30 finite.
    bandwidth, err = as_number(value, positive=True, maximum=MAX_RATE)
    if bandwidth is not None and bandwidth < MIN_RATE:  # (None exactly when err is not)
        return None, f"must be >= {MIN_RATE:g} GB/s, got {show(value)}"
    return bandwidth, err


def load_network(path: str | os.PathLike[str]) -> NetworkConfig:
    """Read and validate a network.yml; raise one ConfigError naming the file."""
    problems = Problems(source_name(path))
    data = read_yaml(path, problems)
    config = _parse(data, problems)
    problems.raise_if_any()
    assert config is not None
    return config
