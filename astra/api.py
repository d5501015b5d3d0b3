"""``astra.simulate``: one simulation from paths, config objects or dicts."""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import pluggy

from astra_core.api import check_workload, expect
from astra_core.api import simulate as _simulate_core
from astra_core.config.memory import MemoryConfig
from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.report.progress import RunProgress
from astra_core.report.results import RunResult

#: What :func:`simulate` returns: per-rank and per-collective results of one run,
#: with pandas views (``rank_frame()``, ``collective_frame()``, ...) and writers
#: (``write_csv``, ``write_parquet``, ``write_plots``, ``write_timeline``).
Report = RunResult


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


def simulate(workload: str | os.PathLike | Sequence, system: Any, network: Any = None, *,
             backend: str | None = None, progress: bool | RunProgress = False,
             topology: Any = None, dims: Sequence[int] | None = None, memory: Any = None,
             comm_groups: Any = None, backend_config: Any = None, plugin_manager: Any = None,
             symmetry: bool = True, background: Any = None) -> Report:
    """Simulate one training step and return its :data:`Report`.

    ``workload``: a Chakra trace prefix (rank r reads ``<prefix>.<r>.et``) or
    a list of :class:`~astra_core.workload.chakra.RankTrace`. ``system``,
    ``network`` and ``memory``: a path, a config object, or a dict shaped
    like system.json / network.yml / the remote-memory JSON (errors then
    name ``system``, ``network`` or ``memory`` as the source). ``backend``: a
    registered backend name (default from plugins.toml). ``progress``: True
    for a progress line on stderr when it is a terminal, or a
    :class:`~astra_core.report.progress.RunProgress`.

    The other keywords are those of :func:`astra_core.api.simulate`:
    ``topology`` (ns-3 format file or PhysicalTopology), ``dims``,
    ``comm_groups`` (path or ``{group id: [NPU ids]}``, validated like the
    file), ``backend_config``, ``plugin_manager``, ``symmetry`` (a bool),
    ``background`` (a flow file run alongside the step).
    Raises :class:`~astra_core.errors.AstraError` subclasses for bad input;
    an argument of the wrong type is a ConfigError naming it, e.g.
    ``simulate: workload must be a path or a list of rank traces, got int``.
    """
    check_workload(workload)
    system = _config(system, SystemConfig, "system", "a path, a SystemConfig or a dict", False)
    network = _config(network, NetworkConfig, "network", "a path, a NetworkConfig, a dict or None", True)
    memory = _config(memory, MemoryConfig, "memory", "a path, a MemoryConfig, a dict or None", True)
    expect(isinstance(progress, (bool, RunProgress)), "progress", "True, False or a RunProgress", progress)
    options = dict(topology=topology, dims=dims, memory=memory, comm_groups=comm_groups,
                   backend_config=backend_config, symmetry=symmetry, background=background)
    display = progress if isinstance(progress, RunProgress) else (RunProgress() if progress else None)
    if display is None or not display.enabled:
        return _simulate_core(workload, system, network, backend=backend,
                              plugin_manager=plugin_manager, **options)
    from astra_core.plugins import make_plugin_manager

    expect(plugin_manager is None or isinstance(plugin_manager, pluggy.PluginManager),
           "plugin_manager", "a pluggy PluginManager or None", plugin_manager)
    pm = plugin_manager or make_plugin_manager()
    pm.register(display)
    try:
        with display:
            return _simulate_core(workload, system, network, backend=backend,
                                  plugin_manager=pm, **options)
    finally:
        pm.unregister(display)
