"""LLM generator against closed forms: FLOPs, pipeline bubble, gradient bytes, ranks and groups."""

from __future__ import annotations

import json

import pytest

from astra_core.api import simulate
from astra_core.errors import ConfigError, TraceError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra import read_rank_trace
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm
from astra_core.workload.generators.models import MODELS

from .conftest import write_network, write_system

H100 = GPUS["h100"]


@pytest.mark.parametrize("name, seq", [("gpt3-175b", 2048), ("llama3-70b", 4096), ("llama3-8b", 2048)])
def test_flops_are_six_times_params_times_tokens(name, seq):
    # Forward + backward = 2 + 4 FLOPs per parameter per token (Kaplan et al. 2020) plus causal
    # attention, which at these sequence lengths adds < 10 %, minus the input embedding (a lookup,
    # no multiply; 6.5 % of Llama-3 8B): the generator's FLOPs summed over every rank of the step
    # must be within 10 % of 6 N T.
    model = MODELS[name]
    cfg = LLMConfig(model, H100, dp=2, tp=8, pp=4, microbatches=4, seq_len=seq)
    wl = generate_llm(cfg)
    tokens = cfg.dp * wl.microbatches * cfg.micro_batch * seq
    ratio = sum(wl.flops.values()) / (6 * model.params() * tokens)
    assert 0.90 < ratio < 1.10


def test_moe_flops_follow_active_parameters():
    # For an MoE model each token uses only its top-k experts: 6 x active params x tokens.
    model = MODELS["mixtral-8x7b"]
    cfg = LLMConfig(model, H100, dp=8, tp=2, pp=2, ep=8, microbatches=2, seq_len=1024)
    wl = generate_llm(cfg)
    tokens = cfg.dp * wl.microbatches * 1024
    ratio = sum(wl.flops.values()) / (6 * model.active_params() * tokens)
    assert 1.0 < ratio < 1.10


def _bubble(tmp_path, schedule: str, stages: int, microbatches: int, model) -> float:
    cfg = LLMConfig(model, H100, pp=stages, microbatches=microbatches, schedule=schedule)
    paths, groups = write_llm(generate_llm(cfg), tmp_path / "llm")
    assert groups is None
    # free communication: no latency, no endpoint delay, 10^9 GB/s links
    network = write_network(tmp_path, [stages], bandwidth=1e9, latency=0.0)
    system = write_system(tmp_path, 1, endpoint_delay=0)
    result = simulate(tmp_path / "llm", system, network)
    optimizer = [n for n in read_rank_trace(paths[0]).nodes if n.name == "optimizer"][0]
    t_opt = optimizer.duration_micros * 1000
    # every stage is busy M x (t_F + t_B) of the pipelined part; the rest of the step is bubble
    busy = [r.compute_ns - t_opt for r in result.ranks]
    return [1 - b / (result.step_ns - t_opt) for b in busy]


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("stages, microbatches", [(4, 8), (2, 3), (4, 1)])
def test_pipeline_bubble_closed_form(tmp_path, tiny_dense, schedule, stages, microbatches):
    # With uniform stages and free communication the step is (M + P - 1) slots of t_F + t_B,
    # of which each stage computes M: bubble fraction (P - 1) / (M + P - 1) on every stage.
    bubbles = _bubble(tmp_path, schedule, stages, microbatches, tiny_dense)
    expected = (stages - 1) / (microbatches + stages - 1)
    for b in bubbles:
        assert b == pytest.approx(expected, rel=1e-4, abs=1e-6)


def _grad_bytes(path) -> int:
    return sum(
        n.comm_size
        for n in read_rank_trace(path).nodes
        if n.type == pb.COMM_COLL_NODE and n.name.startswith("grads_")
    )


