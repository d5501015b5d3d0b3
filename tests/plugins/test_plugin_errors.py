"""A plugin can never make a run silently wrong, lost or hung.

* A backend registered without ``config_type`` refuses a backend config
  (the host enforces it, so third-party backends get it for free); one with a
  config type validates it, naming the file and key.
* A plugin that raises while loading, registering, building a backend, in its
  backend's ``run()`` or in an observer hook is one error line naming the
  plugin; it breaks no other backend nor ``astra backends``; an observer's
  error after a run keeps the result.

Each case uses a small plugin written into a temporary directory. The pair
trace: rank 0 computes 2 us and sends 4096 B to rank 1, which then computes
3 us; on ``analytical`` (Ring 2, 50 GB/s, 500 ns) the message takes
int(500 + 4096 / 53.6870912) = 576 ns, so the ranks finish at 2576 and 5576 ns.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from astra_core.api import simulate
from astra_core.backend import Topology
from astra_core.cli import main
from astra_core.config.network import NetworkConfig
from astra_core.errors import AstraError, ConfigError
from astra_core.hookspecs import hookimpl
from astra_core.plugins import (
    BackendRegistry,
    PluginError,
    PluginSettings,
    PluginWarning,
    backend_registry,
    collective_registry,
    make_plugin_manager,
)
from astra_core.system.collectives.registry import builtin_collectives
from tests.conftest import isolate_plugins, write_pair_trace

REPO = Path(__file__).resolve().parents[2]
SYSTEM = REPO / "examples" / "resnet50_dp" / "system.json"
RING2 = {"topology": ["Ring"], "npus_count": [2], "bandwidth": [50.0], "latency": [500.0]}
ANALYTICAL_FINISH = [2576, 5576]

BACKEND = """
from astra_core.events import EventQueue
from astra_core.hookspecs import hookimpl


class Network:
    def __init__(self, topology, config=None):
        self.events = EventQueue()

    def now(self):
        return self.events.now

    def schedule(self, delay_ns, callback, arg=None):
        self.events.schedule(delay_ns, callback, arg)

    def send(self, src, dst, size_bytes, on_delivered, arg=None, *, tag=0):
        self.events.schedule(100, on_delivered, arg)

    def run(self):
        self.events.run()
"""


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """plugin(source) -> the name of a fresh importable module with that source."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def write(source: str) -> str:
        module = f"astra_test_plugin_{uuid.uuid4().hex[:12]}"
        (tmp_path / f"{module}.py").write_text(source)
        written.append(module)
        return module

    yield write
    for module in written:
        sys.modules.pop(module, None)


@pytest.fixture
def pair(tmp_path) -> str:
    return write_pair_trace(tmp_path / "pair", nbytes=4096, tag=5, fwd_us=2, bwd_us=3)


