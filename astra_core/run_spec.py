"""RunSpec: one simulation described once, and the checks of its arguments' types.

The Python API (:func:`astra_core.api.simulate`, :func:`astra_core.api.estimate`,
:func:`astra_core.api.run`), ``astra run``, sweeps (:mod:`astra_core.sweep`: a
point may set any field) and clusters (:mod:`astra_core.cluster`) all build a
:class:`RunSpec` and pass it on, so that a run option is added here once and
every way of starting a run takes it. Values are checked for type here
(:meth:`RunSpec.checked`); what a file or config holds is the loaders' business.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from astra_core.config.memory import MemoryConfig
from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.errors import ConfigError
from astra_core.flows.flowfile import FlowSpec
from astra_core.topology.faults import LinkFault
from astra_core.topology.physical import PhysicalTopology
from astra_core.workload.chakra import RankTrace

PathLike = str | os.PathLike


def expect(ok: bool, name: str, expected: str, value: Any, caller: str = "simulate") -> None:
    """Raise ConfigError ``"<caller>: <name> must be <expected>, got <type>"`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"{caller}: {name} must be {expected}, got {type(value).__name__}")


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike))


def _is_list(value: Any) -> bool:
    """A list or tuple (not a str, a mapping or another iterable that can be read only once)."""
    return isinstance(value, (list, tuple))


def _config(value: Any, kind, name: str, expected: str, optional: bool):
    """A dict shaped like the config file becomes the config object (source: ``name``).

    Raises ConfigError naming ``name`` for a value that is neither a path, a
    ``kind`` object, a mapping nor (when ``optional``) None.
    """
    if isinstance(value, Mapping):
        return kind.from_dict(dict(value), source=name)
    ok = isinstance(value, (str, os.PathLike, kind)) or (optional and value is None)
    expect(ok, name, expected, value)
    return value


@dataclass(frozen=True)
class RunSpec:
    """One simulation: its inputs, backend and options (sizes in bytes, times in ns).

    ``workload``: a Chakra trace prefix (rank r reads ``<prefix>.<r>.et``) or a
    list of :class:`~astra_core.workload.chakra.RankTrace`. ``system``,
    ``network`` and ``memory``: a path, a config object, or a dict shaped like
    system.json / network.yml / the remote-memory JSON. ``topology``: a physical
    topology (path or :class:`~astra_core.topology.physical.PhysicalTopology`)
    with logical ``dims``. ``comm_groups``: a comm-group JSON or a mapping
    ``{group id: [NPU ids]}``. ``backend``: a registered backend's name (None: the
    default) and ``backend_config`` its configuration. ``symmetry``: simulate one
    rank per class where ranks time alike. ``background``: a flow file or list of
    :class:`~astra_core.flows.flowfile.FlowSpec` run alongside the step.
    ``iterations``: the traces repeated back to back. ``faults``: degraded and
    failed cables. :func:`astra_core.api.run` says what each does.
    """

    workload: PathLike | Sequence[RankTrace]
    system: Any
    network: Any = None
    topology: PathLike | PhysicalTopology | None = None
    dims: Sequence[int] | None = None
    memory: Any = None
    comm_groups: PathLike | Mapping | None = None
    backend: str | None = None
    backend_config: Any = None
    symmetry: bool = True
    background: PathLike | Sequence[FlowSpec] | None = None
    iterations: int = 1
    faults: PathLike | Sequence[LinkFault | Mapping[str, Any]] | None = None

    @classmethod
    def of(cls, arguments: Mapping[str, Any]) -> RunSpec:
        """The spec of a call's arguments (``locals()`` of a function taking every field)."""
        return cls(**{name: arguments[name] for name in RUN_KEYS})

    def checked(self) -> RunSpec:
        """This spec with dict configs made config objects and every field's type checked.

        Raises ConfigError naming the first bad field and the type it got, e.g.
        ``simulate: workload must be a path or a list of rank traces, got int``.
        """
        check_workload(self.workload)
        spec = replace(
            self,
            system=_config(self.system, SystemConfig, "system", "a path, a SystemConfig or a dict", False),
            network=_config(
                self.network, NetworkConfig, "network", "a path, a NetworkConfig, a dict or None", True
            ),
            memory=_config(
                self.memory, MemoryConfig, "memory", "a path, a MemoryConfig, a dict or None", True
            ),
        )
        spec._check_inputs()
        spec._check_options()
        return spec

    def _check_inputs(self) -> None:
        expect(
            self.topology is None or _is_path(self.topology) or isinstance(self.topology, PhysicalTopology),
            "topology",
            "a path, a PhysicalTopology or None",
            self.topology,
        )
        dims = self.dims
        if dims is not None:
            expect(_is_list(dims), "dims", "a list of dimension sizes or None", dims)
            expect(len(dims) > 0, "dims", "a non-empty list of dimension sizes or None", dims)
            for i, size in enumerate(dims):
                expect(isinstance(size, int) and not isinstance(size, bool), f"dims[{i}]", "an integer", size)
        expect(
            self.comm_groups is None or _is_path(self.comm_groups) or isinstance(self.comm_groups, Mapping),
            "comm_groups",
            "a path, a mapping {group id: [NPU ids]} or None",
            self.comm_groups,
        )

    def _check_options(self) -> None:
        expect(
            self.backend is None or isinstance(self.backend, str),
            "backend",
            "a backend name or None",
            self.backend,
        )
        expect(isinstance(self.symmetry, bool), "symmetry", "True or False", self.symmetry)
        iterations = self.iterations
        ok = isinstance(iterations, int) and not isinstance(iterations, bool)
        expect(ok, "iterations", "an integer >= 1", iterations)
        if iterations < 1:
            raise ConfigError(f"simulate: iterations must be an integer >= 1, got {iterations}")


#: The fields of a run, in order: the keywords :func:`astra_core.api.simulate` takes
#: besides its own, and the keys a sweep point may set.
RUN_KEYS = tuple(f.name for f in fields(RunSpec))
#: The fields whose string values are files (``workload``: a trace prefix).
FILE_FIELDS = (
    "workload",
    "system",
    "network",
    "topology",
    "memory",
    "comm_groups",
    "backend_config",
    "background",
    "faults",
)


def check_workload(workload: Any) -> None:
    """Raise ConfigError naming ``workload`` (or ``workload[i]``) unless it is a trace prefix
    or a list of :class:`RankTrace`."""
    expect(_is_path(workload) or _is_list(workload), "workload", "a path or a list of rank traces", workload)
    if _is_path(workload) and not os.fspath(workload):
        raise ConfigError("simulate: workload is an empty path (expected a trace prefix)")
    if _is_list(workload):
        expect(len(workload) > 0, "workload", "a path or a non-empty list of rank traces", workload)
        for rank, trace in enumerate(workload):
            expect(isinstance(trace, RankTrace), f"workload[{rank}]", "a RankTrace", trace)
