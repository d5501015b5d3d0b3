"""Megatron-LM options of the LLM generator: activation recomputation, gradient reduction
after the backward pass, and scatter/gather of pipeline sends, against closed forms."""

from __future__ import annotations

from dataclasses import replace

import pytest

from astra_core.errors import ConfigError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators import ops as O
from astra_core.workload.generators.gpus import GPUS
from astra_core.workload.generators.llm import LLMConfig, generate_llm
from astra_core.workload.generators.models import ModelConfig
from astra_core.workload.generators.pipeline import layout_stages, parse_layout, stage_layers
from astra_core.workload.generators.userbuffers import ub_cfg

A100 = GPUS["a100"]
GPT = ModelConfig("gpt-test", layers=8, hidden=1024, heads=16, ffn_hidden=4096, vocab=51200, seq_len=2048)


def stage(cfg: LLMConfig, p: int = 0):
    wl = generate_llm(cfg)
    return wl, wl.stages[p]


def test_full_recompute_runs_every_forward_twice():
    base = LLMConfig(GPT, A100, tp=2, pp=2, microbatches=4)
    full = LLMConfig(GPT, A100, tp=2, pp=2, microbatches=4, recompute="full")
    wl0, nodes0 = stage(base)
    wl1, nodes1 = stage(full)
    layers = GPT.layers // 2
    b, s, t = 1, GPT.seq_len, 2
    layer_forward = sum(
        o.flops for o in O.attention_ops(GPT, b, s, t, False) + O.mlp_ops(GPT, b, s, t, False)
    )
    # 4 micro-batches x 4 layers on stage 0 re-run their forward once more
    assert wl1.flops[0] - wl0.flops[0] == pytest.approx(4 * layers * layer_forward)
    # and with it the forward's two tensor-parallel all-reduces per layer
    ar = lambda nodes: sum(1 for n in nodes if n.comm_type == pb.ALL_REDUCE and not n.late)  # noqa: E731
    assert ar(nodes1) - ar(nodes0) == 4 * layers * 2


def test_selective_recompute_runs_the_attention_core_again():
    base = LLMConfig(GPT, A100, tp=2, pp=1, microbatches=2)
    sel = LLMConfig(GPT, A100, tp=2, pp=1, microbatches=2, recompute="selective")
    core = [o for o in O.attention_ops(GPT, 1, GPT.seq_len, 2, False) if o.name == "attention"][0]
    extra = generate_llm(sel).flops[0] - generate_llm(base).flops[0]
    assert extra == pytest.approx(2 * GPT.layers * core.flops)


def test_recomputing_the_mlp_module_runs_its_forward_and_all_reduce_again():
    base = LLMConfig(GPT, A100, tp=2, pp=1, microbatches=2)
    mlp = LLMConfig(GPT, A100, tp=2, pp=1, microbatches=2, recompute="selective", recompute_modules=("mlp",))
    forward = sum(o.flops for o in O.mlp_ops(GPT, 1, GPT.seq_len, 2, False))
    (wl0, nodes0), (wl1, nodes1) = stage(base), stage(mlp)
    assert wl1.flops[0] - wl0.flops[0] == pytest.approx(2 * GPT.layers * forward)
    assert wl1.model_flops == wl0.model_flops  # recomputation is hardware work only
    # the block's forward all-reduce (tensor parallelism without sequence parallelism)
    ar = lambda nodes: sum(1 for n in nodes if n.comm_type == pb.ALL_REDUCE and not n.late)  # noqa: E731
    assert ar(nodes1) - ar(nodes0) == 2 * GPT.layers


def test_gradients_reduced_once_after_the_backward_pass():
    overlap = LLMConfig(GPT, A100, dp=4, tp=2, microbatches=2, bucket_bytes=8 << 20)
    local = LLMConfig(GPT, A100, dp=4, tp=2, microbatches=2, bucket_bytes=8 << 20, overlap_grad_reduce=False)
    grads = lambda nodes: [n for n in nodes if n.late]  # noqa: E731
    many = grads(stage(overlap)[1])
    one = grads(stage(local)[1])
    assert len(many) > 1 and len(one) == 1
    # the same bytes either way, and the single reduction waits for the whole backward pass
    assert sum(n.size for n in many) == pytest.approx(one[0].size, abs=len(many))
    nodes = stage(local)[1]
    last_backward = max(i for i, n in enumerate(nodes) if n.type == pb.COMP_NODE and "bwd" in n.name)
    assert nodes.index(one[0]) > last_backward


