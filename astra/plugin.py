"""The one module a plugin imports: hooks, the backend contract, the kernel, and the helpers a backend needs.

A plugin (a network backend, a collective, an observer, a command) imports
what it uses from here and from :mod:`astra`, never from ``astra_core``'s
modules, whose layout may change::

    from astra.plugin import ConfigModel, Topology, hookimpl, lazy_factory

    @hookimpl
    def astra_register_backends(register):
        register("mine", lazy_factory("my_backend.model:create"), config_type="my_backend.model:MyConfig")

Names load on first use, so that a plugin module which imports only the hook
markers keeps ``astra backends`` cheap (no pydantic, no compiled kernel).
``docs/plugins.md`` explains each group; every name keeps the docstring of
its definition. Raises AttributeError for a name that is not part of the face.
"""

# ruff: noqa: F401
# (the imports under TYPE_CHECKING are for type checkers; __getattr__ loads the names)
from __future__ import annotations

from typing import TYPE_CHECKING

from astra._lazy import lazy_names

if TYPE_CHECKING:
    from astra_core.backend import (
        Counters,
        LinkChanges,
        LinkSharing,
        LinkStatistics,
        LoneMessageTime,
        NetworkBackend,
        OwnsEventQueue,
        ReportsProgress,
        SymmetricTiming,
        Topology,
        WorkBudget,
        WorkModel,
    )
    from astra_core.config.dims import parse_dims
    from astra_core.config.files import expect_mapping, read_toml, read_yaml, source_name
    from astra_core.config.issues import (
        PYTHON_SOURCE,
        ConfigWarning,
        Problems,
        as_choice,
        as_int,
        as_number,
        show,
    )
    from astra_core.config.model import (
        STRICT,
        ConfigModel,
        Flag,
        between,
        checked,
        load_model,
        raise_problems,
        source_of,
        validate_mapping,
    )
    from astra_core.config.network import NetworkConfig
    from astra_core.errors import AstraError, BackendUnavailable, ConfigError, SimulationDeadlock
    from astra_core.events import (
        KERNEL_API_HEADER,
        KERNEL_HEADERS,
        EventQueue,
        ProgressHook,
        kernel,
        kernel_api_address,
        native_send_capsule,
    )
    from astra_core.hookspecs import RegisterBackend, RegisterCollective, hookimpl
    from astra_core.lifetime import die_with_parent
    from astra_core.native import compiler, load, load_extension
    from astra_core.outputs import (
        any_stdout,
        atomic_output,
        check_distinct,
        check_not_input,
        check_output_dir,
        check_output_file,
        write_text,
    )
    from astra_core.plugins import PluginError, lazy_factory
    from astra_core.results import RunResult
    from astra_core.system.collectives import DimTopology
    from astra_core.system.collectives.base import CollectivePhase
    from astra_core.system.collectives.plan import Plan, packets
    from astra_core.system.view import ProgressSample, RunView
    from astra_core.topology.faults import link_changes, set_kernel_links
    from astra_core.topology.generators import BYTES_PER_NS_PER_GBPS, mesh, torus
    from astra_core.topology.logical import from_network
    from astra_core.topology.physical import PhysicalTopology
    from astra_core.topology.pipeline import pipeline_ns

#: Where each name of the face is defined, by group.
_DEFINED_IN: dict[str, tuple[str, ...]] = {
    # registration: hook markers and the ``register`` callables hooks are given
    "astra_core.hookspecs": ("hookimpl", "RegisterBackend", "RegisterCollective"),
    "astra_core.plugins": ("lazy_factory", "PluginError"),
    # the backend contract: the protocol, its optional capabilities, what a factory gets
    "astra_core.backend": (
        "NetworkBackend",
        "SymmetricTiming",
        "OwnsEventQueue",
        "ReportsProgress",
        "LinkStatistics",
        "LinkSharing",
        "LinkChanges",
        "LoneMessageTime",
        "Counters",
        "Topology",
        "WorkModel",
        "WorkBudget",
    ),
    # the simulation kernel and compiled extensions
    "astra_core.events": (
        "EventQueue",
        "ProgressHook",
        "kernel",
        "KERNEL_API_HEADER",
        "KERNEL_HEADERS",
        "kernel_api_address",
        "native_send_capsule",
    ),
    "astra_core.native": ("compiler", "load", "load_extension"),
    # topology
    "astra_core.topology.physical": ("PhysicalTopology",),
    "astra_core.topology.logical": ("from_network",),
    "astra_core.topology.faults": ("set_kernel_links", "link_changes"),
    "astra_core.topology.generators": ("BYTES_PER_NS_PER_GBPS", "mesh", "torus"),
    "astra_core.topology.pipeline": ("pipeline_ns",),
    # collectives and observers
    "astra_core.system.collectives.plan": ("Plan", "packets"),
    "astra_core.system.collectives.base": ("CollectivePhase",),
    "astra_core.system.collectives": ("DimTopology",),
    "astra_core.system.view": ("RunView", "ProgressSample"),
    "astra_core.results": ("RunResult",),
    # configuration files and their checks
    "astra_core.config.network": ("NetworkConfig",),
    "astra_core.config.model": (
        "ConfigModel",
        "Flag",
        "STRICT",
        "between",
        "checked",
        "load_model",
        "raise_problems",
        "source_of",
        "validate_mapping",
    ),
    "astra_core.config.issues": (
        "ConfigWarning",
        "PYTHON_SOURCE",
        "Problems",
        "as_choice",
        "as_int",
        "as_number",
        "show",
    ),
    "astra_core.config.files": ("expect_mapping", "read_toml", "read_yaml", "source_name"),
    "astra_core.config.dims": ("parse_dims",),
    # errors a user can fix
    "astra_core.errors": ("AstraError", "ConfigError", "BackendUnavailable", "SimulationDeadlock"),
    # outputs and worker processes
    "astra_core.outputs": (
        "atomic_output",
        "any_stdout",
        "check_distinct",
        "check_not_input",
        "check_output_dir",
        "check_output_file",
        "write_text",
    ),
    "astra_core.lifetime": ("die_with_parent",),
}

_MODULE_OF = {name: module for module, names in _DEFINED_IN.items() for name in names}

__all__ = sorted(_MODULE_OF)


__getattr__, __dir__ = lazy_names(
    _MODULE_OF,
    globals(),
    lambda name: f"astra.plugin has no {name!r} (the plugin face: {', '.join(__all__)})",
)
