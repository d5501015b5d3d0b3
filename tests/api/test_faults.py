"""Faulty cables in a plain run (``simulate(..., faults=...)``, ``astra run --faults``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from astra.api import simulate
from astra_core.cli import main
from astra_core.errors import ConfigError
from astra_core.topology.generators import fat_tree
from astra_core.topology.ns3_format import write_ns3_topology
from astra_core.workload.generators.micro import write_micro

SYSTEM = str(Path(__file__).parents[1] / "data" / "reference" / "system" / "ring_1d.json")
FABRIC = fat_tree(4, 100.0, 1000.0)  # hosts 0-15
EDGE = FABRIC.link_dst[FABRIC.out_links[0][0]]  # host 0's switch


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("trace") / "ar"
    write_micro("all-reduce", 16 << 20, 16, prefix)
    return str(prefix)


def test_a_cable_slowed_from_mid_step_costs_less_than_slowed_all_step(trace):
    # the ring crosses host 0's cable in every step: a quarter of its bandwidth from the
    # start slows the whole all-reduce; from halfway, about half of that
    healthy = simulate(trace, SYSTEM, topology=FABRIC, backend="flow")
    slow = {"link": [0, EDGE], "bandwidth": 0.25}
    whole = simulate(trace, SYSTEM, topology=FABRIC, backend="flow", faults=[slow])
    mid_us = healthy.step_ns / 2000
    mid = simulate(trace, SYSTEM, topology=FABRIC, backend="flow", faults=[{**slow, "at_us": mid_us}])
    assert healthy.step_ns < mid.step_ns < whole.step_ns
    assert not mid.symmetric  # links that change break rank symmetry
    # a degraded ring runs at the slow cable's pace: the time after the fault scales
    # as the whole-run slowdown does, to within the ring's latency terms (5 %)
    after = mid.step_ns - healthy.step_ns / 2
    assert after == pytest.approx(whole.step_ns / 2, rel=0.05)


def test_faults_from_a_file_are_the_faults_given_as_a_list(tmp_path, trace):
    faults = [{"link": [0, EDGE], "bandwidth": 0.5, "at_us": 100, "until_us": 400}]
    (tmp_path / "faults.yaml").write_text(yaml.safe_dump({"faults": faults}))
    write_ns3_topology(FABRIC, tmp_path / "fabric.txt")
    listed = simulate(trace, SYSTEM, topology=FABRIC, backend="analytical-congestion", faults=faults)
    out = CliRunner().invoke(
        main,
        ["run", "--workload", trace, "--system", SYSTEM, "--topology",
         str(tmp_path / "fabric.txt"), "--dims", "16", "--backend", "analytical-congestion",
         "--faults", str(tmp_path / "faults.yaml"), "--json", str(tmp_path / "out.json")],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert json.loads((tmp_path / "out.json").read_text())["step_ns"] == round(listed.step_ns)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"faults": [{"link": [0, EDGE], "down": True}]}, "faults: the cables down (0-{EDGE}) cut NPU 1 off"),
        ({"faults": [{"link": [0, 1], "down": True}]}, "faults[0]: link: no cable between nodes 0 and 1"),
        ({"faults": [{"link": [0, EDGE], "bandwidth": 2}]}, "faults: faults[0].bandwidth:"),
        ({"faults": [{"link": [0, EDGE], "bandwidth": 0.5, "at_us": 5}], "backend": "analytical"},
         "faults: backend analytical cannot change links during a run"),
        ({"faults": [{"link": [0, EDGE], "down": True}], "topology": None},
         "faults: link faults need a physical topology (--topology)"),
    ],
)  # fmt: skip
def test_bad_faults_are_one_line(trace, kwargs, message):
    options = {"topology": FABRIC, "backend": "flow", **kwargs}
    if options["topology"] is None:
        options.update(topology=None, network={"topology": ["Ring"], "npus_count": [16], "bandwidth": [50],
                                               "latency": [500]})  # fmt: skip
    with pytest.raises(ConfigError) as info:
        simulate(trace, SYSTEM, **options)
    assert str(info.value).startswith(message.format(EDGE=EDGE)), str(info.value)
