"""Several jobs on one network: a job alone is its plain run, jobs on disjoint links do not
slow each other, jobs sharing a bottleneck both slow down, and bytes are conserved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import astra
from astra_core.cli import main
from astra_core.workload.generators.micro import write_micro

SYSTEM = Path(__file__).parents[1] / "data" / "reference" / "system" / "ring_1d.json"


def test_a_job_on_every_npu_is_its_plain_run(tmp_path, cluster):
    write_micro("all-reduce", 8 << 20, 16, tmp_path / "ar")
    spec = cluster([{"name": "solo", "workload": "ar", "iterations": 2}])
    result = astra.simulate_cluster(spec)
    plain = astra.simulate(
        str(tmp_path / "ar"),
        tmp_path / "system.json",
        topology=tmp_path / "fabric.txt",
        dims=[4, 4],
        backend="flow",
        iterations=2,
    )
    job = result.jobs[0]
    assert job.iteration_ns == plain.iterations.step_ns
    assert job.end_ns == plain.step_ns
    assert [r.finish_ns for r in result.report.ranks] == [r.finish_ns for r in plain.ranks]
    assert job.slowdown == 1.0


def test_jobs_on_disjoint_links_do_not_slow_each_other(cluster):
    # packed: job a on leaves 0-1, job b on leaves 2-3; no link carries both
    result = astra.simulate_cluster(cluster([{"name": "a"}, {"name": "b", "iterations": 2}]))
    a, b = result.jobs
    assert a.npus == tuple(range(8)) and b.npus == tuple(range(8, 16))
    assert a.iteration_ns == a.alone_iteration_ns and b.iteration_ns == b.alone_iteration_ns
    assert a.slowdown == b.slowdown == 1.0
    assert result.note is None


def test_disjoint_jobs_keep_their_times_whenever_their_flows_start_and_stop(tmp_path):
    # examples/multi_job packed: two LLM jobs on their own leaves, their flows starting
    # and stopping at many instants; on the flow backend's reallocation delay, one job's
    # flow starts and stops may not move when the other's freed bandwidth is taken up
    # (equal to the ns, iteration by iteration)
    import importlib.util

    path = Path(__file__).parents[2] / "examples" / "multi_job" / "run.py"
    module_spec = importlib.util.spec_from_file_location("multi_job_run", path)
    example = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(example)
    (tmp_path / "traces").mkdir()
    example.prepare(tmp_path)
    result = astra.simulate_cluster(example.spec(tmp_path, "packed"))
    for job in result.jobs:
        assert job.iteration_ns == job.alone_iteration_ns and job.slowdown == 1.0, job


def test_jobs_sharing_the_spine_both_slow_down_and_links_carry_the_sum_of_their_bytes(cluster):
    result = astra.simulate_cluster(
        cluster([{"name": "a", "placement": "spread"}, {"name": "b", "placement": "spread"}])
    )
    for job in result.jobs:
        assert job.slowdown > 1.2, job
        assert job.jct_ns > job.alone_end_ns
    # the same messages over the same routes, together or alone: per link, the bytes add up
    total = result.report.links.link_bytes
    a, b = (job.link_bytes for job in result.jobs)
    assert any(x and y for x, y in zip(a, b))  # some link carries both jobs
    assert list(total) == pytest.approx([x + y for x, y in zip(a, b)])


def test_a_later_start_is_measured_from_the_job_s_start(cluster):
    result = astra.simulate_cluster(cluster([{"name": "a"}, {"name": "b", "start_us": 500}]))
    a, b = result.jobs
    assert b.start_ns == 500_000 and b.end_ns > 500_000
    assert b.jct_ns == a.jct_ns  # the same job on a mirror-image place, never sharing a link


def test_a_backend_without_link_sharing_says_jobs_cannot_interfere(cluster):
    result = astra.simulate_cluster(
        cluster(
            [{"name": "a", "placement": "spread"}, {"name": "b", "placement": "spread"}], backend="analytical"
        )
    )
    assert "does not model link sharing: jobs cannot slow each other" in result.note
    assert [j.slowdown for j in result.jobs] == [1.0, 1.0]


@pytest.mark.parametrize(
    "jobs, message",
    [
        (
            [
                {"name": "a", "placement": [0, 1, 2, 3, 4, 5, 6, 7]},
                {"name": "b", "placement": [7, 8, 9, 10, 11, 12, 13, 14]},
            ],
            "job b: placement: NPU 7 is also placed for job a",
        ),
        (
            [{"name": "a"}, {"name": "b"}, {"name": "c"}],
            "job c: placement: 8 ranks, but only 0 of the cluster's 16 NPUs are free",
        ),
        ([{"name": "a", "dims": "3x3"}], "job a: dims 3x3 do not multiply to its 8 ranks"),
        (
            [{"name": "a", "placement": "tight"}],
            "cluster.yaml: jobs[0] (a): placement: expected one of packed, spread",
        ),
        ([{"name": "a", "placement": [0, 1, 2]}], "job a: placement: lists 3 NPUs for its 8 ranks"),
        ([{"name": "a", "workload": "nothing"}], "job a: workload: no trace files"),
        # a later start rounded the job's own times away (a 0.000 ms job)
        (
            [{"name": "a", "start_us": 9 * 10**18}],
            "jobs[0] (a): start_us: must be <= 9,007,199,254,740, got 9000000000000000000",
        ),
    ],
)
def test_bad_specs_are_one_line_errors_naming_the_job(cluster, jobs, message):
    out = CliRunner().invoke(main, ["cluster", str(cluster(jobs))])
    assert out.exit_code == 1, out.output
    lines = [line for line in out.output.splitlines() if line]
    assert len(lines) == 1 and message in lines[0], out.output


def test_the_cli_prints_each_job_and_writes_json(cluster, tmp_path):
    spec = cluster(
        [{"name": "a", "placement": "spread"}, {"name": "b", "placement": "spread", "iterations": 2}]
    )
    out = CliRunner().invoke(main, ["cluster", str(spec), "--json", str(tmp_path / "r.json")])
    assert out.exit_code == 0, out.output
    assert "slowdown" in out.output and "│ b " in out.output
    for line in ("all 2 jobs together (run 1 of 3)", "job a alone (run 2 of 3)", "job b alone (run 3 of 3)"):
        assert f"simulating {line}" in out.output
    data = json.loads((tmp_path / "r.json").read_text())
    assert [j["name"] for j in data["jobs"]] == ["a", "b"]
    assert len(data["jobs"][1]["iteration_ns"]) == 2
    link = next(entry for entry in data["links"] if all(entry["bytes_by_job"].values()))
    assert link["bytes"] == pytest.approx(sum(link["bytes_by_job"].values()), abs=2)


def test_plots_show_the_jobs_and_the_links_bytes_by_job(cluster, tmp_path):
    spec = cluster([{"name": "a", "placement": "spread"}, {"name": "b", "placement": "spread"}])
    out = CliRunner().invoke(main, ["cluster", str(spec), "--plots", str(tmp_path / "plots")])
    assert out.exit_code == 0, out.output
    for name in ("jobs.png", "links.png"):
        assert (tmp_path / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "file").write_text("")
    bad = CliRunner().invoke(main, ["cluster", str(spec), "--plots", str(tmp_path / "file")])
    assert bad.exit_code == 1 and "--plots" in bad.output and "not a directory" in bad.output


@pytest.mark.parametrize("peer", [-1, 2])
def test_a_send_to_a_rank_the_job_does_not_have_is_one_line(tmp_path, cluster, peer):
    # Rank -1 must not run as the job's last rank (a list index), nor rank 2 be a traceback.
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    for rank in range(2):
        other = peer if rank == 0 else 0
        kind = pb.COMM_SEND_NODE if rank == 0 else pb.COMM_RECV_NODE
        src, dst = (rank, other) if rank == 0 else (other, rank)
        write_rank_trace(
            tmp_path / f"p2p.{rank}.et",
            [make_node(1, "x", kind, comm_src=src, comm_dst=dst, comm_tag=0, comm_size=1024)],
        )
    out = CliRunner().invoke(main, ["cluster", str(cluster([{"name": "p", "workload": "p2p"}]))])
    assert out.exit_code == 1, out.output
    assert out.output.strip().splitlines() == [
        f"error: job p: rank 0's send node 1 (x) names rank {peer}, but the job has ranks 0..1"
    ]


def test_iterations_whose_copies_would_not_fit_are_refused_before_the_run(cluster, monkeypatch):
    # Not a million iterations running for minutes and ending in a MemoryError.
    from astra_core.system import memory_guard

    monkeypatch.setattr(memory_guard, "available_bytes", lambda: 8 << 30)  # a machine with 8 GiB free
    out = CliRunner().invoke(main, ["cluster", str(cluster([{"name": "a", "iterations": 1_000_000}]))])
    assert out.exit_code == 1, out.output
    assert out.output.strip().splitlines() == [
        "error: job a: iterations 1000000: 9,000,000 trace nodes to hold (about 8.6 GiB at 1024 bytes "
        "a node), more than the 8.0 GiB this machine has available; run fewer iterations"
    ]  # a node per rank: each of the 8 ranks' copies, and the one they share before it is mapped


def test_a_job_reads_the_comm_groups_beside_its_traces(tmp_path, cluster):
    """A job without comm_groups reads PREFIX.comm_groups.json beside its traces (as gen
    llm writes it; the job stopped at its first sub-group): the same run as naming it."""
    from astra_core.workload.generators.gpus import GPUS
    from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm
    from astra_core.workload.generators.models import ModelConfig

    model = ModelConfig("tiny", layers=2, hidden=256, heads=4, ffn_hidden=1024, vocab=0, seq_len=256)
    cfg = LLMConfig(model, GPUS["h100"], dp=2, tp=2, pp=2, microbatches=2)
    _, groups = write_llm(generate_llm(cfg), tmp_path / "llm")
    assert groups is not None and groups.is_file()
    beside = astra.simulate_cluster(cluster([{"name": "llm", "workload": "llm", "dims": "8"}]), cache=False)
    named = astra.simulate_cluster(
        cluster([{"name": "llm", "workload": "llm", "dims": "8", "comm_groups": str(groups)}]), cache=False
    )
    assert beside.jobs[0].iteration_ns == named.jobs[0].iteration_ns and beside.jobs[0].iteration_ns[0] > 0
