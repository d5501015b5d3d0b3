"""Registers the ``flow`` backend with astra (entry point group ``astra``).

Nothing heavy is imported until a backend is built: listing backends stays cheap.
"""

from astra_core.hookspecs import hookimpl
from astra_core.plugins import lazy_factory


def _factory():
    """The lazy backend factory, with the lazy work model for estimates
    (:class:`astra_core.backend.WorkModel`) as its ``work_model`` attribute."""
    factory = lazy_factory("astra_flow.network:create")
    factory.work_model = lazy_factory("astra_flow.work:work_model")  # type: ignore[attr-defined]
    return factory


@hookimpl
def astra_register_backends(register):
    register(
        "flow",
        _factory(),
        config_type="astra_flow.config:FlowConfig",
        description="flow-level model: messages are max-min fair flows over the physical routes "
        "(ECMP), pipelined across hops, with RoCE framing and ACK load",
    )
