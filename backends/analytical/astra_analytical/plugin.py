"""Registers the ``analytical-congestion`` backend with astra (entry point group ``astra``).

The congestion-unaware ``analytical`` model is the core's built-in
(:mod:`astra_core.analytical`)."""

from astra.plugin import hookimpl, lazy_factory


@hookimpl
def astra_register_backends(register):
    register(
        "analytical-congestion",
        lazy_factory("astra_analytical.congestion:create"),
        description="congestion-aware analytical model (upstream ASTRA-sim's, any topology): "
        "messages queue on shared links, store and forward",
    )
