"""Registers the ``garnetlike`` backend with astra (entry point group ``astra``).

Nothing heavy is imported until a backend is built: listing backends stays cheap.
"""

from astra_core.hookspecs import hookimpl


def create(topology, config=None):
    """Backend factory; see :func:`astra_garnetlike.network.create`."""
    from astra_garnetlike.network import create as build

    return build(topology, config)


@hookimpl
def astra_register_backends(register):
    register(
        "garnetlike",
        create,
        config_type="astra_garnetlike.config:GarnetConfig",
        description="credit-based flow-control packet/flit model (Garnet-like): routers with "
                    "VCs, credits, pipeline, switch allocation; finite buffers, back-pressure",
    )
