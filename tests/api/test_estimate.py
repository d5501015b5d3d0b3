"""``astra.estimate`` / ``astra run --estimate``: what a run would cost its backend,
found by the system layer on the analytical model, without simulating the backend.

Before this, the only estimate was the WorkBudget's refusal, raised at the send
that crossed a backend's limit, i.e. after simulating everything before it;
nothing said how long an accepted run would take.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

import astra
from astra_core.api import estimate, simulate
from astra_core.backend import WorkLimitExceeded
from astra_core.cli import main
from astra_core.flows.flowfile import FlowSpec
from astra_core.plugins import BackendInfo, PluginError, PluginSettings, backend_registry, make_plugin_manager
from tests.conftest import isolate_plugins

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)


@pytest.fixture
def built(monkeypatch) -> list[str]:
    """The names of the backends built from now on."""
    names: list[str] = []
    real = BackendInfo.build

    def build(self, topology, config=None):
        names.append(self.name)
        return real(self, topology, config)

    monkeypatch.setattr(BackendInfo, "build", build)
    return names


def ring_2d(reference_dir):
    """A 1 MiB all-reduce on 16 NPUs, Ring(4) x Switch(4), hierarchical rings."""
    return dict(
        workload=reference_dir / "workload/micro/ALL_REDUCE_16npus_1MB/ALL_REDUCE",
        system=reference_dir / "system/ring_2d.json",
        network=reference_dir / "network/ring4_sw4.yml",
    )


def test_one_rank_per_class_prices_every_ranks_messages_as_the_full_pass_does(reference_dir):
    # On network.yml's links garnetlike routes in dimension order: a ring step of offset
    # +1 or -1 crosses 1 link, a switch step 2. The symmetric pass simulates fewer ranks
    # and moves each representative's messages to every rank of its class.
    case = dict(ring_2d(reference_dir), backend="garnetlike")
    fast = estimate(**case)
    full = estimate(**case, symmetry=False)
    assert fast.symmetric and not full.symmetric
    assert (fast.messages, fast.bytes, fast.budgeted, fast.work) == (
        full.messages,
        full.bytes,
        full.budgeted,
        full.work,
    )
    run = simulate(**case)
    assert fast.messages == run.messages and fast.bytes == run.message_bytes
    assert fast.work == run.counters["flit_hops"]


def test_the_projection_is_the_work_at_the_models_rate(reference_dir):
    case = dict(ring_2d(reference_dir), backend="garnetlike")
    est = estimate(**case)
    from astra_garnetlike.config import FLIT_HOPS_PER_S
    from astra_garnetlike.work import MESSAGE_S

    assert est.rate == FLIT_HOPS_PER_S and est.message_s == MESSAGE_S
    assert est.wall_s == pytest.approx(est.messages * MESSAGE_S + est.work / FLIT_HOPS_PER_S)
    assert est.low_s is None and est.peak_memory_bytes is None  # garnetlike moves every flit
    assert est.line() == (
        f"garnetlike estimate: {est.messages:,} messages, {est.bytes:.3g} B, {est.work:.3g} flit-hops "
        f"-> about {est.wall_s:.3g} s of wall time"
    )


def test_background_flows_add_their_own_work(tmp_path):
    from astra_core.config.system import upstream_system
    from astra_core.topology.generators import fat_tree
    from astra_core.topology.ns3_format import write_ns3_topology
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    topology = tmp_path / "fat_tree.txt"
    write_ns3_topology(fat_tree(4), topology)
    system = tmp_path / "system.json"
    system.write_text(json.dumps(upstream_system("ring", 1)))
    node = make_node(0, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=1 << 20, is_cpu_op=False)
    for rank in range(16):
        write_rank_trace(f"{tmp_path}/ar.{rank}.et", [node])
    case = dict(workload=f"{tmp_path}/ar", system=system, topology=topology, backend="ns3")
    step = estimate(**case)
    # NPU 0 -> 1 shares an edge switch (2 links), 2 -> 15 crosses the core (6 links);
    # a flow to itself moves nothing.
    flows = [FlowSpec(0, 1, 4096, 0), FlowSpec(3, 3, 10, 0), FlowSpec(2, 15, 3 * 4096 + 1, 5)]
    both = estimate(**case, background=flows)
    assert both.messages - step.messages == 3
    assert both.bytes - step.bytes == 4096 + 10 + 3 * 4096 + 1
    assert both.budgeted - step.budgeted == 1 * 2 + 4 * 6
    assert both.work - step.work == 2 * (1 * 2 + 4 * 6)  # and an ACK per packet


def test_a_backend_without_a_work_model_gets_messages_and_bytes(reference_dir):
    est = estimate(**ring_2d(reference_dir), backend="analytical")
    assert est.unit is None and est.wall_s is None and est.messages > 0
    assert est.line().endswith("(the backend gives no work model: no wall time projected)")


def test_astra_estimate_is_the_api_function():
    assert astra.estimate is estimate


# -- astra run --estimate ---------------------------------------------------------------------


def cli(*args) -> object:
    return CliRunner().invoke(main, ["run", *[str(a) for a in args]])


def inputs(reference_dir) -> list:
    case = ring_2d(reference_dir)
    return ["--workload", case["workload"], "--system", case["system"], "--network", case["network"]]


def test_run_estimate_simulates_nothing_on_the_chosen_backend(reference_dir, built, tmp_path):
    out_json = tmp_path / "estimate.json"
    out = cli(*inputs(reference_dir), "--backend", "garnetlike", "--estimate", "--json", out_json)
    assert out.exit_code == 0, out.output
    assert built == ["analytical"]  # the estimate's pass only; garnetlike never built
    est = estimate(**ring_2d(reference_dir), backend="garnetlike")
    lines = out.stdout.splitlines()
    assert lines[0] == est.line()
    assert lines[1] == (
        "speed: 4e+05 flit-hops/s and 30 µs per message (astra run on a 64 MiB all-reduce and a "
        "16-GPU LLM step, this 2-core machine under load)"
    )
    assert lines[2].startswith("estimated in ") and "one rank per class" in lines[2]
    assert "step time" not in out.stdout
    written = json.loads(out_json.read_text())
    assert (written["messages"], written["work"], written["unit"]) == (est.messages, est.work, "flit-hops")


def test_run_estimate_refuses_outputs_only_a_run_writes(reference_dir, tmp_path):
    out = cli(*inputs(reference_dir), "--estimate", "--timeline", tmp_path / "t.json", "--plots", tmp_path)
    assert out.exit_code == 1
    assert (
        out.stderr == "error: --estimate simulates nothing: --timeline, --plots would have nothing to write\n"
    )


def test_a_long_run_says_its_estimate_before_it_starts(reference_dir, monkeypatch):
    args = [*inputs(reference_dir), "--backend", "garnetlike"]
    quiet = cli(*args)  # a fraction of a second projected: nothing said
    assert quiet.exit_code == 0 and "estimate" not in quiet.stderr
    monkeypatch.setattr("astra_core.estimate.SHOW_ESTIMATE_S", 0.0)
    out = cli(*args)
    assert out.exit_code == 0
    est = estimate(**ring_2d(reference_dir), backend="garnetlike")
    assert out.stderr.splitlines()[0] == est.line()
    assert "step time" in out.stdout


def test_a_run_past_the_work_limit_is_refused_before_the_backend_is_built(reference_dir, built, tmp_path):
    config = tmp_path / "g.toml"
    config.write_text("max_flit_hops = 30\n")
    out = cli(*inputs(reference_dir), "--backend", "garnetlike", "--backend-config", config)
    assert out.exit_code == 1
    est = estimate(**ring_2d(reference_dir), backend="garnetlike")
    assert out.stderr == (
        f"error: garnetlike backend: the run would move {est.work:.3g} flit-hops (about "
        f"{est.wall_s:.3g} s of wall time), past the limit max_flit_hops = 30 (raise it in "
        f"{config}; 0 = no limit)\n"
    )
    assert "garnetlike" not in built
    with pytest.raises(WorkLimitExceeded):
        simulate(**ring_2d(reference_dir), backend="garnetlike", backend_config=config, on_estimate=print)


def test_a_work_model_that_raises_is_one_line_naming_the_plugin(tmp_path, monkeypatch, reference_dir):
    module = f"astra_test_plugin_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{module}.py").write_text(
        "from astra_core.hookspecs import hookimpl\n"
        "from astra_core.analytical import create\n\n"
        "def create_bad(topology, config=None):\n    return create(topology, config)\n\n"
        "def work_model(topology, config=None):\n    return {}['missing']\n\n"
        "@hookimpl\ndef astra_register_backends(register):\n"
        "    register('priced', create_bad, work_model=work_model)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    pm = make_plugin_manager(modules=[module], settings=PluginSettings())
    with pytest.raises(PluginError) as err:
        estimate(**ring_2d(reference_dir), backend="priced", plugin_manager=pm)
    assert str(err.value) == (
        f"plugin '{module}': backend 'priced': its work model could not be built: KeyError: 'missing'"
    )


def test_a_run_on_a_backend_that_prices_nothing_makes_no_estimate_pass(reference_dir, built):
    out = cli(*inputs(reference_dir), "--backend", "analytical")
    assert out.exit_code == 0
    assert built == ["analytical"]  # the run's own backend, once


def test_the_estimate_runs_on_the_cores_own_model_with_every_plugin_disabled(
    reference_dir, built, monkeypatch
):
    # Disabling every plugin, the core's own among them (which cannot be), leaves the
    # analytical model: the estimate of a garnetlike run is made on it, as before.
    plugins = backend_registry(settings=PluginSettings()).backends.values()
    monkeypatch.setenv("ASTRA_DISABLE_PLUGINS", ", ".join(sorted({info.plugin for info in plugins})))
    monkeypatch.setenv("ASTRA_PLUGINS", "astra_garnetlike.plugin")
    est = cli(*inputs(reference_dir), "--backend", "garnetlike", "--estimate")
    assert est.exit_code == 0, est.output
    assert built == ["analytical"]  # the estimate's pass only


def test_a_step_that_cannot_finish_is_reported_by_the_run_or_by_the_estimate(tmp_path, reference_dir):
    from astra_core.errors import SimulationDeadlock
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    # Rank 1 of 8 waits for a message rank 0 never sends.
    recv = make_node(1, "recv", pb.COMM_RECV_NODE, comm_src=0, comm_dst=1, comm_size=1024, comm_tag=5)
    comp = make_node(1, "comp", pb.COMP_NODE, duration_micros=1)
    for rank in range(8):
        write_rank_trace(f"{tmp_path}/w.{rank}.et", [recv if rank == 1 else comp])
    case = dict(
        workload=f"{tmp_path}/w",
        system=reference_dir / "system/ring_1d.json",
        network=reference_dir / "network/sw8.yml",
        backend="garnetlike",
    )
    with pytest.raises(SimulationDeadlock) as err:
        estimate(**case)
    assert str(err.value).startswith(
        "estimate (the system layer on the analytical model): simulation cannot finish at t=1000 ns: "
        "1 rank(s) wait forever: rank 1: node 1 (recv)"
    )
    with pytest.raises(SimulationDeadlock) as err:  # the run's own report, its own times
        simulate(**case, on_estimate=print)
    assert str(err.value).startswith("simulation cannot finish at t=")


def test_the_estimate_before_a_run_stops_at_its_deadline_and_says_it_gives_lower_bounds(
    reference_dir, monkeypatch
):
    monkeypatch.setattr("astra_core.estimate.SHOW_ESTIMATE_S", 0.0)
    monkeypatch.setattr("astra_core.estimate.PRE_RUN_PASS_S", 0.0)  # stops at its first look
    monkeypatch.setattr("astra_core.estimate.CHECK_EVERY", 5)
    seen = []
    simulate(**ring_2d(reference_dir), backend="garnetlike", symmetry=False, on_estimate=seen.append)
    (first,) = seen
    full = estimate(**ring_2d(reference_dir), backend="garnetlike", symmetry=False)
    assert first.partial and not full.partial
    assert first.messages == 5 < full.messages and 0 < first.work < full.work
    assert first.line().startswith(
        f"garnetlike estimate (its pass stopped after 0 s: lower bounds): at least 5 messages, "
        f"{first.bytes:.3g} B, {first.work:.3g} flit-hops -> about "
    )


def test_a_work_model_missing_members_is_one_line_naming_the_plugin_and_them(
    tmp_path, monkeypatch, reference_dir
):
    module = f"astra_test_plugin_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{module}.py").write_text(
        "from astra_core.hookspecs import hookimpl\n"
        "from astra_core.analytical import create\n\n"
        "class Half:\n    unit = 'hops'\n    rate = 1.0\n\n"
        "def create_half(topology, config=None):\n    return create(topology, config)\n\n"
        "@hookimpl\ndef astra_register_backends(register):\n"
        "    register('half', create_half, work_model=lambda topology, config=None: Half())\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    pm = make_plugin_manager(modules=[module], settings=PluginSettings())
    with pytest.raises(PluginError) as err:
        estimate(**ring_2d(reference_dir), backend="half", plugin_manager=pm)
    assert str(err.value) == (
        f"plugin '{module}': backend 'half': its work model could not be built: TypeError: work_model "
        "returned Half, which lacks rate_source, message_s, fast_forward, limit, limit_key, "
        "peak_memory_bytes, per_link, hops"
    )
