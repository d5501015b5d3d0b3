"""astra: predict the step time of distributed ML training on a cluster that may not exist yet.

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
    cost = astra.estimate(..., backend="ns3")  # no simulation: messages, packet-hops, wall time
    cost.wall_s, cost.work, cost.line()

Configs are paths, config objects (:mod:`astra_core.config`) or plain dicts
shaped like the files. The ``astra`` command line is a thin layer over this.
"""

from astra.api import Estimate, Report, estimate, simulate
from astra.sweeps import sweep
from astra_core.cluster import simulate_cluster

__all__ = ["Estimate", "Report", "estimate", "simulate", "simulate_cluster", "sweep"]
