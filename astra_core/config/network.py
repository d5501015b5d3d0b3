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

:class:`NetworkConfig` is a pydantic model (:mod:`astra_core.config.model`)
whose fields are the four lists under these keys (``kinds``,
``npus_per_dim``, ``bandwidths_gbps``, ``latencies_ns``); its
:attr:`~NetworkConfig.dims` are the same values as one :class:`Dimension`
per dimension.  Every problem is one line keyed by the file's key path, e.g.
``network.yml: bandwidth[1]: must be > 0, got 0``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field, PrivateAttr, model_validator

from astra_core.config.files import read_yaml, source_name
from astra_core.config.issues import PYTHON_SOURCE, Problems, as_choice, as_int, as_number, show
from astra_core.config.limits import MAX_NPUS, MAX_RATE, MIN_RATE, as_delay, npus_limit_message
from astra_core.config.model import ConfigModel, checked, raise_problems, validate_mapping

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
    """One network dimension: a plain record, checked when a :class:`NetworkConfig`
    is built from it (the dimensions a NetworkConfig hands out are checked).

    ``kind``: building block (a :class:`TopologyKind`, or its name when building
    a NetworkConfig); ``npus``: NPUs along this dimension (>= 2);
    ``bandwidth_gbps``: per-link bandwidth in GB/s (1 GB = 2^30 B);
    ``latency_ns``: per-link latency in ns.
    """

    kind: TopologyKind
    npus: int
    bandwidth_gbps: float
    latency_ns: float

    @property
    def bandwidth_bytes_per_ns(self) -> float:
        """Link bandwidth in bytes/ns: GB/s * 2^30 / 1e9, as upstream."""
        return self.bandwidth_gbps * BYTES_PER_GB / NS_PER_S


@dataclass(frozen=True)
class _Misfit:
    """A per-dimension list with a different number of entries than ``topology``:
    put in its place before the fields are checked, so that its field reports
    it along with every other problem of the file."""

    entries: int
    dims: int


def _per_dimension(value: Any) -> tuple[Any, str | None]:
    """A list of one entry per dimension (a house check)."""
    if isinstance(value, _Misfit):
        return None, f"expected {value.dims} entries (one per dimension), got {value.entries}"
    if not isinstance(value, (list, tuple)):
        return None, f"expected a list (one entry per dimension), got {show(value)}"
    return value, None


def _dimensions(value: Any) -> tuple[Any, str | None]:
    """``topology``: a list of at least one building block (a house check)."""
    value, error = _per_dimension(value)
    if error is None and not value:
        return None, "needs at least one dimension"
    return value, error


def _topology_check(value: Any) -> tuple[str | None, str | None]:
    # Upstream: "Topology name ... not supported" for anything else (case-sensitive).
    return as_choice(value, [kind.value for kind in TopologyKind])


def _npus_check(value: Any) -> tuple[int | None, str | None]:
    # Upstream: "npus_count (...) should be larger than 1".
    npus, err = as_int(value, minimum=2)
    if npus is not None and npus > MAX_NPUS:  # (npus is None exactly when err is not)
        if npus.bit_length() > 64:  # too long to print in full
            return None, f"must be <= {MAX_NPUS:,}, got {show(npus)}"
        return None, npus_limit_message(npus)
    return npus, err


def _bandwidth_check(value: Any) -> tuple[float | None, str | None]:
    # GB/s; MIN_RATE keeps bytes / bandwidth finite, MAX_RATE keeps * 2^30 finite.
    bandwidth, err = as_number(value, positive=True, maximum=MAX_RATE)
    if bandwidth is not None and bandwidth < MIN_RATE:  # (None exactly when err is not)
        return None, f"must be >= {MIN_RATE:g} GB/s, got {show(value)}"
    return bandwidth, err


def _total_npus(npus: tuple[int, ...]) -> tuple[int, ...]:
    """The whole network's NPU count (the product) against the limit; checked
    once every entry is valid, whatever the other keys hold."""
    total = math.prod(npus)
    if len(npus) > 1 and total > MAX_NPUS:
        raise_problems([(None, f"{show(list(npus))} is {npus_limit_message(total)}")])
    return npus


_Topology = Annotated[TopologyKind, checked(_topology_check)]
_Npus = Annotated[int, checked(_npus_check)]
_Bandwidth = Annotated[float, checked(_bandwidth_check)]
_Latency = Annotated[float, checked(as_delay)]
_NpusList = Annotated[tuple[_Npus, ...], checked(_per_dimension), AfterValidator(_total_npus)]


