"""Sweeps: many design points from one spec, run in parallel, collected in one table.

``astra sweep SPEC.yaml`` and :func:`run_sweep`. The spec format is in
:mod:`astra_core.sweep.spec`; what each point reports in
:mod:`astra_core.sweep.point`; the output files in :mod:`astra_core.sweep.table`;
where points run (process pool, Ray) in :mod:`astra_core.sweep.executors`.
"""

from astra_core.sweep.run import SweepOutcome, run_sweep
from astra_core.sweep.spec import SweepSpec, load_spec, parse_spec

__all__ = ["SweepOutcome", "SweepSpec", "load_spec", "parse_spec", "run_sweep"]
