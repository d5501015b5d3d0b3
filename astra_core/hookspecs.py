"""The astra plugin API: pluggy hook specifications (project name ``astra``).

A plugin is a module (or object) with functions named like the hooks below and
decorated with :data:`hookimpl`. Installed plugins are found through the
``astra`` entry-point group; local ones are listed in ``plugins.toml``.
Per-message calls never go through hooks: a backend is a plain object.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("astra")
hookimpl = pluggy.HookimplMarker("astra")


# -- contributions -------------------------------------------------------------
@hookspec
def astra_register_backends(register):
    """Register network backends.

    Called once when the plugin manager is built. Call
    ``register(name, factory, *, config_type=None, description="")`` once per
    backend. ``factory(topology, config) -> NetworkBackend`` gets a
    :class:`astra_core.backend.Topology` and the backend's config (None, a
    path or a parsed object) and raises
    :class:`astra_core.errors.BackendUnavailable` with an install hint when an
    optional dependency is missing. ``config_type`` is the config class or a
    ``"module:Class"`` string naming it. Import nothing heavy here or at module
    level: every run loads every installed plugin.
    """


# -- observers -------------------------------------------------------------------
@hookspec
def astra_run_started(run):
    """A simulation is about to start; ``run`` is the Simulation (ranks built)."""


@hookspec
def astra_run_finished(run, report):
    """A simulation finished; ``report`` is its RunResult (times in ns)."""
