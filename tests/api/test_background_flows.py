"""Background flows beside a training step (``simulate(..., background=...)``, ``--background``)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from astra.api import simulate
from astra_core.cli import main
from astra_core.config.system import upstream_system
from astra_core.errors import ConfigError
from astra_core.flows.flowfile import FlowSpec, format_flows
from astra_core.flows_api import run_flows
from astra_core.topology.generators import fat_tree
from astra_core.topology.ns3_format import write_ns3_topology
from astra_core.workload.generators.micro import write_micro

SYSTEM = upstream_system("ring", 1)  # boost-mode off, its default
FLOWS = [
    FlowSpec(0, 5, 3_000_000, 0),
    FlowSpec(7, 2, 40_000, 1_000),
    FlowSpec(12, 3, 900_000, 5_000),
    FlowSpec(4, 9, 2_500, 20_000),
]


@pytest.fixture(scope="module")
def fabric():
    return fat_tree(4, 100.0, 1000.0)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("trace") / "ar"
    write_micro("all-reduce", 16 << 20, 16, prefix)
    return str(prefix)


def test_flows_after_the_step_leave_it_alone_and_run_as_on_an_idle_fabric(fabric, trace):
    alone = simulate(trace, SYSTEM, topology=fabric, backend="flow")
    later = [FlowSpec(f.src, f.dst, f.size_bytes, f.start_ns + 10**9) for f in FLOWS]
    both = simulate(trace, SYSTEM, topology=fabric, backend="flow", background=later)
    assert [r.finish_ns for r in both.ranks] == [r.finish_ns for r in alone.ranks]
    idle = run_flows(later, fabric, "flow").flows
    # The same flows on the idle fabric: equal FCTs (tags differ, so paths may; the
    # fat-tree's equal-cost paths are equally fast when idle).
    assert [f.fct_ns for f in both.background] == pytest.approx([f.fct_ns for f in idle])
    assert all(f.slowdown == pytest.approx(f.fct_ns / f.ideal_fct_ns) for f in both.background)


def test_flows_during_the_step_slow_it_and_are_slowed(fabric, trace):
    alone = simulate(trace, SYSTEM, topology=fabric, backend="flow")
    heavy = [FlowSpec(s, (s + 8) % 16, 8_000_000, 0) for s in range(16)]
    both = simulate(trace, SYSTEM, topology=fabric, backend="flow", background=heavy)
    assert both.step_ns > alone.step_ns
    # Each NPU's link carries its background flow and its ring traffic: slower than alone.
    assert min(f.slowdown for f in both.background) > 1.05
    assert not both.symmetric  # background traffic breaks rank symmetry


def test_background_needs_a_topology(trace):
    with pytest.raises(ConfigError, match="background flows need a physical topology"):
        simulate(
            trace,
            SYSTEM,
            {"topology": ["Switch"], "npus_count": [16], "bandwidth": [50.0], "latency": [500.0]},
            background=FLOWS,
        )


def test_cli_prints_and_writes_the_background_flows(fabric, trace, tmp_path):
    topology, flows, out = tmp_path / "ft.txt", tmp_path / "flows.txt", tmp_path / "run.json"
    system = tmp_path / "system.json"
    write_ns3_topology(fabric, topology)
    flows.write_text(format_flows(FLOWS))
    system.write_text(json.dumps(SYSTEM))
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--workload",
            trace,
            "--system",
            str(system),
            "--topology",
            str(topology),
            "--backend",
            "flow",
            "--background",
            str(flows),
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "background flows: FCT slowdown, 4 flows" in result.output
    written = json.loads(out.read_text())["background_flows"]
    assert [(f["src"], f["dst"], f["size_bytes"]) for f in written] == [
        (f.src, f.dst, f.size_bytes) for f in FLOWS
    ]
    assert all(f["fct_ns"] >= f["ideal_fct_ns"] * (1 - 1e-12) for f in written)


def test_background_on_a_backend_without_link_sharing_is_refused(fabric, trace, tmp_path):
    # On analytical the flows would change nothing and say nothing (on flow the same
    # run goes from 683.7 to 779.1 us).
    message = (
        "--background: backend analytical does not model link sharing (concurrent messages never "
        "slow each other), so flows would change nothing and FCT slowdowns would measure nothing; "
        "use one that does, e.g. --backend flow, ns3, garnetlike or analytical-congestion"
    )
    with pytest.raises(ConfigError) as exc:
        simulate(trace, SYSTEM, topology=fabric, backend="analytical", background=FLOWS)
    assert str(exc.value) == message
    topology, flows, system = tmp_path / "ft.txt", tmp_path / "flows.txt", tmp_path / "system.json"
    write_ns3_topology(fabric, topology)
    flows.write_text(format_flows(FLOWS))
    system.write_text(json.dumps(SYSTEM))
    args = ["run", "--workload", trace, "--system", system, "--topology", topology]
    result = CliRunner().invoke(
        main, [str(a) for a in [*args, "--backend", "analytical", "--background", flows]]
    )
    assert result.exit_code == 1 and result.stderr == f"error: {message}\n"
    # without background flows analytical runs as before
    assert simulate(trace, SYSTEM, topology=fabric, backend="analytical").step_ns > 0
