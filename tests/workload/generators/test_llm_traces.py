"""In-memory rank traces of a generated step are, node for node, what its files hold."""

from __future__ import annotations

import json

import pytest

import astra
from astra_core.workload.chakra import read_workload
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm
from astra_core.workload.generators.llm_traces import llm_traces
from astra_core.workload.generators.models import ModelConfig

DENSE = ModelConfig("t", layers=8, hidden=512, heads=8, kv_heads=2, ffn_hidden=1024, vocab=1000, mlp="swiglu")
MOE = ModelConfig(
    "e", layers=4, hidden=512, heads=8, kv_heads=2, ffn_hidden=1024, vocab=1000, mlp="swiglu",
    experts=8, top_k=2, expert_ffn_hidden=256,
)  # fmt: skip
PLANS = {
    "tp-cp-vp-fp8": LLMConfig(
        DENSE, GPUS["h100"], dp=2, tp=2, pp=2, cp=2, virtual_stages=2, microbatches=4,
        sequence_parallel=True, tp_comm_overlap=True, precision="fp8", fp8_recipe="tensorwise", dims=[8, 2],
    ),
    "ep-zero1": LLMConfig(MOE, GPUS["h100"], dp=4, ep=2, pp=2, microbatches=4, zero=1),
    "ep-zipf": LLMConfig(MOE, GPUS["h100"], dp=8, ep=4, pp=2, microbatches=4, moe_routing="zipf:1.2"),
    "tp-ep-zipf-drop": LLMConfig(
        MOE, GPUS["h100"], dp=4, tp=2, ep=2, microbatches=2, sequence_parallel=True, moe_routing="zipf:2",
        moe_capacity_factor=1.25,
    ),
}  # fmt: skip


@pytest.mark.parametrize("plan", PLANS)
def test_traces_equal_the_files_read_back(tmp_path, plan):
    cfg = PLANS[plan]
    traces, groups = llm_traces(generate_llm(cfg))
    _, groups_path = write_llm(generate_llm(cfg), tmp_path / "llm")
    read = read_workload(tmp_path / "llm", len(traces))
    for mine, theirs in zip(traces, read, strict=True):
        assert mine.nodes == theirs.nodes
        assert (mine.metadata, mine.version) == (theirs.metadata, theirs.version)
    assert groups == (json.loads(groups_path.read_text()) if groups_path else {})


def test_a_step_from_memory_runs_as_from_files(tmp_path):
    from .conftest import write_network, write_system

    cfg = LLMConfig(DENSE, GPUS["h100"], dp=2, tp=2, pp=2, microbatches=4, sequence_parallel=True)
    network = write_network(tmp_path, [2, 2, 2], bandwidth=50.0, latency=500.0)
    system = write_system(tmp_path, 3)
    traces, groups = llm_traces(generate_llm(cfg))
    memory = astra.simulate(traces, system, network, comm_groups=groups or None)
    _, groups_path = write_llm(generate_llm(cfg), tmp_path / "llm")
    files = astra.simulate(tmp_path / "llm", system, network, comm_groups=groups_path)
    assert memory.step_ns == files.step_ns
    assert [r.finish_ns for r in memory.ranks] == [r.finish_ns for r in files.ranks]


def test_every_rank_is_a_template_with_only_its_own_peers():
    from astra_core.workload.et_peers import PeerNodes, TemplatePeers
    from astra_core.workload.graph import shape_key

    cfg = LLMConfig(
        DENSE, GPUS["h100"], dp=4, tp=2, pp=2, microbatches=4, sequence_parallel=True, tp_comm_overlap=True,
        dims=[2, 8],
    )  # fmt: skip
    traces, _ = llm_traces(generate_llm(cfg))
    kept = [t.nodes for t in traces]
    assert all(isinstance(nodes, TemplatePeers) for nodes in kept)
    # four templates: a stage and the placements of its groups
    assert len({id(nodes.template) for nodes in kept}) == 4
    for nodes in kept:
        as_list = nodes.as_list()
        assert isinstance(as_list, PeerNodes) and shape_key(as_list) == shape_key(nodes) == id(nodes.template)
        assert as_list == nodes and nodes == list(as_list) and nodes[-1] == as_list[-1]
        assert nodes[2:5] == as_list[2:5]
        for pos, node in enumerate(as_list):
            assert nodes.peers_at(pos) == (node.comm_src, node.comm_dst)
        # the peers differ from the template's exactly where the rank's own are
        assert any(nodes.peers_at(p) != (t.comm_src, t.comm_dst) for p, t in enumerate(nodes.template))


