"""The sweep spec (YAML): a base run, the values to vary, and what to plot.

::

    base:                                  # one run, the keys of astra.simulate
      workload: ../resnet50_dp/workload/Resnet50_DataParallel
      system: ../resnet50_dp/system.json   # a path, or the file's mapping inline
      network: network.yml
      backend: analytical
    grid:                                  # every combination of these values
      network.bandwidth[1]: [12.5, 25, 50, 100]
      system.all-reduce-implementation[0]: [ring, direct]
    points:                                # and/or a list of points (x grid, if both)
      - {backend: analytical}
      - {backend: analytical-congestion}
    metric: step_ns                        # the plot's y (a results column)
    x: network.bandwidth[1]                # the plot's x (default: the first grid key)
    output: bandwidth-results              # default: <spec name>-results beside the spec

A *parameter* names a config value:

* a run key: ``workload``, ``system``, ``network``, ``topology``, ``dims``,
  ``memory``, ``comm_groups``, ``backend``, ``backend_config``, ``symmetry``;
* a key inside a config file: ``system.<key>``, ``network.<key>``,
  ``memory.<key>``, ``backend_config.<key>``, with ``[i]`` for one entry of a
  per-dimension list (``network.bandwidth[1]``: dimension 1's bandwidth;
  ``system.all-reduce-implementation[0]``: dimension 0's algorithm;
  ``system.preferred-dataset-splits``: the chunk count).

Relative paths (in ``base`` and in path-valued parameters, a
``backend_config`` file included) are relative to the spec file. Points are
the product of ``points`` (or one empty point) and ``grid``, in order, the
last grid key varying fastest. :func:`parse_spec` checks the spec and what
it names (:mod:`astra_core.sweep.preflight`) and raises one ConfigError
listing every problem.
"""

from __future__ import annotations

import difflib
import itertools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from astra_core.config.files import expect_mapping, read_yaml, source_name
from astra_core.config.issues import Problems, show
from astra_core.errors import AstraError
from astra_core.sweep.point import METRICS
from astra_core.sweep.preflight import check_inputs

#: Run keys a point may set directly (``astra.simulate``'s arguments).
RUN_KEYS = (
    "workload",
    "system",
    "network",
    "topology",
    "dims",
    "memory",
    "comm_groups",
    "backend",
    "backend_config",
    "symmetry",
)
#: Run keys whose string values are file paths (or trace prefixes).
PATH_KEYS = ("workload", "system", "network", "topology", "memory", "comm_groups", "backend_config")
#: Config files whose keys a parameter may set (``root.key[i]``).
CONFIG_ROOTS = ("system", "network", "memory", "backend_config")
SPEC_KEYS = ("base", "grid", "points", "metric", "x", "output")
#: Results columns ``metric`` may name (numbers to plot).
PLOTTABLE = tuple(m for m in METRICS if m != "backend") + ("wall_s",)

_PARAM = re.compile(r"^(?P<root>[A-Za-z_]+)(?:\.(?P<key>[^\[\]]+))?(?:\[(?P<index>\d+)\])?$")


@dataclass(frozen=True)
class Parameter:
    """A parsed parameter name: ``root`` (run key), ``key`` inside it, list ``index``."""

    name: str
    root: str
    key: str | None = None
    index: int | None = None


def parse_parameter(name: str) -> tuple[Parameter | None, str | None]:
    """(Parameter, None) or (None, why it is not a parameter name)."""
    match = _PARAM.match(str(name))
    if not match:
        return None, "not a parameter name (expected e.g. backend, network.bandwidth[1])"
    root, key, index = match["root"], match["key"], match["index"]
    if key is None and index is None:
        if root not in RUN_KEYS:
            return None, f"unknown run key (known: {', '.join(RUN_KEYS)})"
    elif root not in CONFIG_ROOTS:
        return None, f"only {', '.join(CONFIG_ROOTS)} have keys inside them"
    elif key is None:
        return None, "an index needs a key, e.g. network.bandwidth[1]"
    return Parameter(str(name), root, key, int(index) if index is not None else None), None


@dataclass
class SweepSpec:
    """A validated sweep spec. ``points`` are the override dicts, one per design point."""

    source: str
    directory: Path
    base: dict[str, Any]
    parameters: list[str]
    points: list[dict[str, Any]]
    metric: str = "step_ns"
    x: str | None = None
    output: Path = field(default_factory=Path)


def _resolve_path(value: Any, directory: Path) -> Any:
    if isinstance(value, str) and value and not os.path.isabs(value):
        return str((directory / value).resolve())
    return value


def resolve_point(spec: SweepSpec, overrides: dict[str, Any]) -> dict[str, Any]:
    """The run description of one point: base + overrides, paths made absolute.

    Keys are run keys; ``<root>.<key>[i]`` overrides are kept under
    ``"overrides"`` as ``[root, key, index, value]`` (applied by the worker,
    which reads the config files). JSON-serializable.
    """
    run = {
        key: _resolve_path(value, spec.directory) if key in PATH_KEYS else value
        for key, value in spec.base.items()
    }
    edits = []
    for name, value in overrides.items():
        param = cast(Parameter, parse_parameter(name)[0])  # the spec's names parse
        if param.key is None:
            run[param.root] = _resolve_path(value, spec.directory) if param.root in PATH_KEYS else value
        else:
            edits.append([param.root, param.key, param.index, value])
    run["overrides"] = edits
    return run


