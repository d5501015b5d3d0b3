"""``astra cluster`` / ``astra.simulate_cluster``: several jobs on one network, and what
each costs the others.

The jobs of a spec (:mod:`.spec`) are placed (:mod:`.placement`), composed into
one run (:mod:`.compose`) and simulated together on the spec's backend, and each
job again *alone* on the same placement (the other NPUs idle), beside it in worker
processes (:mod:`.processes`), or that run is read from an earlier call with the
same inputs (:mod:`.cache`). Per job: each iteration's time (from its start, or
the previous iteration's end, to when its slowest rank ended it), its completion
time (JCT, from its start to its last iteration's end) and the slowdowns against
running alone. Per link, each job's bytes are its alone run's: the same messages
cross the same routes whether or not the other jobs run (static routes; an
adaptive backend, or a cable failing during the run, may route differently).

On a backend that does not model link sharing (``analytical``) jobs cannot slow
each other: the result says so (:attr:`ClusterResult.note`) and every slowdown
is 1.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, cast

from astra_core.api import resolve_network, run
from astra_core.backend import Topology, require_link_changes, shares_links
from astra_core.cluster.cache import AloneRun, load_alone, store_alone
from astra_core.cluster.compose import GroupIds, JobTraces, compose, job_dims
from astra_core.cluster.hardware import slowness
from astra_core.cluster.placement import place_jobs
from astra_core.cluster.processes import available_processes, run_beside
from astra_core.cluster.spec import ClusterFile, JobSpec, load_cluster_spec
from astra_core.config.comm_groups import load_comm_groups
from astra_core.config.system import load_system
from astra_core.errors import ConfigError
from astra_core.plugins import BackendRegistry, load_settings, make_plugin_manager
from astra_core.report import Report
from astra_core.report.iterations import ends_on_rank, timelines_by_rank
from astra_core.results import whole_ns
from astra_core.run_digest import InputDigests
from astra_core.run_spec import RunSpec
from astra_core.topology.faults import apply_faults, check_reachable, timed_faults
from astra_core.workload.chakra import read_workload
from astra_core.workload.prefix import rank_count

__all__ = ["ClusterResult", "JobResult", "simulate_cluster"]


@dataclass(frozen=True)
class JobResult:
    """One job of a cluster run (times in ns, from the run's start).

    ``npus``: its NPU per rank; ``iteration_ns``: each iteration's time (slowest
    rank); ``end_ns``: when its last iteration ended; ``alone_iteration_ns``,
    ``alone_end_ns``: the same run alone on the same NPUs; ``link_bytes``: bytes
    it moved over each directed link of the topology (None: the backend keeps no
    link statistics).
    """

    name: str
    npus: tuple[int, ...]
    start_ns: float
    iteration_ns: tuple[float, ...]
    end_ns: float
    alone_iteration_ns: tuple[float, ...]
    alone_end_ns: float
    link_bytes: tuple[float, ...] | None = None

    @property
    def jct_ns(self) -> float:
        """Job completion time: its start to its last iteration's end."""
        return self.end_ns - self.start_ns

    @property
    def slowdown(self) -> float:
        """JCT over the JCT alone on the same NPUs."""
        alone = self.alone_end_ns - self.start_ns
        return self.jct_ns / alone if alone else 1.0

    @property
    def iteration_slowdowns(self) -> tuple[float, ...]:
        return tuple(t / a if a else 1.0 for t, a in zip(self.iteration_ns, self.alone_iteration_ns))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "npus": list(self.npus),
            "start_ns": whole_ns(self.start_ns),
            "iteration_ns": [whole_ns(t) for t in self.iteration_ns],
            "jct_ns": whole_ns(self.jct_ns),
            "alone_iteration_ns": [whole_ns(t) for t in self.alone_iteration_ns],
            "alone_jct_ns": whole_ns(self.alone_end_ns - self.start_ns),
            "slowdown": self.slowdown,
            "iteration_slowdowns": list(self.iteration_slowdowns),
        }


@dataclass(frozen=True)
class ClusterResult:
    """A cluster run: ``jobs`` (:class:`JobResult`, spec order), the combined run's
    ``report``, and ``note``: one line when the backend cannot make jobs interfere."""

    backend: str
    jobs: list[JobResult]
    report: Report = field(repr=False)
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document: per job, and per link the bytes of each job."""
        out: dict[str, Any] = {
            "backend": self.backend,
            "makespan_ns": whole_ns(max(j.end_ns for j in self.jobs)),
            "jobs": [j.to_dict() for j in self.jobs],
        }
        links = self.report.links
        if links is not None:  # links no byte crossed are left out
            topo = links.topology
            out["links"] = [
                {
                    "link": i,
                    "src": topo.link_src[i],
                    "dst": topo.link_dst[i],
                    "bytes": round(links.link_bytes[i]),
                    "bytes_by_job": {j.name: round(j.link_bytes[i]) for j in self.jobs if j.link_bytes},
                }
                for i in range(len(links.link_bytes))
                if links.link_bytes[i]
            ]
        if self.note:
            out["note"] = self.note
        return out


def _rank_count(prefix: str, job: str) -> int:
    """How many ranks the job's trace set has (read_workload checks they are 0..n-1)."""
    ranks = rank_count(prefix)
    if not ranks:
        raise ConfigError(f"job {job}: workload: no trace files {prefix}.<rank>.et")
    return ranks