@pytest.mark.parametrize("scatter_gather, expected_gathers", [(True, 4), (False, 0)])
def test_pipeline_sends_carry_one_tp_share(scatter_gather, expected_gathers):
    cfg = LLMConfig(GPT, A100, tp=4, pp=2, microbatches=4, scatter_gather=scatter_gather)
    _, last = stage(cfg, 1)
    act = GPT.seq_len * GPT.hidden * O.BYTES
    recvs = [n for n in last if n.type == pb.COMM_RECV_NODE]
    assert {n.size for n in recvs} == {act // 4 if scatter_gather else act}
    gathers = [n for n in last if n.comm_type == pb.ALL_GATHER and n.name.endswith("_recv_AG")]
    assert len(gathers) == expected_gathers and all(n.size == act // 4 for n in gathers)


def test_unknown_recompute_is_one_line():
    with pytest.raises(ConfigError, match="--recompute: expected one of none, selective, full"):
        generate_llm(LLMConfig(GPT, A100, recompute="some"))


def test_interleaved_schedule_shrinks_the_bubble(tmp_path):
    from astra_core.api import simulate
    from astra_core.workload.chakra import read_rank_trace
    from astra_core.workload.generators.llm import write_llm

    from .conftest import write_network, write_system

    P, M = 4, 8
    bare = ModelConfig("stack", layers=8, hidden=1024, heads=16, ffn_hidden=4096, vocab=0)
    for V in (1, 2):
        cfg = LLMConfig(bare, A100, pp=P, microbatches=M, virtual_stages=V)
        paths, _ = write_llm(generate_llm(cfg), tmp_path / f"v{V}")
        # free communication: no latency, no endpoint delay, 10^9 GB/s links
        network = write_network(tmp_path, [P], bandwidth=1e9, latency=0.0)
        system = write_system(tmp_path, 1, endpoint_delay=0)
        result = simulate(tmp_path / f"v{V}", system, network)
        optimizer = [n for n in read_rank_trace(paths[0]).nodes if n.name == "optimizer"][0]
        t_opt = optimizer.duration_micros * 1000
        # Narayanan et al. SC'21: with V chunks per stage the bubble is (P - 1) / (V M + P - 1)
        # of the pipelined part of the step (every stage equal: a bare stack of layers)
        for rank in result.ranks:
            bubble = 1 - (rank.compute_ns - t_opt) / (result.step_ns - t_opt)
            assert bubble == pytest.approx((P - 1) / (V * M + P - 1), abs=0.005)


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"pp": 1, "virtual_stages": 2}, "needs --pp > 1"),
        ({"pp": 4, "virtual_stages": 3}, "must divide the 8 layers"),
        ({"pp": 2, "virtual_stages": 2, "microbatches": 3}, "multiple of --pp 2"),
    ],
)
def test_interleaving_needs_what_megatron_needs(kw, message):
    with pytest.raises(ConfigError, match=message):
        generate_llm(LLMConfig(GPT, A100, **kw))


