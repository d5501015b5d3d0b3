"""Registers the ``analytical`` backend with astra (entry point group ``astra``)."""

from astra_core.hookspecs import hookimpl


@hookimpl
def astra_register_backends(register):
    from astra_analytical.network import create

    register(
        "analytical",
        create,
        description="congestion-unaware analytical model (upstream ASTRA-sim): "
                    "hops x latency + bytes / bandwidth per message",
    )