class NetworkConfig(ConfigModel):
    """The network of a run: network.yml's four lists, one entry per dimension.

    Fields (each under its network.yml key): ``kinds`` (``topology``),
    ``npus_per_dim`` (``npus_count``), ``bandwidths_gbps`` (``bandwidth``, GB/s
    with 1 GB = 2^30 B) and ``latencies_ns`` (``latency``, ns); :attr:`dims`
    has them as one :class:`Dimension` per dimension. Build from a file with
    :func:`load_network`, from a dict shaped like network.yml with
    :meth:`from_dict`, or from dimensions::

        NetworkConfig(dims=(Dimension(TopologyKind.RING, 4, 100.0, 200.0),))

    Every path validates and raises one :class:`~astra_core.errors.ConfigError`
    with one line per problem, keyed by network.yml's keys (``<python>:
    npus_count[0]: must be >= 2, got 1`` for dimensions built in Python).
    Immutable and hashable; equal when the dimensions are, wherever they were
    read from.
    """

    model_config = ConfigDict(frozen=True, validate_assignment=False)

    kinds: Annotated[tuple[_Topology, ...], checked(_dimensions)] = Field(alias="topology")
    npus_per_dim: _NpusList = Field(alias="npus_count")
    bandwidths_gbps: Annotated[tuple[_Bandwidth, ...], checked(_per_dimension)] = Field(alias="bandwidth")
    latencies_ns: Annotated[tuple[_Latency, ...], checked(_per_dimension)] = Field(alias="latency")
    _dims: tuple[Dimension, ...] = PrivateAttr(default=())

    def __init__(self, dims: Iterable[Dimension]) -> None:
        """The network of ``dims`` (dimension 0 first), checked as network.yml's
        lists would be. Raises ConfigError naming ``<python>``."""
        dims = tuple(dims)
        problems = Problems(PYTHON_SOURCE)
        for index, dim in enumerate(dims):
            if not isinstance(dim, Dimension):
                problems.add(f"dims[{index}]", f"expected a Dimension, got {show(dim)}")
        problems.raise_if_any()
        super().__init__(
            topology=[dim.kind for dim in dims],
            npus_count=[dim.npus for dim in dims],
            bandwidth=[dim.bandwidth_gbps for dim in dims],
            latency=[dim.latency_ns for dim in dims],
        )

    @model_validator(mode="before")
    @classmethod
    def _one_entry_per_dimension(cls, data: Any) -> Any:
        """Every per-dimension list has as many entries as ``topology`` (upstream
        ``check_validity``); a list that does not is replaced by a :class:`_Misfit`."""
        if not isinstance(data, dict):
            return data
        topology = data.get("topology")
        if not isinstance(topology, (list, tuple)) or not topology:
            return data  # its own check reports it; the others cannot be counted
        dims = len(topology)
        return {
            key: _Misfit(len(value), dims)
            if key in _PER_DIMENSION_KEYS and isinstance(value, (list, tuple)) and len(value) != dims
            else value
            for key, value in data.items()
        }

    def model_post_init(self, context: Any, /) -> None:
        """Build :attr:`dims` once (the fields never change)."""
        self._dims = tuple(
            Dimension(kind, npus, bandwidth, latency)
            for kind, npus, bandwidth, latency in zip(
                self.kinds, self.npus_per_dim, self.bandwidths_gbps, self.latencies_ns
            )
        )

    @property
    def dims(self) -> tuple[Dimension, ...]:
        """The network dimensions, dimension 0 (the fastest-varying NPU id) first."""
        return self._dims

    @property
    def dims_count(self) -> int:
        """Number of network dimensions."""
        return len(self.kinds)

    @property
    def npus_count(self) -> int:
        """Total NPUs: the product of the per-dimension NPU counts."""
        return math.prod(self.npus_per_dim)

    def to_dict(self) -> dict[str, list[Any]]:
        """The network.yml mapping for this config (round-trips via :meth:`from_dict`)."""
        return self.model_dump(mode="json", by_alias=True)

    @classmethod
    def from_dict(cls, data: Any, source: str = PYTHON_SOURCE) -> NetworkConfig:
        """Validate a network.yml-shaped mapping; raise one ConfigError (one line
        per problem, each starting with ``source``) if it is not valid."""
        return validate_mapping(cls, data, source)


#: The keys a network.yml may have (upstream's four): the fields' aliases.
KNOWN_KEYS = tuple(field.alias or name for name, field in NetworkConfig.model_fields.items())
#: The keys with one entry per dimension besides ``topology``, which sets the count.
_PER_DIMENSION_KEYS = KNOWN_KEYS[1:]


def load_network(path: str | os.PathLike[str]) -> NetworkConfig:
    """Read and validate a network.yml. Raises one ConfigError naming the file:
    an unreadable file or bad YAML, duplicate keys, or one line per problem."""
    name = source_name(path)
    problems = Problems(name)
    data = read_yaml(path, problems)
    problems.raise_if_any()  # duplicate keys
    return validate_mapping(NetworkConfig, data, name)
