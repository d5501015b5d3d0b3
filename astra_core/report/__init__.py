"""Turning a run into something people can read: functions over
:class:`~astra_core.results.RunResult`, and :class:`Report`, a RunResult with them
as methods (what ``astra.simulate`` returns).

``breakdown`` (six disjoint parts of each rank's time), ``collectives``
(per-collective rows with per-phase times), ``links`` (per-link statistics),
``nccl`` (the NCCL model's choices), ``frames`` (pandas views, CSV and Parquet),
``plots`` (PNGs), ``table`` (the terminal table), ``timeline`` (Chrome/Perfetto
trace). pandas and matplotlib load when a view first needs them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astra_core.results import RunResult

if TYPE_CHECKING:
    import pandas as pd

    from astra_core.report.breakdown import Breakdown

__all__ = ["Report"]


@dataclass(frozen=True)
class Report(RunResult):
    """A run's :class:`~astra_core.results.RunResult` with the report views as methods."""

    @classmethod
    def of(cls, result: RunResult, **changes: Any) -> Report:
        """``result`` as a Report, with ``changes`` to its fields (e.g. ``background``)."""
        values = {f.name: getattr(result, f.name) for f in fields(RunResult)}
        return cls(**{**values, **changes})

    def breakdown(self) -> list[Breakdown]:
        """Per rank: compute, overlapped comm, comm with no compute, waits, idle (ns), adding up to
        the finish time (:mod:`astra_core.report.breakdown`)."""
        from astra_core.report.breakdown import breakdowns

        return breakdowns(self)

    def rank_frame(self) -> pd.DataFrame:
        """pandas DataFrame, one row per rank (:func:`astra_core.report.frames.rank_frame`)."""
        from astra_core.report.frames import rank_frame

        return rank_frame(self)

    def collective_frame(self) -> pd.DataFrame:
        """pandas DataFrame, one row per collective per rank, with per-phase times."""
        from astra_core.report.frames import collective_frame

        return collective_frame(self)

    def phase_frame(self) -> pd.DataFrame:
        """pandas DataFrame, one row per phase of every chunk of every collective."""
        from astra_core.report.frames import phase_frame

        return phase_frame(self)

    def link_frame(self) -> pd.DataFrame | None:
        """pandas DataFrame of per-link statistics, or None if the backend keeps none."""
        from astra_core.report.frames import link_frame

        return link_frame(self)

    def write_csv(self, path: str | os.PathLike) -> None:
        """Write the per-collective records as CSV."""
        from astra_core.report.frames import write_collectives

        write_collectives(self, path, "csv")

    def write_parquet(self, path: str | os.PathLike) -> None:
        """Write the per-collective records as Parquet."""
        from astra_core.report.frames import write_collectives

        write_collectives(self, path, "parquet")

    def write_plots(self, directory: str | os.PathLike) -> list[Path]:
        """Write breakdown.png, timeline.png (and links.png) into ``directory``; their paths."""
        from astra_core.report.plots import write_plots

        return write_plots(self, directory)

    def write_timeline(self, path: str | os.PathLike) -> None:
        """Write a Chrome/Perfetto trace (:mod:`astra_core.report.timeline`)."""
        from astra_core.report.timeline import write_timeline

        write_timeline(self, path)
