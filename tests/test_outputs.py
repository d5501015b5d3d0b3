"""astra_core.outputs: atomic writes and the checks made before a run."""

from __future__ import annotations

import os
import stat

import pytest

from astra_core.errors import ConfigError
from astra_core.outputs import atomic_output, check_output_dir, check_output_file, write_text
from astra_core.report.results import RankResult, RunResult


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    out = tmp_path / "result.json"
    out.write_text("old content")
    with pytest.raises(RuntimeError), atomic_output(out) as temporary:
        temporary.write_text("half of the new")
        raise RuntimeError("the writer died")
    assert out.read_text() == "old content"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_an_os_error_while_writing_is_one_line_naming_the_path(tmp_path):
    out = tmp_path / "t.csv"
    with pytest.raises(ConfigError) as info, atomic_output(out, "--csv"):
        raise OSError(28, "No space left on device")
    assert str(info.value) == f"--csv {out}: cannot write: No space left on device"
    assert list(tmp_path.iterdir()) == []


def test_the_temporary_is_beside_the_destination_and_keeps_its_suffix(tmp_path):
    with atomic_output(tmp_path / "sub" / "plot.png") as temporary:
        assert temporary.parent == tmp_path / "sub" and temporary.suffix == ".png"
        assert temporary != tmp_path / "sub" / "plot.png"
        temporary.write_bytes(b"png")
    assert (tmp_path / "sub" / "plot.png").read_bytes() == b"png"


def test_a_new_file_gets_the_usual_permissions_and_a_replaced_one_keeps_its_own(tmp_path):
    umask = os.umask(0o022)
    try:
        write_text(tmp_path / "new.txt", "x")
        assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o644
        kept = tmp_path / "kept.txt"
        kept.write_text("y")
        kept.chmod(0o600)
        write_text(kept, "z")
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and kept.read_text() == "z"
    finally:
        os.umask(umask)


def test_checks_name_the_option_and_the_path(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(
        ConfigError, match=r"^--json .*/f/x/y.json: cannot write: .*/f is a file, not a directory$"
    ):
        check_output_file(tmp_path / "f" / "x" / "y.json", "--json")
    with pytest.raises(ConfigError, match=r"^--plots .*/f: cannot write: is a file, not a directory$"):
        check_output_dir(tmp_path / "f", "--plots")
    assert check_output_dir(tmp_path / "new" / "dir") == tmp_path / "new" / "dir"
    assert not (tmp_path / "new").exists()  # checking creates nothing


def test_result_writers_create_directories_and_write_atomically(tmp_path):
    result = RunResult(backend="analytical", ranks=[RankResult(0, 10.0, 4.0, 0.0, 6.0, 6.0)])
    result.write_timeline(tmp_path / "a" / "trace.json")
    assert '"step_ns": 10.0' in (tmp_path / "a" / "trace.json").read_text()
    with pytest.raises(ConfigError, match="timeline .*: cannot write: is a directory"):
        result.write_timeline(tmp_path / "a")


@pytest.mark.parametrize(
    "path, message",
    [
        (42, "plots: path must be a str or os.PathLike, got int"),
        (b"x", "plots: path must be a str or os.PathLike, got bytes"),
        ("", "plots: cannot write: empty path"),
    ],
)
def test_result_writers_name_a_bad_path_argument(path, message):
    result = RunResult(backend="analytical", ranks=[RankResult(0, 10.0, 4.0, 0.0, 6.0, 6.0)])
    with pytest.raises(ConfigError) as info:
        result.write_plots(path)
    assert str(info.value) == message
    with pytest.raises(ConfigError, match="^timeline: "):
        result.write_timeline(path)


def test_a_symbolic_link_is_written_through(tmp_path):
    target = tmp_path / "real" / "out.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
