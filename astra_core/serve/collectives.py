"""Collective times of a serving step, simulated by the system layer on the chosen backend.

A replica's forward pass runs the same collectives at every step, only their sizes vary
with the step's tokens: two all-reduces per layer over the tensor-parallel group
(attention's and the MLP's row-parallel outputs, Megatron-LM's layout as vLLM runs it)
and the all-gather of the logits. :class:`CollectiveClock` times one collective of a
given size by simulating it alone: a Chakra trace of one COMM_COLL node per rank
(:mod:`astra_core.workload.generators.micro`'s node) run by :func:`astra_core.api.simulate`
on the deployment's network, system and backend, so every collective algorithm and
network model astra has applies.

Sizes come in thousands of values in one run, so the clock simulates sizes on a grid
of :data:`STEPS_PER_OCTAVE` points per doubling and interpolates linearly in size
between the two grid points around a size. A collective's time is affine in its size
while the algorithm and protocol stay the same (latency plus bytes over bandwidth,
Hockney's model, which NCCL's own tuner uses), so the interpolation is exact inside a
protocol's range and off by at most the jump where NCCL switches protocol; the
interpolated time never goes below the smaller grid point's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.et_decode import ETNode, RankTrace

__all__ = ["STEPS_PER_OCTAVE", "CollectiveClock"]

#: Grid points per doubling of size.
STEPS_PER_OCTAVE = 8
#: The smallest grid size [bytes]; smaller collectives take its time (all latency).
SMALLEST_BYTES = 1024


class CollectiveClock:
    """Times [ns] of collectives over ``ranks`` GPUs (the first ``ranks`` NPUs of
    ``network``), each simulated alone with ``system`` on ``backend``, cached by size.

    ``network``: a network.yml path or dict whose NPU count is ``ranks``; ``system``: a
    system.json path or dict. Raises the simulator's AstraError for bad configurations
    (at the first collective timed)."""

    def __init__(self, ranks: int, network: Any, system: Any, backend: str | None = None):
        self.ranks = ranks
        self.network = network
        self.system = system
        self.backend = backend
        self._grid: dict[tuple[int, int], float] = {}
        self.simulated = 0

    def time_ns(self, kind: int, size_bytes: float) -> float:
        """Time [ns] of one collective of ``kind`` (a Chakra ``CollectiveCommType``:
        ``pb.ALL_REDUCE``, ``pb.ALL_GATHER``, ...) of ``size_bytes`` over the group;
        0 on one rank or for no bytes."""
        if self.ranks == 1 or size_bytes <= 0:
            return 0.0
        position = max(0.0, math.log2(size_bytes / SMALLEST_BYTES) * STEPS_PER_OCTAVE)
        low = math.floor(position)
        t_low = self._at(kind, low)
        if position == low:
            return t_low
        t_high = self._at(kind, low + 1)
        size_low, size_high = _grid_bytes(low), _grid_bytes(low + 1)
        w = (max(size_bytes, SMALLEST_BYTES) - size_low) / (size_high - size_low)
        return max(t_low, t_low + w * (t_high - t_low))

    def _at(self, kind: int, point: int) -> float:
        key = (kind, point)
        if key not in self._grid:
            self._grid[key] = self._simulate(kind, round(_grid_bytes(point)))
        return self._grid[key]

    def _simulate(self, kind: int, size_bytes: int) -> float:
        from astra_core.api import simulate

        node = ETNode(
            0, pb.CollectiveCommType.Name(kind), pb.COMM_COLL_NODE, comm_type=kind, comm_size=size_bytes
        )
        traces = [RankTrace(f"serve-collective.{r}.et", [node], "0.0.4", {}, r) for r in range(self.ranks)]
        report = simulate(traces, self.system, self.network, backend=self.backend)
        self.simulated += 1
        return float(report.step_ns)

    def table(self) -> Mapping[tuple[int, int], float]:
        """The simulated grid: ``{(kind, grid point): ns}`` (grid point i is
        ``1024 x 2^(i / STEPS_PER_OCTAVE)`` bytes)."""
        return dict(self._grid)


def _grid_bytes(point: int) -> float:
    return SMALLEST_BYTES * 2.0 ** (point / STEPS_PER_OCTAVE)
