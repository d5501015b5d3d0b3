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

Relative paths (in ``base`` and in path-valued parameters) are relative to
the spec file. Points are the product of ``points`` (or one empty point) and
``grid``, in order, the last grid key varying fastest.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astra_core.config.files import expect_mapping, read_yaml, source_name
from astra_core.config.issues import Problems, show

#: Run keys a point may set directly (``astra.simulate``'s arguments).
RUN_KEYS = ("workload", "system", "network", "topology", "dims", "memory", "comm_groups",
            "backend", "backend_config", "symmetry")
#: Run keys whose string values are file paths (or trace prefixes).
PATH_KEYS = ("workload", "system", "network", "topology", "memory", "comm_groups",
             "backend_config")
#: Config files whose keys a parameter may set (``root.key[i]``).
CONFIG_ROOTS = ("system", "network", "memory", "backend_config")
SPEC_KEYS = ("base", "grid", "points", "metric", "x", "output")

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
    run = {key: _resolve_path(value, spec.directory) if key in PATH_KEYS else value
           for key, value in spec.base.items()}
    edits = []
    for name, value in overrides.items():
        param, _ = parse_parameter(name)
        if param.key is None:
            run[param.root] = _resolve_path(value, spec.directory) if param.root in PATH_KEYS else value
        else:
            edits.append([param.root, param.key, param.index, value])
    run["overrides"] = edits
    return run


def _check_values(problems: Problems, where: str, mapping: Any) -> dict[str, Any]:
    """A mapping of parameter names, each name checked."""
    if not isinstance(mapping, dict):
        problems.add(where, f"expected a mapping of parameter names to values, got {show(mapping)}")
        return {}
    for name in mapping:
        _, why = parse_parameter(name)
        if why:
            problems.add(f"{where}: {name}", why)
    return mapping


def parse_spec(data: Any, source: str, directory: Path) -> SweepSpec:
    """Validate a spec mapping; one ConfigError listing every problem (naming the spec)."""
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
    for key in ("workload", "system"):
        if base and key not in base:
            problems.add("base", f"missing required key {key!r}")
    grid = _check_values(problems, "grid", mapping.get("grid", {}))
    for name, values in grid.items():
        if not isinstance(values, list) or not values:
            problems.add(f"grid: {name}", f"expected a non-empty list of values, got {show(values)}")
    listed = mapping.get("points", [{}])
    if not isinstance(listed, list) or not listed:
        problems.add("points", f"expected a non-empty list of mappings, got {show(listed)}")
        listed = [{}]
    for i, point in enumerate(listed):
        _check_values(problems, f"points[{i}]", point)
    if "grid" not in mapping and "points" not in mapping:
        problems.add(None, "nothing to sweep: give 'grid' and/or 'points'")
    problems.raise_if_any()

    names = list(dict.fromkeys([*(k for p in listed for k in p), *grid]))
    points = []
    for point in listed:
        for combo in itertools.product(*grid.values()):
            points.append({**point, **dict(zip(grid, combo))})
    x = mapping.get("x") or (next(iter(grid), None) or (names[0] if names else None))
    if x is not None and x not in names:
        problems.add("x", f"{x!r} is not a swept parameter ({', '.join(names)})")
    metric = mapping.get("metric", "step_ns")
    if not isinstance(metric, str):
        problems.add("metric", f"expected a results column name, got {show(metric)}")
    problems.raise_if_any()
    output = mapping.get("output") or f"{Path(source).stem}-results"
    return SweepSpec(source=source, directory=directory, base=dict(base), parameters=names,
                     points=points, metric=metric, x=x, output=(directory / str(output)).resolve())


def load_spec(path: str | os.PathLike) -> SweepSpec:
    """Read and validate a sweep spec file. Raises ConfigError naming the file."""
    problems = Problems(source_name(path))
    data = read_yaml(path, problems)
    problems.raise_if_any()
    return parse_spec(data, source_name(path), Path(path).resolve().parent)
