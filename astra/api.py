"""``astra.simulate``: one simulation from paths, config objects or dicts."""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

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


def _config(value: Any, kind, name: str):
    """A dict shaped like the config file becomes the config object (source: ``name``)."""
    if isinstance(value, Mapping):
        return kind.from_dict(dict(value), source=name)
    return value


def simulate(workload: str | os.PathLike | Sequence, system: Any, network: Any = None, *,
             backend: str | None = None, progress: bool | RunProgress = False,
             **options: Any) -> Report:
    """Simulate one training step and return its :data:`Report`.

    ``workload``: a Chakra trace prefix (rank r reads ``<prefix>.<r>.et``) or
    a list of :class:`~astra_core.workload.chakra.RankTrace`. ``system``,
    ``network`` and the ``memory`` option: a path, a config object, or a dict
    shaped like system.json / network.yml / the remote-memory JSON (errors then
    name ``system``, ``network`` or ``memory`` as the source). ``backend``: a
    registered backend name (default from plugins.toml). ``progress``: True
    for a progress line on stderr when it is a terminal, or a
    :class:`~astra_core.report.progress.RunProgress`.

    Other ``options`` go to :func:`astra_core.api.simulate`: ``topology``
    (ns-3 format file or PhysicalTopology), ``dims``, ``memory``,
    ``comm_groups`` (path or ``{name: ranks}``), ``backend_config``,
    ``plugin_manager``, ``symmetry``. Raises
    :class:`~astra_core.errors.AstraError` subclasses for bad input.
    """
    system = _config(system, SystemConfig, "system")
    network = _config(network, NetworkConfig, "network")
    if "memory" in options:
        options["memory"] = _config(options["memory"], MemoryConfig, "memory")
    display = progress if isinstance(progress, RunProgress) else (RunProgress() if progress else None)
    if display is None or not display.enabled:
        return _simulate_core(workload, system, network, backend=backend, **options)
    from astra_core.plugins import make_plugin_manager

    pm = options.pop("plugin_manager", None) or make_plugin_manager()
    pm.register(display)
    try:
        with display:
            return _simulate_core(workload, system, network, backend=backend,
                                  plugin_manager=pm, **options)
    finally:
        pm.unregister(display)
