"""The sweep spec (YAML): a base run, the values to vary, and what to plot.

::

    base:                                  # one run: astra.RunSpec's fields
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
last grid key varying fastest.

The file is a pydantic model (:class:`SpecFile`, through
:mod:`astra_core.config.model`):

========== ============================================================ =================
key        value                                                        default
========== ============================================================ =================
base       a mapping of run keys (:class:`RunBase`); ``workload`` and   required
           ``system`` required, the values checked when a point runs
grid       a mapping of parameter names to non-empty lists of values    none
points     a non-empty list of mappings of parameter names to values    one empty point
metric     a numeric results column (:data:`PLOTTABLE`)                 ``step_ns``
x          a swept parameter                                            the first grid key
                                                                        (else the first name)
output     the results directory, relative to the spec                  ``<spec name>-results``
========== ============================================================ =================

At least one of ``grid`` and ``points`` must be given; together they make at
most :data:`MAX_POINTS` (100,000) design points, counted as ``len(points)``
times the product of the grid's list lengths before anything is expanded,
whose values come to at most :data:`MAX_EXPANDED_BYTES` (256 MiB) of JSON all
together (a long value is copied into every point it is in). The
file may not use YAML aliases (``*name``: a few lines of them stand for
billions of values). A parameter name must
parse and, for ``system``, ``network`` and ``memory``, name a key its config
has (``network.bandwith`` is refused with a suggestion). :func:`parse_spec`
raises one ConfigError listing every problem of the spec, one line each
naming the spec and the key at fault (``sweep.yaml: grid: colour: unknown
run key ...``); once the spec itself is valid, it checks what the points
name (:mod:`astra_core.sweep.preflight`: files, list entries, backends) and
raises one ConfigError listing every problem of those.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

from pydantic import create_model, model_validator

from astra_core.config.files import read_yaml, source_name
from astra_core.config.issues import Problems, show
from astra_core.config.memory import KNOWN_KEYS as MEMORY_KEYS
from astra_core.config.model import ConfigModel, checked, raise_problems, validate_mapping
from astra_core.config.network import KNOWN_KEYS as NETWORK_KEYS
from astra_core.config.system import KNOWN_KEYS as SYSTEM_KEYS
from astra_core.errors import AstraError
from astra_core.run_spec import FILE_FIELDS, RUN_KEYS
from astra_core.sweep.point import METRICS, sweep_plugin_manager
from astra_core.sweep.preflight import check_inputs


def _as_run_mapping(value: Any) -> tuple[Any, str | None]:
    """``base``: a mapping (its keys are checked by :class:`RunBase`)."""
    if not isinstance(value, dict):
        return None, f"expected a mapping of run keys, got {show(value)}"
    return value, None


class _RunKeys(ConfigModel):
    """``base``: the run every point starts from, as :class:`~astra_core.run_spec.RunSpec`'s
    fields (``workload`` and ``system`` required; :data:`RunBase` has them). Only the keys
    are checked here: a value (a path, an inline config mapping, ``dims`` such as ``8x16``)
    is checked by the run, and a path by :mod:`astra_core.sweep.preflight`."""

    def run(self) -> dict[str, Any]:
        """The keys the spec gave (an explicit null included), in :data:`RUN_KEYS` order."""
        return {name: getattr(self, name) for name in RUN_KEYS if name in self.model_fields_set}


if TYPE_CHECKING:
    RunBase = _RunKeys
else:  # a field per RunSpec field, made from its fields
    RunBase = create_model(
        "RunBase",
        __base__=_RunKeys,
        **{name: (Any, ... if name in ("workload", "system") else None) for name in RUN_KEYS},
    )

#: Config files whose keys a parameter may set (``root.key[i]``).
CONFIG_ROOTS = ("system", "network", "memory", "backend_config")
#: The keys a ``<root>.<key>`` parameter may name (backend configs are the backend's own).
CONFIG_KEYS = {"system": tuple(SYSTEM_KEYS), "network": tuple(NETWORK_KEYS), "memory": tuple(MEMORY_KEYS)}
#: Most design points one spec may make. Each point is a whole simulation (seconds
#: to minutes), so a larger sweep is a typo or a product that grew by accident, and
#: expanding it first would take gigabytes (10^9 points: 4 GB in 18 s).
MAX_POINTS = 100_000
#: Most bytes the design points' values may come to as JSON, all points together
#: (:attr:`SpecFile.expanded_bytes`): a long value in a big grid is copied into
#: every point's identity.
MAX_EXPANDED_BYTES = 256 << 20
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


def _unknown_key(root: str, key: str) -> str | None:
    """Why config ``root`` has no key ``key`` (None if it has, or its keys are the backend's)."""
    known = CONFIG_KEYS.get(root)
    if known is None or key in known:
        return None
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
    hint = f"; did you mean {root}.{close[0]}?" if close else f" (known: {', '.join(known)})"
    return f"{root} config has no key {key!r}{hint}"


def parse_parameter(name: Any) -> tuple[Parameter | None, str | None]:
    """(Parameter, None) or (None, why it is not a parameter name): not of the
    form ``root[.key][[i]]``, an unknown run key, a key inside something that
    is not a config, or a key the system, network or memory config does not have."""
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
    elif why := _unknown_key(root, key):
        return None, why
    return Parameter(str(name), root, key, int(index) if index is not None else None), None


def _as_parameter_name(value: Any) -> tuple[str | None, str | None]:
    """A key of ``grid`` or of a point: a parameter name (:func:`parse_parameter`)."""
    param, why = parse_parameter(value)
    return (param.name, None) if param is not None else (None, why)


def _as_parameter_mapping(value: Any) -> tuple[Any, str | None]:
    if not isinstance(value, dict):
        return None, f"expected a mapping of parameter names to values, got {show(value)}"
    return value, None


def _as_values(value: Any) -> tuple[Any, str | None]:
    if not isinstance(value, list) or not value:
        return None, f"expected a non-empty list of values, got {show(value)}"
    return value, None


def _as_point_list(value: Any) -> tuple[Any, str | None]:
    if not isinstance(value, list) or not value:
        return None, f"expected a non-empty list of mappings, got {show(value)}"
    return value, None


def _json_bytes(value: Any) -> int:
    """Length of ``value`` as JSON (as a point's identity serializes it)."""
    return len(json.dumps(value, default=str))


def _size(n: int) -> str:
    """``n`` bytes for a message: ``286.1 MiB``, or ``254 bytes`` below a MiB."""
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n:,} bytes"


