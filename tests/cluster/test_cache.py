"""Alone runs kept between calls (astra_core.cluster.cache): read back exactly, and run
again whenever anything they depend on changes."""

from __future__ import annotations

import json

import pytest

import astra
from astra_core.cluster import run as cluster_run
from astra_core.workload.generators.micro import write_micro
from tests.conftest import write_nccl_system


@pytest.fixture
def runs(monkeypatch):
    """The jobs simulated alone, by name, in order (the run of all jobs is not counted);
    every run in this process, so that it can count them."""
    done: list[str] = []
    original = cluster_run._Cluster.alone

    def counted(self, index):
        done.append(self.jobs[index].name)
        return original(self, index)

    monkeypatch.setattr(cluster_run._Cluster, "alone", counted)
    monkeypatch.setattr(cluster_run, "available_processes", lambda: 1)
    return done


def _results(result):
    return [
        (j.alone_iteration_ns, j.alone_end_ns, j.link_bytes, j.iteration_ns, j.slowdown) for j in result.jobs
    ]


def test_a_second_call_reads_the_alone_runs(cluster, runs, alone_cache):
    spec = cluster(
        [{"name": "a", "placement": "spread"}, {"name": "b", "placement": "spread", "iterations": 2}]
    )
    first = astra.simulate_cluster(spec)
    assert runs == ["a", "b"] and len(list(alone_cache.glob("*.json"))) == 2
    told: list[str] = []
    second = astra.simulate_cluster(spec, on_run=told.append)
    assert runs == ["a", "b"]  # nothing simulated alone again
    assert _results(second) == _results(first)  # to the last bit, link bytes included
    assert told[1:] == [
        "job a alone (run 2 of 3): kept from an earlier call",
        "job b alone (run 3 of 3): kept from an earlier call",
    ]
    astra.simulate_cluster(spec, cache=False)
    assert runs == ["a", "b", "a", "b"]


def test_what_a_job_alone_depends_on_runs_it_again(tmp_path, cluster, runs):
    astra.simulate_cluster(cluster([{"name": "a"}, {"name": "b"}]))
    assert runs == ["a", "b"]
    # b moves to other NPUs: only b runs again (a's alone run does not see b)
    astra.simulate_cluster(cluster([{"name": "a"}, {"name": "b", "placement": list(range(8, 16))[::-1]}]))
    assert runs == ["a", "b", "b"]
    # the traces change (same names, other bytes): both run again
    write_micro("all-to-all", 2 << 20, 8, tmp_path / "a2a")
    astra.simulate_cluster(cluster([{"name": "a"}, {"name": "b"}]))
    assert runs == ["a", "b", "b", "a", "b"]
    # another backend setting
    (tmp_path / "flow.json").write_text(json.dumps({"reallocation_delay_ns": 0}))
    astra.simulate_cluster(cluster([{"name": "a"}, {"name": "b"}], backend_config="flow.json"))
    assert runs[-2:] == ["a", "b"] and len(runs) == 7


def test_an_unreadable_entry_is_simulated_again(cluster, runs, alone_cache):
    spec = cluster([{"name": "a"}, {"name": "b"}])
    first = astra.simulate_cluster(spec)
    for entry in alone_cache.glob("*.json"):
        entry.write_text("{not json")
    second = astra.simulate_cluster(spec)
    assert runs == ["a", "b", "a", "b"] and _results(second) == _results(first)


def test_the_same_files_elsewhere_are_the_same_runs(tmp_path, cluster, runs):
    spec = cluster([{"name": "a"}, {"name": "b"}])
    first = astra.simulate_cluster(spec)
    moved = tmp_path / "moved"
    moved.mkdir()
    for path in tmp_path.iterdir():
        if path.is_file():
            (moved / path.name).write_bytes(path.read_bytes())
    second = astra.simulate_cluster(moved / spec.name)
    assert runs == ["a", "b"] and _results(second) == _results(first)


def test_a_file_the_system_names_is_part_of_what_a_job_alone_depends_on(tmp_path, cluster, runs):
    # A key of system.json's bytes without the NCCL profile it names would, after the
    # profile changed, read the alone runs back, and two jobs that share nothing would
    # report a slowdown far from 1.
    profile = write_nccl_system(tmp_path / "system.json", tmp_path, gpus_per_node=4)
    spec = cluster([{"name": "a"}, {"name": "b"}], system="nccl-system.json")
    astra.simulate_cluster(spec)
    profile.write_text(json.dumps({"format": "astra-nccl-profile/1", "launch-us": 500.0}))
    second = astra.simulate_cluster(spec)
    assert runs == ["a", "b", "a", "b"]
    assert [round(job.slowdown, 3) for job in second.jobs] == [1.0, 1.0]


def test_an_entry_with_nan_or_negative_times_is_simulated_again(cluster, runs, alone_cache):
    spec = cluster([{"name": "a"}, {"name": "b"}])
    first = astra.simulate_cluster(spec)
    for entry, value in zip(sorted(alone_cache.glob("*.json")), ("NaN", "-1.0"), strict=True):
        data = json.loads(entry.read_text())
        entry.write_text(json.dumps(data).replace(str(data["end_ns"]), value))
    second = astra.simulate_cluster(spec)
    assert runs == ["a", "b", "a", "b"] and _results(second) == _results(first)