@pytest.mark.parametrize(
    "options",
    [
        {"recompute": "full", "virtual_stages": 2},
        {"recompute": "selective", "overlap_grad_reduce": False},
        {"scatter_gather": False, "virtual_stages": 2, "overlap_grad_reduce": False},
        {"dp": 1, "cp": 2, "recompute": "selective"},
        {"sequence_parallel": True, "tp_comm_overlap": True, "recompute": "full"},
        {"dp": 1, "cp": 2, "sequence_parallel": True, "tp_comm_overlap": True},
        {"virtual_stages": 2, "pipeline_layout": "Et|ttt|ttt|tL"},
        {"first_stage_layers": 3},
    ],
)
def test_rank_symmetry_stays_exact(tmp_path, options):
    from astra_core.api import simulate
    from astra_core.workload.generators.llm import write_llm

    from .conftest import write_network, write_system

    cfg = LLMConfig(GPT, A100, **{"dp": 2, "tp": 2, "pp": 2, "microbatches": 4, "dims": [2, 2, 2], **options})
    _, groups = write_llm(generate_llm(cfg), tmp_path / "llm")
    network = write_network(tmp_path, [2, 2, 2])
    system = write_system(tmp_path, 3)
    runs = [
        simulate(tmp_path / "llm", system, network, comm_groups=groups, symmetry=flag)
        for flag in (True, False)
    ]
    assert runs[0].symmetric and not runs[1].symmetric
    assert [r.finish_ns for r in runs[0].ranks] == [r.finish_ns for r in runs[1].ranks]
    assert [r.exposed_comm_ns for r in runs[0].ranks] == [r.exposed_comm_ns for r in runs[1].ranks]


