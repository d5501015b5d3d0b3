"""Running one design point (in a worker process or a Ray task) and what it reports.

:func:`run_point` takes a task ``{"index", "key", "run"}`` (``run`` from
:func:`~astra_core.sweep.spec.resolve_point`) and always returns a row dict:
never raises, so one bad point cannot stop a sweep. A row has ``point``
(index), ``key``, ``status`` (``ok`` or ``error``), ``error`` (one line, ""
when ok), ``wall_s`` and the metrics of :data:`METRICS` (null on error;
times as whole ns, the nearest, as in every astra output):

================== =========================================================
step_ns            slowest rank's finish time (the step time)
compute_ns         GPU compute time, most of any rank
comm_ns            time with this rank's messages in flight, most of any rank
exposed_comm_ns    upstream's exposed communication (finish - compute), most of any rank
compute_only_ns,   the six disjoint parts of the breakdown
overlapped_comm_ns (astra_core.report.breakdown), mean over ranks
comm_only_ns,
collective_wait_ns,
p2p_wait_ns,
idle_ns
npus               NPU count
messages,          messages and bytes the network carried
message_bytes
backend            the backend that ran (resolved default)
================== =========================================================
"""

from __future__ import annotations

import copy
import time
import traceback
from typing import TYPE_CHECKING, Any

from astra_core.config.dims import parse_dims
from astra_core.config.files import read_json, read_toml, read_yaml
from astra_core.config.issues import Problems
from astra_core.errors import AstraError, ConfigError
from astra_core.report.breakdown import PARTS
from astra_core.results import whole_ns

if TYPE_CHECKING:
    from astra_core.run_spec import RunSpec

METRICS = (
    "step_ns",
    "compute_ns",
    "comm_ns",
    "exposed_comm_ns",
    *PARTS,
    "npus",
    "messages",
    "message_bytes",
    "backend",
)
_READERS = {"system": read_json, "network": read_yaml, "memory": read_json}


def raw_config(run: dict[str, Any], root: str) -> tuple[Any, str]:
    """The mapping behind config ``root`` of a resolved run (read from its file if a
    path; a copy if inline) and its source name. Raises ConfigError naming the file."""
    value = run.get(root)
    if value is None:
        if root == "backend_config":
            return {}, "backend_config"
        raise ConfigError(f"sweep: {root}.* is swept but the base has no {root}")
    if isinstance(value, dict):
        return copy.deepcopy(value), root
    problems = Problems(str(value))
    if root == "backend_config":  # the backend's own file: TOML, JSON or YAML
        suffix = str(value).lower().rsplit(".", 1)[-1]
        data = (
            read_toml(value)
            if suffix == "toml"
            else (read_json(value, problems) if suffix == "json" else read_yaml(value, problems))
        )
    else:
        data = _READERS[root](value, problems)
    problems.raise_if_any()
    return data, str(value)


def apply_override(data: Any, source: str, root: str, key: str, index: int | None, value: Any) -> None:
    """Set ``key`` (or entry ``index`` of the list at ``key``) of config mapping ``data``
    read from ``source``. Raises ConfigError naming the file and key when there
    is no such list entry."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: {root}.{key}: the config is not a mapping")
    if index is None:
        data[key] = value
        return
    entries = data.get(key)
    if not isinstance(entries, list):
        raise ConfigError(f"{source}: {key}: is not a list, so [{index}] cannot be swept")
    if index >= len(entries):
        raise ConfigError(f"{source}: {key}[{index}]: out of range ({len(entries)} entries)")
    entries[index] = value


def build_spec(run: dict[str, Any]) -> RunSpec:
    """The RunSpec of a resolved run, with every override applied."""
    from astra_core.config.memory import MemoryConfig
    from astra_core.config.network import NetworkConfig
    from astra_core.config.system import SystemConfig
    from astra_core.run_spec import RunSpec

    args = {k: v for k, v in run.items() if k != "overrides" and v is not None}
    edited: dict[str, tuple[Any, str]] = {}
    for root, key, index, value in run.get("overrides", []):
        if root not in edited:
            edited[root] = raw_config(run, root)
        data, source = edited[root]
        apply_override(data, source, root, key, index, value)
    kinds: dict[str, type[SystemConfig] | type[NetworkConfig] | type[MemoryConfig]] = {
        "system": SystemConfig,
        "network": NetworkConfig,
        "memory": MemoryConfig,
    }
    for root, (data, source) in edited.items():
        args[root] = data if root == "backend_config" else kinds[root].from_dict(data, source=source)
    if isinstance(args.get("dims"), str):
        args["dims"] = parse_dims(args["dims"], "sweep: dims")
    return RunSpec(**args)


def metrics(result) -> dict[str, Any]:
    """The :data:`METRICS` of one RunResult."""
    ranks = result.ranks
    parts = result.breakdown()

    def mean(attr: str) -> int | None:
        return whole_ns(sum(getattr(b, attr) for b in parts) / len(parts)) if parts else None

    def most(attr: str) -> int | None:
        return whole_ns(max(getattr(r, attr) for r in ranks)) if ranks else None

    return {
        "step_ns": whole_ns(result.step_ns),
        "compute_ns": most("compute_ns"),
        "comm_ns": most("comm_ns"),
        "exposed_comm_ns": most("exposed_comm_ns"),
        **{part: mean(part) for part in PARTS},
        "npus": len(ranks),
        "messages": int(result.messages),
        "message_bytes": int(result.message_bytes),
        "backend": result.backend,
    }


def failed_row(task: dict[str, Any], error: str) -> dict[str, Any]:
    """The row of a point that did not produce results."""
    row = {"point": task["index"], "key": task["key"], "status": "error", "error": error, "wall_s": None}
    row.update({m: None for m in METRICS})
    row["backend"] = ""
    return row


_PLUGIN_MANAGERS: dict[str, Any] = {}  # by the plugin settings they were built with


def sweep_plugin_manager() -> Any:
    """This process's plugin manager for a sweep's checks and points, built once per
    plugin settings (plugins.toml and the environment) rather than per point: building
    one loads every plugin, about 50 ms."""
    from astra_core.plugins import load_settings, make_plugin_manager

    settings = load_settings()
    key = repr(settings)
    if key not in _PLUGIN_MANAGERS:
        _PLUGIN_MANAGERS[key] = make_plugin_manager(settings=settings)
    return _PLUGIN_MANAGERS[key]


def error_line(exc: Exception) -> str:
    """One line for a run that raised: an AstraError's lines joined by `` | ``; any other
    exception (a bug) with its type and where it was raised, so that a batch of runs can
    go on and still say where to look."""
    if isinstance(exc, AstraError):
        return " | ".join(str(exc).splitlines()) or type(exc).__name__
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})"


def run_point(task: dict[str, Any]) -> dict[str, Any]:
    """Simulate one point; a row for the results table (raises only MemoryError, which
    ends its worker: :mod:`astra_core.workers`)."""
    from astra_core.api import run

    started = time.perf_counter()
    try:
        result = run(build_spec(task["run"]), plugin_manager=sweep_plugin_manager())
    except MemoryError:  # the worker's to end (astra_core.workers): its heap stays full
        raise
    except Exception as exc:  # AstraError, or a bug: say where, but do not stop the sweep
        return failed_row(task, error_line(exc))
    row = {
        "point": task["index"],
        "key": task["key"],
        "status": "ok",
        "error": "",
        "wall_s": time.perf_counter() - started,
    }
    row.update(metrics(result))
    return row
