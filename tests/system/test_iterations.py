"""``--iterations N``: a rank's trace run N times, each rank's next iteration starting when
its previous one has finished; against closed forms on the analytical backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import astra
from astra_core.cli import main
from astra_core.errors import ConfigError
from astra_core.workload import streaming
from astra_core.workload.chakra_types import COMM_COLL, COMM_RECV, COMM_SEND, COMP, METADATA
from astra_core.workload.et_decode import ETNode, RankTrace
from astra_core.workload.iterations import ITERATION_END, repeat_trace
from tests.system.conftest import network, system

NET = network(["Switch"], [2], [50.0], [500])
SYSTEM_JSON = str(Path(__file__).parents[1] / "data" / "reference" / "system" / "ring_1d.json")
COMPUTE_US = 10


def _pipeline() -> list[RankTrace]:
    """Rank 0 computes then sends 1 MiB to rank 1, which receives it then computes."""
    size = 1 << 20
    r0 = [
        ETNode(1, "c", COMP, duration_micros=COMPUTE_US),
        ETNode(2, "s", COMM_SEND, data_deps=[1], comm_src=0, comm_dst=1, comm_tag=7, comm_size=size),
    ]
    r1 = [
        ETNode(1, "r", COMM_RECV, comm_src=0, comm_dst=1, comm_tag=7, comm_size=size),
        ETNode(2, "c", COMP, data_deps=[1], duration_micros=COMPUTE_US),
    ]
    return [RankTrace("r0", r0, rank=0), RankTrace("r1", r1, rank=1)]


def test_iterations_overlap_across_ranks_as_a_pipeline_does():
    one = astra.simulate(_pipeline(), system(), NET)
    c = COMPUTE_US * 1000
    transfer = one.ranks[0].finish_ns - c  # the send is done when it has arrived
    assert one.ranks[1].finish_ns == pytest.approx(2 * c + transfer)
    run = astra.simulate(_pipeline(), system(), NET, iterations=3)
    # rank 0 starts iteration i + 1 as soon as its send of iteration i has arrived, so
    # rank 1 finishes iteration i at (i + 2) c + (i + 1) transfer: iterations overlap
    ends = [(i + 2) * c + (i + 1) * transfer for i in range(3)]
    assert run.iterations.end_ns == pytest.approx(ends)
    assert run.iterations.rank_end_ns[0] == pytest.approx([(i + 1) * (c + transfer) for i in range(3)])
    assert run.iterations.step_ns == pytest.approx([ends[0], c + transfer, c + transfer])
    assert run.step_ns == pytest.approx(ends[-1])


def _all_reduce(npus: int = 4) -> list[RankTrace]:
    nodes = [
        ETNode(1, "c", COMP, duration_micros=COMPUTE_US),
        ETNode(2, "ar", COMM_COLL, data_deps=[1], comm_type=0, comm_size=1 << 20),
    ]
    return [RankTrace(f"r{r}", nodes, rank=r) for r in range(npus)]


def test_one_iteration_of_many_is_the_plain_run_exactly():
    net = network(["Ring"], [4], [50.0], [500])
    one = astra.simulate(_all_reduce(), system(), net)
    run = astra.simulate(_all_reduce(), system(), net, iterations=4)
    # every rank finishes the all-reduce together, so each iteration is the step again
    assert run.iterations.step_ns == (one.step_ns,) * 4
    assert run.step_ns == 4 * one.step_ns
    assert one.iterations is None  # one iteration: the plain run, nothing repeated
    # the repeated ranks still share one node list, so rank symmetry still folds them
    assert run.symmetric and one.symmetric


def test_a_repeated_trace_chains_its_copies_through_an_end_node():
    trace = RankTrace(
        "t", [ETNode(5, "a", COMP, duration_micros=1), ETNode(9, "b", COMP, data_deps=[5, 404])]
    )
    nodes = repeat_trace(trace, 2).nodes
    assert [n.id for n in nodes] == [5, 9, 10, 16, 20, 21]  # stride: the largest id + 2
    end0, copy1_root, copy1_b, end1 = nodes[2], nodes[3], nodes[4], nodes[5]
    assert (end0.name, end0.type, end0.ctrl_deps) == (ITERATION_END, METADATA, (9,))
    assert copy1_root.ctrl_deps == (10,)  # the second copy starts after the first one's end
    assert copy1_b.data_deps == (16,)  # the dependency on an id not in the file: copy 0 only
    assert end1.ctrl_deps == (20,)


def test_json_carries_each_iteration(tmp_path, workload):
    from tests.system.conftest import pb

    prefix = workload({r: [pb.Node(id=1, name="c", type=pb.COMP_NODE, duration_micros=3)] for r in range(2)})
    net_path = tmp_path / "n.yml"
    net_path.write_text("topology: [Switch]\nnpus_count: [2]\nbandwidth: [50]\nlatency: [500]\n")
    out = tmp_path / "r.json"
    args = ["run", "--workload", prefix, "--system", SYSTEM_JSON, "--network", str(net_path)]
    result = CliRunner().invoke(main, [*args, "--iterations", "3", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "iterations: 3, each (µs): 3.000, 3.000, 3.000" in result.output
    data = json.loads(out.read_text())
    assert data["iterations"] == {"count": 3, "step_ns": [3000] * 3, "end_ns": [3000, 6000, 9000]}
    bad = CliRunner().invoke(main, [*args, "--iterations", "0"])
    assert bad.exit_code == 2 and "Invalid value for '--iterations'" in bad.output


@pytest.mark.parametrize("value", [0, -1, 2.0, True])
def test_iterations_must_be_a_positive_integer(value):
    with pytest.raises(ConfigError, match="^simulate: iterations must be an integer >= 1"):
        astra.simulate(_all_reduce(), system(), network(["Ring"], [4], [50.0], [500]), iterations=value)


def test_a_streamed_trace_is_refused_in_one_line(tmp_path, workload, monkeypatch):
    from tests.system.conftest import pb

    prefix = workload({r: [pb.Node(id=1, name="c", type=pb.COMP_NODE, duration_micros=3)] for r in range(2)})
    monkeypatch.setattr(streaming, "STREAM_MIN_BYTES", 1)
    with pytest.raises(ConfigError, match=r"wl\.0\.et: --iterations needs the trace decoded in memory"):
        astra.simulate(prefix, system(), NET, iterations=2)


def test_the_utilization_of_several_iterations_is_one_step_over_the_mean_step():
    # Not one step's FLOPs over three steps' time for --iterations 3 (a third of the MFU).
    from astra_core.workload.generators.gpus import GPUS
    from astra_core.workload.generators.llm import LLMConfig, generate_llm
    from astra_core.workload.generators.llm_traces import llm_traces
    from astra_core.workload.generators.models import ModelConfig

    model = ModelConfig("t", layers=2, hidden=256, heads=4, kv_heads=4, ffn_hidden=512, vocab=1000)
    traces, _ = llm_traces(generate_llm(LLMConfig(model, GPUS["h100"], dp=2, microbatches=2)))
    one = astra.simulate(traces, system(), NET)
    three = astra.simulate(traces, system(), NET, iterations=3)
    mean_step = three.step_ns / 3
    assert three.llm()["mfu"] == pytest.approx(one.llm()["mfu"] * one.step_ns / mean_step, rel=1e-12)
    assert three.to_dict()["llm"]["tflops_per_gpu"] == pytest.approx(
        three.llm()["model_flops"] / (mean_step * 1e-9) / 2 / 1e12, rel=1e-12
    )


def test_iterations_that_would_not_fit_in_memory_are_refused_before_copying(monkeypatch):
    # Not --iterations 10**9 running for minutes and ending in a MemoryError.
    from astra_core.system import memory_guard
    from astra_core.system.memory_guard import RunTooLarge

    monkeypatch.setattr(memory_guard, "available_bytes", lambda: 8 << 30)  # a machine with 8 GiB free
    with pytest.raises(RunTooLarge) as err:
        astra.simulate(_pipeline(), system(), NET, iterations=10**12)
    (line,) = str(err.value).splitlines()
    assert line.startswith(
        "--iterations 1000000000000: 4,000,000,000,000 trace nodes to hold (about "
    )  # 2 ranks x 2
    assert line.endswith("more than the 8.0 GiB this machine has available; run fewer iterations")