@pytest.mark.parametrize("precision, per_param", [("bf16", 10), ("fp16", 6)])
def test_local_ddp_accumulates_gradients_every_micro_batch(precision, per_param):
    overlapped = LLMConfig(GPT, A100, tp=2, pp=2, dp=2, microbatches=4, precision=precision)
    local = LLMConfig(
        GPT, A100, tp=2, pp=2, dp=2, microbatches=4, overlap_grad_reduce=False, precision=precision
    )
    compute = lambda cfg: sum(n.duration_ns for n in stage(cfg)[1] if n.type == pb.COMP_NODE)  # noqa: E731
    # per micro-batch and layer of stage 0: read the 16-bit gradient and the buffer (FP32 for
    # BF16: 10 B per local parameter; FP16: 6 B), write the buffer, at the framework-kernel rate
    # Q, K, V, output and the two MLP matrices split over TP 2; the two layer norms whole
    params = (4 * GPT.hidden**2 + 2 * GPT.hidden * GPT.ffn_hidden) / 2 + 2 * GPT.hidden
    layer_ns = per_param * params / (A100.memory_gbps * A100.elementwise_efficiency)
    assert compute(local) - compute(overlapped) == pytest.approx(4 * (GPT.layers // 2) * layer_ns, rel=1e-9)


# -- context parallelism ---------------------------------------------------------------


def test_context_parallel_groups_follow_megatrons_order():
    from astra_core.workload.generators.layout import Layout

    layout = Layout(dp=2, tp=2, pp=2, cp=2)
    rank = lambda t, c, d, p: t + 2 * (c + 2 * (d + 2 * p))  # noqa: E731 - tp-cp-dp-pp
    r = rank(1, 1, 0, 1)
    assert layout.members("tp", r) == (rank(0, 1, 0, 1), r)
    assert layout.members("cp", r) == (rank(1, 0, 0, 1), r)
    # gradients are reduced over data and context parallel ranks together
    assert layout.members("dp", r) == tuple(rank(1, c, d, 1) for d in range(2) for c in range(2))
    assert layout.cp_peer(r, 1) == rank(1, 0, 0, 1) and layout.cp_peer(rank(1, 0, 0, 1), -1) == r


def test_context_parallelism_keeps_the_model_flops():
    # the same 8 GPUs as D 4 or D 2 x C 2: every token's GEMMs and the attention
    # matrix are split, not repeated
    plain = generate_llm(LLMConfig(GPT, A100, dp=4, tp=2, microbatches=2))
    split = generate_llm(LLMConfig(GPT, A100, dp=2, tp=2, cp=2, microbatches=4))
    assert sum(split.model_flops.values()) == pytest.approx(sum(plain.model_flops.values()), rel=1e-12)


def test_context_parallel_ring_moves_keys_and_values():
    C, T, M = 4, 2, 2
    cfg = LLMConfig(GPT, A100, tp=T, cp=C, microbatches=M, recompute="full")
    _, nodes = stage(cfg)
    sent = sum(n.size for n in nodes if n.type == pb.COMM_SEND_NODE and n.role == "cp_next")
    # one rank's keys and values: 2 x (s / C) tokens x kv heads / T x head dim x 2 B
    kv = 2 * GPT.seq_len // C * GPT.kv // T * GPT.hd * 2
    # per layer and micro-batch: forward and its recomputation C - 1 hops each; backward
    # C - 1 hops of keys, values and their gradients, then the gradients' way home
    per_layer = 2 * (C - 1) * kv + (C - 1) * 2 * kv + kv
    assert sent == M * GPT.layers * per_layer


def test_all_gather_context_parallelism_gathers_keys_and_values_and_keeps_the_work():
    C, T, M = 4, 2, 2
    ring = LLMConfig(GPT, A100, tp=T, cp=C, microbatches=M, recompute="full")
    gather = replace(ring, cp_comm_type="all_gather")
    wl_ring, _ = stage(ring)
    wl_gather, nodes = stage(gather)
    # the same attention work as the ring's, as two kernels (two diagonals, the whole blocks)
    assert wl_gather.flops[0] == pytest.approx(wl_ring.flops[0], rel=1e-12)
    assert sum(wl_gather.model_flops.values()) == pytest.approx(sum(wl_ring.model_flops.values()), rel=1e-12)
    assert not [n for n in nodes if n.type == pb.COMM_SEND_NODE and n.role.startswith("cp")]
    cp = [n for n in nodes if n.type == pb.COMM_COLL_NODE and n.role == "cp"]
    # one rank's keys (and values): s / C tokens x kv heads / T x head dim x 2 B
    k = GPT.seq_len // C * GPT.kv // T * GPT.hd * 2
    # per layer and micro-batch: forward and its recomputation gather K and V (each rank's
    # share is the all-gather's size); backward gathers them again, then reduce-scatters
    # their gradients (the gathered C shares are the reduce-scatter's size)
    gathers = [n.size for n in cp if n.comm_type == pb.ALL_GATHER]
    scatters = [n.size for n in cp if n.comm_type == pb.REDUCE_SCATTER]
    assert gathers == [k] * (M * GPT.layers * 3 * 2)
    assert scatters == [C * k] * (M * GPT.layers * 2)


def test_all_to_all_context_parallelism_moves_each_heads_share_and_keeps_the_work():
    C, T, M = 2, 2, 2
    ring = LLMConfig(GPT, A100, tp=T, cp=C, microbatches=M, recompute="full")
    wl_ring, _ = stage(ring)
    wl_a2a, nodes = stage(replace(ring, cp_comm_type="a2a"))
    # the whole sequence for H / (T C) heads: the ring's work and model FLOPs, in one kernel
    assert wl_a2a.flops[0] == pytest.approx(wl_ring.flops[0], rel=1e-12)
    assert sum(wl_a2a.model_flops.values()) == pytest.approx(sum(wl_ring.model_flops.values()), rel=1e-12)
    a2a = [n for n in nodes if n.type == pb.COMM_COLL_NODE and n.role == "cp"]
    assert {n.comm_type for n in a2a} == {pb.ALL_TO_ALL}
    # one rank's Q (K, V, output): s / C tokens x H / T heads x head dim x 2 B; per layer and
    # micro-batch, forward and its recomputation move Q, K, V in and the output back,
    # backward the output gradient in and the Q, K, V gradients back
    x = GPT.seq_len // C * GPT.heads // T * GPT.hd * 2
    assert [n.size for n in a2a] == [x] * (M * GPT.layers * 3 * 4)


@pytest.mark.parametrize("kind", ["all_gather", "a2a"])
def test_context_parallel_collectives_sit_on_the_critical_path(tmp_path, kind):
    # nothing overlaps the gathers or the all-to-alls: the step is at least the compute (the
    # step on a network too fast to matter) plus what each rank must send at the link's
    # rate: per layer, all_gather's 6 collectives of (C - 1) shares (forward: K and V
    # gathered; backward: gathered again, their gradients reduce-scattered), a2a's 8
    # tensors of which (C - 1) / C leave (forward Q, K, V and the output; backward their
    # gradients). The ring hides part of its hops behind the blocks. A long sequence on a
    # small model, so that the communication and the compute are alike.
    from astra_core.api import simulate
    from astra_core.config.network import NetworkConfig
    from astra_core.workload.generators.llm_traces import llm_traces

    from .conftest import write_system

    C, GIB_S = 4, 14.0
    model = ModelConfig("long", layers=2, hidden=256, heads=4, ffn_hidden=1024, vocab=1024, seq_len=32768)
    ring = LLMConfig(model, A100, cp=C, microbatches=1, dims=[C])
    system = write_system(tmp_path, 1)

    def step_ns(kind: str, gib_per_s: float) -> float:
        network = NetworkConfig.from_dict(
            {"topology": ["Switch"], "npus_count": [C], "bandwidth": [gib_per_s], "latency": [500]}
        )
        traces, groups = llm_traces(generate_llm(replace(ring, cp_comm_type=kind)))
        return simulate(traces, system, network, comm_groups=groups).step_ns

    x = model.seq_len // C * model.kv * model.hd * 2  # one rank's keys (MHA: = Q, V, output) [B]
    sent = 6 * (C - 1) * x if kind == "all_gather" else 8 * (C - 1) / C * x
    serial = step_ns(kind, 1e4) + model.layers * sent / (GIB_S * 2**30) * 1e9
    assert step_ns(kind, GIB_S) >= serial
    if kind == "all_gather":
        assert step_ns("p2p", GIB_S) < serial


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"cp": 2, "attention": "unfused"}, "--cp 2: context parallelism runs FlashAttention"),
        ({"cp": 3}, r"must split into 2 x cp = 6 equal chunks"),
        ({"cp": 2, "cp_comm_type": "a2a+p2p"}, r"--cp-comm-type: expected one of p2p, all_gather, a2a"),
        (
            {"cp": 32, "cp_comm_type": "a2a"},
            r"heads per tensor-parallel rank \(16 query, 16 key-value\) must divide by --cp 32",
        ),
    ],
)
def test_context_parallelism_needs_what_megatron_needs(kw, message):
    with pytest.raises(ConfigError, match=message):
        generate_llm(LLMConfig(GPT, A100, **kw))


