"""``astra plan --plots DIR``: the throughput-memory Pareto front of the simulated
layouts and the step breakdown of the fastest ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from astra_core.outputs import check_output_dir
from astra_core.report.plots import pyplot, save_figure

__all__ = ["pareto", "plot_plan"]

#: Layouts whose breakdown is drawn.
SHOWN = 8


def pareto(frame: Any) -> Any:
    """The simulated layouts no other beats on both throughput and peak memory, by memory."""
    ok = frame[frame["status"] == "ok"].sort_values(
        ["peak_memory_gib", "tokens_per_gpu_s"], ascending=[True, False]
    )
    best, keep = -1.0, []
    for index, row in ok.iterrows():
        if row["tokens_per_gpu_s"] > best:
            best = row["tokens_per_gpu_s"]
            keep.append(index)
    return ok.loc[keep]


def plot_plan(frame: Any, directory: str | Path) -> list[Path]:
    """Write ``pareto.png`` (tokens/s per GPU against peak memory per GPU, every simulated
    layout, the front joined) and ``breakdown.png`` (compute, exposed collectives and
    pipeline shares of the fastest layouts) into ``directory``; their paths."""
    plt = pyplot()
    out = check_output_dir(directory, "--plots")
    out.mkdir(parents=True, exist_ok=True)
    ok = frame[frame["status"] == "ok"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.scatter(ok["peak_memory_gib"], ok["tokens_per_gpu_s"], s=12, color="0.6", label="simulated layouts")
    front = pareto(frame)
    ax.plot(front["peak_memory_gib"], front["tokens_per_gpu_s"], "o-", color="C0", label="Pareto front")
    ax.set_xlabel("peak memory per GPU [GiB]")
    ax.set_ylabel("tokens/s per GPU")
    ax.legend()
    paths = [save_figure(fig, out / "pareto.png")]
    top = ok.head(SHOWN)
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.45 * len(top)))
    left = [0.0] * len(top)
    for i, part in enumerate(("compute", "exposed collectives", "pipeline bubble and sends")):
        shares = [float(v or 0.0) for v in top[part]]
        ax.barh(range(len(top)), shares, left=left, color=f"C{i}", label=part)
        left = [a + b for a, b in zip(left, shares, strict=True)]
    ax.set_yticks(
        range(len(top)), [f"{r['layout']} ({r['step_s']:.2f} s)" for _, r in top.iterrows()], fontsize=7
    )
    ax.invert_yaxis()
    ax.set_xlabel("share of the step (mean over ranks)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / len(top)), ncol=3)
    paths.append(save_figure(fig, out / "breakdown.png"))
    return paths
