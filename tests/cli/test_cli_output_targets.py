"""Where CLI outputs land: through FIFOs, devices and links, on standard output, never on an input.

What must not happen: ``--json``/``--csv``/``--fct`` at a FIFO replacing it with a regular
file (the reader gets nothing), a link to a FIFO losing the FIFO, a character device becoming
a regular file (as root), ``--json`` at a link loop a RuntimeError traceback, ``--json
S.json`` onto the run's own ``--system S.json`` replacing the system file, ``--csv`` onto a
rank's ``.et`` replacing the trace, ``flows gen --topology T -o T`` replacing the topology,
and a step past int64 ns writing ``--json`` and then dying in ``--csv`` with a pandas
TypeError.

Character devices are made with ``os.mknod`` in the test's directory (the numbers of
``/dev/null`` and ``/dev/full``), never the real ones: code that replaced a device with a
regular file would replace ``/dev/null`` itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

import astra.api
from astra_core.cli import main
from astra_core.topology.generators import fat_tree
from astra_core.topology.ns3_format import write_ns3_topology
from tests.cli.test_cli import EXAMPLE, RING2, two_rank_trace
from tests.conftest import isolate_plugins, one_error_line

TWO_RANK_FINISH_NS = 20031  # Ring 2, 50 GB/s, 500 ns, 1 MiB (tests/cli/test_cli_outputs.py)


@pytest.fixture(autouse=True)
def _plugins(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def run_args(d: Path, system: Path = EXAMPLE / "system.json") -> list:
    (d / "network.yml").write_text(RING2)
    return ["run", "--workload", two_rank_trace(d), "--system", system, "--network", d / "network.yml"]


@pytest.fixture
def no_simulation(monkeypatch):
    """Fails the test if the CLI starts a simulation."""
    calls: list = []
    monkeypatch.setattr(
        astra.api,
        "simulate",
        lambda *a, **k: (
            calls.append(a) or pytest.fail("the simulation started before the outputs were checked")
        ),
    )
    return calls


class FifoReader:
    """A thread that opens ``path`` for reading (waiting for a writer) and keeps what it reads."""

    def __init__(self, path: Path):
        self.path, self.data = path, b""
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with open(self.path, "rb") as f:
            self.data = f.read()

    def finish(self) -> bytes:
        """What the reader got. A reader still waiting (nothing was written) is released; one
        whose FIFO was replaced (it waits on a node no writer can reach) is left, a daemon."""
        if not stat.S_ISFIFO(os.lstat(self.path).st_mode):
            return b""
        with contextlib.suppress(OSError):  # ENXIO: the reader is gone already
            os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
        self.thread.join(timeout=60)  # a guard against a hang, not a timing assertion
        return self.data


def mknod(path: Path, minor: int) -> Path:
    """A character device with major 1 and ``minor`` (3: like /dev/null, 7: like /dev/full)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except (PermissionError, AttributeError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    return path


# -- FIFOs, links, devices ---------------------------------------------------------------


@pytest.mark.parametrize("option", ["--json", "--csv", "--parquet", "--timeline"])
def test_run_writes_through_a_fifo_and_keeps_it(option, tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    result = invoke(*run_args(tmp_path), option, fifo)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    data = reader.finish()
    if option == "--json":
        assert json.loads(data)["step_ns"] == TWO_RANK_FINISH_NS
    elif option == "--timeline":
        assert json.loads(data)["otherData"]["step_ns"] == TWO_RANK_FINISH_NS
    elif option == "--csv":
        assert data.startswith(b"rank,node_id,") and len(data.splitlines()) == 1  # p2p: no collective
    else:
        assert data[:4] == b"PAR1" and data[-4:] == b"PAR1"


def test_run_writes_through_a_link_to_a_fifo_and_keeps_both(tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link.json"
    link.symlink_to(fifo)
    reader = FifoReader(fifo)
    result = invoke(*run_args(tmp_path), "--json", link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == str(fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert json.loads(reader.finish())["step_ns"] == TWO_RANK_FINISH_NS


def test_run_writes_through_a_character_device_and_keeps_it(tmp_path):
    null = mknod(tmp_path / "null", 3)
    result = invoke(*run_args(tmp_path), "--json", null, "--csv", null)  # a device may repeat
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.lstat(null).st_mode) and os.stat(null).st_rdev == os.makedev(1, 3)


def test_a_full_device_is_one_error_line_and_stays_a_device(tmp_path):
    full = mknod(tmp_path / "full", 7)
    result = invoke(*run_args(tmp_path), "--json", full)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.splitlines() == [f"error: --json {full}: cannot write: No space left on device"]
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_a_link_to_a_regular_file_stays_a_link_and_its_target_is_updated(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    result = invoke(*run_args(tmp_path), "--json", link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and json.loads(target.read_text())["step_ns"] == TWO_RANK_FINISH_NS


@pytest.mark.parametrize("where", ["loop.json", "loop/run.json"])
def test_json_at_a_link_loop_is_one_line_before_the_run(where, tmp_path, no_simulation):
    (tmp_path / "loop.json").symlink_to(tmp_path / "loop.json")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    line = one_error_line(invoke(*run_args(tmp_path), "--json", tmp_path / where))
    assert line == (
        f"error: --json {tmp_path / where}: cannot write: a symbolic link loop (a link that leads back to itself)"
    )
    assert no_simulation == []


# -- standard output ------------------------------------------------------------------------


def test_json_to_standard_output_alone_with_the_table_on_stderr(tmp_path):
    result = invoke(*run_args(tmp_path), "--json", "-")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # nothing but the JSON
    assert [r["finish_ns"] for r in doc["ranks"]] == [TWO_RANK_FINISH_NS] * 2
    assert "simulated in" in result.stderr


def test_csv_to_standard_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # so that a file named "-" would show here
    result = invoke(*run_args(tmp_path), "--csv", "-", "--json", tmp_path / "r.json")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].startswith("rank,node_id,name,type,bytes")
    assert json.loads((tmp_path / "r.json").read_text())["step_ns"] == TWO_RANK_FINISH_NS
    assert not (tmp_path / "-").exists()


def test_a_file_named_dash_is_dot_slash_dash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke(*run_args(tmp_path), "--json", "./-")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "-").read_text())["step_ns"] == TWO_RANK_FINISH_NS


def test_standard_output_twice_is_one_line_before_the_run(tmp_path, no_simulation):
    line = one_error_line(invoke(*run_args(tmp_path), "--json", "-", "--timeline", "-"))
    assert line == "error: --timeline and --json both write standard output (-); give them different files"
    assert no_simulation == []


# -- outputs that are inputs ------------------------------------------------------------------


def test_json_onto_the_system_file_is_refused_before_the_run(tmp_path, no_simulation):
    system = tmp_path / "system.json"
    original = (EXAMPLE / "system.json").read_text()
    system.write_text(original)
    line = one_error_line(invoke(*run_args(tmp_path, system), "--json", system))
    assert line == (
        f"error: --json {system} is the --system input; writing it would destroy that input: "
        "give --json another path"
    )
    assert system.read_text() == original and no_simulation == []


def test_csv_onto_a_rank_trace_is_refused_before_the_run(tmp_path, no_simulation):
    args = run_args(tmp_path)
    trace = tmp_path / "p2p.1.et"
    original = trace.read_bytes()
    line = one_error_line(invoke(*args, "--csv", trace))
    assert line == (
        f"error: --csv {trace} is the --workload input; writing it would destroy that input: "
        "give --csv another path"
    )
    assert trace.read_bytes() == original and no_simulation == []


def test_an_output_linked_to_an_input_is_refused(tmp_path, no_simulation):
    args = run_args(tmp_path)
    network = tmp_path / "network.yml"
    (tmp_path / "soft.json").symlink_to(network)
    os.link(network, tmp_path / "hard.csv")
    line = one_error_line(invoke(*args, "--timeline", tmp_path / "soft.json"))
    assert line.startswith(f"error: --timeline {tmp_path / 'soft.json'} is the --network input ({network});")
    line = one_error_line(invoke(*args, "--parquet", tmp_path / "hard.csv"))
    assert line.startswith(f"error: --parquet {tmp_path / 'hard.csv'} is the --network input ({network});")
    assert network.read_text() == RING2 and no_simulation == []


def test_a_plot_onto_an_input_is_refused(tmp_path, no_simulation):
    plots = tmp_path / "plots"
    plots.mkdir()
    memory = plots / "timeline.png"
    memory.write_text('{"memory-type": "NO_MEMORY_EXPANSION"}')
    line = one_error_line(invoke(*run_args(tmp_path), "--memory", memory, "--plots", plots))
    assert line.startswith(f"error: --plots (timeline.png) {memory} is the --memory input;")
    assert no_simulation == []


# -- times past int64 ns ---------------------------------------------------------------------


@pytest.fixture
def exabyte_ring(tmp_path):
    """Valid inputs whose step passes int64 ns: 2^60 bytes all-reduced on a 4-ring at
    1e-6 GB/s (a 1.6e24 ns step); writes ``ar.<r>.et`` and ``slow.yml`` into tmp_path."""
    result = invoke(
        "gen",
        "micro",
        "--collective",
        "all-reduce",
        "--size",
        2**60,
        "--npus",
        4,
        "--output",
        tmp_path / "ar",
    )
    assert result.exit_code == 0, result.output
    (tmp_path / "slow.yml").write_text(
        "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 0.000001 ]\nlatency: [ 500.0 ]\n"
    )
    return tmp_path


def test_times_past_int64_are_one_line_before_any_output(tmp_path, exabyte_ring):
    # 2^60 bytes all-reduced on a 4-ring at 1e-6 GB/s: a 1.6e24 ns step (valid inputs).
    network = tmp_path / "slow.yml"
    args = ["run", "--workload", tmp_path / "ar", "--system", EXAMPLE / "system.json", "--network", network]
    outputs = [
        "--json",
        tmp_path / "r.json",
        "--csv",
        tmp_path / "r.csv",
        "--parquet",
        tmp_path / "r.parquet",
    ]
    result = invoke(*args, *outputs, "--timeline", tmp_path / "t.json")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.splitlines() == [
        "error: --csv and --parquet: end_ns: 1.611e+24 ns is beyond what an int64 ns column holds "
        "(9223372036854775807 ns, about 292 years); nothing was written (--json keeps such times exactly)"
    ]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("r.", "t."))) == []
    # --json alone holds them exactly, as the integer they are.
    result = invoke(*args, "--json", tmp_path / "r.json")
    assert result.exit_code == 0, result.output
    step = json.loads((tmp_path / "r.json").read_text())["step_ns"]
    assert isinstance(step, int) and step > 2**63


# -- astra flows ------------------------------------------------------------------------------


@pytest.fixture
def fabric(tmp_path):
    path = tmp_path / "fat_tree.txt"
    write_ns3_topology(fat_tree(2, 100.0, 1000.0), path)
    return path


def flows_gen(fabric, out):
    return invoke(
        "flows",
        "gen",
        "--cdf",
        "hadoop",
        "--load",
        0.3,
        "--duration-ms",
        0.05,
        "--topology",
        fabric,
        "-o",
        out,
    )


def test_flows_gen_onto_its_topology_is_refused(fabric):
    original = fabric.read_text()
    line = one_error_line(flows_gen(fabric, fabric))
    assert line == (
        f"error: --output {fabric} is the --topology input; writing it would destroy that input: "
        "give --output another path"
    )
    assert fabric.read_text() == original


def test_flows_gen_to_standard_output(fabric):
    result = flows_gen(fabric, "-")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert int(lines[0]) == len(lines) - 1 > 0  # the HPCC flow file: a count, then one flow a line
    assert "wrote standard output" in result.stderr


def test_flows_run_fct_through_a_fifo_to_stdout_and_never_onto_its_flows(fabric, tmp_path):
    flows = tmp_path / "flows.txt"
    flows.write_text("2\n0 1 3 100 1000000 0.000001\n1 0 3 100 1000000 0.000002\n")
    args = ["flows", "run", "--flows", flows, "--topology", fabric, "--backend", "flow"]
    fifo = tmp_path / "fct.fifo"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    result = invoke(*args, "--fct", fifo)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    rows = reader.finish().decode().splitlines()
    assert rows[0] == "src,dst,size_bytes,start_ns,fct_ns,ideal_fct_ns,slowdown" and len(rows) == 3
    result = invoke(*args, "--fct", "-")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1:] == rows[1:]
    line = one_error_line(invoke(*args, "--fct", flows))
    assert line.startswith(f"error: --fct {flows} is the --flows input;")
    assert flows.read_text().startswith("2\n0 1 3 100 1000000")


