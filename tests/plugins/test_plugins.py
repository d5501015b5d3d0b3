"""Plugin discovery: entry points, disabling, local plugin modules, plugins.toml, defaults.

A local plugin written into a temporary directory registers a backend in which
every message takes a constant ``LATENCY_NS`` whatever its size and route, so a
run on it has a closed form that no other backend gives.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

import astra_analytical.plugin
from astra_core.api import simulate
from astra_core.backend import Topology
from astra_core.cli import main
from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.errors import AstraError, ConfigError
from astra_core.plugins import (
    BUILTIN_PLUGIN,
    BackendRegistry,
    PluginSettings,
    backend_registry,
    load_settings,
    make_plugin_manager,
)
from tests.conftest import PLUGIN_ENV, write_pair_trace

REPO = Path(__file__).resolve().parents[2]
SYSTEM = REPO / "examples" / "resnet50_dp" / "system.json"

RING2 = {"topology": ["Ring"], "npus_count": [2], "bandwidth": [50.0], "latency": [500.0]}
RING8 = {"topology": ["Ring"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]}
LATENCY_NS = 1234
SEND_BYTES = 4096

PLUGIN_SOURCE = '''
"""A local astra plugin (test): every message takes LATENCY_NS, whatever its size or route."""
from astra_core.events import EventQueue
from astra_core.hookspecs import hookimpl

LATENCY_NS = {latency}


class ConstantLatencyNetwork:
    def __init__(self, topology, config=None):
        self.events = EventQueue()

    def now(self):
        return self.events.now

    def schedule(self, delay_ns, callback, arg=None):
        self.events.schedule(delay_ns, callback, arg)

    def send(self, src, dst, size_bytes, on_delivered, arg=None, *, tag=0):
        self.events.schedule(LATENCY_NS, on_delivered, arg)

    def run(self):
        self.events.run()


@hookimpl
def astra_register_backends(register):
    register({name!r}, ConstantLatencyNetwork, description="constant latency (test plugin)")
'''


@pytest.fixture(autouse=True)
def no_plugin_settings(tmp_path, monkeypatch) -> Path:
    """No plugin settings from the environment; an empty plugins.toml. Returns its path."""
    for var in PLUGIN_ENV:
        monkeypatch.delenv(var, raising=False)
    toml = tmp_path / "plugins.toml"
    toml.write_text("")
    monkeypatch.setenv("ASTRA_PLUGINS_TOML", str(toml))
    return toml


@pytest.fixture
def write_plugin(tmp_path, monkeypatch):
    """write_plugin(backend_name) -> name of a fresh importable module registering it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def write(backend_name: str, latency_ns: int = LATENCY_NS) -> str:
        module = f"astra_test_plugin_{uuid.uuid4().hex[:12]}"
        (tmp_path / f"{module}.py").write_text(PLUGIN_SOURCE.format(latency=latency_ns, name=backend_name))
        written.append(module)
        return module

    yield write
    for module in written:
        sys.modules.pop(module, None)


@pytest.fixture
def pair_trace(tmp_path) -> str:
    """Rank 0 computes 2 µs then sends SEND_BYTES to rank 1, which receives and computes 3 µs."""
    return write_pair_trace(tmp_path / "pair", nbytes=SEND_BYTES, tag=5, fwd_us=2, bwd_us=3)


def run_pair(prefix: str, **kwargs):
    system = SystemConfig.from_dict(json.loads(SYSTEM.read_text()))
    return simulate(prefix, system, NetworkConfig.from_dict(RING2), **kwargs)


def assert_constant_latency_run(result, backend_name: str) -> None:
    # The send leaves at 2000 ns (after fwd) and is in LATENCY_NS later; rank 0's send
    # completes then, rank 1's receive too, and bwd takes 3000 ns more.
    assert result.backend == backend_name
    assert [r.finish_ns for r in result.ranks] == [2000 + LATENCY_NS, 2000 + LATENCY_NS + 3000]
    assert [r.compute_ns for r in result.ranks] == [2000, 3000]
    assert [r.exposed_comm_ns for r in result.ranks] == [LATENCY_NS, 2000 + LATENCY_NS]


