"""The cluster spec (YAML): one physical network, its backend, and the jobs placed on it.

::

    network: network.yml        # logical dimensions (with a topology: optional, or dims)
    topology: fabric.txt        # physical topology, ns-3 format (for flow, ns3, ...)
    dims: 8x16                  # logical dimensions of the topology (default: network.yml's)
    backend: flow               # network backend (default: plugins.toml's)
    backend_config: flow.toml   # the backend's own file (no output files: every run would
                                #   write them, ns3's monitor.output_dir refused)
    system: system.json         # every job's system.json unless the job gives its own
    compute_speed:              # NPUs slower than timed (astra_core/cluster/hardware.py)
      factors: {12: 0.8}        #   NPU 12 at 0.8x; or normal: {mean: 1, std: 0.05, seed: 3}
    stragglers: {fraction: 0.01, slowdown: [1.5, 3], seed: 7}  # per iteration
    faults:                     # cables of the topology file (astra_core/topology/faults.py)
      - {link: [64, 72], bandwidth: 0.5}   # both directions at half bandwidth
      - {link: [65, 73], down: true}       # gone: routes go round it
      - {link: [66, 74], down: true, at_us: 2000, until_us: 9000}  # during the run (flow,
                                           #   analytical-congestion)
    jobs:
      - name: llm-a
        workload: traces/gpt    # trace prefix: rank r reads traces/gpt.r.et
        comm_groups: traces/gpt.comm_groups.json  # default: this file when it exists
        dims: 8x4               # the logical dimensions its traces were made for
        placement: packed       # packed | spread | rail-aligned | random | [NPU ids]
        seed: 1                 # random placement's seed
        start_us: 0             # when its ranks start [us]
        iterations: 3           # the step run this many times back to back

Relative paths are relative to the spec file. :func:`load_cluster_spec` reads and
checks it (:class:`ClusterFile`, through :mod:`astra_core.config.model`): every
problem is one line naming the spec and the key, a job's keys named by the job
(``cluster.yaml: jobs[1] (llm-b): placement: ...``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from astra_core.cluster.hardware import ComputeSpeed, Stragglers
from astra_core.config.comm_groups import groups_beside
from astra_core.config.dims import Dims
from astra_core.config.files import read_yaml, source_name
from astra_core.config.issues import Problems
from astra_core.config.limits import MAX_INSTANT_US
from astra_core.config.model import ConfigModel, int_in, raise_problems, validate_mapping
from astra_core.errors import ConfigError
from astra_core.topology.faults import LinkFault

__all__ = ["POLICIES", "ClusterFile", "JobSpec", "load_cluster_spec", "spec_input_files"]

#: Placement policies (:mod:`astra_core.cluster.placement`).
POLICIES = ("packed", "spread", "rail-aligned", "random")


class JobSpec(ConfigModel):
    """One job of the cluster (module doc for the keys)."""

    name: str = Field(min_length=1)
    workload: str = Field(min_length=1)
    system: str | None = None
    comm_groups: str | None = None
    dims: Dims | None = None
    placement: str | list[Annotated[int, int_in(0)]] = "packed"
    seed: Annotated[int, int_in(0)] = 0
    start_us: Annotated[int, int_in(0, MAX_INSTANT_US)] = 0
    iterations: Annotated[int, int_in(1, 1_000_000)] = 1

    @model_validator(mode="after")
    def _known_policy(self) -> JobSpec:
        if isinstance(self.placement, str) and self.placement not in POLICIES:
            raise_problems(
                [
                    (
                        "placement",
                        f"expected one of {', '.join(POLICIES)} or a list of NPU ids, got {self.placement!r}",
                    )
                ]
            )
        if isinstance(self.placement, list) and not self.placement:
            raise_problems([("placement", "an NPU list must not be empty")])
        return self


class ClusterFile(ConfigModel):
    """The spec's keys (module doc)."""

    network: str | None = None
    topology: str | None = None
    dims: Dims | None = None
    backend: str | None = None
    backend_config: str | None = None
    system: str | None = None
    compute_speed: ComputeSpeed | None = None
    stragglers: Stragglers | None = None
    faults: list[LinkFault] = Field(default_factory=list)
    jobs: list[JobSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _whole(self) -> ClusterFile:
        problems: list[tuple[str | None, str]] = []
        if self.network is None and self.topology is None:
            problems.append((None, "give network (network.yml) or topology (a physical topology file)"))
        if self.faults and self.topology is None:
            problems.append(("faults", "faulty cables need a physical topology (topology)"))
        if self.dims is not None and self.topology is None:
            problems.append(("dims", "goes with topology; network.yml already has dimensions"))
        elif self.dims is not None and self.network is not None:
            problems.append(("dims", "give either network or dims with topology, not both"))
        names: dict[str, int] = {}
        for i, job in enumerate(self.jobs):
            if job.name in names:
                problems.append(
                    (f"jobs[{i}] ({job.name})", f"name: also the name of jobs[{names[job.name]}]")
                )
            names.setdefault(job.name, i)
            if job.system is None and self.system is None:
                problems.append(
                    (f"jobs[{i}] ({job.name})", "system: no system.json for this job (nor a default)")
                )
        raise_problems(problems)
        return self


def _resolve(path: str | None, directory: Path) -> str | None:
    """``path`` relative to the spec's directory (None stays None)."""
    if path is None:
        return None
    return str(Path(path) if os.path.isabs(path) else directory / path)


def _name_jobs(message: str, data: Any) -> str:
    """``jobs[1].placement`` -> ``jobs[1] (llm-b): placement`` where job 1 has a name."""
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list):
        return message

    def named(match: re.Match) -> str:
        i = int(match.group(1))
        job = jobs[i] if i < len(jobs) else None
        name = job.get("name") if isinstance(job, dict) else None
        if not (isinstance(name, str) and name):
            return match.group(0)
        return f"jobs[{i}] ({name})" + (": " if match.group(2) else "")

    return re.sub(r"jobs\[(\d+)\](\.)?(?! \()", named, message)


