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
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from astra_core.config.files import expect_mapping, read_json, source_name
from astra_core.config.issues import (
    PYTHON_SOURCE,
    ConfigWarning,
    Problems,
    as_choice,
    as_int,
)
from astra_core.config.limits import MAX_DELAY_NS, MAX_NPUS, MAX_RATE

#: ns per second; upstream FREQ (astra-sim/common/Common.hh: 1 GHz, 1 tick = 1 ns).
NS_PER_S = 1_000_000_000
#: remote-mem-bw GB -> bytes (upstream AnalyticalRemoteMemory: ``* 1000000000``).
BYTES_PER_GB_REMOTE = 1_000_000_000


class MemoryType(str, Enum):
    NO_MEMORY_EXPANSION = "NO_MEMORY_EXPANSION"
    PER_NODE_MEMORY_EXPANSION = "PER_NODE_MEMORY_EXPANSION"
    PER_NPU_MEMORY_EXPANSION = "PER_NPU_MEMORY_EXPANSION"
    MEMORY_POOL = "MEMORY_POOL"

    def __str__(self) -> str:
        return self.value


#: memory.json key -> MemoryConfig attribute.
_KEYS = {
    "memory-type": "memory_type",
    "remote-mem-latency": "remote_mem_latency_ns",
    "remote-mem-bw": "remote_mem_bw_gbps",
    "num-nodes": "num_nodes",
    "num-npus-per-node": "num_npus_per_node",
}
#: The keys a memory.json may have (upstream's).
KNOWN_KEYS = tuple(_KEYS)


@dataclass(frozen=True)
class MemoryConfig:
    """The parsed remote-memory config; attribute names carry their unit."""

    memory_type: MemoryType
    remote_mem_latency_ns: int = 0
    remote_mem_bw_gbps: int = 0
    num_nodes: int = 0
    num_npus_per_node: int = 0
    source: str = field(default=PYTHON_SOURCE, compare=False)

    def __post_init__(self) -> None:
        problems = Problems(self.source)
        raw = {key: getattr(self, attr) for key, attr in _KEYS.items()}
        if isinstance(raw["memory-type"], MemoryType):
            raw["memory-type"] = raw["memory-type"].value
        typed = _check(raw, problems, given=set(_KEYS))
        problems.raise_if_any()
        object.__setattr__(self, "memory_type", typed["memory-type"])
        unread = [key for key in _unread_keys(self.memory_type) if raw[key]]
        if unread:
            warnings.warn(
                f"{self.source}: {', '.join(unread)}: no effect with memory-type {self.memory_type.value}",
                ConfigWarning,
                stacklevel=3,
            )

    @property
    def expands_memory(self) -> bool:
        """False for NO_MEMORY_EXPANSION (remote accesses are an error)."""
        return self.memory_type is not MemoryType.NO_MEMORY_EXPANSION

    def access_time_ns(self, tensor_size_bytes: int) -> int:
        """Service time of one request of ``tensor_size_bytes``, in whole ns.

        Upstream ``get_remote_mem_runtime``: latency + truncated
        ``size / (bw_GBps * 1e9) * 1e9``.  Queueing (PER_NODE, MEMORY_POOL) is
        the caller's job; see :meth:`queue_of`.
        """
        if not self.expands_memory:
            raise ValueError("remote memory access is not supported in NO_MEMORY_EXPANSION")
        bytes_per_s = self.remote_mem_bw_gbps * BYTES_PER_GB_REMOTE
        return self.remote_mem_latency_ns + int(tensor_size_bytes / bytes_per_s * NS_PER_S)

    def queue_of(self, npu: int) -> int | None:
        """Which FIFO serves NPU ``npu``'s requests: the node index for
        PER_NODE, 0 for MEMORY_POOL, None (no waiting) for PER_NPU."""
        if self.memory_type is MemoryType.PER_NODE_MEMORY_EXPANSION:
            return npu // self.num_npus_per_node
        if self.memory_type is MemoryType.MEMORY_POOL:
            return 0
        if self.memory_type is MemoryType.PER_NPU_MEMORY_EXPANSION:
            return None
        raise ValueError("remote memory access is not supported in NO_MEMORY_EXPANSION")

    def check_npus_count(self, npus_count: int) -> None:
        """PER_NODE: every NPU must map to one of the ``num-nodes`` nodes
        (upstream indexes a vector of num-nodes entries with npu // per_node)."""
        if self.memory_type is not MemoryType.PER_NODE_MEMORY_EXPANSION:
            return
        capacity = self.num_nodes * self.num_npus_per_node
        if capacity < npus_count:
            problems = Problems(self.source)
            problems.add(
                "num-nodes",
                f"{self.num_nodes} nodes x {self.num_npus_per_node} NPUs per node "
                f"cover {capacity} NPUs, but the network has {npus_count}",
            )
            problems.raise_if_any()

    def to_dict(self) -> dict[str, Any]:
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
        """Validate a remote-memory mapping; raise one ConfigError if bad."""
        problems = Problems(source)
        config = _parse(data, problems)
        problems.raise_if_any()
        assert config is not None
        return config