def _check_values(problems: Problems, where: str, mapping: Any) -> dict[str, Any]:
    """The entries of a mapping of parameter names whose names parse (the others noted)."""
    if not isinstance(mapping, dict):
        problems.add(where, f"expected a mapping of parameter names to values, got {show(mapping)}")
        return {}
    valid = {}
    for name, value in mapping.items():
        _, why = parse_parameter(name)
        if why:
            problems.add(f"{where}: {name}", why)
        else:
            valid[name] = value
    return valid


def _check_metric(problems: Problems, metric: Any) -> None:
    if not isinstance(metric, str):
        problems.add("metric", f"expected a results column name, got {show(metric)}")
    elif metric not in PLOTTABLE:
        close = difflib.get_close_matches(metric, PLOTTABLE, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(PLOTTABLE)})"
        problems.add("metric", f"{metric!r} is not a numeric results column{hint}")


def _backend_check() -> Callable[[str | None], object]:
    """A function that raises AstraError for a backend name no plugin registered."""
    from astra_core.plugins import BackendRegistry, load_settings, make_plugin_manager

    try:
        settings = load_settings()
        registry = BackendRegistry(make_plugin_manager(settings=settings), settings.default_backend)
    except AstraError as exc:
        error = exc

        def unusable(name: str | None) -> None:
            raise error

        return unusable
    return registry.get


def parse_spec(data: Any, source: str, directory: Path) -> SweepSpec:
    """Validate a spec mapping and what it names; one ConfigError listing every problem.

    Each problem is one line naming the spec and the key at fault: the
    spec's own keys, parameter names and values, ``metric`` and ``x``, and
    (:mod:`astra_core.sweep.preflight`) the files, config keys, list entries
    and backends the points use. Nothing has run when this raises.
    """
    problems = Problems(source)
    mapping = expect_mapping(data, problems) or {}
    for key in mapping:
        if key not in SPEC_KEYS:
            problems.unknown(str(key), SPEC_KEYS)
    base = mapping.get("base")
    if base is None:
        problems.missing("base", "the run every point starts from")
        base = {}
    elif not isinstance(base, dict):
        problems.add("base", f"expected a mapping of run keys, got {show(base)}")
        base = {}
    for key in base:
        if key not in RUN_KEYS:
            problems.add("base", f"unknown run key {key!r} (known: {', '.join(RUN_KEYS)})")
    base = {k: v for k, v in base.items() if k in RUN_KEYS}
    for key in ("workload", "system"):
        if base and key not in base:
            problems.add("base", f"missing required key {key!r}")
    grid = _check_values(problems, "grid", mapping.get("grid", {}))
    for name, values in list(grid.items()):
        if not isinstance(values, list) or not values:
            problems.add(f"grid: {name}", f"expected a non-empty list of values, got {show(values)}")
            del grid[name]
    listed = mapping.get("points", [{}])
    if not isinstance(listed, list) or not listed:
        problems.add("points", f"expected a non-empty list of mappings, got {show(listed)}")
        listed = [{}]
    listed = [_check_values(problems, f"points[{i}]", point) for i, point in enumerate(listed)]
    if "grid" not in mapping and "points" not in mapping:
        problems.add(None, "nothing to sweep: give 'grid' and/or 'points'")

    names = list(dict.fromkeys([*(k for p in listed for k in p), *grid]))
    where = {name: "grid" for name in grid}
    for i, point in enumerate(listed):
        for name in point:
            where.setdefault(name, f"points[{i}]")
    points = []
    for point in listed:
        for combo in itertools.product(*grid.values()):
            points.append({**point, **dict(zip(grid, combo))})
    x = mapping.get("x") or (next(iter(grid), None) or (names[0] if names else None))
    if x is not None and x not in names:
        problems.add("x", f"{x!r} is not a swept parameter ({', '.join(names)})")
    metric = mapping.get("metric", "step_ns")
    _check_metric(problems, metric)
    output = mapping.get("output") or f"{Path(source).stem}-results"
    spec = SweepSpec(
        source=source,
        directory=directory,
        base=base,
        parameters=names,
        points=points,
        metric=metric,
        x=x,
        output=(directory / str(output)).resolve(),
    )
    if "workload" in base and "system" in base:
        check_inputs(
            problems,
            points,
            [resolve_point(spec, p) for p in points],
            {name: parse_parameter(name)[0] for name in names},
            where,
            PATH_KEYS,
            _backend_check(),
        )
    problems.raise_if_any()
    return spec


def load_spec(path: str | os.PathLike) -> SweepSpec:
    """Read and validate a sweep spec file. Raises ConfigError naming the file."""
    problems = Problems(source_name(path))
    data = read_yaml(path, problems)
    problems.raise_if_any()
    return parse_spec(data, source_name(path), Path(path).resolve().parent)
