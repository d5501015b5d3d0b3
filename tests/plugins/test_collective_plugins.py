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
    register("ring", ring_plan)  # system.json's plugin:ring, not the core's ring

    from astra_core.system.collectives.double_binary_tree import DoubleBinaryTree
    from astra_core.system.collectives.logical_topology import DoubleBinaryTreeTopology

    trees = {}  # (rank, members) -> the pair of trees its chunks alternate on

    def tree_phase(t, rank, dim, size):
        members = tuple(dim.ring.members)
        key = (rank, members)
        if key not in trees:
            trees[key] = DoubleBinaryTreeTopology(len(members), members[0], members[1] - members[0])
        return DoubleBinaryTree(t, rank, trees[key].next_tree(), size)

    register("mytree", phase_builder=tree_phase, description="a phase of its own")
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
        ("plugin:ring", "network/ring8.yml", 2326112),
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


def test_a_plugin_phase_runs_like_the_builtin_tree(reference_dir, tmp_path, plugin_manager):
    # upstream's alg_unaware_fc8_doubleBinaryTree_ALL_REDUCE_64MB (expected.json)
    upstream = [6200410, 7202350, 6889340, 7202350, 6544875, 7202350, 6889340, 7202350]
    result = simulate(
        reference_dir / "workload/micro/ALL_REDUCE_8npus_64MB/ALL_REDUCE",
        _system(reference_dir, tmp_path, "plugin:mytree"),
        reference_dir / "network/fc8.yml",
        plugin_manager=plugin_manager,
    )
    assert [r.finish_ns for r in result.ranks] == upstream


def test_the_core_registers_upstreams_algorithms_through_the_same_hook(plugin_manager):
    from astra_core.plugins import BUILTIN_PLUGIN, collective_registry

    module = next(n for n, _ in plugin_manager.list_name_plugin() if n.startswith("astra_test_collectives_"))
    owners = {name: c.plugin for name, c in collective_registry(plugin_manager).items()}
    assert owners == dict.fromkeys(
        ["ring", "direct", "halvingDoubling", "doubleBinaryTree"], BUILTIN_PLUGIN
    ) | {f"plugin:{name}": module for name in ("myring", "mydirect", "ring", "mytree")}


@pytest.mark.parametrize("arguments", ["", ", plan_builder=ring_plan, phase_builder=ring_plan"])
def test_a_registration_needs_one_builder(arguments, tmp_path, monkeypatch):
    from astra_core.plugins import collective_registry

    module = f"astra_test_collectives_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(
        "from astra_core.hookspecs import hookimpl\n"
        "from astra_core.system.collectives.ring import ring_plan\n\n"
        f"@hookimpl\ndef astra_register_collectives(register):\n    register('x'{arguments})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    pm = make_plugin_manager(modules=[module], settings=PluginSettings())
    assert "plugin:x" not in collective_registry(pm)
    assert pm.broken == {
        module: "astra_register_collectives raised TypeError: register('x', ...): "
        "give exactly one of plan_builder and phase_builder"
    }
    sys.modules.pop(module, None)


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
        "collective algorithm 'nope' (registered: mydirect, myring, mytree, ring)"
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