@pytest.mark.parametrize(
    "precision, bf16_reduce, element",
    [
        ("bf16", False, 4),  # Megatron-LM reduces BF16 training's gradients in FP32
        ("bf16", True, 2),  # --grad-reduce-in-bf16
        ("fp16", False, 2),  # FP16: the parameters' dtype
    ],
)
def test_data_parallel_gradient_bytes(tmp_path, precision, bf16_reduce, element):
    # A middle pipeline stage of a dense model holds L/P layers: each rank reduces its
    # T-th of the attention and MLP matrices plus its (replicated) layer norms.
    model = MODELS["gpt3-175b"]
    d, t, p = 2, 8, 4
    cfg = LLMConfig(
        model, H100, dp=d, tp=t, pp=p, microbatches=1, precision=precision, grad_reduce_in_bf16=bf16_reduce
    )
    wl = generate_llm(cfg)
    paths, _ = write_llm(wl, tmp_path / "g")
    per_layer = (model.attention_params() + model.dense_mlp_params()) / t + 2 * model.hidden
    middle = wl.layout.rank(0, 0, 1)
    exact = model.layers // p * per_layer * element
    assert _grad_bytes(paths[middle]) == pytest.approx(exact, abs=64)
    assert wl.dp_grad_bytes[middle] == pytest.approx(exact, abs=64)
    # the closed form: parameters x bytes per parameter / (T x P), here within 1 %
    # (embeddings sit on the first/last stage, norms are replicated)
    assert _grad_bytes(paths[middle]) == pytest.approx(model.params() * element / (t * p), rel=0.01)
    # over one model replica (T x P ranks) the gradients add up to every parameter once, plus the
    # replicated norms (T - 1 extra copies) and the last stage's tied-embedding copy
    replica = [wl.layout.rank(tt, 0, pp) for tt in range(t) for pp in range(p)]
    total = sum(_grad_bytes(paths[r]) for r in replica)
    extra = (t - 1) * (2 * model.hidden * model.layers + model.hidden) + model.vocab * model.hidden
    assert total == pytest.approx((model.params() + extra) * element, rel=1e-6)


