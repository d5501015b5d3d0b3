"""``astra.RunSpec`` and ``astra.run``: one description of a run that every entry point builds.

``simulate`` and ``estimate`` take exactly the spec's fields besides their own keywords
(a field added to the spec and not to them would fail here), and a spec run through
``astra.run`` times what the same keywords through ``astra.simulate`` do: a two-rank
exchange of 1 MiB on one Ring of 2 NPUs at 50 GB/s and 500 ns finishes at
int(500 + 2^20 * 1e9 / (50 * 2^30)) = 20031 ns.
"""

from __future__ import annotations

import inspect
from dataclasses import fields
from pathlib import Path

import pytest

import astra
from astra_core.config.network import NetworkConfig
from astra_core.errors import ConfigError
from tests.cli.test_cli import two_rank_trace
from tests.conftest import isolate_plugins

SYSTEM = Path(__file__).resolve().parents[2] / "examples" / "resnet50_dp" / "system.json"
RING2 = {"topology": ["Ring"], "npus_count": [2], "bandwidth": [50.0], "latency": [500.0]}
FIELDS = [f.name for f in fields(astra.RunSpec)]


@pytest.fixture(autouse=True)
def _plugins(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)


@pytest.mark.parametrize(
    "function, own",
    [(astra.simulate, {"progress", "plugin_manager", "on_estimate"}), (astra.estimate, {"plugin_manager"})],
)
def test_the_keyword_entry_points_take_the_specs_fields_and_their_own(function, own):
    assert set(inspect.signature(function).parameters) == set(FIELDS) | own


def test_a_spec_runs_as_its_keywords_do(tmp_path):
    spec = astra.RunSpec(two_rank_trace(tmp_path), SYSTEM, RING2, backend="analytical")
    report = astra.run(spec)
    assert report.step_ns == int(500 + 2**20 * 1e9 / (50 * 2**30)) == 20031
    assert astra.simulate(spec.workload, SYSTEM, RING2, backend="analytical").step_ns == report.step_ns
    assert astra.estimate_run(spec).messages == 1


def test_checking_a_spec_loads_dict_configs_and_names_a_field_of_the_wrong_type(tmp_path):
    spec = astra.RunSpec(two_rank_trace(tmp_path), SYSTEM, RING2)
    assert isinstance(spec.checked().network, NetworkConfig) and spec.network is RING2  # frozen: a new spec
    with pytest.raises(ConfigError, match=r"^simulate: iterations must be an integer >= 1, got float$"):
        astra.run(astra.RunSpec(spec.workload, SYSTEM, RING2, iterations=2.0))
    with pytest.raises(ConfigError, match=r"^simulate: dims\[1\] must be an integer, got str$"):
        astra.RunSpec(spec.workload, SYSTEM, RING2, dims=[2, "1"]).checked()
