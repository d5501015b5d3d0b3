"""Many jobs on one cluster: placement, composition into one run, and per-job results
(``astra cluster``, ``astra.simulate_cluster``; :mod:`.run`)."""

from astra_core.cluster.run import ClusterResult, JobResult, simulate_cluster
from astra_core.cluster.spec import ClusterFile, JobSpec, load_cluster_spec

__all__ = ["ClusterFile", "ClusterResult", "JobResult", "JobSpec", "load_cluster_spec", "simulate_cluster"]