def _as_metric(value: Any) -> tuple[str | None, str | None]:
    if not isinstance(value, str):
        return None, f"expected a results column name, got {show(value)}"
    if value not in PLOTTABLE:
        close = difflib.get_close_matches(value, PLOTTABLE, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(PLOTTABLE)})"
        return None, f"{value!r} is not a numeric results column{hint}"
    return value, None


ParameterName = Annotated[str, checked(_as_parameter_name)]
#: ``grid``: parameter name -> the values it takes.
Grid = Annotated[
    dict[ParameterName, Annotated[list[Any], checked(_as_values)]], checked(_as_parameter_mapping)
]
#: One entry of ``points``: parameter name -> its value.
Point = Annotated[dict[ParameterName, Any], checked(_as_parameter_mapping)]


class SpecFile(ConfigModel):
    """A sweep spec file as written (keys and defaults: the module's table).

    Messages name a parameter after its place: ``grid: network.bandwith``,
    ``points[0]: latency``. :func:`parse_spec` turns it into a :class:`SweepSpec`.
    """

    base: Annotated[RunBase, checked(_as_run_mapping)]
    grid: Grid = {}
    points: Annotated[list[Point], checked(_as_point_list)] = [{}]
    metric: Annotated[str, checked(_as_metric)] = "step_ns"
    x: str | None = None
    output: str | None = None

    @classmethod
    def config_key(cls, loc: tuple[int | str, ...]) -> str | None:
        """``('grid', 'colour', '[key]')`` -> ``grid: colour``; ``('points', 0, 'latency')``
        -> ``points[0]: latency``; other keys as usual (``base``, ``metric``)."""
        parts = tuple(part for part in loc if part != "[key]")
        for section, depth in (("grid", 1), ("points", 2)):
            if parts[:1] == (section,) and len(parts) > depth:
                return f"{super().config_key(parts[:depth])}: {parts[depth]}"
        return super().config_key(parts)

    @model_validator(mode="after")
    def _something_to_plot(self) -> SpecFile:
        problems: list[tuple[str | None, str]] = []
        if not {"grid", "points"} & self.model_fields_set:
            problems.append((None, "nothing to sweep: give 'grid' and/or 'points'"))
        count = self.point_count
        if count > MAX_POINTS:
            factors = [f"{len(self.points)} points"] if "points" in self.model_fields_set else []
            if self.grid:
                factors.append("grid " + " x ".join(str(len(v)) for v in self.grid.values()))
            where = " x ".join(factors)
            problems.append(
                (None, f"{count:,} design points ({where}); a sweep runs at most {MAX_POINTS:,}: split it")
            )
            raise_problems(problems)
        if (size := self.expanded_bytes) > MAX_EXPANDED_BYTES:
            problems.append(
                (
                    None,
                    f"the {count:,} design points' values come to {_size(size)} as JSON; "
                    f"a sweep takes at most {_size(MAX_EXPANDED_BYTES)}: fewer or smaller values",
                )
            )
            raise_problems(problems)
        x, names = self.plot_x, self.parameters
        if x is not None and x not in names:
            problems.append(("x", f"{x!r} is not a swept parameter ({', '.join(names)})"))
        raise_problems(problems)
        return self

    @property
    def point_count(self) -> int:
        """How many design points the spec makes: ``len(points)`` times the product of
        the grid's list lengths (computed without expanding them)."""
        return len(self.points) * math.prod(len(values) for values in self.grid.values())

    @property
    def expanded_bytes(self) -> int:
        """Bytes of JSON the design points' values come to once expanded (each point's
        values are serialized for its identity), computed from each value's size
        without expanding: a grid value appears in ``point_count / len(its list)`` points."""
        count = self.point_count
        if not count:
            return 0
        grid_points = count // len(self.points)
        total = grid_points * sum(_json_bytes(v) for point in self.points for v in point.values())
        for values in self.grid.values():
            total += count // len(values) * sum(_json_bytes(v) for v in values)
        return total

    @property
    def parameters(self) -> list[str]:
        """The swept names: those of ``points`` in order, then the grid's."""
        return list(dict.fromkeys([*(name for point in self.points for name in point), *self.grid]))

    @property
    def plot_x(self) -> str | None:
        """``x``, else the first grid key, else the first swept name (None: nothing swept)."""
        names = self.parameters
        return self.x or next(iter(self.grid), None) or (names[0] if names else None)

    @property
    def locations(self) -> dict[str, str]:
        """Where each swept name is in the spec: ``grid``, else the first ``points[i]`` naming it."""
        where = {name: "grid" for name in self.grid}
        for index, point in enumerate(self.points):
            for name in point:
                where.setdefault(name, f"points[{index}]")
        return where

    def design_points(self) -> list[dict[str, Any]]:
        """The override dicts, one per design point: each entry of ``points`` x the
        grid's product (last grid key fastest)."""
        return [
            {**point, **dict(zip(self.grid, combo))}
            for point in self.points
            for combo in itertools.product(*self.grid.values())
        ]


