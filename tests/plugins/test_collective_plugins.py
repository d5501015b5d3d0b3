"""Collective algorithms contributed by plugins (astra_register_collectives), as plans."""

import json
import sys
import uuid

import pytest

from astra_core.api import simulate
from astra_core.errors import AstraError, ConfigError
from astra_core.plugins import PluginSettings, make_plugin_manager

PLUGIN = """
from astra_core.hookspecs import hookimpl


@hookimpl
def astra_register_collectives(register):
    from astra_core.system.collectives.direct import direct_plan
    from astra_core.system.collectives.ring import ring_plan

    register("myring", lambda t, rank, ring, size: ring_plan(t, rank, ring, size),
             description="the ring, from a plugin")
    register("mydirect", lambda t, rank, ring, size: direct_plan(t, rank, ring, size))
"""


@pytest.fixture
def plugin_manager(tmp_path, monkeypatch):
    module = f"astra_test_collectives_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield make_plugin_manager(modules=[module], settings=PluginSettings())
    sys.modules.pop(module, None)


def _system(reference_dir, tmp_path, algorithm):
    data = json.loads((reference_dir / "system/ring_1d.json").read_text())
    for key in (
        "all-reduce-implementation",
        "all-gather-implementation",
        "reduce-scatter-implementation",
        "all-to-all-implementation",
    ):
        data[key] = [algorithm]
    path = tmp_path / "system.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "algorithm, network, upstream",
    [
        # Upstream's numbers for its own ring and direct algorithms (expected.json):
        # the same plans registered by a plugin give the same times.
        ("plugin:myring", "network/ring8.yml", 2326112),  # unaware_ring8_ALL_REDUCE_64MB
        ("plugin:mydirect", "network/fc8.yml", 332336),  # alg_unaware_fc8_direct_ALL_REDUCE_64MB
    ],
)
def test_a_plugin_plan_runs_like_the_builtin(
    algorithm, network, upstream, reference_dir, tmp_path, plugin_manager
):
    result = simulate(
        reference_dir / "workload/micro/ALL_REDUCE_8npus_64MB/ALL_REDUCE",
        _system(reference_dir, tmp_path, algorithm),
        reference_dir / network,
        plugin_manager=plugin_manager,
    )
    assert [r.finish_ns for r in result.ranks] == [upstream] * 8


def test_an_unregistered_plugin_algorithm_is_a_config_error(reference_dir, tmp_path, plugin_manager):
    path = _system(reference_dir, tmp_path, "plugin:nope")
    with pytest.raises(ConfigError) as exc:
        simulate(
            reference_dir / "workload/micro/ALL_REDUCE_8npus_1MB/ALL_REDUCE",
            path,
            reference_dir / "network/ring8.yml",
            plugin_manager=plugin_manager,
        )
    assert str(exc.value) == (
        f"{path}: all-reduce-implementation[0]: no plugin registered "
        "collective algorithm 'nope' (registered: mydirect, myring)"
    )


def test_a_name_registered_twice_is_an_error(tmp_path, monkeypatch):
    modules = []
    for _ in range(2):
        module = f"astra_test_collectives_{uuid.uuid4().hex[:10]}"
        (tmp_path / f"{module}.py").write_text(PLUGIN)
        modules.append(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    from astra_core.plugins import collective_registry

    pm = make_plugin_manager(modules=modules, settings=PluginSettings())
    with pytest.raises(AstraError, match="collective algorithm '(myring|mydirect)' registered twice"):
        collective_registry(pm)
    for module in modules:
        sys.modules.pop(module, None)