class _Cluster:
    """A spec's inputs, read once: network, system, backend, and each job's traces."""

    def __init__(self, spec: ClusterFile, plugin_manager: Any):
        self.spec = spec
        self.network, self.physical = resolve_network(spec.network, spec.topology, spec.dims)
        if spec.faults and self.physical is not None:
            self.physical = apply_faults(self.physical, spec.faults)
        npus, per_node = self.network.npus_count, self.network.npus_per_dim[0]
        self.npus = npus
        systems = [load_system(cast(str, job.system or spec.system)) for job in spec.jobs]  # spec checked
        for job, system in zip(spec.jobs, systems):
            if system != systems[0]:
                raise ConfigError(
                    f"job {job.name}: system: differs from job {spec.jobs[0].name}'s; a cluster run "
                    "has one system.json for all its jobs"
                )
        self.system = systems[0]
        ranks = [_rank_count(job.workload, job.name) for job in spec.jobs]
        placements = place_jobs(
            [(j.name, r, j.placement, j.seed) for j, r in zip(spec.jobs, ranks)], npus, per_node
        )
        if spec.faults and self.physical is not None:
            for job, npus_of in zip(spec.jobs, placements):
                check_reachable(self.physical, f"job {job.name}", npus_of, spec.faults)
        self.jobs = [self._job(job, r, p) for job, r, p in zip(spec.jobs, ranks, placements)]
        self.group_ids = GroupIds()  # one numbering for every run: the same routes together and alone
        self.digests = InputDigests()  # the spec's shared files hashed once for every job's key
        self.slow = slowness(spec.compute_speed, spec.stragglers, npus, max(j.iterations for j in spec.jobs))
        self.pm = plugin_manager or make_plugin_manager(settings=load_settings())
        registry = BackendRegistry(self.pm, load_settings().default_backend)
        self.backend = registry.get(spec.backend)
        written = self.backend.output_files(spec.backend_config)
        if written:  # every run would write them, and the last to end would win
            raise ConfigError(
                f"backend_config: backend {self.backend.name} writes {len(written)} files "
                f"({min(written)}, ...) in each of the cluster's {len(spec.jobs) + 1} runs (all jobs, "
                "then each alone), one over the other; take those outputs out of the backend's config"
            )
        if timed_faults(spec.faults):  # before any run starts
            require_link_changes(self._build(), self.backend.name)

    def _job(self, job: JobSpec, ranks: int, npus: list[int]) -> JobTraces:
        groups = load_comm_groups(job.comm_groups, ranks) if job.comm_groups else {}
        traces = read_workload(job.workload, ranks)
        return JobTraces(
            job.name,
            traces,
            groups,
            job_dims(job.dims, traces, job.name),
            npus,
            job.iterations,
            job.start_us,
        )

    def compose(self, jobs: list[JobTraces]) -> tuple[list, dict[str, tuple[int, ...]]]:
        """The per-NPU traces and communicator groups of ``jobs`` run together."""
        return compose(jobs, self.npus, self.group_ids, self.slow)

    def alone(self, index: int) -> AloneRun:
        """What job ``index``'s run alone keeps (:func:`_alone`)."""
        job = self.jobs[index]
        return _alone(self.simulate(*self.compose([job])), job)

    def simulate(self, traces: list, groups: dict[str, tuple[int, ...]]) -> Report:
        """One simulation of composed traces on the spec's network and backend."""
        spec = RunSpec(
            traces,
            self.system,
            self.network,
            topology=self.physical,
            comm_groups=groups,
            backend=self.backend.name,
            backend_config=self.spec.backend_config,
            faults=timed_faults(self.spec.faults),  # those for the whole run are in physical
        )
        return run(spec, plugin_manager=self.pm)

    def alone_key(self, job: JobTraces, spec: JobSpec) -> str:
        """The name of ``job``'s alone run in the cache (:mod:`.cache`), once the run of
        all jobs has composed its traces."""
        used = job.composed[1] if job.composed is not None else {}
        parts = {
            "npus": self.npus,
            # the files' bytes are hashed (run_digest), not where they are
            "cluster": self.spec.model_dump(
                exclude={
                    "jobs",
                    "compute_speed",
                    "stragglers",
                    "topology",
                    "network",
                    "system",
                    "backend_config",
                }
            ),
            "backend": self.backend.name,
            "job": {
                "groups": {k: list(v) for k, v in job.groups.items()},
                "dims": job.dims,
                "placement": job.placement,
                "iterations": job.iterations,
                "start_us": job.start_us,
                "communicators": sorted((k, list(v)) for k, v in used.items()),
                "speed": [self.slow.factor(n, i) for n in job.placement for i in range(job.iterations)]
                if self.slow is not None
                else None,
            },
        }
        inputs = {
            "workload": spec.workload,
            "system": spec.system or self.spec.system,
            "network": self.spec.network,
            "topology": self.spec.topology,
            "backend_config": self.spec.backend_config,
        }
        return self.digests.run({**inputs, **parts}, self.backend.packages)

    def _build(self) -> Any:
        """A backend of the spec's kind on its network (to ask what it can do)."""
        return self.backend.build(Topology(self.network, self.physical), self.spec.backend_config)

    def sharing_note(self) -> str | None:
        """One line when the backend does not model link sharing."""
        if shares_links(self._build()) is False:
            return (
                f"backend {self.backend.name} does not model link sharing: jobs cannot slow each other "
                "there (use flow, ns3, garnetlike or analytical-congestion)"
            )
        return None


