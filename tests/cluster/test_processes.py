"""The runs alone beside the run of all jobs, in worker processes (astra_core.cluster.processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import astra
from astra_core.cluster import run as cluster_run
from astra_core.errors import AstraError, ConfigError
from astra_core.workers import WorkerPool
from tests.waiting import default_sigint, wait_for


def _results(result):
    return [
        (j.iteration_ns, j.alone_iteration_ns, j.alone_end_ns, j.link_bytes, j.slowdown) for j in result.jobs
    ]


def test_the_runs_alone_give_the_same_results_in_any_number_of_processes(cluster):
    jobs = [{"name": n, "placement": "spread"} for n in "ab"]
    spec = cluster(jobs)
    here = astra.simulate_cluster(spec, cache=False, processes=1)
    beside = astra.simulate_cluster(spec, cache=False, processes=3)
    assert _results(beside) == _results(here)
    assert beside.jobs[0].slowdown > 1.0  # they share the spines: the runs alone differ from together


def _exits() -> None:
    os._exit(9)


def _runs_out_of_memory() -> None:
    raise MemoryError


@pytest.mark.parametrize(
    "death, how",
    [(_exits, "(exit code 9; out of memory?)"), (_runs_out_of_memory, "(out of memory: MemoryError)")],
)
def test_a_worker_that_dies_is_one_error_naming_its_job(cluster, monkeypatch, death, how):
    parent = os.getpid()
    original = cluster_run._Cluster.alone

    def dies_in_a_worker(self, index):
        if os.getpid() != parent:
            death()
        return original(self, index)

    monkeypatch.setattr(cluster_run._Cluster, "alone", dies_in_a_worker)
    monkeypatch.setattr(WorkerPool, "take_unstarted", lambda self: None)  # every run alone in the worker
    spec = cluster([{"name": n, "placement": "spread"} for n in "ab"])
    with pytest.raises(AstraError) as info:
        astra.simulate_cluster(spec, cache=False, processes=2)
    assert str(info.value).startswith(f"job a alone: the process simulating it died {how}")


@pytest.mark.parametrize("count", [0, -1, 1.5, True])
def test_processes_must_be_a_positive_integer(cluster, count):
    with pytest.raises(ConfigError, match="processes: expected an integer >= 1"):
        astra.simulate_cluster(cluster([{"name": "a"}]), processes=count)


# -- interrupted: no worker outlives astra cluster --------------------------------------------

#: Deadlines (s) for what the tests wait on: generous, since a loaded 2-core machine can be
#: slow to start interpreters; a healthy run polls only until the event happens.
START_S = 300
EXIT_S = 60
REPO = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _workers(pid: int) -> list[int]:
    """``pid``'s forked workers: its children running its own command line (a transient
    child, such as a compiler probe, is none of them)."""
    try:
        own = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    found = []
    for child in _children(pid):
        try:
            if Path(f"/proc/{child}/cmdline").read_bytes() == own:
                found.append(child)
        except OSError:
            continue
    return found


def _children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_astra_cluster_and_no_worker_survives(cluster, tmp_path, signum):
    # Long runs alone (400 iterations each): the signal lands while the worker simulates.
    spec = cluster([{"name": n, "placement": "spread", "iterations": 400} for n in "ab"])
    err_path = tmp_path / "stderr.txt"
    with err_path.open("w") as err_file:
        run = subprocess.Popen(
            [sys.executable, "-m", "astra_core.cli", "cluster", str(spec), "--no-cache", "--processes", "2"],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=err_file,  # a file, not a pipe: a surviving worker would hold a pipe open
            preexec_fn=default_sigint,
        )
    try:
        # the runs announced (startup over: a fork-then-exec child of the startup has the
        # parent's command line for an instant), and a forked worker there
        started = lambda: "(run 3 of 3)" in err_path.read_text() and _workers(run.pid)  # noqa: E731
        assert wait_for(lambda: started() or run.poll() is not None, START_S)
        workers = _workers(run.pid)
        assert workers, f"no worker started: {err_path.read_text()}"
        run.send_signal(signum)
        run.wait(timeout=EXIT_S)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    # Before: SIGTERM ended astra at once and left its workers blocked forever; Ctrl-C
    # waited for the workers' runs to end.
    assert wait_for(lambda: not any(_alive(pid) for pid in workers), EXIT_S), f"{workers} outlived astra"
    assert run.returncode == 128 + signum, err_path.read_text()
    name = signal.Signals(signum).name
    assert err_path.read_text().splitlines()[-1] == f"error: astra cluster: interrupted by {name}"


BUSY_WORKER = """
import os, sys, time
from astra_core.cluster.processes import run_beside

flag = sys.argv[1]

def main():
    while not os.path.exists(flag):  # until the worker has its run
        time.sleep(0.01)
    raise KeyboardInterrupt

def work(i):
    with open(flag + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(flag + ".tmp", flag)
    time.sleep(3600)  # a run that would not end for an hour

try:
    run_beside(main, work, [0], 2, str)
except KeyboardInterrupt:
    print("interrupted")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")
def test_an_interrupt_kills_a_busy_worker_at_once(tmp_path):
    # Before: leaving run_beside waited for the worker's run (here an hour).
    flag = tmp_path / "worker-pid"
    done = subprocess.run(
        [sys.executable, "-c", BUSY_WORKER, str(flag)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=START_S,
    )
    assert (done.returncode, done.stdout) == (0, "interrupted\n"), done.stderr
    worker = int(flag.read_text())
    assert wait_for(lambda: not _alive(worker), EXIT_S)


INTERRUPTED_AT_FORK = """
import os, signal, sys
from astra_core.cluster.processes import run_beside

# Ctrl-C that lands while the pool forks its worker: Python runs the parent's
# at-fork callbacks, where a KeyboardInterrupt is printed and ignored
def interrupt():
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(1000):  # Python code: the handler runs here
        pass

os.register_at_fork(after_in_parent=interrupt)

try:
    run_beside(lambda: "main ran", lambda i: i, [0], 2, str)
except KeyboardInterrupt:
    print("interrupted")
else:
    print("ran to the end")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")
def test_ctrl_c_while_the_workers_fork_still_stops_the_run():
    # Before: the interrupt was lost in the fork's callbacks; the run went on and exited 0.
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_AT_FORK],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=START_S,
        # a shell's background job inherits SIGINT ignored, and the interrupt would then
        # never come: the run gets Ctrl-C as a terminal would give it
        preexec_fn=default_sigint,
    )
    assert (done.returncode, done.stdout) == (0, "interrupted\n"), done.stderr