# -- astra topology and astra noc -------------------------------------------------------------


def test_topology_show_refuses_to_write_over_its_file_and_writes_stdout(fabric):
    original = fabric.read_text()
    line = one_error_line(invoke("topology", "show", fabric, "-o", fabric))
    assert line.startswith(f"error: --output {fabric} is the FILE input;")
    assert fabric.read_text() == original
    result = invoke("topology", "show", fabric, "-o", "-")
    assert result.exit_code == 0, result.output
    assert result.stdout == original and "wrote -" in result.stderr


def test_noc_json_through_a_fifo_and_checked_before_the_run(tmp_path, monkeypatch):
    fifo = tmp_path / "noc.fifo"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    args = ["noc", "--dims", "2x2", "--injection-rate", 0.05, "--cycles", 200, "--warmup", 50]
    result = invoke(*args, "--json", fifo)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    (row,) = json.loads(reader.finish())
    assert (row["dims"], row["injection_rate"], row["cycles"]) == ([2, 2], 0.05, 200)
    # Found before the run, not after it by open().
    import astra_garnetlike.noc

    monkeypatch.setattr(astra_garnetlike.noc, "run_noc", lambda **k: pytest.fail("ran before checking"))
    (tmp_path / "afile").write_text("x")
    line = one_error_line(invoke(*args, "--json", tmp_path / "afile" / "r.json"))
    assert line == (
        f"error: --json {tmp_path / 'afile' / 'r.json'}: cannot write: {tmp_path / 'afile'} is a file, not a directory"
    )