@pytest.fixture
def network_yml(tmp_path) -> Path:
    path = tmp_path / "network.yml"
    path.write_text("topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    return path


def run_pair(prefix: str, **kwargs):
    return simulate(prefix, SYSTEM, NetworkConfig.from_dict(RING2), **kwargs)


def cli(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


# -- --backend-config for a backend that takes none, or validates one --------------------------


def test_analytical_refuses_a_backend_config_instead_of_ignoring_it(tmp_path, pair, network_yml):
    config = tmp_path / "cfg.toml"
    config.write_text("bandwidth = 1\n")
    out = cli(
        "run",
        "--workload",
        pair,
        "--system",
        SYSTEM,
        "--network",
        network_yml,
        "--backend",
        "analytical",
        "--backend-config",
        config,
    )
    assert out.exit_code == 1
    assert out.stderr == f"error: backend 'analytical' takes no --backend-config (got '{config}')\n"
    assert out.exception is None or isinstance(out.exception, SystemExit)
    with pytest.raises(
        ConfigError,
        match=r"^backend 'analytical-congestion' takes no "
        r"--backend-config \(got keys a, b\)$",
    ):
        run_pair(pair, backend="analytical-congestion", backend_config={"a": 1, "b": 2})
    # No config, or an empty mapping (a sweep that sets no backend_config key), is fine.
    assert [r.finish_ns for r in run_pair(pair, backend_config={}).ranks] == ANALYTICAL_FINISH


def test_a_third_party_backend_without_config_type_gets_the_refusal_for_free(plugin, pair):
    module = plugin(
        BACKEND + "\n@hookimpl\ndef astra_register_backends(register):\n    register('plain', Network)\n"
    )
    pm = make_plugin_manager(modules=[module], settings=PluginSettings())
    # Its factory would accept and silently ignore anything; the host refuses first.
    with pytest.raises(
        ConfigError,
        match=r"^backend 'plain' takes no --backend-config "
        r"\(got 'x\.yml'\)$",
    ):
        run_pair(pair, backend="plain", plugin_manager=pm, backend_config="x.yml")
    assert [r.finish_ns for r in run_pair(pair, backend="plain", plugin_manager=pm).ranks] == [2100, 5100]


def test_the_ideal_example_validates_its_config_file(tmp_path, pair, network_yml):
    pytest.importorskip("astra_ideal")
    good = tmp_path / "ideal.toml"
    good.write_text("bandwidth_gbps = 25\nlatency_ns = 0\n")
    out_json = tmp_path / "out.json"
    out = cli(
        "run",
        "--workload",
        pair,
        "--system",
        SYSTEM,
        "--network",
        network_yml,
        "--backend",
        "ideal",
        "--backend-config",
        good,
        "--json",
        out_json,
    )
    assert out.exit_code == 0, out.stderr
    # 4096 B at 25 GB/s: 4096e9 / (25 * 2^30) = 152.6 -> 152 ns, no latency.
    assert [r["finish_ns"] for r in json.loads(out_json.read_text())["ranks"]] == [2152, 5152]
    bad = tmp_path / "bad.yml"
    bad.write_text("speed: 1\nlatency_ns: .inf\nbandwidth_gbps: 1" + "0" * 400 + "\n")
    out = cli(
        "run",
        "--workload",
        pair,
        "--system",
        SYSTEM,
        "--network",
        network_yml,
        "--backend",
        "ideal",
        "--backend-config",
        bad,
    )
    assert out.exit_code == 1
    assert out.stderr.splitlines() == [
        f"error: {bad}: bandwidth_gbps: must be in (0, 1e+09] GB/s, got an integer of about 401 digits",
        f"error: {bad}: latency_ns: must be in [0, 1e+12] ns, got inf",
        f"error: {bad}: unknown key 'speed'",
    ]


# -- a plugin that raises ---------------------------------------------------------------------


def test_a_plugin_whose_registration_raises_breaks_nothing_else(plugin, pair, monkeypatch):
    broken = plugin(
        "from astra_core.hookspecs import hookimpl\n\n@hookimpl\n"
        "def astra_register_backends(register):\n"
        "    register('half', object)\n"
        "    raise RuntimeError('no licence server\\nsecond line')\n"
    )
    wrong = plugin(
        "from astra_core.hookspecs import hookimpl\n\n@hookimpl\n"
        "def astra_register_backends(register):\n    register('wrong', 42)\n"
    )
    monkeypatch.setenv("ASTRA_PLUGINS", f"{broken},{wrong}")
    registry = backend_registry()
    assert registry.broken == {
        broken: "astra_register_backends raised RuntimeError: no licence server",
        wrong: "astra_register_backends raised TypeError: register('wrong', ...): the factory "
        "is not callable",
    }
    assert "half" not in registry.names() and "analytical" in registry.names()
    # Other backends run; the run says which plugins it went without.
    with pytest.warns(PluginWarning) as caught:
        assert [r.finish_ns for r in run_pair(pair).ranks] == ANALYTICAL_FINISH
    assert sorted(str(w.message) for w in caught) == sorted(
        [
            f"plugin '{broken}' is broken and was not used: astra_register_backends raised "
            "RuntimeError: no licence server",
            f"plugin '{wrong}' is broken and was not used: astra_register_backends raised "
            "TypeError: register('wrong', ...): the factory is not callable",
        ]
    )
    # a backend the plugin registered before its hook raised is named with the plugin's reason
    with pytest.raises(AstraError) as info:
        registry.get("half")
    assert str(info.value) == (
        f"backend 'half': unavailable — broken plugin '{broken}': astra_register_backends raised "
        "RuntimeError: no licence server"
    )
    with pytest.raises(
        AstraError,
        match=rf"^unknown backend 'nosuch'; available: .*analytical.*; "
        rf"broken plugins: {broken}: astra_register_backends "
        rf"raised RuntimeError: no licence server; {wrong}: ",
    ):
        registry.get("nosuch")
    out = cli("backends")
    assert out.exit_code == 0
    assert (
        f"{broken}: unavailable — broken plugin: astra_register_backends raised "
        "RuntimeError: no licence server" in out.stdout.splitlines()
    )
    assert any(line.startswith("analytical (default): usable") for line in out.stdout.splitlines())


def test_an_entry_point_that_fails_to_load_breaks_nothing_else(tmp_path, monkeypatch, pair):
    module = f"astra_test_ep_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{module}.py").write_text("raise ImportError('needs libfoo.so')\n")
    dist = tmp_path / "astra_test_broken-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: astra-test-broken\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[astra]\nbrokenep = {module}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        registry = backend_registry()
        assert registry.broken == {"brokenep": "cannot be loaded: ImportError: needs libfoo.so"}
        assert "analytical" in registry.names()
        with pytest.warns(
            PluginWarning,
            match="^plugin 'brokenep' is broken and was not used: "
            "cannot be loaded: ImportError: needs libfoo.so$",
        ):
            assert [r.finish_ns for r in run_pair(pair).ranks] == ANALYTICAL_FINISH
        out = cli("backends")
        assert out.exit_code == 0
        assert (
            "brokenep: unavailable — broken plugin (distribution astra-test-broken 0.1): cannot be "
            "loaded: ImportError: needs libfoo.so" in out.stdout.splitlines()
        )
    finally:
        sys.modules.pop(module, None)


def test_an_installed_plugin_whose_register_hook_raises_is_listed_and_named_by_backend(
    tmp_path, monkeypatch, pair, network_yml
):
    module = f"astra_test_ep_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{module}.py").write_text(
        "from astra_core.hookspecs import hookimpl\n\n@hookimpl\n"
        "def astra_register_backends(register):\n    raise RuntimeError('no licence server')\n"
    )
    dist = tmp_path / "astra_test_licensed-0.3.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: astra-test-licensed\nVersion: 0.3\n")
    (dist / "entry_points.txt").write_text(f"[astra]\nlicensed = {module}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reason = (
        "broken plugin (distribution astra-test-licensed 0.3): astra_register_backends raised "
        "RuntimeError: no licence server"
    )
    try:
        out = cli("backends")
        assert out.exit_code == 0
        assert f"licensed: unavailable — {reason}" in out.stdout.splitlines()
        # --backend naming it gives the same reason, not "unknown backend"
        out = cli(
            "run", "--workload", pair, "--system", SYSTEM, "--network", network_yml, "--backend", "licensed"
        )
        assert out.exit_code == 1
        assert out.stderr.splitlines()[-1] == f"error: backend 'licensed': unavailable — {reason}"
    finally:
        sys.modules.pop(module, None)