# -- tensor-parallel communication overlap ------------------------------------------------


def test_tp_comm_overlap_moves_the_sequence_parallel_bytes_in_rings():
    T, M = 4, 2
    plain = LLMConfig(GPT, A100, tp=T, microbatches=M, sequence_parallel=True)
    # every forward reduce-scatter a ring exchange (Megatron-Bridge's FP8 tables)
    rings = ub_cfg({g: {"method": "ring_exchange"} for g in ("proj_fprop", "fc2_fprop")}, "test")
    ringed = replace(plain, tp_comm_overlap=True, tp_comm_overlap_cfg=rings)
    wl0, nodes0 = stage(plain)
    wl1, nodes1 = stage(ringed)
    shard = GPT.seq_len * GPT.hidden * 2 // T  # one rank's share of an activation [B]
    sent = sum(n.size for n in nodes1 if n.type == pb.COMM_SEND_NODE and n.role == "tp_next")
    # per layer and micro-batch: attention and MLP each gather before their first GEMM and
    # reduce-scatter after their last (forward), and gather the output gradient beside the
    # first data-gradient GEMM (backward): 6 rings of T - 1 shares
    assert sent == M * GPT.layers * 6 * (T - 1) * shard

    # the collectives that remain are the backward's bulk overlaps of each block's first GEMM:
    # the input gathered again for the weight gradient, the data gradient reduce-scattered
    def blocks(nodes):
        return [n for n in nodes if n.type == pb.COMM_COLL_NODE and ("_attn" in n.name or "_mlp" in n.name)]

    assert len(blocks(nodes1)) == M * GPT.layers * 4
    assert all(n.name.endswith(("_input_AG", "_in_RS")) for n in blocks(nodes1))
    # without the rings: forward AG + RS per block, backward AG of the output gradient,
    # the input's AG and the data gradient's RS per block
    assert len(blocks(nodes0)) == M * GPT.layers * 10
    assert wl1.flops[0] == pytest.approx(wl0.flops[0], rel=1e-12)  # the same kernels, in blocks


