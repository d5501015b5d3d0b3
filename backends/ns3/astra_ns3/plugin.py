"""Registers the ``ns3`` backend with astra (entry point group ``astra``).

Importing this module (and registering) never imports ns-3 or cppyy.
"""

from astra.plugin import hookimpl


@hookimpl
def astra_register_backends(register):
    from astra_ns3.factory import (  # light: no ns-3, cppyy, pydantic
        check_available,
        create,
        output_files,
        work_model,
    )

    register(
        "ns3",
        create,
        config_type="astra_ns3.config:Ns3Config",
        description="packet-level RoCE on ns-3: DCQCN / HPCC / line rate, PFC, ECN, per-flow ECMP "
        "(--backend-config FILE: TOML or YAML)",
        check_available=check_available,
        work_model=work_model,
        outputs=output_files,
    )
