"""Registers the ``flow`` backend with astra (entry point group ``astra``).

Nothing heavy is imported until a backend is built: listing backends stays cheap.
"""

from astra.plugin import hookimpl, lazy_factory


@hookimpl
def astra_register_backends(register):
    register(
        "flow",
        lazy_factory("astra_flow.network:create"),
        config_type="astra_flow.config:FlowConfig",
        description="flow-level model: messages are max-min fair flows over the physical routes "
        "(ECMP), pipelined across hops, with RoCE framing and ACK load",
        work_model=lazy_factory("astra_flow.work:work_model"),
    )