def _comm_spans(system, network, cfg):
    """Per communication node of rank 0 but receives: (name, stream, start, end, parents' end)
    [ns]; the run under rank symmetry checked against the run of every rank."""
    from astra_core.api import simulate
    from astra_core.report.breakdown import rank_tracks
    from astra_core.workload.generators.llm_traces import llm_traces

    traces, groups = llm_traces(generate_llm(cfg))
    runs = [simulate(traces, system, network, comm_groups=groups or None, symmetry=s) for s in (True, False)]
    assert runs[0].symmetric and [r.finish_ns for r in runs[0].ranks] == [r.finish_ns for r in runs[1].ranks]
    track = rank_tracks(runs[0])[0]
    end_of = {track.nodes[pos].id: end for pos, _, end in track.records}
    spans = []
    for pos, start, end in track.records:
        node = track.nodes[pos]
        if node.type in (pb.COMM_COLL_NODE, pb.COMM_SEND_NODE):
            ready = max((end_of[d] for d in (*node.data_deps, *node.ctrl_deps)), default=0.0)
            spans.append((node.name, node.attrs.get("comm_stream", 0), start, end, ready))
    return spans


def test_gradient_reductions_run_beside_the_tensor_parallel_ring(tmp_path):
    """Overlapped gradient reduce-scatters run on their data-parallel group's NCCL stream:
    on the NCCL model no other communication waits for them (every send and collective
    starts as its parents end), and they do run while the tensor-parallel ring sends."""
    from astra_core.config.system import nccl_system

    from .conftest import write_network

    cfg = LLMConfig(
        GPT,
        A100,
        tp=4,
        dp=2,
        microbatches=2,
        sequence_parallel=True,
        tp_comm_overlap=True,
        dims=[4, 2],
        bucket_bytes=4 << 20,  # reduced as the backward pass goes
    )
    spans = _comm_spans(nccl_system("A100"), write_network(tmp_path, [4, 2], bandwidth=25.0), cfg)
    grads = [s for s in spans if s[0].startswith("grads_")]
    rest = [s for s in spans if not s[0].startswith("grads_")]
    assert grads and all(stream == 1 for _, stream, *_ in grads)
    assert all(stream == 0 for _, stream, *_ in rest)
    assert all(start == ready for *_, start, _, ready in spans)
    assert any(g[2] < r[3] and r[2] < g[3] for g in grads for r in rest if r[0].endswith("_send"))


def test_upstreams_queues_keep_one_communication_at_a_time(tmp_path):
    """On upstream's ring algorithms (per-dimension queues) a GPU stream is not a slot of its
    own: a rank's sends and collectives never overlap one another."""
    from .conftest import write_network, write_system

    cfg = LLMConfig(
        GPT, A100, tp=4, dp=2, microbatches=2, sequence_parallel=True, tp_comm_overlap=True, dims=[4, 2]
    )
    spans = sorted(
        s[2:4] for s in _comm_spans(write_system(tmp_path, 2), write_network(tmp_path, [4, 2]), cfg)
    )
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))


def test_tp_comm_overlap_hides_communication(tmp_path):
    from astra_core.api import simulate
    from astra_core.workload.generators.llm import write_llm

    from .conftest import write_network, write_system

    steps = []
    for overlap in (False, True):
        cfg = LLMConfig(GPT, A100, tp=4, microbatches=2, sequence_parallel=True, tp_comm_overlap=overlap)
        _, groups = write_llm(generate_llm(cfg), tmp_path / f"o{overlap}")
        steps.append(
            simulate(
                tmp_path / f"o{overlap}",
                write_system(tmp_path, 1),
                write_network(tmp_path, [4], bandwidth=25.0),
                comm_groups=groups,
            ).step_ns
        )
    assert steps[1] < steps[0]