def test_a_local_module_that_raises_on_import_is_set_aside(plugin, monkeypatch, pair, network_yml):
    module = plugin("import astra_test_no_such_dependency\n")
    monkeypatch.setenv("ASTRA_PLUGINS", module)
    registry = backend_registry()
    assert registry.broken == {
        module: "cannot be imported: ModuleNotFoundError: No module named 'astra_test_no_such_dependency'"
    }
    assert "analytical" in registry.names()
    # The command line runs, and warns in one line that the plugin was not used.
    out = cli("run", "--workload", pair, "--system", SYSTEM, "--network", network_yml)
    assert out.exit_code == 0
    assert out.stderr == (
        f"warning: plugin '{module}' is broken and was not used: cannot be "
        "imported: ModuleNotFoundError: No module named "
        "'astra_test_no_such_dependency'\n"
    )


def test_a_factory_that_raises_is_one_line_naming_the_plugin(plugin, pair):
    module = plugin(
        BACKEND + "\ndef create(topology, config=None):\n    return {}['missing']\n\n"
        "@hookimpl\ndef astra_register_backends(register):\n"
        "    register('bad', create)\n"
    )
    pm = make_plugin_manager(modules=[module], settings=PluginSettings())
    with pytest.raises(PluginError) as err:
        run_pair(pair, backend="bad", plugin_manager=pm)
    assert str(err.value) == f"plugin '{module}': backend 'bad' could not be built: KeyError: 'missing'"
    assert isinstance(err.value.__cause__, KeyError)


