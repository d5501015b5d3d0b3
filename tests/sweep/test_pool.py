"""The local worker pool: a dying worker fails only its point; no worker outlives a
killed sweep; a script without a ``__main__`` guard can sweep.

Points that kill their worker come from a local plugin (``crashy``) whose
backends die when built: ``exit3`` calls ``os._exit(3)``, ``sigkill`` kills
itself, ``segv`` reads address 0, ``oom`` raises MemoryError, ``slow`` writes its pid to ``$CRASHY_PIDS``
and sleeps until it is killed. The other points run the two-rank closed-form
trace of test_sweep.py.

The tests wait for events (a pid file appears, a process is gone) by polling
with long deadlines, never for a fixed time: a loaded machine slows them down
but does not fail them.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from astra_core import workers
from astra_core.errors import AstraError
from astra_core.sweep import run_sweep
from tests.conftest import isolate_plugins
from tests.sweep.test_sweep import closed_form_step_ns, write_spec
from tests.waiting import default_sigint, wait_for

REPO = Path(__file__).resolve().parents[2]
PLUGIN = """
import os, signal, time
from astra_core.hookspecs import hookimpl

def exit3(topology, config=None):
    os._exit(3)

def sigkill(topology, config=None):
    os.kill(os.getpid(), signal.SIGKILL)

def segv(topology, config=None):
    import ctypes, resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
    ctypes.string_at(0)

def oom(topology, config=None):
    raise MemoryError

def slow(topology, config=None):
    (__import__("pathlib").Path(os.environ["CRASHY_PIDS"]) / str(os.getpid())).write_text("")
    time.sleep(3600)  # until the test kills the sweep (the kernel then kills us: PDEATHSIG)

@hookimpl
def astra_register_backends(register):
    for factory in (exit3, sigkill, segv, oom, slow):
        register(factory.__name__, factory)
"""


@pytest.fixture(autouse=True)
def _crashy(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "crashy.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(plugins))
    monkeypatch.setenv("ASTRA_PLUGINS", "crashy")
    monkeypatch.setenv("PYTHONPATH", str(plugins))  # for the subprocess tests
    monkeypatch.setenv("CRASHY_PIDS", str(tmp_path))


def test_a_dying_worker_fails_only_the_point_it_held(tmp_path):
    backends = ["analytical", "exit3", "analytical", "sigkill", "analytical", "segv"]
    path = write_spec(
        tmp_path, points=[{"backend": b} for b in backends], grid={"network.bandwidth[0]": [25.0]}
    )
    outcome = run_sweep(path, workers=2)
    frame = outcome.frame
    assert frame["status"].tolist() == ["ok", "error", "ok", "error", "ok", "error"]
    assert frame["error"].tolist()[1] == "worker process died while running this point (exit code 3)"
    assert frame["error"].tolist()[3] == "worker process died while running this point (killed by SIGKILL)"
    assert frame["error"].tolist()[5] == "worker process died while running this point (killed by SIGSEGV)"
    ok = frame[frame["status"] == "ok"]
    assert ok["step_ns"].tolist() == [closed_form_step_ns(25.0, 500.0)] * 3
    assert (outcome.ran, outcome.failed) == (6, 3)
    # A re-run retries only the dead points (not failing every pending point, always).
    again = run_sweep(path, workers=2)
    assert (again.ran, again.skipped, again.failed) == (3, 3, 3)


def test_a_point_out_of_memory_ends_its_worker_and_the_next_points_get_a_fresh_one(tmp_path):
    # a heap that once filled keeps its pages: the worker leaves instead of running on,
    # its point fails saying so, and the points after it run on a new worker
    backends = ["oom", "analytical", "oom", "analytical"]
    path = write_spec(
        tmp_path, points=[{"backend": b} for b in backends], grid={"network.bandwidth[0]": [25.0]}
    )
    frame = run_sweep(path, workers=2).frame
    assert frame["status"].tolist() == ["error", "ok", "error", "ok"]
    died = "worker process died while running this point (out of memory: MemoryError)"
    assert frame["error"].tolist()[0::2] == [died, died]
    assert frame["step_ns"].tolist()[1::2] == [closed_form_step_ns(25.0, 500.0)] * 2
    # in this process (one worker: no pool) the point fails alone and the sweep goes on
    frame = run_sweep(path, workers=1, output=tmp_path / "serial").frame
    assert frame["status"].tolist() == ["error", "ok", "error", "ok"]
    assert all(e.startswith("MemoryError") for e in frame["error"][0::2])


def test_a_worker_that_cannot_start_is_one_error(tmp_path, monkeypatch):
    # As if astra could not be imported in a fresh interpreter: the worker exits
    # before it is ready. Every point would fail the same way, so the sweep stops.
    monkeypatch.setattr(workers, "_BOOT", "import sys; sys.exit(3)")
    path = write_spec(tmp_path, grid={"network.bandwidth[0]": [25.0, 50.0, 100.0]})
    with pytest.raises(AstraError) as err:
        run_sweep(path, workers=2)
    assert str(err.value) == "sweep: a worker process could not start (exit code 3); see its messages above"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


#: Deadlines for what the tests wait on (s). Generous: a loaded 2-core machine can
#: take a minute to start two interpreters that import astra; a healthy run polls
#: only until the event happens, so the bound costs nothing when nothing is wrong.
START_S = 600
EXIT_S = 300


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_no_worker_survives_a_killed_sweep(tmp_path, signum):
    path = write_spec(tmp_path, points=[{"backend": "slow"}, {"backend": "slow"}])
    # Output to a file, not a pipe: a surviving worker would hold a pipe open.
    err_path = tmp_path / "stderr.txt"
    with err_path.open("w") as err_file:
        sweep = subprocess.Popen(
            [sys.executable, "-m", "astra_core.cli", "sweep", str(path), "-j", "2"],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=err_file,
            # a shell's background job inherits SIGINT ignored, and Python then never
            # raises KeyboardInterrupt: the sweep gets Ctrl-C as a terminal would give it
            preexec_fn=default_sigint,
        )
    try:
        pids = lambda: [int(p.name) for p in tmp_path.iterdir() if p.name.isdigit()]  # noqa: E731
        assert wait_for(lambda: len(pids()) == 2, START_S), "workers did not start"
        workers = pids()
        assert all(_alive(pid) for pid in workers)
        sweep.send_signal(signum)
        sweep.wait(timeout=EXIT_S)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert wait_for(lambda: not any(_alive(pid) for pid in workers), EXIT_S), (
        f"workers {workers} outlived the sweep"
    )
    if signum == signal.SIGKILL:
        return
    assert sweep.returncode == 128 + signum
    assert err_path.read_text().strip().splitlines()[-1] == (
        f"error: sweep interrupted by {signal.Signals(signum).name}: 0 points finished "
        f"(kept in {tmp_path / 'sweep-results' / 'points.jsonl'}; run again to resume)"
    )


def test_a_script_without_a_main_guard_can_sweep_on_a_pool(tmp_path):
    path = write_spec(tmp_path, grid={"network.bandwidth[0]": [25.0, 50.0, 100.0]})
    script = tmp_path / "plain.py"
    script.write_text(
        textwrap.dedent(f"""\
        import astra
        frame = astra.sweep({str(path)!r}, workers=2)
        print(frame["status"].tolist(), frame["step_ns"].tolist())
    """)
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=START_S
    )
    assert done.returncode == 0, done.stderr
    steps = [closed_form_step_ns(b, 500.0) for b in (25.0, 50.0, 100.0)]
    assert done.stdout.strip() == f"{['ok'] * 3} {steps}"
