"""Registers the ``garnetlike`` backend with astra (entry point group ``astra``).

Nothing heavy is imported until a backend is built: listing backends stays cheap.
"""

from astra.plugin import hookimpl, lazy_factory


@hookimpl
def astra_register_backends(register):
    register(
        "garnetlike",
        lazy_factory("astra_garnetlike.network:create"),
        config_type="astra_garnetlike.config:GarnetConfig",
        description="credit-based flow-control packet/flit model (Garnet-like): routers with "
        "VCs, credits, pipeline, switch allocation; finite buffers, back-pressure",
        work_model=lazy_factory("astra_garnetlike.work:work_model"),
    )


@hookimpl
def astra_register_commands(cli):
    from astra_garnetlike.cli import noc

    cli.add_command(noc)