def assert_analytical_run(result) -> None:
    # Ring 2, 50 GB/s, 500 ns: 4096 B take int(500 + 4096 / 53.6870912) = int(576.29) = 576 ns.
    assert result.backend == "analytical"
    assert [r.finish_ns for r in result.ranks] == [2576, 5576]


def installed() -> list[str]:
    """Backends of the installed entry points (today: analytical; later maybe more)."""
    return BackendRegistry(make_plugin_manager(settings=PluginSettings())).names()


def lone_message_ns(backend, src: int, dst: int, size: int) -> float:
    arrivals = []
    backend.send(src, dst, size, lambda _: arrivals.append(backend.now()))
    backend.run()
    assert len(arrivals) == 1
    return arrivals[0]


# -- the plugin manager --------------------------------------------------------------------


def test_each_call_builds_a_fresh_manager(write_plugin):
    pm1 = make_plugin_manager(settings=PluginSettings())
    pm2 = make_plugin_manager(settings=PluginSettings())
    assert pm1 is not pm2
    # A plugin registered on one manager is invisible to the other.
    module = __import__(write_plugin("const"))
    pm1.register(module, name="local")
    assert "analytical" in installed() and "const" not in installed()
    assert BackendRegistry(pm1).names() == sorted([*installed(), "const"])
    assert BackendRegistry(pm2).names() == installed()


def test_analytical_is_the_cores_own_and_needs_no_entry_point():
    pm = make_plugin_manager(autoload=False, settings=PluginSettings())
    registry = BackendRegistry(pm)
    assert registry.names() == ["analytical"]
    assert registry.get("analytical").plugin == BUILTIN_PLUGIN
    # It is a working backend: Ring 8, 1 hop, 1 MiB = 500 + 19531.25 ns, truncated
    # (upstream's P2P ring shift on this network: 20031 ns).
    backend = registry.create("analytical", Topology(NetworkConfig.from_dict(RING8)))
    assert lone_message_ns(backend, 0, 1, 1 << 20) == 20031
    # Settings cannot disable the core's plugin.
    kept = make_plugin_manager(autoload=False, disabled=[BUILTIN_PLUGIN], settings=PluginSettings())
    assert BackendRegistry(kept).names() == ["analytical"]


def test_analytical_congestion_is_found_through_the_astra_entry_point_group():
    points = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="astra")}
    assert points["analytical-congestion"] == "astra_analytical.plugin"
    pm = make_plugin_manager(settings=PluginSettings())
    assert pm.get_plugin("analytical-congestion") is astra_analytical.plugin
    assert any(dist.project_name == "astra-analytical" for _, dist in pm.list_plugin_distinfo())
    assert BackendRegistry(pm).get("analytical-congestion").plugin == "analytical-congestion"


@pytest.mark.parametrize("how", ["argument", "environment", "plugins.toml"])
def test_disabling_a_plugin_removes_its_backends(how, monkeypatch, no_plugin_settings, write_plugin):
    other = write_plugin("const")
    if how == "argument":
        pm = make_plugin_manager(
            disabled=["analytical-congestion"], modules=[other], settings=PluginSettings()
        )
        registry = BackendRegistry(pm)
    else:
        if how == "environment":
            monkeypatch.setenv("ASTRA_DISABLE_PLUGINS", "garnetlike, analytical-congestion")
        else:
            no_plugin_settings.write_text('disabled = ["analytical-congestion"]\n')
        monkeypatch.setenv("ASTRA_PLUGINS", other)
        registry = backend_registry()
    # The environment case also disables the garnetlike plugin: its backends go too.
    off = {"analytical-congestion", "garnetlike"} if how == "environment" else {"analytical-congestion"}
    everything = backend_registry(settings=PluginSettings()).backends
    gone = {name for name, info in everything.items() if info.plugin in off}
    assert "analytical-congestion" in gone and "analytical" not in gone
    left = sorted({*everything, "const"} - gone)
    assert registry.names() == left
    with pytest.raises(AstraError) as err:
        registry.get("analytical-congestion")
    assert str(err.value) == f"unknown backend 'analytical-congestion'; available: {', '.join(left)}"