# -- astra sweep ------------------------------------------------------------------------------


def test_sweep_refuses_a_results_file_that_is_an_input_before_any_point(tmp_path, monkeypatch):
    import astra_core.sweep.run
    from astra_core.errors import ConfigError
    from astra_core.sweep import run_sweep
    from tests.sweep.test_sweep import write_spec

    path = write_spec(tmp_path)
    network = tmp_path / "results.csv"  # the network file, named as the sweep's table
    network.write_text(RING2)
    spec = path.read_text().replace("network.yml", "results.csv")
    path.write_text(spec + "grid:\n  network.latency[0]: [100.0, 200.0]\n")
    monkeypatch.setattr(astra_core.sweep.run, "run_serial", lambda *a: pytest.fail("ran before checking"))
    with pytest.raises(ConfigError) as info:
        run_sweep(path, output=tmp_path, workers=1)
    assert str(info.value) == (
        f"--output (results.csv) {network} is the network input; writing it would destroy that input: "
        "give --output another path"
    )
    assert network.read_text() == RING2


# -- astra convert ----------------------------------------------------------------------------


def test_convert_text_refuses_outputs_onto_its_input(reference_dir, tmp_path):
    source = (reference_dir / "text" / "Transformer_HybridParallel.txt").read_text()
    text = tmp_path / "t.3.et"  # the text workload, named as rank 3's output trace would be
    text.write_text(source)
    line = one_error_line(invoke("convert", "text", text, "--npus", 8, "--output", tmp_path / "t"))
    assert line == (
        f"error: --output (rank 3) {text} is the FILE input; writing it would destroy that input: "
        "give --output another path"
    )
    other = tmp_path / "w.txt"
    other.write_text(source)
    line = one_error_line(
        invoke("convert", "text", other, "--npus", 8, "--output", tmp_path / "o", "--comm-groups", other)
    )
    assert line.startswith(f"error: --comm-groups {other} is the FILE input;")
    assert text.read_text() == other.read_text() == source
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".et") == ["t.3.et"]


