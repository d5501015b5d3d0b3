"""``astra run --backend ns3`` on the workloads the other backends run, with a config file."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from astra_core.cli import main
from astra_ns3.tests.fabrics import make_ns3, star

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "resnet50_dp"


def _run(args: list[str]):
    make_ns3(star(2))  # skip off CI / fail in CI when ns-3 is missing
    return CliRunner().invoke(main, ["run", "--backend", "ns3", *args])


def test_microbenchmark_with_a_backend_config_and_monitor_files(reference_dir, tmp_path):
    config = tmp_path / "ns3.toml"
    out = tmp_path / "monitor"
    config.write_text(f'cc = "hpcc"\n[monitor]\ninterval_us = 5\noutput_dir = "{out}"\nformat = "parquet"\n')
    result = _run(
        [
            "--workload",
            str(reference_dir / "workload/micro/ALL_GATHER_8npus_1MB/ALL_GATHER"),
            "--system",
            str(reference_dir / "system/ring_1d.json"),
            "--network",
            str(reference_dir / "network/ring8.yml"),
            "--backend-config",
            str(config),
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["backend"] == "ns3" and report["step_ns"] > 0
    messages = pd.read_parquet(out / "messages.parquet")
    ports = pd.read_parquet(out / "ports.parquet")
    samples = pd.read_parquet(out / "flow_samples.parquet")
    # An all-gather of 1 MB on 8 NPUs with 4 chunks: each NPU forwards 7 x 4 pieces.
    assert len(messages) == 8 * 7 * 4 and messages.finish_ns.notna().all()
    assert ports.tx_bytes.sum() > messages.bytes.sum()  # framing and ACKs on top
    assert set(samples.message) <= set(messages.message) and len(samples) > 0


def test_resnet50_example_at_8_npus_runs(tmp_path):
    result = _run(
        [
            "--workload",
            str(EXAMPLE / "workload/Resnet50_DataParallel"),
            "--system",
            str(EXAMPLE / "system.json"),
            "--network",
            str(EXAMPLE / "network.yml"),
            "--memory",
            str(EXAMPLE / "memory.json"),
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert len(report["ranks"]) == 8
    # Compute dominates this step; communication adds a little, never nothing.
    assert all(r["finish_ns"] > r["compute_ns"] for r in report["ranks"])


def test_a_bad_backend_config_is_one_error_line(reference_dir, tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("cc: swift\n")
    result = _run(
        [
            "--workload",
            str(reference_dir / "workload/micro/ALL_REDUCE_8npus_1MB/ALL_REDUCE"),
            "--system",
            str(reference_dir / "system/ring_1d.json"),
            "--network",
            str(reference_dir / "network/sw8.yml"),
            "--backend-config",
            str(config),
        ]
    )
    assert result.exit_code == 1
    assert result.output.strip().startswith(f"error: {config}: cc: ")
    assert len(result.output.strip().splitlines()) == 1


def test_a_monitor_table_and_an_output_on_one_file_are_refused_before_the_run(reference_dir, tmp_path):
    # The monitor's messages table and --csv would both write out/messages.csv, the later
    # silently replacing the other: refused in one line naming both, before anything runs.
    config = tmp_path / "ns3.toml"
    out = tmp_path / "out"
    config.write_text(f'[monitor]\noutput_dir = "{out}"\n')
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--backend",
            "ns3",
            "--backend-config",
            str(config),
            "--workload",
            str(reference_dir / "workload/micro/ALL_GATHER_8npus_1MB/ALL_GATHER"),
            "--system",
            str(reference_dir / "system/ring_1d.json"),
            "--network",
            str(reference_dir / "network/ring8.yml"),
            "--csv",
            str(out / "messages.csv"),
        ],
    )
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {config}: monitor.output_dir (messages.csv) and --csv both write {out / 'messages.csv'}; "
        "give them different files\n"
    )
    assert not out.exists()
