"""The ``astra`` command line: one click group over :mod:`astra.api` and the tools.

Commands, one module each: ``run`` and ``backends`` (:mod:`.run`),
``topology`` (:mod:`.topology`), ``gen`` and ``convert`` (:mod:`.workload`),
``sweep`` (:mod:`.sweep`), ``flows`` (:mod:`.flows`), ``calibrate``
(:mod:`.calibrate`); plugins add their own
through the ``astra_register_commands`` hook (``astra noc`` comes from
astra-garnetlike). :mod:`.common` holds the one error boundary (an
:class:`~astra_core.errors.AstraError` is ``error:`` lines and exit 1) and
the shared parameter parsing.
"""

from __future__ import annotations

import warnings

import click

from astra_core.cli.calibrate import calibrate
from astra_core.cli.cluster import cluster
from astra_core.cli.common import AstraGroup
from astra_core.cli.flows import flows
from astra_core.cli.plan import plan
from astra_core.cli.run import backends, run
from astra_core.cli.scale import scale
from astra_core.cli.serve import serve
from astra_core.cli.sweep import sweep
from astra_core.cli.topology import topology
from astra_core.cli.workload import convert, gen
from astra_core.errors import AstraError


@click.group(cls=AstraGroup, context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.version_option(package_name="astra-core")
def main() -> None:
    """astra: predict the step time of distributed ML training, and LLM serving's
    latencies, on a cluster."""


for _command in (run, backends, topology, convert, gen, sweep, flows, calibrate, cluster, scale, plan, serve):
    main.add_command(_command)


def _plugin_commands() -> None:
    """Commands that installed plugins register (a plugin that fails is set aside with
    a warning, as for backends)."""
    from astra_core.plugins import make_plugin_manager

    try:
        manager = make_plugin_manager()
    except AstraError as exc:  # a bad plugins.toml: the core commands still work
        warnings.warn(f"plugin commands not loaded: {exc}", stacklevel=1)
        return
    from astra_core.plugins import PLUGIN_FAILURES, describe, hook_callers

    for plugin, call in hook_callers(manager, "astra_register_commands"):
        try:
            call(cli=main)
        except PLUGIN_FAILURES as exc:  # a broken plugin breaks no other command
            warnings.warn(f"plugin '{plugin}': astra_register_commands raised {describe(exc)}", stacklevel=1)


_plugin_commands()