def test_tp_comm_overlap_runs_beside_the_context_parallel_ring():
    """Megatron-Core with --tp-comm-overlap and --context-parallel-size: the attention
    block's tensor-parallel rings wrap the attention core's context-parallel ring; each
    ring moves what it moves alone."""
    C, T, M = 2, 4, 2
    cfg = LLMConfig(
        GPT, A100, tp=T, cp=C, microbatches=M, sequence_parallel=True, tp_comm_overlap=True, recompute="full"
    )
    wl, nodes = stage(cfg)
    tp_sent = sum(n.size for n in nodes if n.type == pb.COMM_SEND_NODE and n.role == "tp_next")
    cp_sent = sum(n.size for n in nodes if n.type == pb.COMM_SEND_NODE and n.role == "cp_next")
    shard = GPT.seq_len // C * GPT.hidden * 2 // T  # one rank's share of its s / C tokens [B]
    kv = 2 * GPT.seq_len // C * GPT.kv // T * GPT.hd * 2
    # rings of T - 1 shares: forward 2 all-gathers, its recomputation 2, backward 2; the
    # forward reduce-scatters pipelined in 4 splits (Transformer Engine's default)
    assert tp_sent == M * GPT.layers * 6 * (T - 1) * shard
    pipelined = [n for n in nodes if n.type == pb.COMM_COLL_NODE and "_rs_tp" in n.name]
    assert len(pipelined) == M * GPT.layers * 2 * 2 * 4
    assert sum(n.size for n in pipelined) == M * GPT.layers * 2 * 2 * T * shard
    # as test_context_parallel_ring_moves_keys_and_values
    assert cp_sent == M * GPT.layers * (2 * (C - 1) * kv + (C - 1) * 2 * kv + kv)
    plain = generate_llm(
        LLMConfig(GPT, A100, tp=T, cp=C, microbatches=M, sequence_parallel=True, recompute="full")
    )
    assert wl.flops[0] == pytest.approx(plain.flops[0], rel=1e-12)  # the same kernels, in blocks


def test_tp_comm_overlap_needs_sequence_parallelism():
    with pytest.raises(ConfigError, match="--tp-comm-overlap needs --sequence-parallel"):
        generate_llm(LLMConfig(GPT, A100, tp=2, tp_comm_overlap=True))


def _layers_on(stage_nodes) -> set[int]:
    """The transformer layers whose forward attention a stage runs."""
    return {int(n.name[1:].split("_")[0]) for n in stage_nodes if n.name.endswith("_fwd_attn")}


@pytest.mark.parametrize(
    "layers, P, first, last, expected",
    [
        (10, 4, 1, 1, [1, 4, 4, 1]),  # the rest evenly over the two middle stages
        (11, 4, 2, None, [2, 3, 3, 3]),  # only the first given
        (9, 3, None, 1, [4, 4, 1]),  # only the last given
        (5, 2, 2, 3, [2, 3]),  # both given, no stage between
    ],
)
def test_uneven_first_and_last_stages_hold_their_layers_in_order(layers, P, first, last, expected):
    model = ModelConfig("stack", layers=layers, hidden=1024, heads=16, ffn_hidden=4096, vocab=51200)
    cfg = LLMConfig(model, A100, pp=P, microbatches=P, first_stage_layers=first, last_stage_layers=last)
    wl = generate_llm(cfg)
    held = [sorted(_layers_on(nodes)) for nodes in wl.stages]
    assert [len(h) for h in held] == expected
    assert [i for h in held for i in h] == list(range(layers))  # every layer once, in stage order
    # the embedding stays on the first stage and the output layer on the last
    assert any("embedding" in n.name for n in wl.stages[0]) and any(
        "lm_head" in n.name for n in wl.stages[-1]
    )


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"pp": 1, "first_stage_layers": 2}, "needs --pp of at least 2"),
        ({"pp": 2, "virtual_stages": 2, "first_stage_layers": 2}, "not with --virtual-stages"),
        (
            {"pp": 4, "first_stage_layers": 1},
            "remaining 7 of the 8 layers .* must split evenly over the other 3",
        ),
        ({"pp": 2, "first_stage_layers": 3, "last_stage_layers": 3}, "remaining 2 of the 8 layers"),
        ({"pp": 3, "first_stage_layers": 4, "last_stage_layers": 4}, "at least one layer each"),
    ],
)
def test_uneven_stages_need_what_megatron_needs(kw, message):
    with pytest.raises(ConfigError, match=message):
        generate_llm(LLMConfig(GPT, A100, microbatches=4, **kw))


