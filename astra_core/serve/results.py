"""What a serving run measured: per request, per step, and the summary a serving benchmark prints.

Per request (:attr:`ServingResult.requests`, one row each, times in ns from the run's
start): ``arrival_ns``, ``prompt_tokens``, ``output_tokens``, ``replica`` (the engine
that produced its tokens: the replica, its engine under data-parallel attention, the
decode one under disaggregation), ``prefill_replica`` (-1 without), ``queue_ns`` (arrival
to first scheduled), ``ttft_ns`` (arrival to first token), ``tpot_ns`` (time per output
token after the first: ``(finish - first token) / (output - 1)``; empty for one-token
outputs), ``e2e_ns`` (arrival to last token), ``kv_transfer_ns`` (the prompt's end on
the prefill replica to its KV cache's arrival on the decode replica; empty without
disaggregation) and ``preemptions``. Inter-token latencies (ITL) of every token after a
request's first are kept as a histogram ``{gap ns: tokens}``. Per step
(:attr:`ServingResult.steps`): ``end_ns``, ``pool``, ``replica``, ``duration_ns``,
``tokens``, ``kv_blocks_used``.

The summary follows vLLM's ``benchmark_serving.py``: the run lasts from the first arrival
to the last token; request and token throughputs are over that duration; TTFT, TPOT, ITL
and end-to-end latency as mean, median and 99th percentile (linear interpolation, as
``numpy.percentile``); goodput counts the requests per second that met every given SLO
(TTFT, TPOT and end-to-end limits in ms; DistServe's definition, OSDI 2024).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from astra_core.errors import ConfigError

if TYPE_CHECKING:
    from astra_core.serve.engine import Pool
    from astra_core.serve.scheduler import Sequence

__all__ = ["RequestRecord", "ServingResult"]

NS_PER_MS = 1e6
_REQUEST_COLUMNS = (
    "arrival_ns", "prompt_tokens", "output_tokens", "replica", "prefill_replica", "queue_ns", "ttft_ns", "tpot_ns",
    "e2e_ns", "kv_transfer_ns", "preemptions",
)  # fmt: skip


def _stats_ms(values: np.ndarray, weights: np.ndarray | None = None) -> dict[str, float | None]:
    """Mean, median and p99 [ms] of ``values`` [ns] (each counted ``weights`` times);
    None for no values (JSON's null)."""
    if not len(values):
        return {"mean_ms": None, "median_ms": None, "p99_ms": None}
    if weights is None:
        mean = float(np.mean(values))
        median, p99 = np.percentile(values, [50, 99])
    else:
        order = np.argsort(values)
        values, weights = values[order], weights[order]
        mean = float(np.average(values, weights=weights))
        median, p99 = (_weighted_percentile(values, weights, q) for q in (50, 99))
    return {
        "mean_ms": mean / NS_PER_MS,
        "median_ms": float(median) / NS_PER_MS,
        "p99_ms": float(p99) / NS_PER_MS,
    }


def _weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """``numpy.percentile(np.repeat(values, weights), q)`` without the repeat (sorted values)."""
    total = int(weights.sum())
    rank = q / 100 * (total - 1)
    below, frac = int(math.floor(rank)), rank - math.floor(rank)
    ends = np.cumsum(weights)  # element i covers ranks [ends[i] - weights[i], ends[i])
    low = values[np.searchsorted(ends, below, side="right")]
    high = values[np.searchsorted(ends, min(below + 1, total - 1), side="right")]
    return float(low + frac * (high - low))


@dataclass(eq=False)
class RequestRecord:
    """One request through a run (``request``: as the client sent it), its sequence on
    the (prefill) replica ``first``, and
    under disaggregation its sequence on the decode replica ``second``, the decode
    replica chosen, and when its KV cache arrived there [ns]."""

    request: Any
    first: Sequence | None = None
    second: Sequence | None = None
    decode_replica: int = -1
    kv_arrived_ns: int = -1

    def row(self) -> tuple:
        r, first = self.request, self.first
        assert first is not None
        last = self.second or first
        tpot = (
            (last.finish_ns - last.first_token_ns) / (r.output_tokens - 1)
            if r.output_tokens > 1
            else math.nan
        )
        transfer = self.kv_arrived_ns - first.finish_ns if self.second is not None else math.nan
        return (
            r.arrival_ns, r.prompt_tokens, r.output_tokens, last.replica, first.replica if self.second else -1,
            first.first_scheduled_ns - r.arrival_ns, last.first_token_ns - r.arrival_ns, tpot,
            last.finish_ns - r.arrival_ns, transfer, first.preemptions + (self.second.preemptions if self.second else 0),
        )  # fmt: skip


@dataclass(frozen=True)
class ServingResult:
    """A serving run's results (see the module docstring). ``itl``: the inter-token gaps
    by the step that closed them (``end_ns``, ``gap_ns``, ``tokens``); ``pools``: per pool
    role (``serve``, or ``prefill`` and ``decode``) its KV cache blocks per engine."""

    requests: pd.DataFrame
    itl: pd.DataFrame
    steps: pd.DataFrame
    pools: Mapping[str, int]
    collectives_simulated: int = 0

    @classmethod
    def of(
        cls,
        pools: list[Pool],
        records: list[RequestRecord],
        itl: list[tuple[int, int, int]],
        steps: list[tuple[int, str, int, int, int, int]],
    ) -> ServingResult:
        """The result of a finished run (every request finished)."""
        frame = pd.DataFrame([record.row() for record in records], columns=list(_REQUEST_COLUMNS))
        step_frame = pd.DataFrame(
            steps, columns=["end_ns", "pool", "replica", "duration_ns", "tokens", "kv_blocks_used"]
        )
        gaps = pd.DataFrame(itl, columns=["end_ns", "gap_ns", "tokens"])
        simulated = sum(p.clock.collectives.simulated for p in pools if p.clock.collectives is not None)
        return cls(frame, gaps, step_frame, {p.role: p.blocks for p in pools}, simulated)

    @property
    def itl_histogram(self) -> dict[int, int]:
        """Every inter-token gap: ``{gap ns: tokens}``."""
        return {int(g): int(n) for g, n in self.itl.groupby("gap_ns").tokens.sum().items()}

    def window(self, warmup: int = 0) -> tuple[pd.DataFrame, int]:
        """(the requests sent after the first ``warmup``, and when the first of them was
        sent [ns]): a run's steady state, as a benchmark's warm-up requests leave it.
        Raises ConfigError when ``warmup`` leaves no request."""
        r = self.requests
        if warmup <= 0:
            return r, int(r.arrival_ns.min())
        if warmup >= len(r):
            raise ConfigError(f"requests: warmup: {warmup} of {len(r)} requests leaves none to measure")
        order = r.sort_values("arrival_ns", kind="stable")
        kept = order.iloc[warmup:]
        return kept.sort_index(), int(kept.arrival_ns.min())

    def summary(self, slo_ms: Mapping[str, float] | None = None, warmup: int = 0) -> dict[str, Any]:
        """The run's summary (module docstring); ``slo_ms``: limits by ``ttft``, ``tpot``
        and ``e2e`` [ms] for goodput; ``warmup``: the first requests sent are left out, and
        so are the tokens and time before the next was sent (:meth:`window`)."""
        r, start = self.window(warmup)
        seconds = int((r.arrival_ns + r.e2e_ns).max() - start) / 1e9
        itl = self.itl[self.itl.end_ns >= start]
        out: dict[str, Any] = {
            "requests": len(r),
            "duration_s": seconds,
            "request_throughput": len(r) / seconds,
            "input_token_throughput": float(r.prompt_tokens.sum()) / seconds,
            "output_token_throughput": float(r.output_tokens.sum()) / seconds,
            "ttft": _stats_ms(r.ttft_ns.to_numpy(dtype=float)),
            "tpot": _stats_ms(r.tpot_ns.dropna().to_numpy(dtype=float)),
            "itl": _stats_ms(itl.gap_ns.to_numpy(dtype=float), itl.tokens.to_numpy(dtype=float)),
            "e2e": _stats_ms(r.e2e_ns.to_numpy(dtype=float)),
            "queue": _stats_ms(r.queue_ns.to_numpy(dtype=float)),
            "preemptions": int(r.preemptions.sum()),
            "kv_blocks_per_replica": dict(self.pools),
            "peak_kv_use": {
                role: float(self.steps[self.steps.pool == role].kv_blocks_used.max() / blocks)
                for role, blocks in self.pools.items()
            },
        }
        if "prefill" in self.pools:
            out["kv_transfer"] = _stats_ms(r.kv_transfer_ns.dropna().to_numpy(dtype=float))
        if slo_ms:
            met = _met(r, slo_ms)
            out["goodput"] = float(met.sum()) / seconds
            out["slo_attainment"] = float(met.mean())
        return out

    def attainment(self, slo_ms: Mapping[str, float], warmup: int = 0) -> float:
        """The share of requests that met every limit of ``slo_ms`` (``ttft``, ``tpot``,
        ``e2e`` in ms; a one-token request meets any TPOT limit): DistServe's SLO
        attainment."""
        return float(_met(self.window(warmup)[0], slo_ms).mean())


def _met(r: pd.DataFrame, slo_ms: Mapping[str, float]) -> np.ndarray:
    """Per request of ``r``, whether it met every limit of ``slo_ms``."""
    met = np.ones(len(r), dtype=bool)
    for key, limit in slo_ms.items():
        column = r[f"{key}_ns"].to_numpy(dtype=float)
        met &= np.isnan(column) | (column <= limit * NS_PER_MS)
    return met
