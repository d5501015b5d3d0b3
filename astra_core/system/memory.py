"""Remote memory for MEM_LOAD / MEM_STORE nodes (upstream ``AnalyticalRemoteMemory``).

An access of ``tensor_size`` bytes takes ``remote-mem-latency +
tensor_size / remote-mem-bw`` ns once served. Per-NPU memories serve every
request at once; a per-node memory (``num-npus-per-node`` NPUs share it) and a
memory pool (all NPUs share it) serve one request at a time, first come first
served.
"""

from __future__ import annotations

from astra_core.config.memory import MemoryConfig


class RemoteMemory:
    """Shared remote-memory timing for all ranks; times in ns."""

    def __init__(self, config: MemoryConfig):
        self.config = config
        self._busy_until: dict[int, float] = {}

    @property
    def enabled(self) -> bool:
        return self.config.expands_memory

    def access_done_delay(self, npu: int, tensor_size: int, now: float) -> float:
        """Delay from ``now`` until an access issued now by ``npu`` completes."""
        service = self.config.access_time_ns(tensor_size)
        queue = self.config.queue_of(npu)
        if queue is None:
            return service
        start = max(now, self._busy_until.get(queue, 0))
        self._busy_until[queue] = start + service
        return start + service - now