def test_an_output_onto_a_custom_collective_of_the_system_is_refused(tmp_path, no_simulation):
    repo = Path(__file__).resolve().parents[2]
    xml = tmp_path / "ring.xml"
    xml.write_text((repo / "tests" / "data" / "custom" / "custom_allreduce.xml").read_text())
    system = json.loads((EXAMPLE / "system.json").read_text())
    system["all-reduce-implementation-custom"] = [str(xml)]
    (tmp_path / "system.json").write_text(json.dumps(system))
    line = one_error_line(invoke(*run_args(tmp_path, tmp_path / "system.json"), "--timeline", xml))
    assert line == (
        f"error: --timeline {xml} is the --system's *-implementation-custom input; "
        "writing it would destroy that input: give --timeline another path"
    )
    assert xml.read_text().startswith("<") and no_simulation == []


def test_an_output_onto_the_nccl_profile_the_system_names_is_refused(tmp_path, no_simulation):
    # astra run --json onto the profile must not replace it with the results, exit 0.
    repo = Path(__file__).resolve().parents[2]
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"format": "astra-nccl-profile/1", "launch-us": 20.0}))
    system = json.loads((repo / "examples" / "validation" / "hgx_h100" / "system.json").read_text())
    system["nccl"]["profile"] = "profile.json"  # found beside system.json
    (tmp_path / "system.json").write_text(json.dumps(system))
    line = one_error_line(invoke(*run_args(tmp_path, tmp_path / "system.json"), "--json", profile))
    assert line == (
        f"error: --json {profile} is the --system's nccl.profile input; "
        "writing it would destroy that input: give --json another path"
    )
    assert json.loads(profile.read_text())["launch-us"] == 20.0 and no_simulation == []


def test_a_sweep_with_times_past_int64_is_one_line_and_keeps_its_points(tmp_path, exabyte_ring):
    # Not TypeError: cannot safely cast non-equivalent float64 to int64, with a traceback.
    spec = tmp_path / "s.yaml"
    spec.write_text(
        f"base:\n  workload: ar\n  system: {EXAMPLE / 'system.json'}\n  network: slow.yml\n"
        "grid:\n  network.latency[0]: [100.0, 200.0]\n"
    )
    result = invoke("sweep", spec, "--workers", 1)
    out = tmp_path / "s-results"
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.splitlines() == [
        f"error: {out}: cannot write the results table: step_ns: 1.611e+24 ns is beyond what an int64 "
        "ns column holds (9223372036854775807 ns, about 292 years) (every point is kept in points.jsonl)"
    ]
    assert sorted(p.name for p in out.iterdir()) == ["points.jsonl"]
    assert len((out / "points.jsonl").read_text().splitlines()) == 2
