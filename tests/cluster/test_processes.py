"""The runs alone beside the run of all jobs, in worker processes (astra_core.cluster.processes)."""

from __future__ import annotations

import os

import pytest

import astra
from astra_core.cluster import processes
from astra_core.cluster import run as cluster_run
from astra_core.errors import AstraError, ConfigError


def _results(result):
    return [
        (j.iteration_ns, j.alone_iteration_ns, j.alone_end_ns, j.link_bytes, j.slowdown) for j in result.jobs
    ]


def test_the_runs_alone_give_the_same_results_in_any_number_of_processes(cluster):
    jobs = [{"name": n, "placement": "spread"} for n in "ab"]
    spec = cluster(jobs)
    here = astra.simulate_cluster(spec, cache=False, processes=1)
    beside = astra.simulate_cluster(spec, cache=False, processes=3)
    assert _results(beside) == _results(here)
    assert beside.jobs[0].slowdown > 1.0  # they share the spines: the runs alone differ from together


def test_a_worker_that_dies_is_one_error_naming_its_job(cluster, monkeypatch):
    parent = os.getpid()
    original = cluster_run._Cluster.alone

    def dies_in_a_worker(self, index):
        if os.getpid() != parent:
            os._exit(9)
        return original(self, index)

    monkeypatch.setattr(cluster_run._Cluster, "alone", dies_in_a_worker)
    monkeypatch.setattr(processes, "_take_unstarted", lambda *args: {})  # every run alone in the worker
    spec = cluster([{"name": n, "placement": "spread"} for n in "ab"])
    with pytest.raises(AstraError) as info:
        astra.simulate_cluster(spec, cache=False, processes=2)
    assert str(info.value).startswith("job a alone: the process simulating it died")


@pytest.mark.parametrize("count", [0, -1, 1.5, True])
def test_processes_must_be_a_positive_integer(cluster, count):
    with pytest.raises(ConfigError, match="processes: expected an integer >= 1"):
        astra.simulate_cluster(cluster([{"name": "a"}]), processes=count)
