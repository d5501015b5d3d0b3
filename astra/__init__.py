"""astra: predict the step time of distributed ML training, and LLM serving's latencies, on a cluster that may not exist yet.

The Python API in one screen::

    import astra

    report = astra.simulate(workload="examples/resnet50_dp/workload/Resnet50_DataParallel",
                            system="examples/resnet50_dp/system.json",
                            network="examples/resnet50_dp/network.yml")
    report.step_ns                 # slowest rank's finish time, ns
    report.ranks[0].exposed_comm_ns
    report.rank_frame()            # pandas: one row per rank
    report.collective_frame()      # pandas: one row per collective per rank, per-phase times
    report.write_plots("plots/")   # breakdown.png, timeline.png (links.png)

    results = astra.sweep("sweep.yaml")   # a grid of design points -> pandas DataFrame

    jobs = astra.simulate_cluster("cluster.yaml")  # several jobs on one network: slowdowns
    best = astra.plan("llama3-70b", "network.yml", global_batch=1024)  # fastest layouts that fit
    served = astra.simulate_serving("serve.yaml")  # LLM serving: per-request TTFT, TPOT, ITL
    served.summary(slo_ms={"ttft": 2000, "tpot": 100})
    cost = astra.estimate(..., backend="ns3")  # no simulation: messages, packet-hops, wall time
    cost.wall_s, cost.work, cost.line()

    spec = astra.RunSpec(workload=..., system=..., backend="flow")  # one run, described once
    report = astra.run(spec, progress=True)    # as simulate; astra.estimate_run(spec) as estimate

Configs are paths, config objects (:mod:`astra_core.config`) or plain dicts
shaped like the files. The ``astra`` command line is a thin layer over this.

Names load on first use: a plugin that imports :mod:`astra.plugin` does not
load the simulator.
"""

# ruff: noqa: F401
# (the imports under TYPE_CHECKING are for type checkers; __getattr__ loads the names)
from __future__ import annotations

from typing import TYPE_CHECKING

from astra._lazy import lazy_names

if TYPE_CHECKING:
    from astra.api import Estimate, Report, RunSpec, estimate, estimate_run, run, simulate
    from astra.sweeps import sweep
    from astra_core.cluster import simulate_cluster
    from astra_core.plan.api import plan
    from astra_core.serve.api import simulate_serving

_MODULE_OF = {
    "Estimate": "astra.api",
    "Report": "astra.api",
    "RunSpec": "astra.api",
    "estimate_run": "astra.api",
    "run": "astra.api",
    "estimate": "astra.api",
    "simulate": "astra.api",
    "sweep": "astra.sweeps",
    "simulate_cluster": "astra_core.cluster",
    "plan": "astra_core.plan.api",
    "simulate_serving": "astra_core.serve.api",
}

__all__ = sorted(_MODULE_OF)


__getattr__, __dir__ = lazy_names(
    _MODULE_OF, globals(), lambda name: f"module 'astra' has no attribute {name!r}"
)
