"""Registers the ``analytical`` backend with astra (entry point group ``astra``)."""

from astra.plugin import hookimpl


@hookimpl
def astra_register_backends(register):
    from astra_analytical.congestion import create as create_congestion
    from astra_analytical.network import create

    register(
        "analytical-congestion",
        create_congestion,
        description="congestion-aware analytical model (upstream ASTRA-sim's, any topology): "
        "messages queue on shared links, store and forward",
    )
    register(
        "analytical",
        create,
        description="congestion-unaware analytical model (upstream ASTRA-sim): "
        "hops x latency + bytes / bandwidth per message",
    )