def test_a_backend_run_that_raises_is_one_line_naming_the_plugin(plugin, pair):
    module = plugin(
        BACKEND.replace("self.events.run()", "self.events.run()\n        1 / 0")
        + "\n@hookimpl\ndef astra_register_backends(register):\n"
        "    register('divides', Network)\n"
    )
    pm = make_plugin_manager(modules=[module], settings=PluginSettings())
    with pytest.raises(PluginError) as err:
        run_pair(pair, backend="divides", plugin_manager=pm)
    assert str(err.value) == (
        f"plugin '{module}': backend 'divides' failed in run(): ZeroDivisionError: division by zero"
    )


def test_a_backend_with_slots_is_guarded_too_and_left_untouched(plugin, pair):
    # The host wraps such a backend rather than replace run() on the instance, which a
    # __slots__ class refuses (its errors would escape as raw tracebacks).
    module = plugin(
        BACKEND.replace("class Network:\n", "class Network:\n    __slots__ = ('events',)\n\n").replace(
            "self.events.run()", "self.events.run()\n        1 / 0"
        )
        + "\n@hookimpl\ndef astra_register_backends(register):\n"
        "    register('slotted', Network)\n"
    )
    pm = make_plugin_manager(modules=[module], settings=PluginSettings())
    backend = BackendRegistry(pm).create("slotted", Topology(NetworkConfig.from_dict(RING2)))
    assert backend.wrapped.run.__func__ is type(backend.wrapped).run  # the plugin's own, not replaced
    with pytest.raises(PluginError) as err:
        run_pair(pair, backend="slotted", plugin_manager=pm)
    assert str(err.value) == (
        f"plugin '{module}': backend 'slotted' failed in run(): ZeroDivisionError: division by zero"
    )


def test_an_error_of_the_host_inside_a_plugin_run_keeps_its_type(plugin):
    # The plugin's run() drives the host's callbacks: their bugs are not the plugin's.
    module = plugin(
        BACKEND + "\n@hookimpl\ndef astra_register_backends(register):\n    register('fine', Network)\n"
    )
    registry = BackendRegistry(make_plugin_manager(modules=[module], settings=PluginSettings()))
    backend = registry.create("fine", Topology(NetworkConfig.from_dict(RING2)))

    def host_callback(_):
        raise LookupError("the host's own bug")

    backend.schedule(5, host_callback)
    with pytest.raises(LookupError, match="the host's own bug"):
        backend.run()


OBSERVERS = """
from astra_core.hookspecs import hookimpl

SEEN = []


@hookimpl
def astra_run_started(run):
    if {fail_start}:
        raise ValueError("cannot open the dashboard")


@hookimpl
def astra_run_finished(run, report):
    SEEN.append(report.step_ns)
    raise OSError("disk full")
"""


def test_an_observer_that_fails_at_the_start_is_one_line_naming_it(plugin, pair):
    module = plugin(OBSERVERS.format(fail_start=True))
    pm = make_plugin_manager(modules=[module], settings=PluginSettings())
    with pytest.raises(PluginError) as err:
        run_pair(pair, plugin_manager=pm)
    assert str(err.value) == (
        f"plugin '{module}': astra_run_started raised ValueError: cannot open the dashboard"
    )


