"""Arguments of ``astra.simulate`` / ``astra_core.api.simulate`` / ``astra.sweep``: a value of
the wrong type is one ConfigError naming the argument and the type it got, never a
TypeError or AttributeError from deep inside, and never silently taken as truthy.

Dict comm groups are validated exactly like a comm-group file
(astra_core.config.comm_groups.parse_comm_groups). A two-rank exchange
(Ring 2, 50 GB/s, 500 ns, 1 MiB) finishes at 20031 ns: the closed form used
to check that valid inputs still run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import astra
from astra_core.api import simulate as core_simulate
from astra_core.config.comm_groups import parse_comm_groups
from astra_core.errors import ConfigError, TraceError
from astra_core.workload.chakra import read_workload
from tests.cli.test_cli import two_rank_trace
from tests.conftest import isolate_plugins

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "resnet50_dp"
SYSTEM = EXAMPLE / "system.json"
RING2 = {"topology": ["Ring"], "npus_count": [2], "bandwidth": [50.0], "latency": [500.0]}
TWO_RANK_FINISH_NS = 20031


@pytest.fixture(autouse=True)
def _plugins(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)


@pytest.fixture
def prefix(tmp_path) -> Path:
    """Rank 0 sends 1 MiB to rank 1."""
    return two_rank_trace(tmp_path)


def error_of(call) -> str:
    with pytest.raises(ConfigError) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("simulate", [astra.simulate, core_simulate], ids=["astra", "core"])
def test_workload_of_a_wrong_type(simulate):
    assert (
        error_of(lambda: simulate(42, SYSTEM, RING2 if simulate is astra.simulate else None))
        == "simulate: workload must be a path or a list of rank traces, got int"
    )


def test_workload_list_of_paths_names_the_element(prefix):
    assert (
        error_of(lambda: astra.simulate([f"{prefix}.0.et", f"{prefix}.1.et"], SYSTEM, RING2))
        == "simulate: workload[0] must be a RankTrace, got str"
    )


def test_workload_list_with_fewer_traces_than_npus_is_an_error(prefix):
    # Not a run of the traces given, as if the network were smaller.
    traces = read_workload(prefix, 2)
    with pytest.raises(TraceError) as info:
        astra.simulate(traces[:1], SYSTEM, RING2)
    assert str(info.value) == (
        "simulate: workload has 1 rank traces, but the network has 2 NPUs (one trace per NPU)"
    )
    assert astra.simulate(traces, SYSTEM, RING2).step_ns == TWO_RANK_FINISH_NS


@pytest.mark.parametrize("value", ["no", "False", 0, 1, None])
def test_symmetry_must_be_a_bool(prefix, value):
    assert (
        error_of(lambda: astra.simulate(prefix, SYSTEM, RING2, symmetry=value))
        == f"simulate: symmetry must be True or False, got {type(value).__name__}"
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"system": 3}, "simulate: system must be a path, a SystemConfig or a dict, got int"),
        ({"network": [1]}, "simulate: network must be a path, a NetworkConfig, a dict or None, got list"),
        ({"memory": 2.5}, "simulate: memory must be a path, a MemoryConfig, a dict or None, got float"),
        ({"topology": 7}, "simulate: topology must be a path, a PhysicalTopology or None, got int"),
        ({"dims": "2"}, "simulate: dims must be a list of dimension sizes or None, got str"),
        ({"dims": [2.0]}, "simulate: dims[0] must be an integer, got float"),
        ({"dims": []}, "simulate: dims must be a non-empty list of dimension sizes or None, got list"),
        (
            {"comm_groups": [[0, 1]]},
            "simulate: comm_groups must be a path, a mapping {group id: [NPU ids]} or None, got list",
        ),
        ({"backend": 1}, "simulate: backend must be a backend name or None, got int"),
        (
            {"plugin_manager": "pm"},
            "simulate: plugin_manager must be a pluggy PluginManager or None, got str",
        ),
        ({"progress": "yes"}, "simulate: progress must be True, False or a RunProgress, got str"),
    ],
)
def test_every_argument_of_a_wrong_type_is_named(prefix, kwargs, message):
    args = {"system": SYSTEM, "network": RING2, **kwargs}
    if "topology" in kwargs:
        args["network"] = None
    assert error_of(lambda: astra.simulate(prefix, **args)) == message


def test_dict_comm_groups_are_validated_like_the_file(prefix):
    groups = {"1": [0, 5], "0": [0], "x": [1]}
    with pytest.raises(ConfigError) as expected:
        parse_comm_groups(groups, 2, source="comm_groups")
    message = error_of(lambda: astra.simulate(prefix, SYSTEM, RING2, comm_groups=groups))
    assert message == str(expected.value)
    assert message.splitlines() == [
        "comm_groups: group 1[1]: NPU id 5 out of range (the network has NPUs 0..1)",
        "comm_groups: group 0: group id 0 is reserved for the default group of all NPUs "
        "(pg_name '0' is PyTorch's default process group; upstream asserts id > 0)",
        "comm_groups: group 'x': group id must be a non-negative decimal integer "
        "(collective nodes name it in their pg_name attribute)",
    ]


def test_dict_comm_groups_accept_tuples_and_ranges(prefix):
    report = astra.simulate(prefix, SYSTEM, RING2, comm_groups={1: (0, 1), "2": range(2)})
    assert report.step_ns == TWO_RANK_FINISH_NS


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"spec": 5}, "sweep: spec must be a SweepSpec, a path or a dict, got int"),
        ({"workers": "2"}, "sweep: workers must be an integer >= 1 or None, got str"),
        ({"workers": 0}, "sweep: workers must be an integer >= 1 or None, got 0"),
        ({"workers": True}, "sweep: workers must be an integer >= 1 or None, got bool"),
        ({"ray": 1}, "sweep: ray must be True, False, a cluster address or None, got int"),
        ({"fresh": "no"}, "sweep: fresh must be True or False, got str"),
        ({"output": 3}, "sweep: output must be a path or None, got int"),
    ],
)
def test_sweep_arguments_of_a_wrong_type_are_named(tmp_path, kwargs, message):
    args = {"spec": str(tmp_path / "never-read.yaml"), **kwargs}
    assert error_of(lambda: astra.sweep(**args)) == message
