"""Sweeps: the spec, the results table, failing points, resuming, the process pool and Ray.

The design points run a two-rank trace whose step time has a closed form:
rank 0 computes 5 µs and sends S = 1 MiB to rank 1, which receives it and
computes 3 µs. On one Ring dimension of 2 NPUs with bandwidth B GB/s (1 GB =
2^30 B) and latency L ns, the message takes int(L + S / (B * 2^30 / 1e9)) ns
(upstream's analytical model truncates to whole ns), so

    step_ns = 5000 + int(L + 2^20 * 1e9 / (B * 2^30)) + 3000

on ``analytical`` and on the ``ideal`` example backend alike (a lone message;
see examples/plugin_backend).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import struct
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

import astra
from astra_core.cli import main
from astra_core.errors import AstraError, ConfigError
from astra_core.sweep import load_spec, run_sweep
from astra_core.sweep.point import METRICS
from tests.conftest import isolate_plugins, write_nccl_system, write_pair_trace

REPO = Path(__file__).resolve().parents[2]
SYSTEM = REPO / "examples" / "resnet50_dp" / "system.json"
MIB = 1 << 20
BANDWIDTHS = [12.5, 25.0, 50.0, 100.0]
LATENCIES = [0.0, 500.0, 1000.0]
BACKENDS = ["analytical", "ideal"]


def closed_form_step_ns(bandwidth_gbps: float, latency_ns: float) -> int:
    return 5000 + int(latency_ns + MIB * 1e9 / (bandwidth_gbps * 2**30)) + 3000


@pytest.fixture(autouse=True)
def _plugins(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)


def write_pair(directory: Path) -> None:
    (directory / "trace").mkdir(exist_ok=True)
    write_pair_trace(directory / "trace" / "pair", nbytes=MIB, tag=9, fwd_us=5, bwd_us=3)
    (directory / "network.yml").write_text(
        "topology: [Ring]\nnpus_count: [2]\nbandwidth: [50.0]\nlatency: [500.0]\n"
    )


def write_spec(directory: Path, **spec) -> Path:
    """A spec in ``directory`` over the pair trace (relative paths, as a user writes them)."""
    write_pair(directory)
    data = {"base": {"workload": "trace/pair", "system": str(SYSTEM), "network": "network.yml"}}
    data.update(spec)
    path = directory / "sweep.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


GRID = {"network.bandwidth[0]": BANDWIDTHS, "network.latency[0]": LATENCIES}


# -- the spec ------------------------------------------------------------------------------


def test_grid_is_the_product_in_order_and_points_multiply_it(tmp_path):
    spec = load_spec(write_spec(tmp_path, points=[{"backend": b} for b in BACKENDS], grid=GRID))
    assert spec.parameters == ["backend", "network.bandwidth[0]", "network.latency[0]"]
    assert len(spec.points) == len(BACKENDS) * len(BANDWIDTHS) * len(LATENCIES) == 24
    assert spec.points[0] == {
        "backend": "analytical",
        "network.bandwidth[0]": 12.5,
        "network.latency[0]": 0.0,
    }
    assert spec.points[1] == {
        "backend": "analytical",
        "network.bandwidth[0]": 12.5,
        "network.latency[0]": 500.0,
    }  # last grid key fastest
    assert spec.points[-1] == {
        "backend": "ideal",
        "network.bandwidth[0]": 100.0,
        "network.latency[0]": 1000.0,
    }
    assert spec.x == "network.bandwidth[0]" and spec.metric == "step_ns"
    assert spec.output == tmp_path / "sweep-results"
    assert spec.base["workload"] == "trace/pair"


def test_every_spec_problem_is_reported_at_once_naming_the_file(tmp_path):
    path = write_spec(
        tmp_path,
        grid={"network.bandwidth[0]": [], "network.bandwith": [1], "sytem.foo": [1], "colour": [1]},
        points=[{"backend": "analytical", "latency": 3}],
        metric="step_ns",
        outptu="x",
    )
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    # pydantic's order: the keys in the spec's field order, then the unknown ones.
    assert str(err.value).splitlines() == [
        f"{path}: grid: network.bandwidth[0]: expected a non-empty list of values, got []",
        f"{path}: grid: network.bandwith: network config has no key 'bandwith'; did you mean "
        "network.bandwidth?",
        f"{path}: grid: sytem.foo: only system, network, memory, backend_config have keys inside them",
        f"{path}: grid: colour: unknown run key (known: workload, system, network, topology, "
        "dims, memory, comm_groups, backend, backend_config, symmetry, background, iterations, faults)",
        f"{path}: points[0]: latency: unknown run key (known: workload, system, network, "
        "topology, dims, memory, comm_groups, backend, backend_config, symmetry, background, iterations, faults)",
        f"{path}: unknown key 'outptu'; did you mean 'output'?",
    ]


def test_the_spec_itself_must_be_valid_before_its_files_are_checked(tmp_path):
    path = write_spec(
        tmp_path,
        base={"workload": "trace/pair", "netwrk": "network.yml", "dims": "2"},
        points=[{"workload": "trace/nope"}],
        metric=3,
        x="backend",
    )
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert str(err.value).splitlines() == [
        f"{path}: base: missing required key 'system'",
        f"{path}: base: unknown key 'netwrk'; did you mean 'network'?",
        f"{path}: metric: expected a results column name, got 3",
    ]
    path = write_spec(tmp_path, points=[{"workload": "trace/nope"}], x="backend")
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert str(err.value) == f"{path}: x: 'backend' is not a swept parameter (workload)"


def test_the_files_keys_list_entries_backends_and_metric_a_spec_names_are_checked_first(tmp_path):
    # Every problem that would fail points (or the plot) at run time, in one error per
    # round (the spec's own, then the files and backends it names), each line naming
    # the spec key at fault; nothing runs.
    grid = {
        "network.latency[3]": [1.0],
        "system.all-reduce-implementation[0]": ["ring"],
        "system.preferred-dataset-splits[0]": [2],
        "memory.remote-mem-bw": [5],
        "system.collective-optimisation": ["baseline"],
    }
    points = [
        {"backend": "analyticl"},
        {"network": "missing.yml", "backend": "analytical"},
        {"workload": "trace/nope"},
    ]
    path = write_spec(tmp_path, grid=grid, points=points, metric="step_time", output="out")
    with pytest.raises(ConfigError) as err:
        run_sweep(path, workers=1)
    assert str(err.value).splitlines() == [
        f"{path}: grid: system.collective-optimisation: system config "
        "has no key 'collective-optimisation'; did you mean "
        "system.collective-optimization?",
        f"{path}: metric: 'step_time' is not a numeric results column; did you mean 'step_ns'?",
    ]
    del grid["system.collective-optimisation"]
    path = write_spec(tmp_path, grid=grid, points=points, output="out")
    with pytest.raises(ConfigError) as err:
        run_sweep(path, workers=1)
    network, system = tmp_path / "network.yml", SYSTEM
    lines = str(err.value).splitlines()
    assert lines[:-1] == [
        f"{path}: grid: network.latency[3]: {network}: latency[3]: out of range (1 entries)",
        f"{path}: grid: system.preferred-dataset-splits[0]: {system}: preferred-dataset-splits: "
        "is not a list, so [0] cannot be swept",
        f"{path}: grid: memory.remote-mem-bw: there is no memory config (in base or this point) to set it in",
        f"{path}: points[1]: network: {tmp_path / 'missing.yml'}: file not found",
        f"{path}: points[2]: workload: {tmp_path / 'trace' / 'nope'}: no trace files "
        f"{tmp_path / 'trace' / 'nope'}.<rank>.et",
    ]
    assert lines[-1].startswith(
        f"{path}: points[0]: backend: unknown backend 'analyticl'; available: analytical, "
    )
    assert not (tmp_path / "out").exists()


def test_a_spec_without_anything_to_sweep_or_base_is_an_error(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("metric: step_ns\n")
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert str(err.value).splitlines() == [f"{path}: missing required key 'base'"]
    path.write_text(f"base: {{workload: trace/pair, system: {SYSTEM}}}\nmetric: step_ns\n")
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert str(err.value).splitlines() == [f"{path}: nothing to sweep: give 'grid' and/or 'points'"]


def test_a_grid_past_the_point_bound_is_refused_before_it_is_expanded(tmp_path, monkeypatch):
    from astra_core.sweep import spec as spec_module

    # points multiply the grid; exactly the bound is allowed
    monkeypatch.setattr(spec_module, "MAX_POINTS", 12)  # first: today's code has no bound
    path = write_spec(tmp_path, points=[{"backend": b} for b in BACKENDS], grid=GRID)
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert str(err.value).splitlines() == [
        f"{path}: 24 design points (2 points x grid 4 x 3); a sweep runs at most 12: split it"
    ]
    assert len(load_spec(write_spec(tmp_path, grid=GRID)).points) == 12
    monkeypatch.undo()
    # 10^9 points (nine axes of 10) once took 4 GB in 18 s to expand; the bound is
    # the product of the list lengths, so the refusal costs nothing.
    axes = ["network.bandwidth[0]", "network.latency[0]", "system.preferred-dataset-splits"]
    axes += [f"network.{key}[{i}]" for i in (1, 2, 3) for key in ("bandwidth", "latency")]
    path = write_spec(tmp_path, grid={name: list(range(1, 11)) for name in axes})
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert str(err.value).splitlines() == [
        f"{path}: 1,000,000,000 design points (grid {' x '.join(['10'] * 9)}); "
        "a sweep runs at most 100,000: split it"
    ]


def test_values_that_expand_past_the_byte_bound_are_refused_before_expanding(tmp_path, monkeypatch):
    from astra_core.sweep import spec as spec_module

    # the bound is computed without expanding: each value times the points it is in
    grid = {
        "network.latency[0]": [0.0, 500.0, 1000.0],
        "system.all-reduce-implementation[0]": ["ring", "direct"],
    }
    points = [{"backend": b} for b in BACKENDS]
    spec_file = spec_module.SpecFile.model_validate(
        {"base": {"workload": "w", "system": "s"}, "grid": grid, "points": points}
    )
    expanded = sum(len(json.dumps(v)) for point in spec_file.design_points() for v in point.values())
    # "analytical" and "ideal" in 6 points each, 3 latencies in 4, 2 algorithms in 6
    assert spec_file.expanded_bytes == expanded == 6 * (12 + 7) + 4 * (3 + 5 + 6) + 6 * (6 + 8)
    monkeypatch.setattr(spec_module, "MAX_EXPANDED_BYTES", expanded - 1)
    path = write_spec(tmp_path, grid=grid, points=points)
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert str(err.value).splitlines() == [
        f"{path}: the 12 design points' values come to 254 bytes as JSON; "
        "a sweep takes at most 253 bytes: fewer or smaller values"
    ]
    monkeypatch.setattr(spec_module, "MAX_EXPANDED_BYTES", expanded)
    assert len(load_spec(path).points) == 12


def test_yaml_aliases_in_a_spec_are_refused_naming_the_line(tmp_path):
    # Even a harmless alias is refused: nested ones (eight levels of nine, from ten
    # lines) stand for 9^8 values, which json.dumps (the point identity) once
    # expanded to 2.3 GB before it was killed.
    write_pair(tmp_path)
    path = tmp_path / "sweep.yaml"
    path.write_text(
        f"base: {{workload: trace/pair, system: {SYSTEM}, network: network.yml}}\n"
        "grid:\n"
        "  network.bandwidth[0]: &values [25, 50]\n"
        "  network.latency[0]: *values\n"
    )
    with pytest.raises(ConfigError) as err:
        load_spec(path)
    assert str(err.value).splitlines() == [
        f"{path}: invalid YAML at line 4 column 23: alias *values "
        "(aliases are not allowed in this file; write the values out)"
    ]
    path.write_text(path.read_text().replace("&values ", "").replace("*values", "[25, 50]"))
    assert len(load_spec(path).points) == 4


# -- running -----------------------------------------------------------------------------------


def check_closed_form(frame: pd.DataFrame) -> None:
    ok = frame[frame["status"] == "ok"]
    for row in ok.to_dict("records"):
        expected = closed_form_step_ns(row["network.bandwidth[0]"], row["network.latency[0]"])
        assert row["step_ns"] == expected, row
        # Most of any rank of finish - compute: rank 1, step - its 3 µs (rank 0: step - 8 µs).
        assert row["exposed_comm_ns"] == expected - 3000
        assert row["messages"] == 1 and row["message_bytes"] == MIB and row["npus"] == 2
        parts = (
            row["compute_only_ns"]
            + row["overlapped_comm_ns"]
            + row["comm_only_ns"]
            + row["collective_wait_ns"]
            + row["p2p_wait_ns"]
            + row["idle_ns"]
        )
        # The mean over both ranks of their six parts is the mean finish time:
        # rank 0 finishes when its send is done (step - 3000), rank 1 at step.
        assert parts == pytest.approx(expected - 1500)


def test_serial_sweep_matches_the_closed_form_and_records_a_failing_point(tmp_path):
    path = write_spec(tmp_path, grid={**GRID, "network.bandwidth[0]": [*BANDWIDTHS, -1.0]})
    outcome = run_sweep(path, workers=1)
    frame = outcome.frame
    assert len(frame) == 15 and outcome.ran == 15 and outcome.skipped == 0
    failed = frame[frame["status"] == "error"]
    assert failed["network.bandwidth[0]"].tolist() == [-1.0] * 3
    assert set(failed["error"]) == {f"{tmp_path / 'network.yml'}: bandwidth[0]: must be > 0, got -1.0"}
    assert failed["step_ns"].isna().all()
    assert outcome.failed == 3
    assert (frame.loc[frame["status"] == "ok", "error"] == "").all()
    check_closed_form(frame)
    names = sorted(p.name for p in (tmp_path / "sweep-results").iterdir())
    assert names == ["points.jsonl", "results.csv", "results.parquet", "step_ns.png"]


def test_a_sweep_varies_any_run_field_iterations_among_them(tmp_path):
    # Iteration i + 1 of a rank starts when its iteration i is done: rank 0 computes and
    # sends again while rank 1 computes, so n iterations take n (5 us + message) + 3 us.
    frame = run_sweep(write_spec(tmp_path, grid={"iterations": [1, 2, 3]}), workers=1).frame
    message_ns = int(500.0 + MIB * 1e9 / (50.0 * 2**30))
    assert frame["step_ns"].tolist() == [n * (5000 + message_ns) + 3000 for n in (1, 2, 3)]


def test_results_table_schema_in_parquet_and_csv(tmp_path):
    path = write_spec(
        tmp_path, points=[{"backend": b} for b in BACKENDS], grid={"network.bandwidth[0]": [25.0, 50.0]}
    )
    outcome = run_sweep(path, workers=1)
    out = tmp_path / "sweep-results"
    # 'backend' is a swept parameter and a metric (the backend that ran): one column,
    # in the parameters' place, holding the resolved name.
    expected = [
        "point",
        "backend",
        "network.bandwidth[0]",
        "status",
        *[m for m in METRICS if m != "backend"],
        "wall_s",
        "error",
        "key",
    ]
    parquet = pd.read_parquet(out / "results.parquet")
    csv = pd.read_csv(out / "results.csv", keep_default_na=False)
    assert list(parquet.columns) == list(csv.columns) == list(outcome.frame.columns) == expected
    assert str(parquet["network.bandwidth[0]"].dtype) == "float64"
    assert str(parquet["step_ns"].dtype) == "Int64" and str(parquet["npus"].dtype) == "int64"
    assert parquet["backend"].tolist() == ["analytical", "analytical", "ideal", "ideal"]
    assert (
        parquet["step_ns"].tolist()
        == csv["step_ns"].tolist()
        == [closed_form_step_ns(b, 500.0) for b in (25.0, 50.0, 25.0, 50.0)]
    )
    assert parquet["key"].nunique() == 4


def test_resume_skips_finished_points_and_retries_failed_ones(tmp_path):
    path = write_spec(tmp_path, grid={"network.bandwidth[0]": [25.0, -1.0, 50.0]})
    first = run_sweep(path, workers=1)
    assert (first.ran, first.skipped, first.failed) == (3, 0, 1)
    log = tmp_path / "sweep-results" / "points.jsonl"
    assert len(log.read_text().splitlines()) == 3
    again = run_sweep(path, workers=1)
    assert (again.ran, again.skipped, again.failed) == (1, 2, 1)  # only the failed point
    pd.testing.assert_frame_equal(again.frame.drop(columns="wall_s"), first.frame.drop(columns="wall_s"))
    # A sweep killed mid-way: one finished row and half a line. The rest runs.
    lines = log.read_text().splitlines()
    ok_line = next(line for line in lines if '"status": "ok"' in line)
    log.write_text(ok_line + "\n" + lines[-1][: len(lines[-1]) // 2])
    resumed = run_sweep(path, workers=1)
    assert (resumed.ran, resumed.skipped) == (2, 1)
    assert resumed.frame["step_ns"].tolist()[::2] == [
        closed_form_step_ns(25.0, 500.0),
        closed_form_step_ns(50.0, 500.0),
    ]
    # A wider grid runs only its new points; --fresh runs everything.
    path.write_text(path.read_text().replace("- 50.0", "- 50.0\n  - 100.0"))
    wider = run_sweep(path, workers=1)
    assert (wider.ran, wider.skipped) == (2, 2)  # the new point and the failed one
    fresh = run_sweep(path, workers=1, fresh=True)
    assert (fresh.ran, fresh.skipped) == (4, 0)


def test_resume_recognises_points_by_the_content_of_their_inputs_not_their_paths(tmp_path):
    sweep_dir = tmp_path / "a"
    sweep_dir.mkdir()
    path = write_spec(
        sweep_dir,
        points=[{"network": "network.yml"}, {"network": "slow.yml"}],
        grid={"network.bandwidth[0]": [25.0, 50.0]},
    )
    (sweep_dir / "slow.yml").write_text(
        "topology: [Ring]\nnpus_count: [2]\nbandwidth: [50.0]\nlatency: [2000.0]\n"
    )
    first = run_sweep(path, workers=1)
    assert first.ran == 4
    assert first.frame["step_ns"].tolist() == [
        closed_form_step_ns(b, lat) for lat in (500, 2000) for b in (25.0, 50.0)
    ]
    # Editing one network file re-runs the points that read it, with its new values.
    (sweep_dir / "slow.yml").write_text(
        "topology: [Ring]\nnpus_count: [2]\nbandwidth: [50.0]\nlatency: [3000.0]\n"
    )
    edited = run_sweep(path, workers=1)
    assert (edited.ran, edited.skipped) == (2, 2)
    assert edited.frame["step_ns"].tolist() == [
        closed_form_step_ns(b, lat) for lat in (500, 3000) for b in (25.0, 50.0)
    ]
    # So does editing a rank's trace: the same bytes at a smaller size.
    trace = sweep_dir / "trace"
    write_pair_trace(trace / "pair", nbytes=MIB // 2, tag=9, fwd_us=5, bwd_us=3)
    retraced = run_sweep(path, workers=1)
    assert (retraced.ran, retraced.skipped) == (4, 0)
    # The same sweep, moved elsewhere with its results, runs nothing again.
    moved = tmp_path / "b"
    shutil.copytree(sweep_dir, moved)
    again = run_sweep(moved / "sweep.yaml", workers=1)
    assert (again.ran, again.skipped) == (0, 4)
    pd.testing.assert_frame_equal(again.frame, retraced.frame)


def test_resume_reruns_points_whose_system_names_a_changed_file(tmp_path):
    # system.json's bytes alone would not change when the NCCL profile it names does:
    # the points would be read back with the old profile's times.
    profile = write_nccl_system(SYSTEM, tmp_path, gpus_per_node=2)
    (tmp_path / "switch.yml").write_text(
        "topology: [Switch]\nnpus_count: [2]\nbandwidth: [50.0]\nlatency: [500.0]\n"
    )
    path = write_spec(tmp_path, grid={"network.latency[0]": LATENCIES})
    data = yaml.safe_load(path.read_text())
    data["base"].update(system="nccl-system.json", network="switch.yml")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    first = run_sweep(path, workers=1)
    assert first.ran == 3 and (first.frame["status"] == "ok").all()
    assert (run_sweep(path, workers=1).ran, run_sweep(path, workers=1).skipped) == (0, 3)
    profile.write_text(json.dumps({"format": "astra-nccl-profile/1", "launch-us": 500.0}))
    assert run_sweep(path, workers=1).ran == 3


def test_a_backend_config_file_is_relative_to_the_spec_sweepable_and_part_of_the_identity(
    tmp_path, monkeypatch
):
    path = write_spec(tmp_path, grid={"backend_config.bandwidth_gbps": [25.0, 50.0]})
    data = yaml.safe_load(path.read_text())
    data["base"].update(backend="ideal", backend_config="ideal.toml")
    path.write_text(yaml.safe_dump(data))
    (tmp_path / "ideal.toml").write_text("latency_ns = 100.0\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    first = run_sweep(path, workers=1)
    assert first.frame["error"].tolist() == ["", ""]
    assert first.frame["step_ns"].tolist() == [closed_form_step_ns(b, 100.0) for b in (25.0, 50.0)]
    (tmp_path / "ideal.toml").write_text("latency_ns = 300.0\n")
    edited = run_sweep(path, workers=1)
    assert edited.ran == 2
    assert edited.frame["step_ns"].tolist() == [closed_form_step_ns(b, 300.0) for b in (25.0, 50.0)]


def test_a_torn_last_line_of_the_point_log_is_cut_off_not_appended_to(tmp_path):
    path = write_spec(tmp_path, grid={"network.bandwidth[0]": [25.0, 50.0, 100.0]})
    run_sweep(path, workers=1)
    log = tmp_path / "sweep-results" / "points.jsonl"
    lines = log.read_text().splitlines()
    # Killed while writing the third row: two rows and a half.
    log.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][:40])
    resumed = run_sweep(path, workers=1)
    assert (resumed.ran, resumed.skipped) == (1, 2)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [row["point"] for row in rows] == [0, 1, 2]
    assert log.read_text().endswith("\n")
    again = run_sweep(path, workers=1)  # the re-run point's row was kept
    assert (again.ran, again.skipped) == (0, 3)
    assert again.frame["step_ns"].tolist() == [closed_form_step_ns(b, 500.0) for b in (25.0, 50.0, 100.0)]


def test_a_damaged_line_inside_the_point_log_is_named_in_a_warning(tmp_path):
    path = write_spec(tmp_path, grid={"network.bandwidth[0]": [25.0, 50.0]})
    run_sweep(path, workers=1)
    log = tmp_path / "sweep-results" / "points.jsonl"
    lines = log.read_text().splitlines()
    log.write_text("garbage\n" + "\n".join(lines) + "\n")
    with pytest.warns(
        UserWarning,
        match=rf"^{re.escape(str(log))}: line 1 is not a point row; "
        r"ignored \(its point runs again\)$",
    ):
        again = run_sweep(path, workers=1)
    assert (again.ran, again.skipped) == (0, 2)


def test_a_point_log_that_cannot_be_written_is_one_error(tmp_path):
    path = write_spec(tmp_path, grid={"network.bandwidth[0]": [25.0, 50.0]})
    log = tmp_path / "sweep-results" / "points.jsonl"

    def break_the_log(row):  # after the first row: the log's name is taken by a directory
        log.unlink()
        log.mkdir()

    with pytest.raises(AstraError) as err:
        run_sweep(path, workers=1, on_row=break_the_log)
    assert str(err.value) == f"{log}: cannot write the point log: Is a directory"


def test_sweep_over_system_values_and_workloads(tmp_path):
    # Chunk count and algorithm per dimension are system.json values; a second
    # workload directory is a path relative to the spec.
    write_pair(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    write_pair(other)
    spec = write_spec(
        tmp_path,
        grid={
            "system.preferred-dataset-splits": [1, 4],
            "system.all-reduce-implementation[0]": ["ring", "direct"],
            "workload": ["trace/pair", "other/trace/pair"],
        },
    )
    frame = astra.sweep(spec, workers=1)
    assert len(frame) == 8 and (frame["status"] == "ok").all()
    # Point-to-point only: neither chunks nor the all-reduce algorithm change the step.
    assert set(frame["step_ns"]) == {closed_form_step_ns(50.0, 500.0)}
    assert frame["workload"].tolist()[:2] == ["trace/pair", "other/trace/pair"]
    # An entry past the end of the list is a spec error, found before anything runs.
    bad = write_spec(tmp_path, grid={"system.all-reduce-implementation[3]": ["ring"]})
    with pytest.raises(ConfigError) as err:
        astra.sweep(bad, workers=1, output=tmp_path / "bad")
    assert str(err.value) == (
        f"{bad}: grid: system.all-reduce-implementation[3]: {SYSTEM}: "
        "all-reduce-implementation[3]: out of range (1 entries)"
    )
    assert not (tmp_path / "bad").exists()


# -- process pool and Ray -----------------------------------------------------------------------

RAY_GRID = {
    "backend": BACKENDS,
    "network.bandwidth[0]": [25.0, 50.0, 100.0],
    "network.latency[0]": [0.0, 1000.0],
}


def png_ok(path: Path) -> bool:
    data = path.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and min(struct.unpack(">II", data[16:24])) >= 200


def test_pool_and_ray_sweeps_give_the_same_table(tmp_path):
    pool_spec = write_spec(tmp_path, grid=RAY_GRID, output="pool")
    pool = run_sweep(pool_spec, workers=2)
    assert len(pool.frame) == 12 and pool.failed == 0
    check_closed_form(pool.frame)
    # The same points on a local Ray instance, through the CLI (--ray after SPEC).
    ray_spec = tmp_path / "ray.yaml"
    ray_spec.write_text(pool_spec.read_text().replace("output: pool", "output: ray"))
    result = CliRunner().invoke(main, ["sweep", str(ray_spec), "--ray"])
    assert result.exit_code == 0, result.output
    assert "12 points: 12 to run on Ray (local), 0 finished before" in result.output
    ray_frame = pd.read_parquet(tmp_path / "ray" / "results.parquet")
    pd.testing.assert_frame_equal(
        ray_frame.drop(columns="wall_s"), pool.frame.drop(columns="wall_s"), check_dtype=False
    )
    assert png_ok(tmp_path / "ray" / "step_ns.png")
    assert (ray_frame["wall_s"] > 0).all()


# -- the command line ----------------------------------------------------------------------


def test_cli_sweep_in_process_with_an_output_directory(tmp_path):
    spec = write_spec(tmp_path, grid={"network.bandwidth[0]": [25.0, -1.0]})
    out = tmp_path / "elsewhere"
    result = CliRunner().invoke(main, ["sweep", str(spec), "-o", str(out), "-j", "1"])
    # A failed point: every other point runs and the table is written, then exit 1
    # with one line naming the failed point and its error.
    assert result.exit_code == 1, result.output
    assert "2 points: 2 to run on this process, 0 finished before" in result.stdout
    assert "┃ network.bandwidth[0] (GB/s) ┃" in result.stdout  # the table names the unit
    assert result.stderr.splitlines() == [
        f"error: 1 of 2 points failed (point 1): point 1: {tmp_path / 'network.yml'}: "
        f"bandwidth[0]: must be > 0, got -1.0; every error in the 'error' column of "
        f"{out / 'results.csv'}"
    ]
    frame = pd.read_csv(out / "results.csv")
    assert frame["status"].tolist() == ["ok", "error"]
    assert frame["step_ns"].tolist()[0] == closed_form_step_ns(25.0, 500.0)
    assert math.isnan(frame["step_ns"].tolist()[1])
    again = CliRunner().invoke(main, ["sweep", str(spec), "-o", str(out), "-j", "1"])
    assert "2 points: 1 to run on this process, 1 finished before" in again.output
    assert again.exit_code == 1
    fixed = write_spec(tmp_path, grid={"network.bandwidth[0]": [25.0, 50.0]})
    clean = CliRunner().invoke(main, ["sweep", str(fixed), "-o", str(out), "-j", "1"])
    assert clean.exit_code == 0 and clean.stderr == ""


def test_failure_summary_names_the_first_three_failed_points_and_counts_the_rest(tmp_path):
    spec = write_spec(
        tmp_path, grid={"network.bandwidth[0]": [25.0, -1.0, -2.0], "network.latency[0]": [0.0, 500.0]}
    )
    outcome = run_sweep(spec, workers=1)
    assert outcome.failure_summary() == (
        f"4 of 6 points failed (points 2, 3, 4 and 1 more): point 2: "
        f"{tmp_path / 'network.yml'}: bandwidth[0]: must be > 0, got -1.0; every error in the "
        f"'error' column of {tmp_path / 'sweep-results' / 'results.csv'}"
    )


def test_cli_sweep_with_a_bad_spec_is_one_error_line_per_problem(tmp_path):
    spec = write_spec(tmp_path, grid={"network.bandwidth[0]": 25.0})
    result = CliRunner().invoke(main, ["sweep", str(spec)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: {spec}: grid: network.bandwidth[0]: expected a non-empty list of values, got 25.0"
    ]
    missing = CliRunner().invoke(main, ["sweep", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 1
    assert missing.stderr.splitlines() == [f"error: {tmp_path / 'nope.yaml'}: file not found"]
