"""astra's core: workload (Chakra traces), system layer, plugin API and reports.

Layers, from the top: :mod:`astra_core.api` (one simulation), the workload
(:mod:`astra_core.workload`), the system layer (:mod:`astra_core.system`:
per-rank execution, collectives, scheduling), the network contract
(:mod:`astra_core.backend`; backends are plugins), topologies, reports and
the command line (:mod:`astra_core.cli`). ``astra_core.__version__`` is the
installed distribution's version (pyproject.toml is its one source).
"""

from __future__ import annotations


def __getattr__(name: str) -> str:
    if name == "__version__":
        from importlib.metadata import version

        return version("astra-core")
    raise AttributeError(f"module 'astra_core' has no attribute {name!r}")
