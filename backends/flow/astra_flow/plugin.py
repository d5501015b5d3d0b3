"""Registers the ``flow`` backend with astra (entry point group ``astra``).

Nothing heavy is imported until a backend is built: listing backends stays cheap.
"""

from astra_core.hookspecs import hookimpl


def create(topology, config=None):
    """Backend factory; see :func:`astra_flow.network.create`."""
    from astra_flow.network import create as build

    return build(topology, config)


@hookimpl
def astra_register_backends(register):
    register(
        "flow",
        create,
        config_type="astra_flow.config:FlowConfig",
        description="flow-level model: messages are max-min fair flows over the physical routes "
                    "(ECMP), pipelined across hops, with RoCE framing and ACK load",
    )