def test_an_observer_that_fails_at_the_end_keeps_the_result(plugin, pair, tmp_path, network_yml, monkeypatch):
    first, second = plugin(OBSERVERS.format(fail_start=False)), plugin(OBSERVERS.format(fail_start=False))
    pm = make_plugin_manager(modules=[first, second], settings=PluginSettings())
    with pytest.warns(PluginWarning) as caught:
        result = run_pair(pair, plugin_manager=pm)
    assert [r.finish_ns for r in result.ranks] == ANALYTICAL_FINISH
    # Both observers ran, though each raised.
    assert sys.modules[first].SEEN == sys.modules[second].SEEN == [5576]
    assert sorted(str(w.message) for w in caught) == sorted(
        f"plugin '{name}': astra_run_finished raised OSError: disk full (the run's result is kept)"
        for name in (first, second)
    )
    # The command line writes the result, then says what went wrong, and exits 0.
    monkeypatch.setenv("ASTRA_PLUGINS", first)
    out_json = tmp_path / "out.json"
    out = cli("run", "--workload", pair, "--system", SYSTEM, "--network", network_yml, "--json", out_json)
    assert out.exit_code == 0
    assert [r["finish_ns"] for r in json.loads(out_json.read_text())["ranks"]] == ANALYTICAL_FINISH
    assert (
        f"warning: plugin '{first}': astra_run_finished raised OSError: disk full (the run's "
        "result is kept)" in out.stderr.splitlines()
    )


def test_a_collectives_hook_that_raises_breaks_nothing_else(plugin, pair):
    module = plugin(
        "from astra_core.hookspecs import hookimpl\n\n@hookimpl\n"
        "def astra_register_collectives(register):\n    raise KeyError('ring')\n"
    )
    pm = make_plugin_manager(modules=[module], settings=PluginSettings())
    assert set(collective_registry(pm)) == set(builtin_collectives())  # the core's alone
    assert pm.broken == {module: "astra_register_collectives raised KeyError: 'ring'"}
    with pytest.warns(
        PluginWarning,
        match=f"^plugin '{module}' is broken and was not used: "
        "astra_register_collectives raised KeyError: 'ring'$",
    ):
        assert [r.finish_ns for r in run_pair(pair, plugin_manager=pm).ranks] == ANALYTICAL_FINISH


def test_error_lines_are_short_and_keep_the_reason_of_a_traceback():
    from astra_core.plugins import describe

    crash = RuntimeError(
        'ns3 worker failed:\nTraceback (most recent call last):\n  File "w.py", '
        "line 1, in <module>\nValueError: bad payload\n"
    )
    assert describe(crash) == "RuntimeError: ns3 worker failed: ValueError: bad payload"
    assert describe(ValueError("first\nsecond")) == "ValueError: first"
    long = describe(ValueError("x" * 500))
    assert len(long) == 200 and long.endswith("...")


@pytest.mark.parametrize(
    "body, reason",
    [
        # sys.exit() in a plugin once ended `astra backends` with nothing printed, exit 0
        ("def astra_register_backends(register):\n    sys.exit()\n", "SystemExit"),
        ("def astra_register_backends(register):\n    sys.exit(3)\n", "SystemExit: 3"),
        # a hook naming no argument was called with register= (its TypeError was the reason)
        ("def astra_register_backends():\n    raise OSError('no licence')\n", "OSError: no licence"),
    ],
)
def test_astra_backends_lists_a_plugin_whose_register_hook_raises(plugin, monkeypatch, body, reason):
    module = plugin("import sys\nfrom astra_core.hookspecs import hookimpl\n\n@hookimpl\n" + body)
    monkeypatch.setenv("ASTRA_PLUGINS", module)
    out = cli("backends")
    assert out.exit_code == 0
    lines = out.stdout.splitlines()
    assert lines[-1] == f"{module}: unavailable — broken plugin: astra_register_backends raised {reason}"
    assert any(line.startswith("analytical (default): usable") for line in lines)
    # the same through the Python API
    pm = make_plugin_manager(modules=[module], settings=PluginSettings())
    assert BackendRegistry(pm).broken == {module: f"astra_register_backends raised {reason}"}


def test_an_observer_that_calls_sys_exit_is_one_line_naming_it(plugin, pair):
    module = plugin(
        "import sys\nfrom astra_core.hookspecs import hookimpl\n\n@hookimpl\n"
        "def astra_run_started(run):\n    sys.exit(2)\n"
    )
    pm = make_plugin_manager(modules=[module], settings=PluginSettings())
    with pytest.raises(PluginError) as err:
        run_pair(pair, plugin_manager=pm)
    assert str(err.value) == f"plugin '{module}': astra_run_started raised SystemExit: 2"


