"""``astra.sweep``: run a sweep spec and get its results table."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from astra_core.errors import ConfigError
from astra_core.run_spec import expect
from astra_core.sweep import SweepSpec, run_sweep


def sweep(
    spec: SweepSpec | str | os.PathLike | dict,
    *,
    output: str | os.PathLike | None = None,
    workers: int | None = None,
    ray: bool | str | None = None,
    fresh: bool = False,
) -> Any:
    """Run every unfinished point of ``spec`` and return the results as a pandas DataFrame.

    ``spec``: a sweep spec file (YAML, see :mod:`astra_core.sweep.spec`) or the
    same as a dict (relative paths then relative to the working directory).
    ``output``: results directory (default: the spec's ``output``, else
    ``<spec name>-results`` beside the spec). ``workers``: process pool size
    (default one per CPU; 1 runs in this process). ``ray``: True for a local
    Ray instance or a cluster address. ``fresh``: ignore earlier results.
    Failed points are rows with ``status == "error"`` and their ``error``.
    An argument of the wrong type is a ConfigError naming it
    (``sweep: workers must be an integer >= 1 or None, got str``).
    """
    expect(
        isinstance(spec, (SweepSpec, str, os.PathLike, Mapping)),
        "spec",
        "a SweepSpec, a path or a dict",
        spec,
        "sweep",
    )
    expect(
        output is None or isinstance(output, (str, os.PathLike)), "output", "a path or None", output, "sweep"
    )
    expect(
        workers is None or (isinstance(workers, int) and not isinstance(workers, bool)),
        "workers",
        "an integer >= 1 or None",
        workers,
        "sweep",
    )
    if workers is not None and workers < 1:
        raise ConfigError(f"sweep: workers must be an integer >= 1 or None, got {workers}")
    expect(
        ray is None or isinstance(ray, (bool, str)),
        "ray",
        "True, False, a cluster address or None",
        ray,
        "sweep",
    )
    expect(isinstance(fresh, bool), "fresh", "True or False", fresh, "sweep")
    if isinstance(spec, Mapping) and not isinstance(spec, dict):
        spec = dict(spec)
    return run_sweep(spec, output=output, workers=workers, ray=ray, fresh=fresh).frame
