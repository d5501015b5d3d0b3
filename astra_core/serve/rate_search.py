"""The highest request rate a deployment serves within its SLOs (``astra serve --find-rate``).

A rate meets the SLOs when at least ``attainment`` of its requests meet every limit of
the spec's ``slo`` (DistServe's SLO attainment, OSDI 2024, whose figures use 90 %). The
search runs the spec's generated requests (same count, lengths and seed; the arrival
gaps scale with the rate) at the spec's rate, doubles or halves it until one rate meets
the SLOs and the next does not, then bisects between them ``steps`` times; every run is
a point of the latency-throughput curve.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from astra_core.errors import ConfigError
from astra_core.serve.spec import ServeSpec

__all__ = ["find_rate"]

#: Doublings or halvings tried before the search gives up on bracketing the rate.
MAX_BRACKETING = 30


def find_rate(
    spec: ServeSpec,
    attainment: float = 0.9,
    steps: int = 6,
    on_point: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[float | None, list[dict[str, Any]]]:
    """(the highest rate found to meet the SLOs, or None when even the slowest tried
    does not; every run's summary with its ``rate`` and ``attainment``). Raises
    ConfigError when the spec has no SLO or reads its requests from a file."""
    from astra_core.serve.api import run_spec

    if not spec.slo:
        raise ConfigError("slo: --find-rate needs the SLOs a rate must meet (slo: {ttft: ms, tpot: ms})")
    if spec.requests.file is not None or spec.requests.concurrency:
        raise ConfigError(
            "requests: --find-rate varies the rate of generated requests, not a file's or a client's"
        )
    points: list[dict[str, Any]] = []

    def meets(rate: float) -> bool:
        trial = spec.model_copy(update={"requests": spec.requests.model_copy(update={"rate": rate})})
        result = run_spec(trial)
        warmup = spec.requests.warmup
        point = {"rate": rate, **result.summary(slo_ms=spec.slo, warmup=warmup)}
        point["attainment"] = point["slo_attainment"]
        points.append(point)
        if on_point:
            on_point(point)
        return point["attainment"] >= attainment

    rate = spec.requests.rate or 1.0
    good, bad = (rate, None) if meets(rate) else (None, rate)
    for _ in range(MAX_BRACKETING):
        if good is not None and bad is not None:
            break
        trial = good * 2 if good is not None else bad / 2  # type: ignore[operator]
        if meets(trial):
            good = trial
        else:
            bad = trial
    if good is None or bad is None:
        return good, points
    for _ in range(steps):
        middle = (good + bad) / 2
        if meets(middle):
            good = middle
        else:
            bad = middle
    return good, points