@dataclass
class SweepSpec:
    """A validated sweep spec, ready to run. ``points`` are the override dicts,
    one per design point; ``base`` the run keys the spec gave; ``directory``
    the spec's folder (relative paths start there); ``output`` the results
    directory (absolute)."""

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
        key: _resolve_path(value, spec.directory) if key in FILE_FIELDS else value
        for key, value in spec.base.items()
    }
    edits = []
    for name, value in overrides.items():
        param = cast(Parameter, parse_parameter(name)[0])  # the spec's names parse
        if param.key is None:
            run[param.root] = _resolve_path(value, spec.directory) if param.root in FILE_FIELDS else value
        else:
            edits.append([param.root, param.key, param.index, value])
    run["overrides"] = edits
    return run


def backend_lookup() -> Callable[[str | None], Any]:
    """A function from a backend name (None: the default) to its BackendInfo; it raises
    AstraError for a name no plugin registered."""
    from astra_core.plugins import BackendRegistry, load_settings

    try:
        registry = BackendRegistry(sweep_plugin_manager(), load_settings().default_backend)
    except AstraError as exc:
        error = exc

        def unusable(name: str | None) -> None:
            raise error

        return unusable
    return registry.get


def parse_spec(data: Any, source: str, directory: Path) -> SweepSpec:
    """Validate a spec mapping (:class:`SpecFile`), then what it names.

    ``source`` names the spec in messages; relative paths start at
    ``directory``. Raises one ConfigError listing every problem of the spec
    (its keys, parameter names, values, ``metric`` and ``x``), each line naming
    the spec and the key at fault; if the spec is valid, one listing every
    problem of the files, list entries and backends the points use
    (:mod:`astra_core.sweep.preflight`). Nothing has run when this raises.
    """
    spec_file = validate_mapping(SpecFile, data, source)
    points = spec_file.design_points()
    names = spec_file.parameters
    spec = SweepSpec(
        source=source,
        directory=directory,
        base=spec_file.base.run(),
        parameters=names,
        points=points,
        metric=spec_file.metric,
        x=spec_file.plot_x,
        output=(directory / (spec_file.output or f"{Path(source).stem}-results")).resolve(),
    )
    problems = Problems(source)
    check_inputs(
        problems,
        points,
        [resolve_point(spec, p) for p in points],
        {name: parse_parameter(name)[0] for name in names},
        spec_file.locations,
        FILE_FIELDS,
        backend_lookup(),
    )
    problems.raise_if_any()
    return spec


def load_spec(path: str | os.PathLike) -> SweepSpec:
    """Read and validate a sweep spec file (:func:`parse_spec`). Raises ConfigError naming the file."""
    problems = Problems(source_name(path))
    data = read_yaml(path, problems, aliases=False)
    problems.raise_if_any()
    return parse_spec(data, source_name(path), Path(path).resolve().parent)