# -- the embedding and the loss in the pipeline split; pipeline layouts --------------------


@pytest.mark.parametrize(
    "layout, P, layers, expected",
    [
        # Llama 3.1 405B's 2025 recipe: 126 layers, embedding and loss each in a chunk's place
        ("Et|(tt|)*62tL", 8, 126, [1] + [2] * 62 + [1]),
        # an embedding-only first chunk and a loss-only last one (Llama 3 paper, section 3.3.2)
        ("E|(t|)*6L", 4, 6, [0, 1, 1, 1, 1, 1, 1, 0]),
        ("Et*6|t*6|t*6|t*5|t*5|t*5|t*5|t*5L", 8, 43, [6, 6, 6, 5, 5, 5, 5, 5]),
        ("E,ttt|ttt,L", 2, 6, [3, 3]),  # commas are cosmetic
    ],
)
def test_a_pipeline_layout_spells_each_virtual_stage(layout, P, layers, expected):
    assert parse_layout(layout, P, layers) == expected
    assert layout_stages(layout) == len(expected)


def test_counting_embedding_and_loss_is_the_layout_that_gives_them_a_layer_each():
    assert stage_layers(126, 8, 8, embedding=True, loss=True) == parse_layout("Et|(tt|)*62tL", 8, 126)
    assert stage_layers(7, 4, 1, embedding=True) == [1, 2, 2, 2]


@pytest.mark.parametrize(
    "layout, message",
    [
        ("Ettt|(tt|)*2,m|L", r"it places 1 multi-token-prediction layers \(m\); --mtp-num-layers is 0"),
        ("Ett|tt|tt|ttL", "places 8 transformer layers; the model has 6"),
        ("tEtt|tttL", r"embedding \(E\) must come first"),
        ("Ettt|tt|tL", "3 virtual stages are not a multiple of the 2"),
        ("Ett|tx|ttL", "unknown layer letters 'x'"),
    ],
)
def test_a_bad_pipeline_layout_is_one_line(layout, message):
    with pytest.raises(ValueError, match=message):
        parse_layout(layout, 2, 6)


def test_a_pipeline_layout_places_layers_with_virtual_stages():
    """'E|tttt|tttt|L' on 2 stages x 2 chunks: chunk 0 of stage 0 holds only the
    embedding, chunk 1 of stage 1 only the output layer and loss; the model's FLOPs are
    the even split's."""
    cfg = LLMConfig(GPT, A100, pp=2, microbatches=4, virtual_stages=2, pipeline_layout="E|tttt|tttt|L")
    wl = generate_llm(cfg)
    assert sorted(_layers_on(wl.stages[0])) == [4, 5, 6, 7]  # virtual stage 2 = chunk 1 of stage 0
    assert sorted(_layers_on(wl.stages[1])) == [0, 1, 2, 3]  # virtual stage 1 = chunk 0 of stage 1
    assert any("embedding" in n.name for n in wl.stages[0])
    assert any("lm_head" in n.name for n in wl.stages[1])
    even = generate_llm(LLMConfig(GPT, A100, pp=2, microbatches=4, virtual_stages=2))
    assert sum(wl.model_flops.values()) == pytest.approx(sum(even.model_flops.values()), rel=1e-12)


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"pipeline_layout": "Ett|tt|tt|ttL"}, "--virtual-stages is 1"),
        ({"pipeline_layout": "Ettt|tttttL", "first_stage_layers": 3}, "not with --decoder-first"),
        (
            {"pipeline_layout": "Ettt|tttttL", "account_for_loss": True},
            "--pipeline-layout: not with --account-for-loss",
        ),
        ({"account_for_embedding": True, "virtual_stages": 2}, r"8 layers \+ 1 for the embedding = 9"),
    ],
)
def test_flexible_splits_need_what_megatron_needs(kw, message):
    with pytest.raises(ConfigError, match=message):
        generate_llm(LLMConfig(GPT, A100, pp=2, microbatches=4, **kw))
