"""Mixture-of-experts layers as Megatron-core's all-to-all token dispatcher runs them: the
permutations around the experts and the collectives over the expert-parallel ranks,
against sizes derived here from the layer's shape."""

from __future__ import annotations

from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators import ops as O
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.models import ModelConfig

MOE = ModelConfig(
    "moe-test", layers=2, hidden=256, heads=4, ffn_hidden=512, vocab=0, mlp="swiglu",
    experts=8, top_k=2, expert_ffn_hidden=128,
)  # fmt: skip
B, S = 2, 512


def test_permutations_move_each_routed_row():
    h, k, rows = MOE.hidden, MOE.top_k, B * S
    router, experts, combine = O.moe_ops(MOE, B, S, 1, False, ep=4)
    permute = router[-1]
    # permutation 1: each token read and written once per chosen expert (2-byte rows)
    assert (permute.name, permute.bytes) == ("moe_permute", 2 * 2 * k * rows * h)
    # backward scatters the k rows of a token back into one
    (permute_bwd,) = O.backward([permute])
    assert permute_bwd.bytes == 2 * (k + 1) * rows * h
    # two local experts: the received rows are sorted by expert and restored after
    assert [experts[0].name, experts[-1].name] == ["moe_sort", "moe_unsort"]
    assert experts[0].bytes == experts[-1].bytes == 2 * 2 * k * rows * h
    # unpermutation: read the k weighted rows of a token, write its sum
    assert (combine[0].name, combine[0].bytes) == ("moe_unpermute", 2 * (k + 1) * rows * h)
    # one local expert per rank: nothing to sort
    _, alone, _ = O.moe_ops(MOE, B, S, 1, False, ep=8)
    assert not any(o.name.startswith("moe_") for o in alone)


def test_each_moe_layer_counts_dispatches_and_combines_over_the_expert_ranks():
    cfg = LLMConfig(MOE, GPUS["h100"], dp=4, ep=4, microbatches=1, micro_batch=B, seq_len=S)
    nodes = generate_llm(cfg).stages[0]
    layer = [
        n for n in nodes if n.name.startswith("L0_mb0_") and n.type == pb.COMM_COLL_NODE and n.role == "ep"
    ]
    assigned = B * S * MOE.top_k
    forward = [(n.name.rsplit("_", 2)[-2:], n.comm_type, n.size) for n in layer if "_fwd_" in n.name]
    assert forward == [
        (["counts", "AG"], pb.ALL_GATHER, 8 * MOE.experts),  # int64 tokens per expert
        (["dispatch", "A2A"], pb.ALL_TO_ALL, assigned * MOE.hidden * 2),
        (["probs", "A2A"], pb.ALL_TO_ALL, assigned * 4),  # FP32 routing probabilities
        (["combine", "A2A"], pb.ALL_TO_ALL, assigned * MOE.hidden * 2),
    ]
    backward = [n.name.rsplit("_", 2)[-2] for n in layer if "_bwd_" in n.name]
    assert backward == ["combine", "probs", "dispatch"]  # the counts are the forward's
