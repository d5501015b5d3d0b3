"""Sweeps: many design points from one spec, run in parallel, collected in one table.

``astra sweep SPEC.yaml`` and :func:`run_sweep`. The spec format is in
:mod:`astra_core.sweep.spec`, its checks against the files and backends it
names in :mod:`astra_core.sweep.preflight`; what each point reports in
:mod:`astra_core.sweep.point`; how a resumed sweep recognises a point in
:mod:`astra_core.sweep.identity`; the output files in
:mod:`astra_core.sweep.table`; where points run in
:mod:`astra_core.sweep.executors` (this process, Ray) and
:mod:`astra_core.sweep.pool` (local worker processes).
"""

from astra_core.sweep.run import SweepOutcome, run_sweep
from astra_core.sweep.spec import SweepSpec, load_spec, parse_spec

__all__ = ["SweepOutcome", "SweepSpec", "load_spec", "parse_spec", "run_sweep"]
