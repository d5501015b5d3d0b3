"""Checks of a sweep spec against the files and backends it names, before anything runs.

:func:`check_inputs` notes every problem in the spec's
:class:`~astra_core.config.issues.Problems`, one line per spec key at fault
(the same problem in many points is one line):

* a path that names nothing: a config file that does not exist, a workload
  prefix with no ``<prefix>.<rank>.et`` file, a config file that cannot be
  read or parsed (any point that reads it would fail);
* an entry of something that is not a list, an index past the end of the
  list in the file a point uses, a config key swept with no config to set it in;
* a backend that is not registered.

A parameter naming a key its config does not have (``network.bandwith[0]``)
is a problem of the spec itself (:func:`astra_core.sweep.spec.parse_parameter`).

A value that is wrong for its key (a negative bandwidth) is not checked here:
the config's own validation fails that point alone when it runs.
"""

from __future__ import annotations

import copy
import glob
import os
import re
from collections.abc import Callable
from typing import Any

from astra_core.config.issues import Problems
from astra_core.errors import AstraError, ConfigError
from astra_core.sweep.point import apply_override, raw_config
from astra_core.workload.prefix import suggest_prefix

_RANK_FILE = re.compile(r"\.(\d+)\.et")


def rank_files(prefix: str) -> list[tuple[int, str]]:
    """``(rank, path)`` of every ``<prefix>.<rank>.et`` file, in rank order."""
    found = []
    for path in glob.glob(glob.escape(prefix) + ".*.et"):
        match = _RANK_FILE.fullmatch(path[len(prefix) :])
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def _path_problem(name: str, path: str) -> str | None:
    if name == "workload":
        if rank_files(path):
            return None
        hint = suggest_prefix(path)
        return f"{path}: no trace files {path}.<rank>.et{f'; {hint}' if hint else ''}"
    if not os.path.exists(path):
        return f"{path}: file not found"
    if os.path.isdir(path):
        return f"{path}: is a directory, not a file"
    return None


class _Checker:
    """The state of one check: what was noted, the raw configs read, the paths that failed."""

    def __init__(self, problems: Problems, parameters: dict[str, Any], where: dict[str, str]):
        self.problems = problems
        self.parameters = parameters
        self.where = where
        self.seen: set[tuple[str, str]] = set()
        self.broken_paths: set[tuple[str, str]] = set()
        self.raw: dict[tuple[str, str], tuple[Any, str]] = {}

    def note(self, key: str, message: str) -> None:
        if (key, message) not in self.seen:
            self.seen.add((key, message))
            self.problems.add(key, message)

    def location(self, name: str, point: dict[str, Any]) -> str:
        """Where a run value comes from: the point's spec entry, or the base."""
        return f"{self.where[name]}: {name}" if name in point else f"base: {name}"

    def paths(self, point: dict[str, Any], run: dict[str, Any], path_keys: tuple[str, ...]) -> None:
        for name in path_keys:
            value = run.get(name)
            if isinstance(value, str) and (why := _path_problem(name, value)):
                self.note(self.location(name, point), why)
                self.broken_paths.add((name, value))

    def _raw(self, point: dict[str, Any], run: dict[str, Any], root: str) -> tuple[Any, str]:
        """A copy of the raw config ``root`` of this point; (None, "") if it cannot be read."""
        given = run.get(root)
        if isinstance(given, str) and (root, given) in self.broken_paths:
            return None, ""
        cache_key = (root, given if isinstance(given, str) else repr(given))
        if cache_key not in self.raw:
            try:
                self.raw[cache_key] = raw_config(run, root)
            except ConfigError as exc:
                for line in str(exc).splitlines():
                    self.note(self.location(root, point), line)
                self.raw[cache_key] = (None, "")
        data, source = self.raw[cache_key]
        return copy.deepcopy(data), source

    def overrides(self, point: dict[str, Any], run: dict[str, Any]) -> None:
        """Apply the point's config overrides to copies of its raw configs, noting failures."""
        edited: dict[str, tuple[Any, str]] = {}
        for name, value in point.items():
            param = self.parameters[name]
            if param.key is None:
                continue
            here = f"{self.where[name]}: {name}"
            if param.root not in edited:
                if run.get(param.root) is None and param.root != "backend_config":
                    self.note(here, f"there is no {param.root} config (in base or this point) to set it in")
                    edited[param.root] = (None, "")
                else:
                    edited[param.root] = self._raw(point, run, param.root)
            data, source = edited[param.root]
            if data is None:
                continue
            try:
                apply_override(data, source, param.root, param.key, param.index, value)
            except ConfigError as exc:
                self.note(here, str(exc))


def check_inputs(
    problems: Problems,
    points: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    parameters: dict[str, Any],
    where: dict[str, str],
    path_keys: tuple[str, ...],
    backend_check: Callable[[str | None], object] | None,
) -> None:
    """Note every problem of the points (``points[i]`` resolved is ``runs[i]``) in ``problems``.

    ``parameters``: the parsed parameter (``root``, ``key``, ``index``) of each
    swept name; ``where``: each name's spec location (``grid``,
    ``points[2]``); ``path_keys``: run keys whose string values are paths;
    ``backend_check(name)``: raises AstraError for a backend that cannot be
    used (None: not checked).
    """
    checker = _Checker(problems, parameters, where)
    backends: dict[str | None, str] = {}
    for point, run in zip(points, runs):
        checker.paths(point, run, path_keys)
        checker.overrides(point, run)
        backend = run.get("backend")
        if backend is None or isinstance(backend, str):
            backends.setdefault(backend, checker.location("backend", point))
    if backend_check is not None:
        for backend_name, key in backends.items():
            try:
                backend_check(backend_name)
            except AstraError as exc:
                checker.note(key, str(exc))
