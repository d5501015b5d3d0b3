"""astra_core.outputs: atomic writes and the checks made before a run."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from astra_core.errors import ConfigError
from astra_core.outputs import (
    atomic_output,
    check_distinct,
    check_output_dir,
    check_output_file,
    write_bytes,
    write_text,
)
from astra_core.report import Report
from astra_core.results import RankResult


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
    result = Report(backend="analytical", ranks=[RankResult(0, 10.0, 4.0, 0.0, 6.0, 6.0)])
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
    result = Report(backend="analytical", ranks=[RankResult(0, 10.0, 4.0, 0.0, 6.0, 6.0)])
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


# -- destinations that are not regular files ----------------------------------------------


def test_atomic_output_writes_through_a_fifo_and_leaves_it(tmp_path):
    import threading

    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    with atomic_output(fifo, "--json") as temporary:
        assert temporary.parent != tmp_path  # not beside a device or FIFO (think of /dev)
        temporary.write_text("through")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    reader.join(timeout=60)  # a guard against a hang only
    assert got == [b"through"]
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_a_write_error_on_a_device_is_one_line_and_the_device_stays(tmp_path):
    full = tmp_path / "full"
    try:
        os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full's numbers
    except OSError as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    with pytest.raises(ConfigError) as info:
        write_text(full, "x" * 10, "--csv")
    assert str(info.value) == f"--csv {full}: cannot write: No space left on device"
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_dash_is_standard_output(capfdbinary):
    write_bytes("-", b"to stdout\n", "--json")
    assert capfdbinary.readouterr().out == b"to stdout\n"
    assert check_output_file("-", "--json") == Path("-")


def test_link_loops_are_one_line(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for check in (check_output_file, check_output_dir):
        with pytest.raises(ConfigError, match=r"^--x .*/loop: cannot write: a symbolic link loop"):
            check(loop, "--x")
    check_distinct({"--a": loop, "--b": tmp_path / "other"})  # not a RuntimeError in resolve()
    with pytest.raises(ConfigError, match="both write"):
        check_distinct({"--a": loop, "--b": loop})


def test_check_distinct_sees_hard_links_and_standard_output_but_lets_devices_repeat(tmp_path):
    (tmp_path / "a").write_text("")
    os.link(tmp_path / "a", tmp_path / "b")
    with pytest.raises(ConfigError, match=f"^--b and --a both write {tmp_path / 'b'};"):
        check_distinct({"--a": tmp_path / "a", "--b": tmp_path / "b"})
    with pytest.raises(ConfigError, match=r"both write standard output \(-\)"):
        check_distinct({"--a": "-", "--b": "-"})
    check_distinct({"--a": "/dev/null", "--b": "/dev/null", "--c": "./-", "--d": "-"})


def test_check_not_input_names_both_options_and_sees_links(tmp_path):
    from astra_core.outputs import check_not_input

    system = tmp_path / "system.json"
    system.write_text("{}")
    (tmp_path / "link").symlink_to(system)
    with pytest.raises(ConfigError) as info:
        check_not_input({"--json": tmp_path / "link", "--csv": None}, {"--system": system})
    assert str(info.value) == (
        f"--json {tmp_path / 'link'} is the --system input ({system}); writing it would destroy "
        "that input: give --json another path"
    )
    listed: list[str] = []

    def traces():
        listed.append("listed")
        yield str(system)

    check_not_input({"--json": tmp_path / "new.json"}, {"--workload": traces()})
    assert listed == []  # no output exists: the inputs are not even listed
    check_not_input({"--json": "-"}, {"--system": system})


def test_whole_ns_column_refuses_times_past_int64_naming_the_column():
    import pandas as pd

    from astra_core.errors import AstraError
    from astra_core.outputs import INT64_MAX_NS, whole_ns_column

    assert whole_ns_column(pd.Series([1.4, 2.6, float("nan")]), "end_ns").tolist() == [1, 3, pd.NA]
    assert whole_ns_column(pd.Series([float(2**62)]), "end_ns").tolist() == [2**62]
    for bad in (2.0**63, float("inf"), -(2.0**64)):
        with pytest.raises(AstraError) as info:
            whole_ns_column(pd.Series([0.0, bad]), "end_ns")
        assert str(info.value) == (
            f"end_ns: {abs(bad):.4g} ns is beyond what an int64 ns column holds "
            f"({INT64_MAX_NS} ns, about 292 years)"
        )


def test_result_writers_refuse_times_past_int64_in_one_line(tmp_path):
    from astra_core.errors import AstraError

    huge = float(2**70)
    result = Report(backend="analytical", ranks=[RankResult(0, huge, 4.0, 0.0, huge, huge)])
    with pytest.raises(AstraError, match="^finish_ns: 1.181e\\+21 ns is beyond what an int64 ns column"):
        result.rank_frame()  # not TypeError: cannot safely cast non-equivalent float64 to int64


def test_dev_stdout_redirected_to_a_file_is_written_through_not_renamed_over(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "redirected.txt"
    script = (
        "from astra_core.outputs import write_text\nprint('table')\nwrite_text('/dev/stdout', 'json\\n')\n"
    )
    with open(out, "w") as sink:
        subprocess.run([sys.executable, "-c", script], stdout=sink, check=True)
    assert out.read_text() == "table\njson\n"  # not "json\n" alone, renamed over the shell's file
