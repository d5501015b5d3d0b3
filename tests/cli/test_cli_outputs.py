"""Output files of ``astra run`` and ``astra topology``: checked before the run, written
atomically into directories created on demand.

An unwritable output (a directory given as a file, a parent that is a file,
two options naming one file) must fail with one error line before the
simulation starts: the test replaces ``astra.api.simulate`` by a recorder and
checks it was never called. Successful runs are checked against the closed
form of a two-rank exchange (Ring 2, 50 GB/s, 500 ns, 1 MiB: 20031 ns).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import astra.api
from astra_core.cli import main
from tests.cli.test_cli import EXAMPLE, RING2, two_rank_trace
from tests.conftest import isolate_plugins, one_error_line

TWO_RANK_FINISH_NS = 20031


@pytest.fixture(autouse=True)
def _plugins(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def run_args(d: Path) -> list:
    (d / "network.yml").write_text(RING2)
    return [
        "run",
        "--workload",
        two_rank_trace(d),
        "--system",
        EXAMPLE / "system.json",
        "--network",
        d / "network.yml",
    ]


@pytest.fixture
def no_simulation(monkeypatch):
    """Fails the test if the CLI starts a simulation."""
    calls = []
    monkeypatch.setattr(
        astra.api,
        "simulate",
        lambda *a, **k: (
            calls.append(a) or pytest.fail("the simulation started before the outputs were checked")
        ),
    )
    return calls


@pytest.mark.parametrize("option", ["--json", "--timeline", "--csv", "--parquet"])
def test_output_under_a_file_fails_before_the_run(option, tmp_path, no_simulation):
    (tmp_path / "afile").write_text("x")
    line = one_error_line(invoke(*run_args(tmp_path), option, tmp_path / "afile" / "out"))
    assert option in line and str(tmp_path / "afile" / "out") in line
    assert "is a file, not a directory" in line
    assert no_simulation == []


@pytest.mark.parametrize("option", ["--json", "--timeline", "--csv", "--parquet"])
def test_output_that_is_a_directory_fails_before_the_run(option, tmp_path, no_simulation):
    (tmp_path / "adir").mkdir()
    line = one_error_line(invoke(*run_args(tmp_path), option, tmp_path / "adir"))
    assert line == f"error: {option} {tmp_path / 'adir'}: cannot write: is a directory, not a file"
    assert no_simulation == []


def test_plots_dir_that_is_a_file_fails_before_the_run(tmp_path, no_simulation):
    (tmp_path / "afile").write_text("x")
    line = one_error_line(invoke(*run_args(tmp_path), "--plots", tmp_path / "afile"))
    assert line == f"error: --plots {tmp_path / 'afile'}: cannot write: is a file, not a directory"
    assert no_simulation == []


def test_two_options_naming_one_file_fail_before_the_run(tmp_path, no_simulation):
    out = tmp_path / "same.out"
    line = one_error_line(invoke(*run_args(tmp_path), "--json", out, "--csv", out))
    assert line == f"error: --csv and --json both write {out}; give them different files"
    assert no_simulation == []


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root may write anywhere")
def test_output_in_a_read_only_directory_fails_before_the_run(tmp_path, no_simulation):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        line = one_error_line(invoke(*run_args(tmp_path), "--json", locked / "run.json"))
    finally:
        locked.chmod(0o755)
    assert "permission denied" in line and str(locked) in line
    assert no_simulation == []


def test_permission_denied_fails_before_the_run_even_as_root(tmp_path, monkeypatch, no_simulation):
    # root may write anywhere, so the permission answer is simulated: os.access says "not
    # writable" for this one directory, as it does for a user without write permission there.
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access

    def access(p, mode, **kw):
        return not (Path(p) == locked and mode & os.W_OK) and real_access(p, mode, **kw)

    monkeypatch.setattr(os, "access", access)
    for option, target in (
        ("--json", locked / "run.json"),
        ("--plots", locked / "plots"),
        ("--csv", locked / "new" / "c.csv"),
    ):
        line = one_error_line(invoke(*run_args(tmp_path), option, target))
        assert line == f"error: {option} {target}: cannot write: permission denied in directory {locked}"
    line = one_error_line(invoke(*run_args(tmp_path), "--plots", locked))
    assert line == f"error: --plots {locked}: cannot write: permission denied in directory {locked}"
    assert no_simulation == []


def test_outputs_go_into_directories_created_on_demand(tmp_path):
    out = tmp_path / "new" / "deeper"
    result = invoke(
        *run_args(tmp_path),
        "--json",
        out / "a" / "run.json",
        "--timeline",
        out / "b" / "trace.json",
        "--csv",
        out / "c" / "coll.csv",
        "--plots",
        out / "plots",
    )
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "a" / "run.json").read_text())
    assert [r["finish_ns"] for r in doc["ranks"]] == [TWO_RANK_FINISH_NS] * 2
    trace = json.loads((out / "b" / "trace.json").read_text())
    assert trace["otherData"]["step_ns"] == TWO_RANK_FINISH_NS
    assert (out / "c" / "coll.csv").read_text().startswith("rank,")
    assert sorted(p.name for p in (out / "plots").iterdir()) == ["breakdown.png", "timeline.png"]
    # Nothing but the outputs: no temporary files left beside them.
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == [
        "breakdown.png",
        "coll.csv",
        "run.json",
        "timeline.png",
        "trace.json",
    ]


def test_json_output_replaces_an_existing_file_atomically(tmp_path, monkeypatch):
    out = tmp_path / "run.json"
    out.write_text("old")
    replaced = []
    real_replace = os.replace

    def spy(src, dst):
        replaced.append((Path(src), Path(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    result = invoke(*run_args(tmp_path), "--json", out)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["step_ns"] == TWO_RANK_FINISH_NS
    (src,) = [src for src, dst in replaced if dst == out]  # the traces are written so too
    assert src.parent == tmp_path and src != out


# -- astra topology ------------------------------------------------------------------------


def test_topology_output_under_a_file_fails_before_building(tmp_path, monkeypatch):
    from astra_core.topology import generators

    monkeypatch.setattr(generators, "fat_tree", lambda *a: pytest.fail("built before checking"))
    (tmp_path / "afile").write_text("x")
    line = one_error_line(
        invoke("topology", "fat-tree", "--k", "4", "--output", tmp_path / "afile" / "fabric.txt")
    )
    assert line == (
        f"error: --output {tmp_path / 'afile' / 'fabric.txt'}: cannot write: "
        f"{tmp_path / 'afile'} is a file, not a directory"
    )


@pytest.mark.parametrize("option", ["--output", "--plot"])
def test_topology_output_that_is_a_directory_is_one_line(option, tmp_path):
    (tmp_path / "adir").mkdir()
    line = one_error_line(invoke("topology", "torus", "--dims", "2x2", option, tmp_path / "adir"))
    assert line == f"error: {option} {tmp_path / 'adir'}: cannot write: is a directory, not a file"


def test_topology_outputs_go_into_new_directories(tmp_path):
    result = invoke(
        "topology",
        "fat-tree",
        "--k",
        "2",
        "--output",
        tmp_path / "a" / "f.txt",
        "--plot",
        tmp_path / "b" / "f.png",
    )
    assert result.exit_code == 0, result.output
    # k=2: 2 hosts, 2 edge + 2 aggregation + 1 core switches; 2 + 2 + 2 cables.
    assert (tmp_path / "a" / "f.txt").read_text().splitlines()[0] == "7 5 6"
    assert (tmp_path / "b" / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_topology_show_of_a_directory_is_one_line(tmp_path):
    line = one_error_line(invoke("topology", "show", tmp_path))
    assert line == f"error: {tmp_path}: is a directory, not a file"


def test_a_plot_file_name_taken_by_a_directory_fails_before_the_run(tmp_path, no_simulation):
    (tmp_path / "plots" / "timeline.png").mkdir(parents=True)
    line = one_error_line(invoke(*run_args(tmp_path), "--plots", tmp_path / "plots"))
    assert line == (
        f"error: --plots {tmp_path / 'plots' / 'timeline.png'}: cannot write: is a directory, not a file"
    )
    assert no_simulation == []


def test_an_output_file_that_is_also_a_plot_fails_before_the_run(tmp_path, no_simulation):
    plots = tmp_path / "plots"
    line = one_error_line(invoke(*run_args(tmp_path), "--timeline", plots / "timeline.png", "--plots", plots))
    assert line == (
        f"error: --plots (timeline.png) and --timeline both write {plots / 'timeline.png'}; "
        "give them different files"
    )
    assert no_simulation == []


def test_topology_plot_format_follows_the_suffix_png_without_one(tmp_path):
    for name, magic in (("fabric", b"\x89PNG"), ("fabric.svg", b"<?xml")):
        result = invoke("topology", "torus", "--dims", "2x2", "--plot", tmp_path / name)
        assert result.exit_code == 0, result.output
        assert (tmp_path / name).read_bytes().startswith(magic)


def test_topology_plot_with_a_suffix_matplotlib_cannot_draw_fails_before_building(tmp_path, monkeypatch):
    # Not matplotlib's ValueError with a traceback, after the fabric is built.
    from astra_core.topology import generators

    monkeypatch.setattr(generators, "torus", lambda *a: pytest.fail("built before checking"))
    line = one_error_line(invoke("topology", "torus", "--dims", "2x2", "--plot", tmp_path / "f.txt"))
    assert line.startswith(f"error: --plot {tmp_path / 'f.txt'}: cannot draw a '.txt' image (one of: ")
    assert "png" in line and "svg" in line
    assert not (tmp_path / "f.txt").exists()