def test_a_disabled_default_backend_fails_the_run_naming_what_is_left(
    monkeypatch, pair_trace, no_plugin_settings
):
    no_plugin_settings.write_text('default_backend = "analytical-congestion"\n')
    monkeypatch.setenv("ASTRA_DISABLE_PLUGINS", "analytical-congestion")
    available = ", ".join(backend_registry().names())
    assert "analytical" in available.split(", ")
    with pytest.raises(AstraError) as err:
        run_pair(pair_trace)
    assert str(err.value) == f"unknown backend 'analytical-congestion'; available: {available}"


# -- a local plugin module -------------------------------------------------------------------


@pytest.mark.parametrize("how", ["argument", "environment", "plugins.toml"])
def test_local_plugin_backend_is_found_and_used(
    how, monkeypatch, no_plugin_settings, write_plugin, pair_trace
):
    module = write_plugin("const")
    if how == "argument":
        pm = make_plugin_manager(modules=[module], settings=PluginSettings())
        result = run_pair(pair_trace, backend="const", plugin_manager=pm)
    else:
        if how == "environment":
            monkeypatch.setenv("ASTRA_PLUGINS", module)
        else:
            no_plugin_settings.write_text(f'modules = ["{module}"]\n')
        assert backend_registry().names() == sorted([*installed(), "const"])
        result = run_pair(pair_trace, backend="const")
    assert_constant_latency_run(result, "const")
    assert "const" not in backend_registry(settings=PluginSettings()).names()


