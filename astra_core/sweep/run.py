"""Running a sweep: resolve points, skip finished ones, execute the rest, write the table."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astra_core.errors import AstraError
from astra_core.lifetime import sigterm_raises
from astra_core.run_digest import InputDigests
from astra_core.run_spec import FILE_FIELDS
from astra_core.sweep.executors import run_pool, run_ray, run_serial
from astra_core.sweep.identity import point_key
from astra_core.sweep.spec import SweepSpec, backend_lookup, load_spec, parse_spec, resolve_point
from astra_core.sweep.table import LOG_NAME, PointLog, plot_results, results_frame, write_results

#: Failed points a summary names before it counts the rest.
NAMED_FAILURES = 3


@dataclass
class SweepOutcome:
    """What a sweep did: the results table (pandas), files written, points run and skipped."""

    frame: Any
    files: list[Path] = field(default_factory=list)
    ran: int = 0
    skipped: int = 0

    @property
    def failed(self) -> int:
        """How many points have no result (status other than ``ok``)."""
        return int((self.frame["status"] != "ok").sum())

    def failure_summary(self) -> str | None:
        """One line on the failed points (None if none failed): how many of all,
        the first few by number, the first one's error and where the rest are, e.g.
        ``2 of 15 points failed (points 3, 7): point 3: network.yml: ...; every
        error in the 'error' column of results.csv``."""
        failed = self.frame[self.frame["status"] != "ok"]
        if failed.empty:
            return None
        numbers = [str(p) for p in failed["point"].tolist()]
        named = ", ".join(numbers[:NAMED_FAILURES])
        more = f" and {len(numbers) - NAMED_FAILURES} more" if len(numbers) > NAMED_FAILURES else ""
        first = failed.iloc[0]
        error = first["error"] or first["status"]
        table = next((p for p in self.files if p.suffix == ".csv"), None)
        where = f"; every error in the 'error' column of {table}" if table else ""
        return (
            f"{len(failed)} of {len(self.frame)} points failed "
            f"(point{'s' if len(numbers) > 1 else ''} {named}{more}): "
            f"point {first['point']}: {error}{where}"
        )


def as_spec(spec: SweepSpec | str | os.PathLike | dict) -> SweepSpec:
    """A SweepSpec from a spec, a spec file, or a spec mapping (paths relative to the cwd)."""
    if isinstance(spec, SweepSpec):
        return spec
    if isinstance(spec, dict):
        return parse_spec(spec, "<sweep spec>", Path.cwd())
    return load_spec(spec)


def _check_not_inputs(spec: SweepSpec, directory: Path) -> None:
    """Raise ConfigError when a file the sweep writes in ``directory`` is the spec or a file a
    point reads (its system, network, ... given by path): it would be destroyed."""
    from astra_core.outputs import check_not_input

    names = (LOG_NAME, "results.parquet", "results.csv", f"{spec.metric}.png")
    outputs = {f"--output ({name})": directory / name for name in names}

    def paths(key: str):  # made only when some output exists already
        for overrides in spec.points:
            value = resolve_point(spec, overrides).get(key)
            if isinstance(value, str):
                yield value

    inputs: dict[str, Any] = {"spec": spec.source, **{key: paths(key) for key in FILE_FIELDS}}
    check_not_input(outputs, inputs)


def _backend_packages() -> Callable[[Any], frozenset[str]]:
    """Backend name (None: the default) -> its plugin's packages (empty for an unknown name,
    whose points fail when they run)."""
    lookup = backend_lookup()
    found: dict[Any, frozenset[str]] = {}

    def packages(name: Any) -> frozenset[str]:
        if name not in found:
            try:
                found[name] = lookup(name).packages
            except (AstraError, TypeError):
                found[name] = frozenset()
        return found[name]

    return packages


def run_sweep(
    spec: SweepSpec | str | os.PathLike | dict,
    *,
    output: str | os.PathLike | None = None,
    workers: int | None = None,
    ray: bool | str | None = None,
    fresh: bool = False,
    on_row: Callable[[dict], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> SweepOutcome:
    """Run every point of ``spec`` not finished before; write results and plot.

    ``output``: results directory (default: the spec's). ``workers``: process
    pool size (default: one per CPU; 1 runs in this process). ``ray``: True
    for a local Ray instance, or a cluster address (``auto``,
    ``ray://host:10001``). ``fresh``: forget earlier results. ``on_start(to_run,
    skipped)`` and ``on_row(row)`` observe progress. Raises AstraError for a
    bad spec or unwritable output; failing points are rows with their error
    (:meth:`SweepOutcome.failure_summary`). On Ctrl-C or SIGTERM (raised as
    KeyboardInterrupt, :class:`~astra_core.lifetime.Interrupted`) no worker
    is left running and every finished point is in the output's point log.
    """
    spec = as_spec(spec)
    directory = Path(output).resolve() if output is not None else spec.output
    _check_not_inputs(spec, directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AstraError(f"{directory}: cannot create sweep output: {exc.strerror or exc}") from None
    log = PointLog(directory)
    if fresh:
        log.clear()
    done = log.load()
    keys, tasks = [], []
    digests, packages = InputDigests(), _backend_packages()
    for index, overrides in enumerate(spec.points):
        run = resolve_point(spec, overrides)
        key = point_key(digests, run, packages(run.get("backend")))
        keys.append(key)
        previous = done.get(key)
        if previous is None or previous.get("status") != "ok":
            tasks.append({"index": index, "key": key, "run": run})
    skipped = len(spec.points) - len(tasks)
    if on_start is not None:
        on_start(len(tasks), skipped)

    def record(row: dict) -> None:
        log.append(row)
        done[row["key"]] = row
        if on_row is not None:
            on_row(row)

    with sigterm_raises():
        if ray:
            run_ray(tasks, record, address=None if ray is True else str(ray))
        elif workers == 1:
            run_serial(tasks, record)
        else:
            run_pool(tasks, record, workers)
    try:  # a time past int64 ns (astra_core.outputs.whole_ns_column): no table, the points are kept
        frame = results_frame(spec, keys, done)
    except AstraError as exc:
        raise AstraError(
            f"{directory}: cannot write the results table: {exc} (every point is kept in {LOG_NAME})"
        ) from None
    files = write_results(frame, directory)
    plot = plot_results(frame, spec, directory / f"{spec.metric}.png")
    if plot is not None:
        files.append(plot)
    return SweepOutcome(frame=frame, files=files, ran=len(tasks), skipped=skipped)