def _ends(report: Report, job: JobTraces) -> tuple[tuple[float, ...], float]:
    """(each iteration's time, the last iteration's end) of ``job`` in ``report``."""
    start = job.start_us * 1000.0
    if job.iterations == 1:
        end = max(report.ranks[n].finish_ns for n in job.placement)
        return (end - start,), end
    timelines = timelines_by_rank(report)
    per_rank = [
        ends_on_rank(timelines[npu], len(job.traces[rank].nodes), job.iterations)
        for rank, npu in enumerate(job.placement)
    ]
    ends = [max(r[i] for r in per_rank) for i in range(job.iterations)]
    return tuple(e - (ends[i - 1] if i else start) for i, e in enumerate(ends)), ends[-1]


def simulate_cluster(
    spec: str | os.PathLike | ClusterFile,
    *,
    plugin_manager: Any = None,
    on_run: Callable[[str], None] | None = None,
    cache: bool = True,
    processes: int | None = None,
) -> ClusterResult:
    """Run the jobs of ``spec`` (a cluster spec file or a :class:`ClusterFile`) on one
    network, and each alone on its NPUs (module doc), or read its alone run from an
    earlier call with the same inputs (:mod:`.cache`; not with ``cache=False``).

    The runs alone go on beside the run of all jobs in up to ``processes`` processes in
    all (default: one per CPU this process may use; 1: one after the other in this
    process; :mod:`.processes`); results do not depend on it. ``on_run(what)`` is told
    of each run before they start (``"all 3 jobs together (run 1 of 4)"``). Raises
    ConfigError (one line naming the job and key) for a bad spec or ``processes`` < 1,
    and what :func:`astra.simulate` raises."""
    if not isinstance(spec, ClusterFile):
        spec = load_cluster_spec(spec)
    if processes is not None and (
        isinstance(processes, bool) or not isinstance(processes, int) or processes < 1
    ):
        raise ConfigError(f"processes: expected an integer >= 1, got {processes!r}")
    cluster = _Cluster(spec, plugin_manager)
    count = len(cluster.jobs)
    runs = 1 if count == 1 else count + 1
    composed = cluster.compose(cluster.jobs)  # before the keys: they name its communicators
    keys: dict[int, str | None] = {}
    kept: dict[int, AloneRun] = {}
    if count > 1:  # a job on its own is its run alone
        for i, (job, job_spec) in enumerate(zip(cluster.jobs, spec.jobs)):
            key = keys[i] = cluster.alone_key(job, job_spec) if cache else None
            found = None if key is None else load_alone(key)
            if found is not None:
                kept[i] = found
    todo = [i for i in keys if i not in kept]
    if on_run is not None:
        on_run(f"all {count} jobs together (run 1 of {runs})")
        for i in keys:
            what = f"job {cluster.jobs[i].name} alone (run {i + 2} of {runs})"
            on_run(what if i not in kept else f"{what}: kept from an earlier call")
    together, fresh = run_beside(
        lambda: cluster.simulate(*composed),
        cluster.alone,
        todo,
        available_processes() if processes is None else processes,
        lambda i: f"job {cluster.jobs[i].name} alone",
    )
    for i, alone in fresh.items():
        key = keys[i]
        if key is not None:
            store_alone(key, alone)
    alone_runs = {**kept, **fresh}
    results = []
    for i, job in enumerate(cluster.jobs):
        iteration_ns, end = _ends(together, job)
        alone_iteration_ns, alone_end, links = alone_runs[i] if count > 1 else _alone(together, job)
        results.append(
            JobResult(
                job.name,
                tuple(job.placement),
                job.start_us * 1000.0,
                iteration_ns,
                end,
                alone_iteration_ns,
                alone_end,
                links,
            )
        )
    # the combined run was given only the timed faults (the others are out of its topology)
    together = replace(together, faults=tuple(cluster.spec.faults))
    return ClusterResult(together.backend, results, together, cluster.sharing_note())


def _alone(report: Report, job: JobTraces) -> AloneRun:
    """What a cluster run keeps of ``job``'s run alone (``report``)."""
    iteration_ns, end = _ends(report, job)
    return iteration_ns, end, None if report.links is None else tuple(report.links.link_bytes)