def test_a_symmetric_step_from_template_ranks_equals_the_full_run(tmp_path):
    from .conftest import write_network, write_system

    cfg = LLMConfig(
        DENSE, GPUS["h100"], dp=4, tp=2, pp=2, microbatches=4, sequence_parallel=True, tp_comm_overlap=True,
        dims=[2, 8],
    )  # fmt: skip
    network = write_network(tmp_path, [2, 8], bandwidth=50.0, latency=500.0)
    system = write_system(tmp_path, 2)
    traces, groups = llm_traces(generate_llm(cfg))
    folded = astra.simulate(traces, system, network, comm_groups=groups or None)
    full = astra.simulate(traces, system, network, comm_groups=groups or None, symmetry=False)
    assert folded.symmetric and len(set(folded.representative)) == 2  # one rank per stage
    assert [r.finish_ns for r in folded.ranks] == [r.finish_ns for r in full.ranks]


def test_templates_whose_groups_differ_in_name_alone_time_alike():
    """The groups of a stage's templates differ in name only: their timing signature is
    computed once (timing_key) and equals each template's own, computed alone."""
    from astra_core.system.symmetry import _base_signature, _base_signatures
    from astra_core.workload.graph import build_graphs, shape_key, timing_key

    cfg = LLMConfig(DENSE, GPUS["h100"], dp=4, tp=2, pp=2, microbatches=4, sequence_parallel=True, dims=[16])
    traces, _ = llm_traces(generate_llm(cfg))
    graphs = build_graphs(traces)
    shapes = {shape_key(g.nodes) for g in graphs}
    timings = {timing_key(g.nodes) for g in graphs}
    # a template per rank (its own tensor- and data-parallel groups), one timing per stage
    assert (len(shapes), len(timings)) == (16, 2)
    shared = _base_signatures(graphs)
    interned: dict = {}
    alone = [_base_signature(g, interned, {}, {}) for g in graphs]
    for key in timings:  # computed alone, the templates of one timing key are equal
        assert len({alone[r] for r, g in enumerate(graphs) if timing_key(g.nodes) == key}) == 1
    # the same classes, and the same positions of the nodes naming peers or groups
    assert [alone.index(a) for a in alone] == [shared.index(b) for b in shared]
    assert [pos for _, pos in alone] == [pos for _, pos in shared]


def test_a_templates_names_rename_its_timings_groups_one_to_one():
    """Each template that times as another names, collective for collective, the group
    ``names`` maps the other's to, one to one; placements that are not one to one give a
    template that times on its own."""
    from astra_core.workload.generators.layout import Placement
    from astra_core.workload.generators.llm_traces import _renames

    cfg = LLMConfig(DENSE, GPUS["h100"], dp=4, tp=2, pp=2, microbatches=4, sequence_parallel=True, dims=[16])
    traces, _ = llm_traces(generate_llm(cfg))
    renamed = 0
    for trace in traces:
        template = trace.nodes.template
        if template.timing is template:
            continue
        renamed += 1
        pairs = {(a.pg_name, b.pg_name) for a, b in zip(template.timing, template) if a.pg_name}
        assert pairs == set(template.names.items()) and len(pairs) == len({b for _, b in pairs}) > 1
    assert renamed == 16 - 2  # every rank but each stage's first
    group = Placement("group", 1)
    assert _renames({"tp": group, "dp": group}, {"tp": group, "dp": Placement("group", 2)}) is None
    assert _renames({"tp": group, "dp": Placement("group", 2)}, {"tp": group, "dp": group}) is None
    assert _renames(
        {"tp": group, "x": Placement("dims", (1,))},
        {"tp": Placement("group", 3), "x": Placement("dims", (1,))},
    ) == {"1": "3"}


def test_sends_name_the_group_they_run_on():
    """Megatron-core runs a pipeline neighbour's send on the pipeline group (the P ranks
    T x C x D apart), a context-parallel ring step on the CP group (C ranks T apart), a
    tensor-parallel overlap step on the TP group (T consecutive ranks): T = C = D = P = 2,
    16 ranks; each send's or receive's peer is in the group its attributes name."""
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.chakra_types import COMM_GROUP_SIZE, COMM_GROUP_STRIDE

    traces, _ = llm_traces(generate_llm(PLANS["tp-cp-vp-fp8"]))
    seen = set()
    for trace in traces:
        for node in trace.nodes:
            if node.type not in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
                continue
            group = (node.attrs[COMM_GROUP_STRIDE], node.attrs[COMM_GROUP_SIZE])
            stride, size = group
            assert trace.rank - trace.rank // stride % size * stride + stride * (size - 1) < 16
            peer = node.comm_dst if node.type == pb.COMM_SEND_NODE else node.comm_src
            assert (peer - trace.rank) % stride == 0 and abs(peer - trace.rank) < stride * size
            seen.add(group)
    assert seen == {(8, 2), (2, 2), (1, 2)}