def _check(raw: dict[str, Any], problems: Problems, given: set[str]) -> dict[str, Any]:
    typed: dict[str, Any] = {}
    if "memory-type" in raw:
        value, err = as_choice(raw["memory-type"], [m.value for m in MemoryType])
        if err:
            problems.add("memory-type", err)
        else:
            typed["memory-type"] = MemoryType(value)
    for key, maximum in _MAXIMA.items():
        if key in raw:
            number, err = as_int(raw[key], minimum=0, maximum=maximum)
            if err:
                problems.add(key, err + _INT_HINT if err.startswith("expected an integer") else err)
            else:
                typed[key] = number
    kind = typed.get("memory-type")
    if kind is not None and kind is not MemoryType.NO_MEMORY_EXPANSION:
        _require_positive("remote-mem-bw", raw, typed, given, problems, f"GB/s; {kind.value} divides by it")
    if kind is MemoryType.PER_NODE_MEMORY_EXPANSION:
        for key in ("num-nodes", "num-npus-per-node"):
            _require_positive(key, raw, typed, given, problems, f"needed by {kind.value}")
    return typed


_INT_HINT = " (upstream stores it as an unsigned integer)"


def _unread_keys(kind: MemoryType) -> tuple[str, ...]:
    """Keys ``kind`` never reads (AnalyticalRemoteMemory): a non-zero value
    there is valid but suspicious."""
    if kind is MemoryType.NO_MEMORY_EXPANSION:
        return ("remote-mem-latency", "remote-mem-bw", "num-nodes", "num-npus-per-node")
    if kind is MemoryType.PER_NODE_MEMORY_EXPANSION:
        return ()
    return ("num-nodes", "num-npus-per-node")


#: Largest value of each numeric key (ns, GB/s, counts).
_MAXIMA = {
    "remote-mem-latency": int(MAX_DELAY_NS),
    "remote-mem-bw": int(MAX_RATE),
    "num-nodes": MAX_NPUS,
    "num-npus-per-node": MAX_NPUS,
}


def _require_positive(key, raw, typed, given, problems, why) -> None:
    if key in raw and key not in typed:
        return  # already reported
    if key not in given:
        problems.missing(key, why)
    elif typed[key] < 1:
        problems.add(key, f"must be >= 1 ({why}), got {typed[key]}")


def _parse(data: Any, problems: Problems) -> MemoryConfig | None:
    mapping = expect_mapping(data, problems)
    if mapping is None:
        return None
    raw: dict[str, Any] = {}
    for key, value in mapping.items():
        if key in _KEYS:
            raw[key] = value
        else:
            problems.unknown(str(key), _KEYS)
    if "memory-type" not in mapping:
        problems.missing("memory-type")
    typed = _check(raw, problems, given=set(raw))
    if problems:
        return None
    return MemoryConfig(**{_KEYS[k]: v for k, v in typed.items()}, source=problems.source)


def load_memory(path: str | os.PathLike[str]) -> MemoryConfig:
    """Read and validate a remote-memory JSON; raise one ConfigError naming the file."""
    problems = Problems(source_name(path))
    data = read_json(path, problems)
    config = _parse(data, problems)
    problems.raise_if_any()
    assert config is not None
    return config
