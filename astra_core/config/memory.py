"""Remote-memory JSON (``--remote-memory-configuration``), as upstream reads it.

Upstream source: ``AnalyticalRemoteMemory`` (astra-sim
extern/remote_memory_backend/analytical/AnalyticalRemoteMemory.cc).  Keys:

``memory-type`` (required here; upstream leaves it uninitialised if absent)
    ``NO_MEMORY_EXPANSION``: no remote memory; a MEM_LOAD/MEM_STORE node is a
    fatal error ("Remote memory access is not supported in NO_MEMORY_EXPANSION").
    ``PER_NODE_MEMORY_EXPANSION``: one remote memory per node of
    ``num-npus-per-node`` NPUs; NPU ``i`` uses node ``i // num-npus-per-node``;
    the node's requests are served one at a time, FIFO.
    ``PER_NPU_MEMORY_EXPANSION``: every NPU has its own remote memory; requests
    never wait for each other.
    ``MEMORY_POOL``: one memory shared by all NPUs; all requests are served
    one at a time, FIFO.
``remote-mem-latency`` (default 0)
    ns per access; upstream stores it as uint64, so an integer here, at most
    1e12 (:mod:`astra_core.config.limits`).
``remote-mem-bw`` (default 0; must be > 0 for every expansion type)
    GB/s with **1 GB = 1e9 bytes** (upstream ``remote_mem_bw * 1000000000``);
    upstream stores it as uint64, so an integer here, at most 1e12.
``num-nodes``, ``num-npus-per-node`` (default 0; only read for
    PER_NODE_MEMORY_EXPANSION, where both must be >= 1; at most 2^20, the
    NPU limit).

Access time of one request once it is served (upstream
``get_remote_mem_runtime``; FREQ = 1e9 ticks/s, 1 tick = 1 ns)::

    time_ns = remote-mem-latency + uint64(tensor_size / (remote-mem-bw * 1e9) * 1e9)

i.e. latency plus size / bandwidth in bytes per ns, truncated to whole ns.  In
the serialised types a request that finds its memory busy starts when the
previous one ends.

:class:`MemoryConfig` is a pydantic model (:mod:`astra_core.config.model`)
whose fields carry their unit (``memory_type``, ``remote_mem_latency_ns``,
``remote_mem_bw_gbps``, ``num_nodes``, ``num_npus_per_node``) and are read
from the keys above.  A non-zero key the memory type never reads is valid but
a :class:`~astra_core.config.issues.ConfigWarning`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from enum import Enum
from typing import Annotated, Any

from pydantic import ConfigDict, Field, ValidationInfo, model_validator

from astra_core.config.files import read_json, source_name
from astra_core.config.issues import PYTHON_SOURCE, ConfigWarning, Problems, as_choice, as_int
from astra_core.config.limits import MAX_DELAY_NS, MAX_NPUS, MAX_RATE
from astra_core.config.model import ConfigModel, checked, raise_problems, source_of, validate_mapping
from astra_core.config.network import NS_PER_S
from astra_core.errors import ConfigError

#: remote-mem-bw GB -> bytes (upstream AnalyticalRemoteMemory: ``* 1000000000``).
BYTES_PER_GB_REMOTE = 1_000_000_000


class MemoryType(str, Enum):
    """``memory-type``: how remote memory is attached (see the module docstring)."""

    NO_MEMORY_EXPANSION = "NO_MEMORY_EXPANSION"
    PER_NODE_MEMORY_EXPANSION = "PER_NODE_MEMORY_EXPANSION"
    PER_NPU_MEMORY_EXPANSION = "PER_NPU_MEMORY_EXPANSION"
    MEMORY_POOL = "MEMORY_POOL"

    def __str__(self) -> str:
        return self.value


def _memory_type(value: Any) -> tuple[str | None, str | None]:
    return as_choice(value, [kind.value for kind in MemoryType])


def _unsigned(maximum: int) -> Callable[[Any], tuple[int | None, str | None]]:
    """A house check: an integer in [0, maximum], as upstream's uint64 fields."""

    def check(value: Any) -> tuple[int | None, str | None]:
        number, error = as_int(value, minimum=0, maximum=maximum)
        if error and error.startswith("expected an integer"):
            error += " (upstream stores it as an unsigned integer)"
        return number, error

    return check


