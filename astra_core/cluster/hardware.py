"""Uneven compute: NPUs slower than others, and stragglers in some iterations.

A cluster spec may give

* ``compute_speed``: each NPU's speed relative to the GPU its traces were timed
  for (1: as timed; 0.8: every GPU compute node takes 1 / 0.8 as long), either
  ``factors`` (``{npu: speed}``, the others 1) or ``normal`` (``{mean, std,
  seed}``: every NPU drawn from that normal distribution, reproducibly, and held
  above :data:`MIN_SPEED`); a factor is at least :data:`MIN_SPEED`;
* ``stragglers``: in every iteration a ``fraction`` of the cluster's NPUs,
  drawn anew per iteration with ``seed``, whose GPU compute takes ``slowdown``
  times as long that iteration (a number, or ``[low, high]``: each straggler's
  factor drawn uniformly), at most :data:`MAX_SLOWDOWN`.

:class:`ComputeSlowness` is the result: the factor a GPU compute node of
iteration ``i`` on NPU ``n`` takes longer by. CPU nodes keep their time; so do
compute nodes timed by the roofline model (``roofline-enabled``), whose time
comes from their FLOPs and bytes.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import Field

from astra_core.config.model import ConfigModel, int_in, number_in

__all__ = ["MAX_SLOWDOWN", "MIN_SPEED", "ComputeSlowness", "ComputeSpeed", "Stragglers", "slowness"]

#: The slowest an NPU drawn from a distribution may be (a speed of 0 or below never finishes).
MIN_SPEED = 0.05
#: The most a straggler may slow its NPU down: as slow as :data:`MIN_SPEED`.
MAX_SLOWDOWN = 1 / MIN_SPEED


class NormalSpeed(ConfigModel):
    """``normal``: speeds drawn from N(mean, std), seeded."""

    mean: Annotated[float, number_in(positive=True)] = 1.0
    std: Annotated[float, number_in(minimum=0.0)]
    seed: Annotated[int, int_in(0)] = 0


class ComputeSpeed(ConfigModel):
    """``compute_speed``: per-NPU speeds (module doc)."""

    factors: dict[Annotated[int, int_in(0)], Annotated[float, number_in(minimum=MIN_SPEED)]] = Field(
        default_factory=dict
    )
    normal: NormalSpeed | None = None


#: A straggler's slowdown factor.
Slowdown = Annotated[float, number_in(minimum=1.0, maximum=MAX_SLOWDOWN)]


class Stragglers(ConfigModel):
    """``stragglers``: per iteration, a fraction of NPUs whose compute is slower (module doc)."""

    fraction: Annotated[float, number_in(minimum=0.0, maximum=1.0)]
    slowdown: Slowdown | Annotated[list[Slowdown], Field(min_length=2, max_length=2)]
    seed: Annotated[int, int_in(0)] = 0


@dataclass(frozen=True)
class ComputeSlowness:
    """``factor(npu, iteration)``: how many times longer a GPU compute node takes there."""

    speed: tuple[float, ...]
    stragglers: Mapping[int, Mapping[int, float]] = field(default_factory=dict)  # iteration -> npu -> x

    def factor(self, npu: int, iteration: int) -> float:
        return self.stragglers.get(iteration, {}).get(npu, 1.0) / self.speed[npu]


def _speeds(spec: ComputeSpeed | None, npus: int) -> tuple[float, ...]:
    if spec is None:
        return (1.0,) * npus
    speeds = [1.0] * npus
    if spec.normal is not None:
        rng = random.Random(spec.normal.seed)
        speeds = [max(MIN_SPEED, rng.gauss(spec.normal.mean, spec.normal.std)) for _ in range(npus)]
    for npu, speed in spec.factors.items():
        speeds[npu] = speed
    return tuple(speeds)


def _stragglers(spec: Stragglers | None, npus: int, iterations: int) -> dict[int, dict[int, float]]:
    if spec is None or not spec.fraction:
        return {}
    count = max(1, round(spec.fraction * npus))
    out: dict[int, dict[int, float]] = {}
    for i in range(iterations):
        rng = random.Random(spec.seed * 1_000_003 + i)
        chosen = sorted(rng.sample(range(npus), count))
        if isinstance(spec.slowdown, list):
            low, high = min(spec.slowdown), max(spec.slowdown)
            out[i] = {n: rng.uniform(low, high) for n in chosen}
        else:
            out[i] = {n: spec.slowdown for n in chosen}
    return out


def slowness(
    speed: ComputeSpeed | None, stragglers: Stragglers | None, npus: int, iterations: int
) -> ComputeSlowness | None:
    """The cluster's compute factors (None: every NPU as timed, every iteration).
    Raises ConfigError for a factor given for an NPU the cluster does not have."""
    from astra_core.errors import ConfigError

    if speed is not None:
        outside = sorted(n for n in speed.factors if n >= npus)
        if outside:
            raise ConfigError(
                f"compute_speed: factors: NPU {outside[0]} is not on the cluster (NPUs 0..{npus - 1})"
            )
    if speed is None and stragglers is None:
        return None
    return ComputeSlowness(_speeds(speed, npus), _stragglers(stragglers, npus, iterations))
