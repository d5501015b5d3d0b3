"""``astra.sweep``: run a sweep spec and get its results table."""

from __future__ import annotations

import os
from typing import Any

from astra_core.sweep import SweepSpec, run_sweep


def sweep(spec: SweepSpec | str | os.PathLike | dict, *, output: str | os.PathLike | None = None,
          workers: int | None = None, ray: bool | str | None = None, fresh: bool = False) -> Any:
    """Run every unfinished point of ``spec`` and return the results as a pandas DataFrame.

    ``spec``: a sweep spec file (YAML, see :mod:`astra_core.sweep.spec`) or the
    same as a dict (relative paths then relative to the working directory).
    ``output``: results directory (default: the spec's ``output``, else
    ``<spec name>-results`` beside the spec). ``workers``: process pool size
    (default one per CPU; 1 runs in this process). ``ray``: True for a local
    Ray instance or a cluster address. ``fresh``: ignore earlier results.
    Failed points are rows with ``status == "error"`` and their ``error``.
    """
    return run_sweep(spec, output=output, workers=workers, ray=ray, fresh=fresh).frame