_Kind = Annotated[MemoryType, checked(_memory_type)]
_Latency = Annotated[int, checked(_unsigned(int(MAX_DELAY_NS)))]  # ns
_Bandwidth = Annotated[int, checked(_unsigned(int(MAX_RATE)))]  # GB/s, 1 GB = 1e9 B
_Count = Annotated[int, checked(_unsigned(MAX_NPUS))]


def _unread_keys(kind: MemoryType) -> tuple[str, ...]:
    """Keys ``kind`` never reads (AnalyticalRemoteMemory): a non-zero value
    there is valid but suspicious."""
    if kind is MemoryType.NO_MEMORY_EXPANSION:
        return ("remote-mem-latency", "remote-mem-bw", "num-nodes", "num-npus-per-node")
    if kind is MemoryType.PER_NODE_MEMORY_EXPANSION:
        return ()
    return ("num-nodes", "num-npus-per-node")


class MemoryConfig(ConfigModel):
    """The remote-memory config; attribute names carry their unit, each field
    is read from the memory.json key of its alias (see the module docstring).

    Build from a file with :func:`load_memory`, from a dict shaped like the
    file with :meth:`from_dict`, or in Python::

        MemoryConfig(MemoryType.MEMORY_POOL, remote_mem_bw_gbps=10)

    Every path validates and raises one :class:`ConfigError` with one line per
    problem, keyed by the file's keys; a non-zero key the memory type never
    reads is a :class:`ConfigWarning`. Immutable.
    """

    model_config = ConfigDict(frozen=True, validate_assignment=False)

    memory_type: _Kind = Field(alias="memory-type")
    remote_mem_latency_ns: _Latency = Field(0, alias="remote-mem-latency")
    remote_mem_bw_gbps: _Bandwidth = Field(0, alias="remote-mem-bw")
    num_nodes: _Count = Field(0, alias="num-nodes")
    num_npus_per_node: _Count = Field(0, alias="num-npus-per-node")

    def __init__(
        self,
        memory_type: MemoryType | str,
        remote_mem_latency_ns: int = 0,
        remote_mem_bw_gbps: int = 0,
        num_nodes: int = 0,
        num_npus_per_node: int = 0,
    ) -> None:
        """A remote-memory config built in Python, checked as the file would be
        (every key counts as given). Raises ConfigError naming ``<python>``."""
        super().__init__(
            **{
                "memory-type": memory_type,
                "remote-mem-latency": remote_mem_latency_ns,
                "remote-mem-bw": remote_mem_bw_gbps,
                "num-nodes": num_nodes,
                "num-npus-per-node": num_npus_per_node,
            }
        )

    @model_validator(mode="after")
    def _keys_the_type_needs(self, info: ValidationInfo) -> MemoryConfig:
        """The keys the memory type divides by or indexes with are given and >= 1
        (built in Python every key is given); warn about keys it never reads."""
        kind = self.memory_type
        needed: list[tuple[str, str]] = []
        if kind is not MemoryType.NO_MEMORY_EXPANSION:
            needed.append(("remote_mem_bw_gbps", f"GB/s; {kind.value} divides by it"))
        if kind is MemoryType.PER_NODE_MEMORY_EXPANSION:
            needed += [(name, f"needed by {kind.value}") for name in ("num_nodes", "num_npus_per_node")]
        problems: list[tuple[str | None, str]] = []
        for name, why in needed:
            key = type(self).model_fields[name].alias or name
            if name not in self.model_fields_set:
                problems.append((None, f"missing required key {key!r} ({why})"))
            elif getattr(self, name) < 1:
                problems.append((key, f"must be >= 1 ({why}), got {getattr(self, name)}"))
        raise_problems(problems)
        values = self.model_dump(by_alias=True)
        unread = [key for key in _unread_keys(kind) if values[key]]
        if unread:
            warnings.warn(
                f"{source_of(info)}: {', '.join(unread)}: no effect with memory-type {kind.value}",
                ConfigWarning,
                stacklevel=2,
            )
        return self

    @property
    def expands_memory(self) -> bool:
        """False for NO_MEMORY_EXPANSION (remote accesses are an error)."""
        return self.memory_type is not MemoryType.NO_MEMORY_EXPANSION

    def access_time_ns(self, tensor_size_bytes: int) -> int:
        """Service time of one request of ``tensor_size_bytes``, in whole ns.

        Upstream ``get_remote_mem_runtime``: latency + truncated
        ``size / (bw_GBps * 1e9) * 1e9``.  Queueing (PER_NODE, MEMORY_POOL) is
        the caller's job; see :meth:`queue_of`.  Raises ValueError for
        NO_MEMORY_EXPANSION.
        """
        if not self.expands_memory:
            raise ValueError("remote memory access is not supported in NO_MEMORY_EXPANSION")
        bytes_per_s = self.remote_mem_bw_gbps * BYTES_PER_GB_REMOTE
        return self.remote_mem_latency_ns + int(tensor_size_bytes / bytes_per_s * NS_PER_S)

    def queue_of(self, npu: int) -> int | None:
        """Which FIFO serves NPU ``npu``'s requests: the node index for
        PER_NODE, 0 for MEMORY_POOL, None (no waiting) for PER_NPU.  Raises
        ValueError for NO_MEMORY_EXPANSION."""
        if self.memory_type is MemoryType.PER_NODE_MEMORY_EXPANSION:
            return npu // self.num_npus_per_node
        if self.memory_type is MemoryType.MEMORY_POOL:
            return 0
        if self.memory_type is MemoryType.PER_NPU_MEMORY_EXPANSION:
            return None
        raise ValueError("remote memory access is not supported in NO_MEMORY_EXPANSION")

    def check_npus_count(self, npus_count: int) -> None:
        """PER_NODE: every NPU must map to one of the ``num-nodes`` nodes
        (upstream indexes a vector of num-nodes entries with npu // per_node).
        Raises ConfigError naming this config's file."""
        if self.memory_type is not MemoryType.PER_NODE_MEMORY_EXPANSION:
            return
        capacity = self.num_nodes * self.num_npus_per_node
        if capacity < npus_count:
            raise ConfigError(
                f"{self.source}: num-nodes: {self.num_nodes} nodes x {self.num_npus_per_node} "
                f"NPUs per node cover {capacity} NPUs, but the network has {npus_count}"
            )

    def to_dict(self) -> dict[str, Any]:
        """The remote-memory mapping for this config, with only the keys its
        memory type reads (round-trips via :meth:`from_dict`)."""
        out: dict[str, Any] = {"memory-type": self.memory_type.value}
        if self.expands_memory:
            out["remote-mem-latency"] = self.remote_mem_latency_ns
            out["remote-mem-bw"] = self.remote_mem_bw_gbps
        if self.memory_type is MemoryType.PER_NODE_MEMORY_EXPANSION:
            out["num-nodes"] = self.num_nodes
            out["num-npus-per-node"] = self.num_npus_per_node
        return out

    @classmethod
    def from_dict(cls, data: Any, source: str = PYTHON_SOURCE) -> MemoryConfig:
        """Validate a remote-memory mapping; raise one ConfigError (one line per
        problem, each starting with ``source``) if it is not valid."""
        return validate_mapping(cls, data, source)


#: The keys a memory.json may have (upstream's): the fields' aliases.
KNOWN_KEYS = tuple(field.alias or name for name, field in MemoryConfig.model_fields.items())


def load_memory(path: str | os.PathLike[str]) -> MemoryConfig:
    """Read and validate a remote-memory JSON. Raises one ConfigError naming the
    file: an unreadable file or bad JSON, duplicate keys, or one line per problem."""
    name = source_name(path)
    problems = Problems(name)
    data = read_json(path, problems)
    problems.raise_if_any()  # duplicate keys
    return validate_mapping(MemoryConfig, data, name)
