"""The ``ns3`` backend factory and its availability probe (no ns-3 import here)."""

from __future__ import annotations

import os
from importlib import metadata, util
from typing import Any

from astra.plugin import BackendUnavailable, Topology

INSTALL_HINT = "pip install -e backends/ns3 (or: pip install 'ns3>=3.44,<3.45' cppyy)"


def check_available() -> None:
    """Raise BackendUnavailable (with the install hint) unless ns3 3.44 and cppyy are installed."""
    try:
        version = metadata.version("ns3")
    except metadata.PackageNotFoundError:
        raise BackendUnavailable(
            f"the ns3 backend needs the 'ns3' package (ns-3 3.44): {INSTALL_HINT}"
        ) from None
    if not version.startswith("3.44"):
        raise BackendUnavailable(
            f"the ns3 backend is built for ns-3 3.44, found ns3 {version}: {INSTALL_HINT}"
        )
    if util.find_spec("cppyy") is None:
        raise BackendUnavailable(f"the ns3 backend needs the 'cppyy' package: {INSTALL_HINT}")


def create(topology: Topology, config: Any = None):
    """Backend factory: ``config`` is None, an Ns3Config, a mapping, or a TOML/YAML path.

    Uses ``topology.physical`` if given, else the links of network.yml's
    dimensions (:func:`astra_core.topology.logical.from_network`). Raises
    BackendUnavailable or ConfigError."""
    check_available()
    from astra.plugin import from_network
    from astra_ns3.config import load_config
    from astra_ns3.network import Ns3Network

    physical = topology.physical if topology.physical is not None else from_network(topology.network)
    source = os.fspath(config) if isinstance(config, (str, os.PathLike)) else "<python>"
    return Ns3Network(physical, load_config(config), config_source=source)


def output_files(config: Any = None) -> dict[str, Any]:
    """The monitor's tables that a run under ``config`` writes (label -> path; {} with no
    ``monitor.output_dir``), for the caller's check against its own outputs. Raises
    ConfigError for a bad config (its file and key)."""
    from astra_ns3.config import load_config
    from astra_ns3.monitors import table_files

    monitor = load_config(config).monitor
    if not monitor.output_dir:
        return {}
    source = os.fspath(config) if isinstance(config, (str, os.PathLike)) else "backend config"
    return table_files(monitor.output_dir, monitor.format, source)


def work_model(topology: Topology, config: Any = None):
    """The run's :class:`~astra_core.backend.WorkModel` (:mod:`astra_ns3.work`), built
    without ns-3: packets x links per message, for ``astra run --estimate``."""
    from astra_ns3.work import work_model as build

    return build(topology, config)
