"""LLM generator collective sizes follow upstream's comm_size meaning.

Upstream ``Ring.cc``: an all-gather of ``comm_size`` S sends n - 1 messages of S
(S is each rank's input, the shard); a reduce-scatter of S sends n - 1 messages
of S / n (S is the whole input). Gathering back what a reduce-scatter scattered
therefore moves the same bytes and, on a ring, takes the same time.
"""

from __future__ import annotations

import pytest

from astra_core.api import simulate
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra import read_rank_trace
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm

from .conftest import write_network, write_system

H100 = GPUS["h100"]


def _colls(path) -> dict[str, object]:
    return {n.name: n for n in read_rank_trace(path).nodes if n.type == pb.COMM_COLL_NODE}


def test_sequence_parallel_gather_and_scatter_take_the_same_time(tmp_path, tiny_dense):
    t = 4
    cfg = LLMConfig(tiny_dense, H100, tp=t, sequence_parallel=True, dims=[t])
    paths, _ = write_llm(generate_llm(cfg), tmp_path / "sp")
    colls = _colls(paths[0])
    act = 1 * tiny_dense.seq_len * tiny_dense.hidden * 2  # micro-batch x sequence x hidden x 2 B
    ag, rs = colls["L0_mb0_fwd_attn_in_AG"], colls["L0_mb0_fwd_attn_out_RS"]
    assert (ag.comm_type, rs.comm_type) == (pb.ALL_GATHER, pb.REDUCE_SCATTER)
    assert (ag.comm_size, rs.comm_size) == (act // t, act)
    network = write_network(tmp_path, [t], topology="Ring")
    system = write_system(tmp_path, 1)
    took = {}
    for rec in simulate(tmp_path / "sp", system, network).collectives:
        if rec.rank == 0:
            took[rec.node.name] = rec.finish_ns - rec.start_ns
    ag_ns, rs_ns = took["L0_mb0_fwd_attn_in_AG"], took["L0_mb0_fwd_attn_out_RS"]
    # Same messages (4 chunks x 3 ring steps of act / 16); the reduce-scatter alone reduces each
    # one it receives: 1 write + 2 reads of act / 16 at local-mem-bw 1600 B/ns, whole ns each.
    assert rs_ns - ag_ns == 4 * 3 * 3 * int(act / 16 / 1600)


@pytest.mark.parametrize("zero", [1, 3])
def test_zero_weight_gathers_contribute_one_shard(tmp_path, tiny_dense, zero):
    # ZeRO 1-2 all-gather the updated weights once; ZeRO 3 each layer's before use. Each of the
    # D ranks contributes the 1/D shard it owns, so the gathers' sizes are the reduce-scatters' / D,
    # in 16-bit weights where the BF16 gradients were reduced in FP32 (Megatron-LM): x 2 / 4.
    d = 4
    cfg = LLMConfig(tiny_dense, H100, dp=d, zero=zero, dims=[d])
    paths, _ = write_llm(generate_llm(cfg), tmp_path / "z")
    colls = _colls(paths[0])
    rs_total = sum(n.comm_size for name, n in colls.items() if name.startswith("grads_"))
    weights = 2 / cfg.grad_bytes  # weight bytes per gradient byte
    if zero == 1:
        assert colls["params_AG"].comm_size == pytest.approx(rs_total * weights / d, abs=1)
    else:
        per_layer = [n.comm_size for name, n in colls.items() if name.startswith("grads_")]
        layer0 = colls["L0_mb0_fwd_params_AG"]
        assert layer0.comm_type == pb.ALL_GATHER
        assert layer0.comm_size == pytest.approx(per_layer[-1] * weights / d, abs=1)


@pytest.mark.parametrize("zero", [1, 3])
def test_context_parallel_ranks_share_the_weight_shards(tmp_path, tiny_dense, zero):
    # Megatron-core reduces the gradients and shards the distributed optimizer over the
    # data-parallel group with context parallelism (D x C ranks): with D = C = 2 the weights
    # gathered back are 1/4 of the reduced gradients (in 16-bit weights), and the optimizer
    # steps the same 1/4 shard as D = 4 without context parallelism.
    def program(dp: int, cp: int) -> dict[str, object]:
        cfg = LLMConfig(tiny_dense, H100, dp=dp, cp=cp, zero=zero, dims=[dp * cp])
        paths, _ = write_llm(generate_llm(cfg), tmp_path / f"d{dp}c{cp}")
        return {n.name: n for n in read_rank_trace(paths[0]).nodes}

    with_cp, without = program(2, 2), program(4, 1)
    rs_total = sum(n.comm_size for name, n in with_cp.items() if name.startswith("grads_"))
    weights = 2 / LLMConfig(tiny_dense, H100, dp=4).grad_bytes
    gathers = [n.comm_size for name, n in with_cp.items() if name.endswith("params_AG")]
    if zero == 1:
        assert gathers == [pytest.approx(rs_total * weights / 4, abs=1)]
    else:  # every layer gathered before its forward and its backward pass
        assert sum(gathers) == pytest.approx(2 * rs_total * weights / 4, abs=2 * len(gathers))

    def optimizer(nodes: dict) -> dict:
        return {
            k: (n.duration_micros, n.num_ops, n.tensor_size)
            for k, n in nodes.items()
            if k.startswith("optimizer")
        }

    assert optimizer(without) and optimizer(with_cp) == optimizer(without)
