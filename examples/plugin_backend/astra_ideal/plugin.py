"""Registers the ``ideal`` backend with astra.

Found through the ``astra`` entry-point group (pyproject.toml). Keep this
module cheap to import: ``astra backends`` imports every plugin just to list
them, so the model itself is imported inside the hook.
"""

from astra_core.hookspecs import hookimpl


@hookimpl
def astra_register_backends(register):
    from astra_ideal.network import IdealConfig, create

    register("ideal", create, config_type=IdealConfig,
             description="ideal non-blocking fabric (example plugin): no shared links; each NPU "
                         "sends one message at a time per dimension at constant bandwidth")