HOOKS_AS_PLUGGY_CALLS_THEM = (
    BACKEND
    + """
SEEN = []


def create(topology, config=None):
    return Network(topology)


@hookimpl(wrapper=True)
def astra_register_backends(register):
    register("wrapped", create, description="registered by a hook wrapper")
    return (yield)


@hookimpl
def astra_register_collectives():  # pluggy passes a hook only the arguments it names
    SEEN.append("collectives")


@hookimpl(wrapper=True)
def astra_run_finished(report):
    SEEN.append(report.step_ns)
    return (yield)
"""
)


def test_hooks_are_called_through_the_manager_as_pluggy_calls_them(plugin, pair, monkeypatch):
    # Walking get_hookimpls() and calling each function by hand ran a wrapper's
    # generator without starting it (its backend and observer silently missing)
    # and called a hook naming fewer arguments with all of them (a TypeError,
    # so a working plugin was listed as broken).
    module = plugin(HOOKS_AS_PLUGGY_CALLS_THEM)
    pm = make_plugin_manager(modules=[module], settings=PluginSettings())
    registry = BackendRegistry(pm)
    assert set(collective_registry(pm)) == set(builtin_collectives())
    assert pm.broken == {}
    assert "wrapped" in registry.names()
    assert sys.modules[module].SEEN == ["collectives"]
    # the message takes the plugin's 100 ns: rank 0 at 2 us + 100 ns, rank 1 3 us later
    result = run_pair(pair, plugin_manager=pm, backend="wrapped")
    assert [r.finish_ns for r in result.ranks] == [2100, 5100]
    assert [seen for seen in sys.modules[module].SEEN if seen != "collectives"] == [5100]
    monkeypatch.setenv("ASTRA_PLUGINS", module)
    out = cli("backends")
    assert out.exit_code == 0
    assert "wrapped: usable — registered by a hook wrapper" in out.stdout.splitlines()


def test_an_availability_check_that_raises_is_listed_as_broken(plugin, monkeypatch):
    module = plugin(
        BACKEND + "\ndef create(topology, config=None):\n    return Network(topology)\n\n"
        "def probe():\n    raise OSError('no /dev/fabric')\n\n"
        "@hookimpl\ndef astra_register_backends(register):\n"
        "    register('probed', create, description='d', check_available=probe)\n"
    )
    monkeypatch.setenv("ASTRA_PLUGINS", module)
    out = cli("backends")
    assert out.exit_code == 0
    assert (
        f"probed: unavailable — broken plugin '{module}': its availability check raised "
        "OSError: no /dev/fabric" in out.stdout.splitlines()
    )
    assert any(line.startswith("analytical (default): usable") for line in out.stdout.splitlines())


def test_a_progress_observer_that_raises_is_dropped_with_one_warning_and_the_run_goes_on():
    example = Path(__file__).resolve().parents[2] / "examples" / "resnet50_dp"
    inputs = (
        str(example / "workload" / "Resnet50_DataParallel"),
        example / "system.json",
        example / "network.yml",
    )

    class Failing:
        calls = 0

        @hookimpl
        def astra_run_progress(self, run, progress):
            Failing.calls += 1
            raise RuntimeError("no terminal")

    class Recording:
        @hookimpl
        def astra_run_progress(self, run, progress):
            reports.append(progress)

    reports: list = []
    plain = simulate(*inputs, backend="analytical-congestion")
    pm = make_plugin_manager(settings=PluginSettings())
    pm.register(Failing(), name="failing")
    pm.register(Recording(), name="recording")
    with pytest.warns(PluginWarning) as caught:
        result = simulate(*inputs, backend="analytical-congestion", plugin_manager=pm)
    lines = [str(w.message) for w in caught if "astra_run_progress" in str(w.message)]
    assert lines == [
        "plugin 'failing': astra_run_progress raised RuntimeError: no terminal "
        "(no more progress reports to it in this run)"
    ]
    assert Failing.calls == 1 and len(reports) >= 2  # the other observer got every report
    assert result.step_ns == plain.step_ns and reports[-1].now_ns == result.step_ns