@pytest.mark.parametrize("d, t, p, e", [(2, 2, 2, 1), (4, 2, 2, 2), (4, 1, 3, 4), (1, 4, 1, 1), (2, 2, 2, 2)])
def test_rank_count_and_comm_groups(tmp_path, tiny_moe, d, t, p, e):
    # One trace per rank, D x T x P of them. With rank = t + T (d + D p) (Megatron's order) the
    # groups are: D x P tensor-parallel groups of T consecutive ranks, T x P data-parallel groups
    # of D ranks (stride T), and for MoE T x P x D/E expert-parallel groups of E and T x P x E
    # expert-data-parallel groups of D/E; a one-NPU group communicates nothing, a group of all
    # NPUs needs no entry, and two roles with the same NPUs share one group.
    model = (
        tiny_moe
        if e > 1
        else tiny_moe.__class__(**{**tiny_moe.__dict__, "experts": 0, "top_k": 0, "expert_ffn_hidden": 0})
    )
    model = model.__class__(**{**model.__dict__, "layers": 3 * model.layers if p == 3 else model.layers})
    cfg = LLMConfig(model, H100, dp=d, tp=t, pp=p, ep=e, microbatches=2)
    paths, groups_path = write_llm(generate_llm(cfg), tmp_path / "m")
    n = d * t * p
    assert len(paths) == n and not (tmp_path / f"m.{n}.et").exists()

    def rank(tt, dd, pp):
        return tt + t * (dd + d * pp)

    expected = set()
    for pp in range(p):
        expected |= {tuple(rank(i, dd, pp) for i in range(t)) for dd in range(d)}
        expected |= {tuple(rank(tt, i, pp) for i in range(d)) for tt in range(t)}
        if e > 1:
            expected |= {
                tuple(rank(tt, b * e + i, pp) for i in range(e)) for tt in range(t) for b in range(d // e)
            }
            expected |= {
                tuple(rank(tt, k + e * i, pp) for i in range(d // e)) for tt in range(t) for k in range(e)
            }
    expected = {g for g in expected if 1 < len(g) < n}
    groups = json.loads(groups_path.read_text()) if groups_path else {}
    assert {tuple(g) for g in groups.values()} == expected
    assert len(groups) == len(expected)
    # each collective names a group its rank belongs to
    for r in range(n):
        for node in read_rank_trace(paths[r]).nodes:
            if node.pg_name is not None:
                assert r in groups[node.pg_name]


def test_runs_every_plan_without_deadlock(tmp_path, tiny_moe):
    # Small MoE model over 16 NPUs: every schedule x ZeRO stage x sequence parallelism runs to the
    # end; with ZeRO >= 1 gradients are reduce-scattered and weights all-gathered instead.
    network = write_network(tmp_path, [2, 4, 2])
    system = write_system(tmp_path, 3)
    steps = {}
    for schedule in ("gpipe", "1f1b"):
        for zero in (0, 1, 3):
            for sp in (False, True):
                cfg = LLMConfig(
                    tiny_moe,
                    H100,
                    dp=4,
                    tp=2,
                    pp=2,
                    ep=2,
                    microbatches=3,
                    schedule=schedule,
                    zero=zero,
                    sequence_parallel=sp,
                    dims=[2, 4, 2],
                )
                prefix = tmp_path / f"{schedule}{zero}{sp}"
                paths, groups = write_llm(generate_llm(cfg), prefix)
                result = simulate(prefix, system, network, comm_groups=groups)
                steps[(schedule, zero, sp)] = result.step_ns
                kinds = {
                    n.comm_type
                    for n in read_rank_trace(paths[0]).nodes
                    if n.type == pb.COMM_COLL_NODE and n.name.startswith(("grads_", "params_"))
                }
                assert kinds == (
                    {pb.ALL_REDUCE}
                    if zero == 0
                    else {pb.REDUCE_SCATTER, pb.ALL_GATHER}
                    if zero == 1
                    else {pb.REDUCE_SCATTER}
                )
    assert all(s > 0 for s in steps.values())


def test_involved_dims_match_comm_groups(tmp_path, tiny_dense):
    # Placing tensor- and data-parallel groups as whole network dimensions (involved_dim) or as
    # comm groups over the same NPUs must give the same step when each dimension is a Switch.
    network = write_network(tmp_path, [2, 2, 2])
    system = write_system(tmp_path, 3)
    runs = []
    for dims in (None, [2, 2, 2]):
        cfg = LLMConfig(tiny_dense, H100, dp=2, tp=2, pp=2, microbatches=2, dims=dims)
        prefix = tmp_path / f"d{dims is None}"
        _, groups = write_llm(generate_llm(cfg), prefix)
        assert (groups is None) == (dims is not None)
        runs.append(simulate(prefix, system, network, comm_groups=groups).step_ns)
    assert runs[0] == pytest.approx(runs[1], rel=1e-9)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"tp": 3}, "--tp 3"),
        ({"pp": 3}, "--pp 3"),
        ({"ep": 2}, "--ep 2"),
        ({"dp": 2, "global_batch": 3}, "--global-batch 3"),
        ({"dp": 2, "global_batch": 8, "microbatches": 3}, "disagrees"),
        ({"zero": 4}, "--zero"),
        ({"schedule": "zigzag"}, "--schedule"),
    ],
)
def test_bad_plans_are_one_line_errors(tiny_dense, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        generate_llm(LLMConfig(tiny_dense, H100, **kwargs))


def test_each_group_is_listed_once_however_many_ranks_share_it(tmp_path, tiny_moe, monkeypatch):
    """Writing D ranks lists each rank's groups once per group, not once per rank: a
    data-parallel group of D ranks listed by each of its D ranks made ``gen llm --dp
    100000`` quadratic (more than 5 minutes). The count of listings is the count of
    distinct groups of the roles a rank's collectives use (closed form below), and the
    files are those of a layout that has listed nothing yet."""
    from astra_core.workload.generators.layout import Layout

    listed: list[tuple[str, int]] = []
    members = Layout.members

    def counting(self, role, rank):
        listed.append((role, rank))
        return members(self, role, rank)

    monkeypatch.setattr(Layout, "members", counting)
    d, t, p, e = 8, 2, 2, 2
    cfg = LLMConfig(tiny_moe, H100, dp=d, tp=t, pp=p, ep=e, microbatches=2)
    wl = generate_llm(cfg)
    before = len(listed)
    paths, _ = write_llm(wl, tmp_path / "m")
    roles = {role for role, _ in listed[before:]}
    groups = {"tp": d * p, "dp": t * p, "ep": t * p * d // e, "edp": t * p * e, "emb": t * d, "amax": p}
    estimate = p * len(roles)  # the size check renders one rank per stage beforehand, on a copy
    assert len(listed) - before == sum(groups[role] for role in roles) + estimate
    fresh = Layout(dp=d, tp=t, pp=p, ep=e)
    monkeypatch.setattr(Layout, "members", members)
    wl.layout = fresh
    again, _ = write_llm(wl, tmp_path / "again")
    assert [path.read_bytes() for path in paths] == [path.read_bytes() for path in again]


def test_a_run_reads_the_comm_groups_gen_llm_wrote_beside_the_traces(tmp_path, tiny_dense):
    """``gen llm`` writes PREFIX.comm_groups.json beside its traces; a run of PREFIX
    without comm groups reads it (the run failed on its first sub-group), and gives the
    step of naming it; an explicit file still wins."""
    cfg = LLMConfig(tiny_dense, H100, dp=2, tp=2, pp=2, microbatches=2)
    _, groups = write_llm(generate_llm(cfg), tmp_path / "m")
    assert groups == tmp_path / "m.comm_groups.json" and json.loads(groups.read_text())
    network, system = write_network(tmp_path, [2, 4]), write_system(tmp_path, 2)
    beside = simulate(str(tmp_path / "m"), system, network)
    named = simulate(str(tmp_path / "m"), system, network, comm_groups=groups)
    assert beside.step_ns == named.step_ns > 0
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"1": [0, 1]}))
    with pytest.raises(TraceError, match="communicator group '[0-9]+' is not defined"):
        simulate(str(tmp_path / "m"), system, network, comm_groups=other)
