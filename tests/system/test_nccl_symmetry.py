"""Rank symmetry with NCCL collectives: exact, and only where NCCL's patterns allow it.

Each case runs the same generated Megatron step with and without the
shortcut and compares every rank's finish time; the number of simulated
ranks is the closed form of the layout's classes (one per pipeline stage
when NCCL runs rings)."""

from __future__ import annotations

import pytest

import astra
from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.system.collectives.nccl.model import NcclModel
from astra_core.system.comm_types import CommType
from astra_core.system.nccl_symmetry import NcclCollectives
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm
from astra_core.workload.generators.models import ModelConfig

GIB = 1 << 30
MODEL = ModelConfig("t", layers=4, hidden=1024, heads=16, ffn_hidden=4096, vocab=1000, seq_len=512)


def dgx(nodes: int) -> NetworkConfig:
    """DGX A100 nodes: NVSwitch (300 GB/s per GPU), one 25 GB/s rail NIC per GPU."""
    return NetworkConfig.from_dict(
        {
            "topology": ["Switch", "Switch"],
            "npus_count": [8, nodes],
            "bandwidth": [300e9 / GIB, 25e9 / GIB],
            "latency": [300, 1350],
        }
    )


def nccl_system(**nccl) -> SystemConfig:
    return SystemConfig.from_dict(
        {
            "scheduling-policy": "LIFO",
            "collective-optimization": "baseline",
            "preferred-dataset-splits": 1,
            **{
                f"{c}-implementation": ["nccl"]
                for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
            },
            "nccl": {"gpu": "A100", **nccl},
        }
    )


