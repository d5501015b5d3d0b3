"""``astra serve --plots DIR``: latency distributions and KV cache use over time of one
run, and the latency-throughput curve of a rate search."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from astra_core.outputs import check_output_dir
from astra_core.report.plots import pyplot, save_figure
from astra_core.serve.results import ServingResult

__all__ = ["plot_rates", "plot_run"]

#: Time bins of the over-time plot: each point is the mean of the steps that ended in
#: its bin, over all replicas of a pool.
TIME_BINS = 400


def plot_run(result: ServingResult, directory: str | Path) -> list[Path]:
    """Write ``latency_cdf.png`` (the share of requests within each TTFT, TPOT and
    end-to-end latency) and ``kv_use.png`` (each pool's KV cache use and tokens per step
    over time: the mean of its replicas' steps in each of :data:`TIME_BINS` bins) into
    ``directory``; their paths."""
    plt = pyplot()
    out = check_output_dir(directory, "--plots")
    out.mkdir(parents=True, exist_ok=True)
    r = result.requests
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, column, label in zip(axes, ("ttft_ns", "tpot_ns", "e2e_ns"), ("TTFT", "TPOT", "end to end")):
        values = np.sort(r[column].dropna().to_numpy(dtype=float)) / 1e6
        if len(values):
            ax.plot(values, np.arange(1, len(values) + 1) / len(values))
        ax.set_xlabel(f"{label} (ms)")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("share of requests")
    paths = [save_figure(fig, out / "latency_cdf.png")]
    steps = result.steps
    span = max(1, int(steps.end_ns.max()))
    fig, axes = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    for role, blocks in result.pools.items():
        mine = steps[steps.pool == role]
        binned = mine.groupby((mine.end_ns * TIME_BINS // span).rename("bin"))[
            ["kv_blocks_used", "tokens"]
        ].mean()
        seconds = (binned.index.to_numpy(dtype=float) + 0.5) * span / TIME_BINS / 1e9
        axes[0].plot(seconds, binned.kv_blocks_used / blocks, lw=0.8, label=role)
        axes[1].plot(seconds, binned.tokens, lw=0.8, label=role)
    axes[0].set_ylabel("KV cache in use")
    axes[0].set_ylim(0, 1.02)
    axes[1].set_ylabel("tokens per step")
    axes[1].set_xlabel("time (s)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
    paths.append(save_figure(fig, out / "kv_use.png"))
    return paths


def plot_rates(points: list[dict[str, Any]], directory: str | Path) -> list[Path]:
    """Write ``rates.png``: TTFT and TPOT (median and p99) and SLO attainment against the
    request rate of each run of a rate search (:mod:`.rate_search`); its path."""
    plt = pyplot()
    out = check_output_dir(directory, "--plots")
    out.mkdir(parents=True, exist_ok=True)
    points = sorted(points, key=lambda p: p["rate"])
    rates = [p["rate"] for p in points]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, key, label in zip(axes[:2], ("ttft", "tpot"), ("TTFT", "TPOT")):
        for q, style in (("median_ms", "-o"), ("p99_ms", "--o")):
            ax.plot(rates, [p[key][q] for p in points], style, ms=3, label=q.split("_")[0])
        ax.set_ylabel(f"{label} (ms)")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    axes[2].plot(rates, [p["attainment"] for p in points], "-o", ms=3)
    axes[2].set_ylabel("SLO attainment")
    axes[2].set_ylim(0, 1.02)
    for ax in axes:
        ax.set_xlabel("requests/s")
        ax.grid(alpha=0.3)
    return [save_figure(fig, out / "rates.png")]
