"""The files a system.json names, which a run reads besides it.

A run of ``system.json`` also reads the NCCL profile its ``nccl.profile`` names
(:func:`~astra_core.config.nccl_profile.find_profile`) and the MSCCL XML files or
Chakra ET traces its ``*-implementation-custom`` entries name
(:func:`~astra_core.system.collectives.custom.custom_sources`). What writes outputs
checks them as inputs (:func:`astra_core.outputs.check_not_input`), and what keeps
results checks their bytes (the cluster's cache of alone runs).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from astra_core.config.nccl_profile import find_profile
from astra_core.config.system import SystemConfig, load_system
from astra_core.errors import AstraError
from astra_core.workload.chakra import rank_trace_files

__all__ = ["system_named_files"]


def system_named_files(system: str | os.PathLike[str] | SystemConfig) -> Iterator[tuple[str, str]]:
    """(key, path) of the existing files ``system`` (a system.json path, or one loaded)
    names: ``nccl.profile`` and its file, then ``<collective>-implementation-custom`` and
    its XML file or each of its ``.et`` files. Nothing for a system file that does not
    load or a name that resolves to no file (the run reports those in one line)."""
    from astra_core.system.collectives.custom import custom_sources

    try:
        config = system if isinstance(system, SystemConfig) else load_system(system)
        entry = config.nccl.profile if config.nccl is not None else None
        profile = find_profile(entry, config.source) if entry is not None else None
        sources = custom_sources(config)
    except AstraError:
        return
    if profile is not None:
        yield "nccl.profile", str(profile)
    for comm_type, source in sources.items():
        key = f"{comm_type.label}-implementation-custom"
        if str(source).endswith(".xml"):
            yield key, str(source)
        else:
            for path in rank_trace_files(str(source)).values():
                yield key, path
