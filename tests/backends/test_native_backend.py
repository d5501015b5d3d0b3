"""A compiled network model from a third party (docs/plugins.md, "A compiled network
model"): built with ``astra_core.native.load_extension`` against the kernel's API
header, it gets every message without a Python call and gives the same times as the
same model written in Python.

The model (tests/data/native_backend/fifo_nic.cc): each NPU's NIC sends one message
at a time, first come first served, at ``bytes_per_ns``; a message arrives
``latency_ns`` after its last byte left."""

from __future__ import annotations

from pathlib import Path

import pytest

from astra_core.api import simulate
from astra_core.events import KERNEL_API_HEADER, EventQueue, kernel
from astra_core.hookspecs import hookimpl
from astra_core.native import load_extension
from astra_core.plugins import PluginSettings, make_plugin_manager
from tests.conftest import isolate_plugins

DATA = Path(__file__).resolve().parents[1] / "data"
SOURCE = DATA / "native_backend" / "fifo_nic.cc"
REFERENCE = DATA / "reference"
LATENCY_NS, BYTES_PER_NS = 700.0, 25.0


class FifoNicPython:
    """The model in Python: the yardstick."""

    def __init__(self, npus: int) -> None:
        self.events = EventQueue()
        self.schedule = self.events.schedule
        self._free_at = [0.0] * npus
        self.python_sends = 0

    def now(self) -> float:
        return self.events.now

    def send(self, src, dst, size_bytes, on_delivered, arg=None, *, tag=0):
        self.python_sends += 1
        now = self.events.now
        start = max(self._free_at[src], now)
        done = start + size_bytes / BYTES_PER_NS
        self._free_at[src] = done
        self.events.schedule(done + LATENCY_NS - now, on_delivered, arg)

    def run(self) -> None:
        self.events.run()


class FifoNicCompiled(FifoNicPython):
    """The same model compiled: the matcher finds ``native_send`` and ``events`` (the
    Python ``send`` is kept for callers in Python)."""

    def __init__(self, npus: int) -> None:
        super().__init__(npus)
        module = load_extension("_fifo_nic", [SOURCE], [KERNEL_API_HEADER])
        self.model = module.Model(self.events, kernel().C_API, LATENCY_NS, BYTES_PER_NS, npus)
        self.native_send = self.model.native_send


class Backends:
    @hookimpl
    def astra_register_backends(self, register):
        register("fifo-python", lambda topology, config=None: FifoNicPython(topology.network.npus_count))
        register("fifo-compiled", lambda topology, config=None: FifoNicCompiled(topology.network.npus_count))


@pytest.fixture
def plugin_manager(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)
    pm = make_plugin_manager(settings=PluginSettings())
    pm.register(Backends(), name="fifo-nic")
    return pm


@pytest.mark.parametrize(
    "workload,system",
    [
        ("all_to_all/8npus_1MB/all_to_all", "direct_1d.json"),
        ("all_reduce/8npus_1MB/all_reduce", "ring_1d.json"),
    ],
)
def test_a_compiled_model_gives_the_times_of_the_same_model_in_python(plugin_manager, workload, system):
    inputs = (
        str(REFERENCE / "workload" / workload),
        str(REFERENCE / "system" / system),
        str(REFERENCE / "network" / "sw8.yml"),
    )
    python = simulate(*inputs, backend="fifo-python", plugin_manager=plugin_manager, symmetry=False)
    compiled = simulate(*inputs, backend="fifo-compiled", plugin_manager=plugin_manager, symmetry=False)
    assert [r.finish_ns for r in compiled.ranks] == [r.finish_ns for r in python.ranks]
    assert compiled.messages == python.messages > 0


def test_the_compiled_model_is_handed_every_message_natively():
    from astra_core.system.p2p import MessageMatcher

    backend = FifoNicCompiled(4)
    matcher = MessageMatcher(backend, 4)
    log = []
    for src in range(3):
        matcher.send(src, 3, 2500, 1, log.append, src)  # 100 ns of NIC time each
    matcher.recv(0, 3, 2500, 1, log.append, "in")
    matcher.send(0, 3, 2500, 2, log.append, "second")  # queues behind the first on NIC 0
    backend.run()
    assert backend.python_sends == 0 and backend.model.messages == 4
    assert log == [0, "in", 1, 2, "second"]
    assert backend.now() == 100 + 100 + LATENCY_NS  # the second message left NIC 0 at 200 ns