def test_local_plugin_is_listed_by_the_cli(monkeypatch, write_plugin):
    monkeypatch.setenv("ASTRA_PLUGINS", write_plugin("const"))
    result = CliRunner().invoke(main, ["backends"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == len(installed()) + 1
    assert (
        "analytical (default): usable — congestion-unaware analytical model (upstream "
        "ASTRA-sim): hops x latency + bytes / bandwidth per message" in lines
    )
    assert "const: usable — constant latency (test plugin)" in lines


def test_the_analytical_backend_still_runs_beside_a_local_plugin(monkeypatch, write_plugin, pair_trace):
    monkeypatch.setenv("ASTRA_PLUGINS", write_plugin("const"))
    assert_analytical_run(run_pair(pair_trace))
    assert_analytical_run(run_pair(pair_trace, backend="analytical"))


def test_a_name_registered_twice_is_an_error(write_plugin):
    clash = write_plugin("analytical")
    with pytest.raises(
        AstraError,
        match=rf"^backend 'analytical' registered twice \(by "
        rf"({BUILTIN_PLUGIN} and {clash}|{clash} and {BUILTIN_PLUGIN})\)$",
    ):
        BackendRegistry(make_plugin_manager(modules=[clash], settings=PluginSettings()))
    first, second = write_plugin("same"), write_plugin("same")
    with pytest.raises(AstraError, match=r"^backend 'same' registered twice"):
        BackendRegistry(make_plugin_manager(modules=[first, second], settings=PluginSettings()))


def test_a_module_that_cannot_be_imported_is_listed_as_broken(monkeypatch):
    # It breaks no other backend; runs warn about it, and asking for a
    # backend it would have brought names it.
    monkeypatch.setenv("ASTRA_PLUGINS", "astra_no_such_plugin_module")
    registry = backend_registry()
    assert registry.broken == {
        "astra_no_such_plugin_module": "cannot be imported: "
        "ModuleNotFoundError: No module named 'astra_no_such_plugin_module'"
    }
    assert set(registry.names()) >= {"analytical", "analytical-congestion"}
    with pytest.raises(
        AstraError,
        match=r"^unknown backend 'mine'; available: .*; broken plugins: "
        r"astra_no_such_plugin_module: cannot be imported",
    ):
        registry.get("mine")


def test_a_misspelled_hook_is_caught(tmp_path, monkeypatch):
    # check_pending() after loading: a hook name the spec does not know is not silently ignored.
    module = f"astra_test_typo_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{module}.py").write_text(
        "from astra_core.hookspecs import hookimpl\n\n"
        "@hookimpl\ndef astra_register_backend(register):\n    register('typo', None)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(AstraError, match="unknown hook 'astra_register_backend'"):
            make_plugin_manager(modules=[module], settings=PluginSettings())
    finally:
        sys.modules.pop(module, None)


def test_listing_an_entry_point_module_again_is_harmless_or_a_clear_error():
    try:
        registry = BackendRegistry(
            make_plugin_manager(modules=["astra_analytical.plugin"], settings=PluginSettings())
        )
    except AstraError:
        return  # a one-line error the CLI can print is acceptable too
    # Exactly what the entry points alone give (other installed plugins, e.g. the
    # examples/plugin_backend one, included): nothing registered twice.
    assert registry.names() == installed()
    assert set(registry.names()) >= {"analytical", "analytical-congestion"}


OBSERVER_SOURCE = """
from astra_core.hookspecs import hookimpl

CALLS = []


@hookimpl
def astra_run_started(run):
    CALLS.append(("started", run.now_ns, run.npus_count))


@hookimpl
def astra_run_finished(run, report):
    CALLS.append(("finished", run.now_ns, report.step_ns,
                  [r.finish_ns for r in report.ranks]))
"""


def test_observer_plugin_sees_the_run_start_and_finish(tmp_path, monkeypatch, pair_trace):
    module = f"astra_test_observer_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{module}.py").write_text(OBSERVER_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ASTRA_PLUGINS", module)
    try:
        result = run_pair(pair_trace)
        assert_analytical_run(result)
        # Called once each: before time moves (t = 0, 2 NPUs), and after the last event
        # (t = the step time, 5576 ns) with the very result simulate() returns.
        assert sys.modules[module].CALLS == [("started", 0, 2), ("finished", 5576, 5576, [2576, 5576])]
    finally:
        sys.modules.pop(module, None)


# -- plugins.toml and defaults ---------------------------------------------------------------


def test_plugins_toml_with_an_unknown_key_is_a_config_error(no_plugin_settings):
    no_plugin_settings.write_text('default_backend = "analytical"\ndisable = ["analytical"]\n')
    with pytest.raises(ConfigError) as err:
        load_settings()
    message = str(err.value)
    assert message.startswith(f"{no_plugin_settings}: unknown key 'disable'")
    with pytest.raises(ConfigError, match="unknown key 'disable'"):
        backend_registry()


def test_plugins_toml_that_is_not_toml_is_a_config_error(no_plugin_settings):
    no_plugin_settings.write_text("modules = [\n")
    with pytest.raises(ConfigError, match=rf"^{no_plugin_settings}: cannot read plugin settings"):
        load_settings()


@pytest.mark.parametrize("how", ["plugins.toml", "environment", "environment over plugins.toml"])
def test_default_backend_is_used_when_none_is_named(
    how, monkeypatch, no_plugin_settings, write_plugin, pair_trace
):
    module = write_plugin("const")
    if how == "plugins.toml":
        no_plugin_settings.write_text(f'default_backend = "const"\nmodules = ["{module}"]\n')
    elif how == "environment":
        monkeypatch.setenv("ASTRA_PLUGINS", module)
        monkeypatch.setenv("ASTRA_DEFAULT_BACKEND", "const")
    else:
        no_plugin_settings.write_text(f'default_backend = "analytical"\nmodules = ["{module}"]\n')
        monkeypatch.setenv("ASTRA_DEFAULT_BACKEND", "const")
    assert backend_registry().default == "const"
    assert_constant_latency_run(run_pair(pair_trace, backend=None), "const")
    # Naming a backend still wins over the default.
    assert_analytical_run(run_pair(pair_trace, backend="analytical"))


def test_builtin_default_is_analytical(pair_trace):
    assert load_settings().default_backend == "analytical"
    assert_analytical_run(run_pair(pair_trace))


def test_default_backend_that_does_not_exist_fails_clearly(monkeypatch, pair_trace):
    monkeypatch.setenv("ASTRA_DEFAULT_BACKEND", "no-such-backend")
    with pytest.raises(AstraError) as err:
        run_pair(pair_trace)
    available = ", ".join(installed())
    assert str(err.value) == f"unknown backend 'no-such-backend'; available: {available}"


# -- where plugins.toml is found, and how the environment combines with it -----------------
# (the rules docs/plugins.md states)


def test_plugins_toml_in_the_working_directory_is_used_when_none_is_named(
    tmp_path, monkeypatch, write_plugin
):
    module = write_plugin("const")
    monkeypatch.delenv("ASTRA_PLUGINS_TOML")
    here = tmp_path / "project"
    here.mkdir()
    (here / "plugins.toml").write_text(f'default_backend = "const"\nmodules = ["{module}"]\n')
    monkeypatch.chdir(here)
    settings = load_settings()
    assert settings.source == str(here / "plugins.toml")
    assert settings.default_backend == "const" and settings.modules == [module]
    # Elsewhere, the repository's plugins.toml (default analytical, no extra modules).
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    settings = load_settings()
    assert settings.source == str(REPO / "plugins.toml")
    assert settings.default_backend == "analytical" and settings.modules == []


def test_environment_lists_add_to_the_plugins_toml_lists(monkeypatch, no_plugin_settings, write_plugin):
    first, second = write_plugin("one"), write_plugin("two")
    no_plugin_settings.write_text(f'modules = ["{first}"]\ndisabled = ["x"]\n')
    monkeypatch.setenv("ASTRA_PLUGINS", f" {second} ,")
    monkeypatch.setenv("ASTRA_DISABLE_PLUGINS", "y, analytical-congestion")
    settings = load_settings()
    assert settings.modules == [first, second]
    assert settings.disabled == ["x", "y", "analytical-congestion"]
    assert backend_registry().names() == sorted({*installed(), "one", "two"} - {"analytical-congestion"})


def test_a_listed_module_that_is_also_disabled_is_not_loaded(no_plugin_settings, write_plugin):
    module = write_plugin("const")
    no_plugin_settings.write_text(f'modules = ["{module}"]\ndisabled = ["{module}"]\n')
    assert "const" not in backend_registry().names()
    assert module not in sys.modules


def test_loading_the_plugins_imports_no_backend_model():
    # Every run loads every installed plugin, so registration must stay cheap:
    # no packet model, C++ binding or backend config is imported just to list
    # (pydantic is the core's own config library, so it is not on the list).
    code = (
        "import sys; from astra_core.plugins import backend_registry; r = backend_registry(); "
        "heavy = {'simpy', 'cppyy', 'astra_ns3.config', 'astra_ns3.network', "
        "'astra_garnetlike.network', 'astra_garnetlike.config', 'astra_ideal.network', "
        "'astra_flow.network', 'astra_flow.config'}; "
        "print(sorted(heavy & set(sys.modules)), sorted(r.names()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, names = out.stdout.strip().split("] ", 1)
    assert loaded == "[" and "analytical" in names


def test_a_lazy_factory_names_module_and_function():
    from astra_core.plugins import lazy_factory

    for bad in ("astra_flow.network", ":create", "astra_flow.network:"):
        with pytest.raises(ValueError, match="expected 'module:function'"):
            lazy_factory(bad)
