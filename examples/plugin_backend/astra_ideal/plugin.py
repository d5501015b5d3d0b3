"""Registers the ``ideal`` backend with astra.

Found through the ``astra`` entry-point group (pyproject.toml). Keep this
module cheap to import: every astra run loads every installed plugin, so the
model is imported only when a backend is built (``lazy_factory``), and the
config class is named as a "module:Class" string.
"""

from astra.plugin import hookimpl, lazy_factory


@hookimpl
def astra_register_backends(register):
    register(
        "ideal",
        lazy_factory("astra_ideal.network:create"),
        config_type="astra_ideal.network:IdealConfig",
        description="ideal non-blocking fabric (example plugin): no shared links; each NPU "
        "sends one message at a time per dimension at constant bandwidth",
    )