def runs(tmp_path, dp, tp, pp, dims, system=None, **options):
    cfg = LLMConfig(
        MODEL, GPUS["a100"], dp=dp, tp=tp, pp=pp, micro_batch=1, global_batch=4 * dp, dims=dims, **options
    )
    _, groups = write_llm(generate_llm(cfg), tmp_path / "llm")
    network = dgx(dp * tp * pp * options.get("cp", 1) // 8)
    return [
        astra.simulate(
            str(tmp_path / "llm"),
            system or nccl_system(),
            network,
            comm_groups=str(groups) if groups else None,
            symmetry=flag,
        )
        for flag in (True, False)
    ]


@pytest.mark.parametrize(
    "dp, tp, pp, dims, options, simulated",
    [
        # TP on the node's NVSwitch ring, DP on the rails: one class
        (4, 8, 1, [8, 4], {}, 1),
        # the nodes dimension read as DP x PP: one class per stage
        (2, 8, 2, [8, 4], {"recompute": "full", "overlap_grad_reduce": False}, 2),
        (4, 2, 2, None, {"virtual_stages": 2}, 2),
        (8, 1, 2, None, {"recompute": "selective"}, 2),
        # one node read as TP x DP x PP (Megatron's order tp-cp-dp-pp): one class per stage
        (2, 2, 4, None, {}, 4),
        # TP x CP x DP on one node (the CP rings' groups mark their digit), the stages on
        # the rails: one class per stage
        (2, 2, 2, [8, 2], {"cp": 2}, 2),
    ],
)
def test_nccl_symmetry_is_exact(tmp_path, dp, tp, pp, dims, options, simulated):
    sym, full = runs(tmp_path, dp, tp, pp, dims, **options)
    assert sym.symmetric and not full.symmetric
    assert len(sym.traces) == simulated
    assert [r.finish_ns for r in sym.ranks] == [r.finish_ns for r in full.ranks]
    assert [r.exposed_comm_ns for r in sym.ranks] == [r.exposed_comm_ns for r in full.ranks]


def test_trees_fold_where_nccl_time_decides(tmp_path):
    """NCCL_ALGO=Tree: a tree's root and leaves differ, but on this fabric every tree
    collective's messages are over before NCCL's predicted time, which then decides
    when it ends on every member: the run folds into one class and stays exact in
    times, message counts and time in flight (the members' messages replayed)."""
    sym, full = runs(tmp_path, 4, 8, 1, [8, 4], system=nccl_system(NCCL_ALGO="Tree"))
    assert sym.symmetric and len(sym.traces) == 1
    assert {c.nccl_choice.algorithm for c in full.collectives if c.nccl_choice} == {"Tree"}
    assert [r.finish_ns for r in sym.ranks] == [r.finish_ns for r in full.ranks]
    assert (sym.messages, sym.message_bytes) == (full.messages, full.message_bytes)
    for a, b in zip(sym.ranks, full.ranks):
        assert a.comm_ns == pytest.approx(b.comm_ns, abs=1e-3)
        assert a.comm_wait_ns == pytest.approx(b.comm_wait_ns, abs=1e-3)


def test_trees_keep_their_roots_where_messages_decide(tmp_path):
    """With 100 µs per hop between nodes (NCCL's cost model counts 2.7 µs) a tree's
    messages outlast NCCL's predicted time, so the leaves end later than the root: no
    translation moves a tree's members, and the run is exact with fewer classes merged."""
    cfg = LLMConfig(MODEL, GPUS["a100"], dp=4, tp=8, pp=1, micro_batch=1, global_batch=16, dims=[8, 4])
    _, groups = write_llm(generate_llm(cfg), tmp_path / "llm")
    network = NetworkConfig.from_dict(
        {
            "topology": ["Switch", "Switch"],
            "npus_count": [8, 4],
            "bandwidth": [300e9 / GIB, 25e9 / GIB],
            "latency": [300, 100_000],
        }
    )
    sym, full = (
        astra.simulate(str(tmp_path / "llm"), nccl_system(NCCL_ALGO="Tree"), network, symmetry=flag)
        for flag in (True, False)
    )
    assert [r.finish_ns for r in sym.ranks] == [r.finish_ns for r in full.ranks]
    assert not sym.symmetric or len(sym.traces) > 1


def collectives(algo: str, members, size=64 << 20) -> NcclCollectives:
    network = dgx(2)
    model = NcclModel(nccl_system(NCCL_ALGO=algo).nccl, network)
    out = NcclCollectives([], [8, 2], {}, model)
    out.collectives = {(CommType.ALL_REDUCE, tuple(members), size)}
    return out


def plus(k):
    """Translation by k GPUs inside a node (dimension 0 of 8)."""
    return lambda r: r - r % 8 + (r % 8 + k) % 8


def test_a_ring_inside_a_node_turns_with_the_node():
    node = range(8)
    assert collectives("Ring", node).preserved_by(plus(3))
    # a tree in a node is a chain: its ends do not turn
    assert not collectives("Tree", node).preserved_by(plus(3))
    # a half-node communicator that stays in place keeps its order under any algorithm
    assert collectives("Tree", [0, 1, 2, 3]).preserved_by(lambda r: r)


def test_a_split_node_is_not_a_ring_rotation():
    # two GPUs per node on two nodes: +1 wraps local rank 7 to 0 and reorders the rails
    assert collectives("Ring", [0, 4, 8, 12]).preserved_by(plus(1))
    assert not collectives("Ring", [3, 7, 11, 15]).preserved_by(plus(1))


def test_a_collective_too_large_to_replay_settles_a_translation_first(monkeypatch):
    """Translating a two-GPUs-per-node communicator by half a node swaps each node's
    members, so both its collectives must be replayed to fold. The all-gather sends more
    messages than a replay may hold though fewer bytes than the all-reduce: it is
    checked first and refuses the translation before anything is replayed."""
    import astra_core.system.nccl_symmetry as nccl_symmetry

    members = (0, 4, 8, 12)
    model = NcclModel(nccl_system().nccl, dgx(2))
    found = NcclCollectives([], [8, 2], {}, model, message_ns=lambda src, dst, size: 1000.0)
    reduce, gather = (CommType.ALL_REDUCE, members, 1 << 30), (CommType.ALL_GATHER, members, 768 << 20)
    found.collectives = {reduce, gather}

    def messages(comm_type, size):
        return sum(
            len(lane.sends) for m in members for lane in model.schedule(comm_type, m, members, size)[0].lanes
        )

    count = {c: messages(c[0], c[2]) for c in (reduce, gather)}
    assert count[gather] > count[reduce] and gather[2] < reduce[2]
    monkeypatch.setattr(nccl_symmetry, "REPLAY_MESSAGES_MAX", (count[gather] + count[reduce]) // 2)

    def replay(*args):
        raise AssertionError("a collective was replayed")

    monkeypatch.setattr(nccl_symmetry, "replay", replay)
    assert found.moved_by(plus(4)) is None
