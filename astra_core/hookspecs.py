"""The astra plugin API: pluggy hook specifications (project name ``astra``).

A plugin is a module (or object) with functions named like the hooks below and
decorated with :data:`hookimpl`. Installed plugins are found through the
``astra`` entry-point group; local ones are listed in ``plugins.toml``.
Per-message calls never go through hooks: a backend is a plain object.

Errors: raise :class:`astra_core.errors.AstraError` subclasses for what a
user can fix. Anything else a plugin raises where the host calls it becomes
one line naming the plugin (:class:`astra_core.plugins.PluginError`), and a
plugin that fails to load or register is set aside without breaking the
others (see :mod:`astra_core.plugins`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

if TYPE_CHECKING:
    import click

    from astra_core.results import RunResult
    from astra_core.system.view import ProgressSample, RunView


class RegisterBackend(Protocol):
    """The ``register`` an ``astra_register_backends`` hook is given."""

    def __call__(
        self,
        name: str,
        factory: Callable[..., Any],
        *,
        config_type: type | str | None = None,
        description: str = "",
        check_available: Callable[[], None] | None = None,
        work_model: Callable[..., Any] | None = None,
        outputs: Callable[[Any], Mapping[str, Any]] | None = None,
    ) -> None: ...


class RegisterCollective(Protocol):
    """The ``register`` an ``astra_register_collectives`` hook is given."""

    def __call__(
        self,
        name: str,
        plan_builder: Callable[..., Any] | None = None,
        *,
        phase_builder: Callable[..., Any] | None = None,
        description: str = "",
    ) -> None: ...


hookspec = pluggy.HookspecMarker("astra")
hookimpl = pluggy.HookimplMarker("astra")


# -- contributions -------------------------------------------------------------
@hookspec
def astra_register_backends(register: RegisterBackend) -> None:
    """Register network backends.

    Called once when the plugin manager is built. Call
    ``register(name, factory, *, config_type=None, description="")`` once per
    backend. ``factory(topology, config) -> NetworkBackend`` gets a
    :class:`astra_core.backend.Topology` and the backend's config (None, a
    path or a parsed object) and raises
    :class:`astra_core.errors.BackendUnavailable` with an install hint when an
    optional dependency is missing. ``config_type`` is the config class or a
    ``"module:Class"`` string naming it; a backend registered without one
    takes no config (the host refuses ``--backend-config`` for it), so a
    backend with one must validate what it gets (ConfigError naming the file
    and key). ``check_available()`` raises BackendUnavailable (with an install
    hint) when the backend cannot run here; ``astra backends`` calls it without
    building anything. ``work_model(topology, config)`` returns the backend's
    :class:`astra_core.backend.WorkModel` (what a run would cost it, for
    ``astra run --estimate`` and the pre-run check of a work limit).
    ``outputs(config)`` returns the files the backend writes under that config
    (label -> path), which ``astra run`` checks against its own outputs and
    inputs before the run. If the hook
    raises, nothing it registered is kept. Import nothing heavy here or at
    module level: every run loads every installed plugin.
    """


@hookspec
def astra_register_collectives(register: RegisterCollective) -> None:
    """Register collective algorithms.

    The core registers upstream's algorithms through this hook too (``ring``,
    ``direct``, ``halvingDoubling`` as plans, ``doubleBinaryTree`` as a phase; see
    :func:`astra_core.system.collectives.registry.register_builtin_collectives`).
    Call ``register(name, plan_builder, *, description="")`` once per algorithm;
    system.json then names a plugin's ``"plugin:<name>"`` in an
    ``*-implementation`` list. ``plan_builder(comm_type, rank, ring, data_size)
    -> Plan`` returns one rank's
    :class:`astra_core.system.collectives.plan.Plan` for one chunk of
    ``data_size`` bytes of a collective of ``comm_type``
    (:class:`astra_core.system.comm_types.CommType`) on ``ring`` (a
    :class:`astra_core.system.collectives.logical_topology.RingTopology` of
    one network dimension or communicator group); astra's windowed executor
    runs it with upstream's packet semantics (the core's ``direct<W>`` is also
    given ``window=W``). An algorithm that is not a plan registers
    ``register(name, phase_builder=factory)`` instead:
    ``factory(comm_type, rank, dim, data_size)`` returns the chunk's phase, a
    :class:`astra_core.system.collectives.base.CollectivePhase` on ``dim`` (a
    :class:`astra_core.system.collectives.DimTopology`: ``ring``, ``nodes``).
    Keep imports inside the hook.
    """


@hookspec
def astra_register_commands(cli: click.Group) -> None:
    """Add commands to the ``astra`` command line.

    ``cli`` is the top-level click group: call ``cli.add_command(command)``
    (e.g. astra-garnetlike adds ``astra noc``). Called when the command line
    loads, so import the command's heavy dependencies inside it, not here.
    An ``AstraError`` the command raises is printed as ``error:`` lines with
    exit status 1 by the group.
    """


# -- observers -------------------------------------------------------------------
@hookspec
def astra_run_started(run: RunView) -> None:
    """A simulation is about to start; ``run`` is a read-only
    :class:`~astra_core.system.view.RunView` of it (ranks built, clock at 0).

    If it raises, the run does not start: one error line names the plugin."""


@hookspec
def astra_run_progress(run: RunView, progress: ProgressSample) -> None:
    """The backend reported progress; ``progress`` is a
    :class:`~astra_core.system.view.ProgressSample` (simulated time in ns, events,
    messages sent and delivered, ET nodes done). Called every
    :data:`~astra_core.events.PROGRESS_EVERY` events of an event-queue backend,
    on each heartbeat of the ns3 worker, and once when the run ends. Keep it
    cheap: it runs inside the simulation.

    If it raises, a warning line names the plugin, which gets no more progress
    calls in that run; the run goes on."""


@hookspec
def astra_run_finished(run: RunView, report: RunResult) -> None:
    """A simulation finished; ``report`` is its frozen
    :class:`~astra_core.results.RunResult` (times in ns).

    If it raises, the result is still returned (and written by the CLI); the
    error is a warning line naming the plugin, and later observers still run."""
