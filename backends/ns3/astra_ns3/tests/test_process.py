"""Process isolation, the library cache, the JIT fallback, and the plugin's cheap import."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from astra_core.errors import AstraError
from astra_ns3.tests.fabrics import make_ns3, require_ns3, star


def test_a_crashing_worker_is_an_error_not_a_hang_and_the_next_run_works():
    from astra_ns3 import process

    worker = process.acquire()
    with pytest.raises(process.WorkerDied, match=r"died with signal SIGABRT: .*astra_ns3_abort called"):
        worker.request(("crash",), "never")
    assert not worker.alive()
    # A new simulation gets a new worker.
    backend = make_ns3(star(2))
    done = []
    backend.send(0, 1, 1000, done.append, "ok")
    backend.run()
    assert done == ["ok"]


def test_a_worker_killed_mid_run_is_reported(monkeypatch):
    backend = make_ns3(star(2))
    killed = []

    def kill(_):
        os.kill(backend._worker.proc.pid, 9)
        killed.append(True)

    backend.send(0, 1, 50_000_000, lambda _: None)
    backend.schedule(1000, kill)
    with pytest.raises(AstraError, match="died with signal SIGKILL"):
        backend.run()
    assert killed
    # The backend stays usable: the next run starts a fresh worker.
    arrived = []
    backend.send(0, 1, 0, arrived.append, "again")
    backend.run()
    assert arrived == ["again"]


def test_importing_the_plugin_and_listing_backends_loads_no_ns3():
    code = (
        "import sys; from astra_core.plugins import backend_registry; "
        "rows = backend_registry().availability(); "
        "assert any(n == 'ns3' and ok for n, ok, _ in rows), rows; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('ns', 'ns3', 'cppyy')]; "
        "assert not bad, bad; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


def test_missing_dependencies_give_the_install_hint(monkeypatch):
    from importlib import metadata

    from astra_core.errors import BackendUnavailable
    from astra_ns3 import factory

    def no_ns3(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(factory.metadata, "version", no_ns3)
    with pytest.raises(BackendUnavailable, match=r"needs the 'ns3' package.*pip install"):
        factory.check_available()


def test_library_is_cached_by_sources_version_and_compiler(tmp_path, monkeypatch):
    from astra_ns3 import build

    if build.compiler() is None:
        pytest.skip("no C++ compiler")
    path = build.compiled_library()
    assert path.is_file() and str(build.cache_dir()) in str(path)
    assert build.compiled_library() == path  # cached: no rebuild
    key = build.library_key(build.compiler())
    texts = build.source_texts()
    monkeypatch.setattr(build, "source_texts", lambda: {**texts, "api.cc": texts["api.cc"] + "\n"})
    assert build.library_key(build.compiler()) != key
    monkeypatch.setattr(build, "ns3_version", lambda: "3.44.post99")
    assert build.library_key(build.compiler()) != key


def test_cppyy_jit_fallback_gives_the_same_result(monkeypatch):
    from astra_ns3 import process

    def lone_message(backend):
        arrived = []
        backend.send(0, 1, 1_000_000, lambda _: arrived.append(backend.now()))
        backend.run()
        return arrived[0]

    compiled = lone_message(make_ns3(star(2)))
    process.close_idle()
    monkeypatch.setenv("ASTRA_NS3_LIBRARY", "jit")
    monkeypatch.setenv("ASTRA_NS3_REUSE", "0")
    backend = make_ns3(star(2))
    assert lone_message(backend) == compiled


def test_a_run_that_will_compile_the_model_says_so(tmp_path, monkeypatch, capsys):
    from astra_ns3 import build, network

    require_ns3()
    build.compiled_library()  # built and cached (as by any run before)
    assert not build.needs_compiling()
    monkeypatch.setenv("ASTRA_NS3_CACHE", str(tmp_path))  # an empty cache: the next run compiles
    assert build.needs_compiling()
    monkeypatch.setattr(network, "_compile_checked", False)
    network._say_if_compiling()
    network._say_if_compiling()  # once per process
    err = capsys.readouterr().err
    assert err == (
        f"ns3 backend: compiling the C++ model for this machine, once (about 10 s; cached in {tmp_path})\n"
    )


def test_a_worker_dies_with_its_caller_even_when_it_reads_nothing():
    # SIGKILL (or SIGTERM) to a caller must not leave its busy worker simulating, orphaned.
    import signal
    import time

    caller = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom astra_ns3 import process\nw = process.acquire()\n"
            "print(w.proc.pid, flush=True)\ntime.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        worker = int(caller.stdout.readline())
        os.kill(worker, signal.SIGSTOP)  # reads nothing from now on, as a busy worker
        caller.kill()
        caller.wait()
        deadline = time.monotonic() + 60  # generous: the kernel signals at once
        while _running(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(worker)
    finally:
        caller.kill()


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