def load_cluster_spec(path: str | os.PathLike) -> ClusterFile:
    """Read and check a cluster spec; its paths made relative to its directory.

    Raises ConfigError: one line per problem, naming the spec and the key.
    """
    source = source_name(path)
    problems = Problems(source)
    data = read_yaml(path, problems, aliases=False)
    problems.raise_if_any()
    try:
        spec = validate_mapping(ClusterFile, data, source)
    except ConfigError as exc:
        raise ConfigError(_name_jobs(str(exc), data)) from None
    directory = Path(path).resolve().parent
    update: dict[str, Any] = {
        key: _resolve(getattr(spec, key), directory)
        for key in ("network", "topology", "backend_config", "system")
    }
    jobs = []
    for job in spec.jobs:
        paths = {key: _resolve(getattr(job, key), directory) for key in ("workload", "system", "comm_groups")}
        paths["comm_groups"] = paths["comm_groups"] or groups_beside(paths["workload"])
        jobs.append(job.model_copy(update=paths))
    resolved = spec.model_copy(update={**update, "jobs": jobs})
    resolved._source = source
    return resolved


def spec_input_files(spec: ClusterFile) -> dict[str, Iterator[str]]:
    """Every file a run of ``spec`` (loaded: its paths resolved) reads besides the spec,
    by what names it (``"network"``, ``"jobs[0] (a) workload"``, ``"system's
    nccl.profile"``, ...); each listed lazily (a job's traces are its existing
    ``PREFIX.<rank>.et`` files). For :func:`astra_core.outputs.check_not_input` and the
    cache of alone runs, whose keys cover every byte a result depends on."""
    from astra_core.system.input_files import system_named_files
    from astra_core.workload.chakra import rank_trace_files

    def one(path: str | None) -> Iterator[str]:
        if path is not None:
            yield path

    def named(system: str | None) -> Iterator[str]:
        if system is not None:
            yield from (path for _, path in system_named_files(system))

    def traces(prefix: str) -> Iterator[str]:
        yield from rank_trace_files(prefix).values()

    out: dict[str, Iterator[str]] = {
        key.replace("_", "-"): one(getattr(spec, key))
        for key in ("network", "topology", "backend_config", "system")
    }
    out["system: a file it names"] = named(spec.system)
    for i, job in enumerate(spec.jobs):
        label = f"jobs[{i}] ({job.name})"
        out[f"{label} workload"] = traces(job.workload)
        out[f"{label} comm_groups"] = one(job.comm_groups)
        out[f"{label} system"] = one(job.system)
        out[f"{label} system: a file it names"] = named(job.system)
    return out
