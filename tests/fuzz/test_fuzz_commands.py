"""Fuzz the newest commands as a user or a script drives them: ``astra cluster`` specs
(jobs, placement, start times, iterations, stragglers, compute speeds, faults) and
``astra gen llm`` options. Each gives a result with sane numbers, or one error line
naming the input; never a traceback, a hang, or a run that outgrows the machine."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from astra_core.cli import main
from astra_core.cluster.run import simulate_cluster
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.writer import make_node, write_rank_trace
from tests.fuzz.budget import answer_or_one_line_error, fuzz_settings, wall_limit
from tests.fuzz.strategies import mutated, nasty_scalars, nasty_values

SYSTEM = Path(__file__).parents[1] / "data" / "reference" / "system" / "ring_1d.json"
CORPUS = Path(__file__).parent / "corpus" / "cluster"

#: The cluster spec's keys, and a job's (astra_core/cluster/spec.py).
CLUSTER_KEYS = ["network", "dims", "backend", "system", "compute_speed", "stragglers", "faults", "jobs"]
JOB_KEYS = [
    "name",
    "workload",
    "system",
    "comm_groups",
    "dims",
    "placement",
    "seed",
    "start_us",
    "iterations",
]

#: Values a user's spec plausibly holds for the keys whose types are structured.
_structured = st.one_of(
    st.fixed_dictionaries({"fraction": nasty_scalars, "slowdown": nasty_values, "seed": nasty_scalars}),
    st.fixed_dictionaries({"factors": st.dictionaries(nasty_scalars, nasty_scalars, max_size=3)}),
    st.fixed_dictionaries({"normal": st.fixed_dictionaries({"mean": nasty_scalars, "std": nasty_scalars})}),
    st.lists(
        st.fixed_dictionaries(
            {"link": st.lists(nasty_scalars, max_size=3)},
            optional={"down": nasty_scalars, "bandwidth": nasty_scalars, "at_us": nasty_scalars},
        ),
        max_size=2,
    ),
    st.sampled_from(["4x2", "-4x-4", "2x2x2", "0x8", "8", "4,2", "x", "99999999999999999999x1"]),
    st.sampled_from(
        ["packed", "spread", "rail-aligned", "random", [0, 1, 2, 3], [7, 7, 7, 7], [-1, 0, 1, 2]]
    ),
)
_values = st.one_of(nasty_values, _structured)


@pytest.fixture(scope="module")
def cluster_folder(tmp_path_factory) -> Path:
    """8 NPUs on one switch; a 4-rank job: 100 us of compute, then a 1 MiB all-reduce."""
    folder = tmp_path_factory.mktemp("cluster")
    (folder / "network.yml").write_text(
        "topology: [Switch]\nnpus_count: [8]\nbandwidth: [50]\nlatency: [500]\n"
    )
    for rank in range(4):
        write_rank_trace(
            folder / f"job.{rank}.et",
            [
                make_node(1, "c", pb.COMP_NODE, duration_micros=100),
                make_node(
                    2, "ar", pb.COMM_COLL_NODE, data_deps=[1], comm_type=pb.ALL_REDUCE, comm_size=1 << 20
                ),
            ],
        )
    return folder


@st.composite
def cluster_specs(draw) -> dict:
    """A two-job spec with some keys of the spec and of its jobs mangled."""
    base_job = {"name": "a", "workload": "job", "iterations": 1}
    jobs = [
        draw(mutated(base_job, JOB_KEYS)) if draw(st.booleans()) else dict(base_job),
        {"name": "b", "workload": "job"},
    ]
    spec = {"network": "network.yml", "system": str(SYSTEM), "backend": "analytical", "jobs": jobs}
    edits = draw(st.lists(st.tuples(st.sampled_from(CLUSTER_KEYS), _values), max_size=2))
    for key, value in edits:
        spec[key] = value
    return spec


def _run_spec(folder: Path, spec: dict, name: str = "cluster.yaml") -> None:
    path = folder / name
    path.write_text(yaml.safe_dump(spec, allow_unicode=True))
    result = answer_or_one_line_error(simulate_cluster, path, cache=False, processes=1, limit_s=30)
    if result is not None:
        for job in result.jobs:
            times = [*job.iteration_ns, *job.alone_iteration_ns, job.start_ns, job.end_ns, job.slowdown]
            assert all(math.isfinite(t) and t >= 0 for t in times), job
            assert job.end_ns >= job.start_ns + sum(job.iteration_ns) - 1e-6, job


@fuzz_settings(60)
@given(spec=cluster_specs())
def test_cluster_specs(cluster_folder, spec):
    """Whatever a spec holds: jobs that run with finite times, or one error line per problem."""
    _run_spec(cluster_folder, spec)


@pytest.mark.parametrize("case", sorted(CORPUS.glob("*.yaml")), ids=lambda p: p.stem)
def test_cluster_corpus(cluster_folder, case):
    """Specs that must give neither a traceback nor a wrong answer (``# expect:`` names the
    one line they must give; without it, they must run)."""
    text = case.read_text()
    spec = yaml.safe_load(text)
    spec.setdefault("system", str(SYSTEM))
    expected = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("# expect:")]
    path = cluster_folder / f"{case.stem}.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = CliRunner().invoke(main, ["cluster", str(path), "--no-cache", "--processes", "1"])
    if expected:
        assert out.exit_code == 1, out.output
        assert out.output.strip() == f"error: {path}: {expected[0]}"
    else:
        assert out.exit_code == 0, out.output


#: gen llm's numeric options, and how a user gets them wrong.
_GEN_OPTIONS = ["--dp", "--tp", "--pp", "--cp", "--ep", "--microbatches", "--micro-batch", "--global-batch"]
_option_values = st.one_of(
    st.integers(min_value=1, max_value=8),
    st.sampled_from([0, -1, 3, 7, 2**20 + 1, 2**31, 10**30]),
    st.sampled_from(["1.5", "nan", "", "8x", "1e3"]),
)


@fuzz_settings(40)
@given(options=st.dictionaries(st.sampled_from(_GEN_OPTIONS), _option_values, max_size=4))
def test_gen_llm_options(tmp_path_factory, options):
    """Any mix of plan sizes: traces written, or one line saying what is wrong (click's
    usage errors included), within seconds (no plan may run for minutes in silence)."""
    folder = tmp_path_factory.mktemp("gen")
    argv = ["gen", "llm", "--model", "llama3-8b", "--output", str(folder / "l")]
    for option, value in options.items():
        argv += [option, str(value)]
    with wall_limit(60):
        out = CliRunner().invoke(main, argv)
    assert out.exception is None or isinstance(out.exception, SystemExit), repr(out.exception)
    errors = [line for line in out.output.splitlines() if line.startswith(("error:", "Error:"))]
    if out.exit_code:
        assert len(errors) == 1, out.output
    else:
        assert not errors and (folder / "l.0.et").is_file(), out.output


REPO = Path(__file__).resolve().parents[2]
NCCL_PRESET = REPO / "examples" / "validation" / "hgx_h100_4nodes"
_LOG_HEADER = [
    "# nccl-tests version 2.17.9 nccl-headers=23007 nccl-library=23007",
    "# Collective test starting: all_reduce_perf",
    *(
        f"#  Rank {r:2d} Group  0 Pid {100 + r} on a device {r} [0x1b] NVIDIA H100 80GB HBM3"
        for r in range(8)
    ),
]
_time = st.one_of(
    st.floats(min_value=1e-3, max_value=1e5),
    st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e30", "1e-30", "x", "", "N/A"]),
)
_size = st.one_of(st.sampled_from([0, 8, 1024, 1 << 20, 1 << 30, 2**40]), st.integers(-5, 1 << 31))
_row = st.tuples(_size, _time, _time).map(
    lambda r: f"{r[0]:>12} {max(r[0], 0) // 4:>12} float sum -1 {r[1]} 0.00 0.00 0 {r[2]} 0.00 0.00 0"
)


@fuzz_settings(40)
@given(rows=st.lists(st.one_of(_row, st.text(max_size=40)), max_size=6), header=st.booleans())
def test_calibrate_nccl_logs(tmp_path_factory, rows, header):
    """Any nccl-tests log, mangled or absurd: a profile, or one error line naming the log;
    whatever is written is a profile the run can read."""
    folder = tmp_path_factory.mktemp("log")
    log, out = folder / "ar.txt", folder / "profile.json"
    log.write_text("\n".join((_LOG_HEADER if header else []) + rows) + "\n")
    argv = ["calibrate", "nccl", str(log), "-o", str(out)]
    argv += ["--system", str(NCCL_PRESET / "system.json"), "--network", str(NCCL_PRESET / "network.yml")]
    with wall_limit(60):
        result = CliRunner().invoke(main, argv)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    if result.exit_code:
        assert len(errors) == 1 and str(log) in errors[0], result.output
        assert not out.exists()
    else:
        from astra_core.config.nccl_profile import read_profile

        assert read_profile(out).bw_efficiency is not None
