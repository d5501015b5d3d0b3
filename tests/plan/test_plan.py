"""astra plan: the layouts it considers, its bound and screening, and that its search finds
what simulating every layout in full finds."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from astra_core.cli import main
from astra_core.config.system import nccl_system
from astra_core.errors import ConfigError
from astra_core.plan import Layout, Limits, Space, layouts, search
from astra_core.plan.floors import CollectiveFloors
from astra_core.plan.point import FIELDS, _extend, compute_bound_ns, run_layout, screen_microbatches
from astra_core.plan.space import identity
from astra_core.report.breakdown import PARTS
from astra_core.run_digest import InputDigests
from astra_core.workload.generators.gpus import load_gpu
from astra_core.workload.generators.llm import _check as check_llm
from astra_core.workload.generators.llm_stage import StageBuilder
from astra_core.workload.generators.models import MODELS, ModelConfig
from astra_core.workload.generators.userbuffers import ub_cfg
from astra_core.workload.trace_size import MAX_RANK_NODES

MODEL = ModelConfig(
    "tiny",
    layers=8,
    hidden=1024,
    heads=16,
    kv_heads=8,
    ffn_hidden=4096,
    vocab=32000,
    seq_len=2048,
    mlp="swiglu",
)
#: A mixture of experts of the same shape: 16 experts, 2 routed per token.
MOE = replace(MODEL, name="tiny-moe", experts=16, top_k=2, expert_ffn_hidden=1024)
NETWORK = {
    "topology": ["Switch", "Switch"],
    "npus_count": [8, 2],
    "bandwidth": [419.0, 46.6],
    "latency": [300, 1350],
}
SYSTEM = nccl_system("H100")


def _space(model: ModelConfig = MODEL, **limits) -> Space:
    return Space(model, load_gpu("H100"), 16, 8, 64, 2048, dims=(8, 2), limits=Limits(**limits))


def _in_process(tasks, on_row, admit=None) -> None:
    for task in tasks:
        if admit is None or admit(task):
            on_row(run_layout(task))


def _full_step_ns(space: Space, layout: Layout, microbatches: int | None = None) -> float:
    microbatches = microbatches or space.global_batch // (layout.dp * layout.micro_batch)
    config = space.config(layout)
    config = replace(config, global_batch=layout.dp * layout.micro_batch * microbatches, microbatches=None)
    task = {
        "key": "",
        "config": config,
        "microbatches": microbatches,
        "counts": (microbatches,),
    }
    row = run_layout({**task, "system": SYSTEM, "network": NETWORK, "backend": None})
    assert row["status"] == "ok", row["error"]
    return row["step_ns"]


def test_every_layout_keeps_megatrons_rules_and_fits():
    space = _space(max_cp=2)
    fit, pruned = layouts(space)
    assert len(fit) > 100 and {lay.cp for lay, _ in fit} == {1, 2}
    for layout, memory in fit:
        assert layout.tp * layout.cp * layout.pp * layout.dp == 16
        assert all(w % layout.tp == 0 for w in (MODEL.heads, MODEL.kv, MODEL.ffn_hidden))
        layers = MODEL.layers + (2 if layout.edges_in_split else 0)
        assert layers % (layout.pp * layout.vp) == 0
        assert space.global_batch % (layout.dp * layout.micro_batch) == 0
        if layout.vp > 1:
            assert (space.global_batch // (layout.dp * layout.micro_batch)) % layout.pp == 0
        assert max(m.peak_bytes for m in memory) <= 80 * 2**30
    assert pruned["layers do not divide over the pipeline stages"] == 1  # PP 16 on 8 layers
    assert {lay.cp for lay, _ in layouts(_space())[0]} == {1}  # 2,048 tokens: no CP by default


def test_a_reserve_keeps_exactly_the_layouts_that_fit_beside_it():
    fit, _ = layouts(_space())
    peaks = sorted(max(m.peak_bytes for m in mem) for _, mem in fit)
    limit = peaks[len(peaks) // 2]  # half of them fit beside the reserve
    kept, pruned = layouts(_space(reserve_bytes=80 * 2**30 - limit))
    assert {lay for lay, _ in kept} == {lay for lay, mem in fit if max(m.peak_bytes for m in mem) <= limit}
    assert 0 < len(kept) < len(fit) and pruned["over the GPU's HBM less the reserve"] >= len(fit) - len(kept)


def test_fixed_sizes_are_kept():
    fit, _ = layouts(_space(tp=2, pp=2, micro_batch=1, recomputes=("none",)))
    assert fit and all(
        (lay.tp, lay.pp, lay.micro_batch, lay.recompute) == (2, 2, 1, "none") for lay, _ in fit
    )


def test_a_model_that_fits_nowhere_is_one_line():
    space = Space(MODELS["llama3-405b"], load_gpu("H100"), 8, 8, 8, 8192, dims=(8,))
    with pytest.raises(ConfigError) as err:
        search(space, SYSTEM, {**NETWORK, "npus_count": [8]}, run=_in_process)
    assert "\n" not in str(err.value) and "over the GPU's HBM" in str(err.value)


def test_a_global_batch_past_the_trace_limits_is_one_line_before_any_schedule_is_walked(monkeypatch):
    """10^12 sequences: every layout's step passes the generator's node limit (M x 8 layers
    x 4 nodes > 2^22 for every M >= 10^12 / 16), and the search says so at once instead of
    walking trillions of micro-batches through the memory model."""
    from astra_core.plan import space as space_module

    monkeypatch.setattr(space_module, "stage_memory", lambda *a: pytest.fail("walked a schedule"))
    space = Space(MODEL, load_gpu("H100"), 16, 8, 10**12, 2048, dims=(8, 2))
    with pytest.raises(ConfigError) as err:
        search(space, SYSTEM, NETWORK, run=_in_process)
    message = str(err.value)
    assert "\n" not in message and message.startswith("no layout of tiny on 16 H100 fits: ")
    assert " a step past astra's trace limits (micro-batches x layers)" in message
    monkeypatch.undo()  # the same layouts at a batch the generator takes are walked and kept
    assert layouts(replace(space, global_batch=64))[0]


@pytest.mark.parametrize(
    ("layout", "shown"),
    [
        (Layout(2, 1, 4, 2, 2, 1, 1), (4, 8)),
        (Layout(2, 1, 8, 1, 1, 1, 1), (1, 2)),
        (Layout(1, 2, 2, 1, 4, 1, 1), (1, 2)),
    ],
    ids=lambda x: x.label() if isinstance(x, Layout) else None,
)
def test_screening_extends_the_step_exactly(layout, shown):
    """T(M) = a + b M: two short runs give the long one (interleaved: from M = P)."""
    space = _space()
    microbatches = space.global_batch // (layout.dp * layout.micro_batch)
    counts = screen_microbatches(layout.pp, microbatches, layout.vp)
    assert counts == shown
    task = {"key": "", "config": space.config(layout), "microbatches": microbatches, "counts": counts}
    screened = run_layout({**task, "system": SYSTEM, "network": NETWORK, "backend": None})
    assert screened["step_ns"] == pytest.approx(_full_step_ns(space, layout), rel=1e-6)


def test_a_part_the_screen_extends_below_zero_counts_zero_and_the_parts_keep_their_sum():
    """A bubble that shrinks between the screen's runs: the line alone would make it
    negative at the plan's micro-batches."""
    two = dict.fromkeys(FIELDS, 0.0)
    four = dict.fromkeys(FIELDS, 0.0)
    two.update(step_ns=300.0, compute_only_ns=200.0, p2p_wait_ns=100.0)
    four.update(step_ns=460.0, compute_only_ns=400.0, p2p_wait_ns=60.0)
    out = _extend({2: two, 4: four}, 16)  # the line: compute 1,600, p2p wait -180
    assert out["step_ns"] == pytest.approx(1420.0)
    assert out["p2p_wait_ns"] == 0.0 and all(out[p] >= 0.0 for p in PARTS)
    assert sum(out[p] for p in PARTS) == pytest.approx(1600.0 - 180.0)
    assert out["compute_only_ns"] == pytest.approx(1420.0)


@pytest.mark.parametrize(
    ("model", "layout"),
    [
        (MODEL, Layout(2, 1, 4, 2, 2, 1, 1)),
        (MODEL, Layout(1, 2, 2, 1, 4, 1, 2)),
        (MODEL, Layout(8, 1, 1, 1, 2, 1, 1, recompute="full")),
        (MODEL, Layout(1, 1, 8, 1, 2, 1, 4)),
        (MOE, Layout(1, 1, 4, 2, 4, 4, 1)),
        (MOE, Layout(4, 1, 2, 4, 2, 2, 4)),
        (MOE, Layout(2, 1, 1, 1, 8, 8, 2, recompute="full")),
    ],
    ids=lambda x: x.label() if isinstance(x, Layout) else x.name,
)
def test_bound_never_passes_the_simulated_step(model, layout):
    """Neither the step nor a micro-batch's share of it is shorter than the compute chain
    with its blocking collectives at NCCL's floor says."""
    space = _space(model)
    microbatches = space.global_batch // (layout.dp * layout.micro_batch)
    config = space.config(layout)
    bound = compute_bound_ns(config, microbatches, CollectiveFloors(SYSTEM, NETWORK, config))
    step = _full_step_ns(space, layout)
    assert 0 < bound.step_ns <= step
    fewer = microbatches // 2
    assert 0 < bound.slot_ns * (microbatches - fewer) <= step - _full_step_ns(space, layout, fewer)


def test_the_bound_counts_each_blocking_collective_at_the_simulators_nccl_floor():
    """Every collective the compute chain waits on adds NCCL's predicted time for it, the
    time the simulated run's NCCL model gives the same collective; a system that splits
    collectives into chunks, whose floors are the chunks', adds none."""
    import astra
    from astra_core.report.nccl import nccl_choices
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.generators.llm import generate_llm
    from astra_core.workload.generators.llm_traces import llm_traces

    layout = Layout(2, 1, 1, 1, 8, 8, 1)  # TP 2 without TP overlap, EP 8 over two nodes
    config = replace(_space(MOE).config(layout), global_batch=16, tp_comm_overlap=False)
    traces, groups = llm_traces(generate_llm(config))
    result = astra.simulate(traces, SYSTEM, NETWORK, comm_groups=groups or None)
    predicted = {(e["type"], e["ranks"], e["bytes"]): e["nccl_predicted_ns"] for e in nccl_choices(result)}
    floors = CollectiveFloors(SYSTEM, NETWORK, config)
    nodes, _, _ = StageBuilder(config, 2, 0, MAX_RANK_NODES, MAX_RANK_NODES, {}).build()
    blocking = [n for n in nodes if n.chain and n.type == pb.COMM_COLL_NODE]
    assert {"tp", "ep"} <= {n.role for n in blocking}
    for n in blocking:
        key = (pb.CollectiveCommType.Name(n.comm_type), len(floors.layout.members(n.role, 0)), n.size)
        assert floors.floor_ns(n, 0) == predicted[key] > 0
    with_floors = compute_bound_ns(config, 16, floors)
    split = CollectiveFloors({**SYSTEM, "preferred-dataset-splits": 4}, NETWORK, config)
    assert split.model is None and compute_bound_ns(config, 16, split) == compute_bound_ns(config, 16)
    assert with_floors.step_ns > compute_bound_ns(config, 16).step_ns


def test_every_layout_of_a_moe_search_is_one_the_generator_takes():
    """Selective recomputation's modules go with selective recomputation alone: a base
    plan that recomputes ``moe_act`` still lets the search try no and full recomputation."""
    base = replace(_space(MOE).config(Layout(1, 1, 1, 1, 16, 8, 1)), recompute="selective")
    base = replace(base, recompute_modules=("moe_act", "layernorm"))
    space = replace(_space(MOE, recomputes=("none", "full", "selective")), base=base)
    fit, _ = layouts(space)
    assert {lay.recompute for lay, _ in fit} == {"none", "full", "selective"}
    for lay, _ in fit:
        check_llm(space.config(lay))


def test_a_base_userbuffers_table_goes_with_tp_overlap():
    """A base plan's userbuffers table rides with tensor-parallel overlap: every layout with
    TP > 1 keeps it, one without TP has none (the generator refuses a table without the
    overlap), and each is one the generator takes."""
    table = ub_cfg({"qkv_wgrad": {"num_sm": 24, "set_sm_margin": False}}, "base")
    base = replace(_space().config(Layout(2, 1, 4, 1, 2, 1, 1)), tp_comm_overlap_cfg=table)
    assert base.tp_comm_overlap
    space = replace(_space(), base=base)
    fit, _ = layouts(space)
    assert {lay.tp for lay, _ in fit} >= {1, 2}
    for lay, _ in fit:
        config = space.config(lay)
        assert config.tp_comm_overlap_cfg == (table if lay.tp > 1 else None)
        check_llm(config)


def test_the_weight_gather_options_follow_each_layouts_zero_stage():
    """Without a base plan a layout overlaps the distributed optimizer's weight all-gather
    where DP > 1 (Megatron-Bridge's default); a base's --overlap-param-gather and
    --fp8-param-gather go to the layouts whose ZeRO stage has them (1-2; 1-3), and each
    plan is one the generator takes."""
    space = _space(zeros=(0, 1, 3))
    fit, _ = layouts(space)
    assert {lay.zero for lay, _ in fit} == {0, 1, 3}
    for lay, _ in fit:
        assert space.config(lay).overlap_param_gather == (lay.zero == 1 and lay.dp > 1)
    base = replace(
        space.config(Layout(2, 1, 4, 1, 2, 1, 1)),
        precision="fp8",
        fp8_recipe="tensorwise",
        fp8_param_gather=True,
    )
    based = replace(space, base=base, precision="fp8", fp8_recipe="tensorwise")
    for lay, _ in layouts(based)[0]:
        config = based.config(lay)
        assert config.overlap_param_gather == (lay.zero == 1)
        assert config.fp8_param_gather == (lay.zero >= 1)
        check_llm(config)


def test_a_screen_stops_after_a_run_that_cannot_win():
    layout = Layout(2, 1, 4, 1, 2, 1, 1)
    space = _space()
    microbatches = space.global_batch // (layout.dp * layout.micro_batch)
    slot = compute_bound_ns(space.config(layout), microbatches).slot_ns
    task = {"key": "k", "config": space.config(layout), "microbatches": microbatches, "counts": (1, 2)}
    task.update(system=SYSTEM, network=NETWORK, backend=None, slot_ns=slot)
    first = run_layout({**task, "counts": (1,), "microbatches": 1})["step_ns"]
    line = first + slot * (microbatches - 1)
    stopped = run_layout({**task, "beat_ns": line})
    assert stopped["status"] == "bounded" and stopped["simulated"] == [1]
    assert stopped["line_bound_ns"] == pytest.approx(line) and list(stopped["runs"]) == [1]
    assert line <= _full_step_ns(space, layout)
    went_on = run_layout({**task, "beat_ns": line * 1.0001, "known": stopped["runs"]})
    assert went_on["status"] == "ok" and list(went_on["runs"]) == [2]  # the known run not run again
    assert went_on["step_ns"] == pytest.approx(_full_step_ns(space, layout), rel=1e-6)


def test_search_finds_what_simulating_every_layout_finds(tmp_path):
    space = _space(cp=1, micro_batches=(1, 2), recomputes=("none",))
    fit, _ = layouts(space)
    brute = sorted((_full_step_ns(space, lay), lay) for lay, _ in fit)
    cache = tmp_path / "plan.jsonl"
    progress: dict[str, tuple[int, int | None]] = {}
    outcome = search(
        space,
        SYSTEM,
        NETWORK,
        run=_in_process,
        top=3,
        full=1,
        cache=cache,
        on_progress=lambda phase, done, total: progress.__setitem__(phase, (done, total)),
    )
    assert all(done == total for done, total in progress.values())  # every phase's bar ends full
    ok = outcome.frame[outcome.frame["status"] == "ok"]
    found = [float(s) for s in ok["step_s"].head(3)]
    assert found == pytest.approx([s * 1e-9 for s, _ in brute[:3]], rel=1e-6)
    assert ok["layout"].iloc[0] == brute[0][1].label()
    assert outcome.runs["screening runs"] < len(fit)  # the bound spared some
    again = search(space, SYSTEM, NETWORK, run=_in_process, top=3, full=1, cache=cache)
    assert sum(again.runs.values()) == 0
    assert list(again.frame["step_s"].head(3)) == pytest.approx(found)
    # a base plan's settings are simulated, so they key the cache: 2021's unfused attention
    # with dropout reruns every layout (none read back from the runs above) and is slower
    base = replace(space.config(fit[0][0]), attention="unfused", dropout=True)
    older = search(replace(space, base=base), SYSTEM, NETWORK, run=_in_process, top=3, full=1, cache=cache)
    assert sum(older.runs.values()) > 0
    assert float(older.frame["step_s"].iloc[0]) > found[0]


def test_a_search_is_keyed_by_what_its_files_hold_not_where_they_lie(tmp_path):
    """The H100 preset's measured GEMM table and a recorded MoE routing are named by their
    bytes: a copy elsewhere (another checkout) keys the same runs and search, so a cache
    is found wherever it was made; a table whose content changed keys others, never a
    stale result."""
    space = _space()
    layout = layouts(space)[0][0][0]
    table = tmp_path / "gemm.csv"
    table.write_bytes(Path(space.gpu.gemm_table).read_bytes())
    moved = replace(space, gpu=replace(space.gpu, gemm_table=str(table)))
    assert repr(moved) != repr(space)  # the path is in the settings

    def key(value) -> str:
        return identity(value, InputDigests())

    assert key(moved) == key(space) and key(moved.config(layout)) == key(space.config(layout))
    loads = tmp_path / "loads.json"
    loads.write_text('{"layers": [[3, 1]]}')
    routed = replace(moved.config(layout), moe_routing=str(loads))
    copy = tmp_path / "copy.json"
    copy.write_text(loads.read_text())
    assert key(routed) == key(replace(routed, moe_routing=str(copy)))
    assert key(replace(moved, base=routed)) == key(
        replace(moved, base=replace(routed, moe_routing=str(copy)))
    )
    copy.write_text('{"layers": [[1, 3]]}')
    assert key(routed) != key(replace(routed, moe_routing=str(copy)))
    table.write_text(table.read_text().replace(",", ", ", 1))  # the same path, other bytes
    assert key(moved) != key(space)


def test_a_field_added_later_keys_as_before_at_its_default():
    # a search kept before context parallelism's communication type existed asked what one
    # at the default (the ring) asks: its key leaves the field out; another value keys another
    from astra_core.plan.space import LATER_FIELDS

    config = _space().config(layouts(_space())[0][0][0])
    key = identity(config, InputDigests())
    assert "cp_comm_type" in LATER_FIELDS and "cp_comm_type" in repr(config)
    assert "cp_comm_type" not in key
    assert identity(replace(config, cp_comm_type="all_gather"), InputDigests()) != key


def test_a_full_run_the_generator_refuses_keeps_the_screen_and_says_why(monkeypatch):
    """The trace limits are checked on a lower bound of a step's nodes, so a layout can
    pass them and screen, and the generator still refuse its full step (the 405B at
    TP 8, CP 2, PP 32 on 1,024 H100 did): the layout keeps the screen's figure, which
    is the full step's, and says why it has no full run; the CLI prints that line."""
    import io

    from rich.console import Console

    import astra_core.workload.generators.llm as llm
    from astra_core.cli.plan import _print

    space = _space(tp=2, cp=1, pp=2, vp=1, micro_batch=1, recomputes=("none",))
    ((layout, _),), _ = layouts(space)
    full_ns = _full_step_ns(space, layout)

    def nodes(microbatches: int) -> int:
        cfg = replace(space.config(layout), global_batch=layout.dp * microbatches, microbatches=None)
        return sum(map(len, llm.generate_llm(cfg).stages))

    monkeypatch.setattr(llm, "MAX_RANK_NODES", (nodes(2) + nodes(space.microbatches(layout))) // 2)
    outcome = search(space, SYSTEM, NETWORK, run=_in_process, top=1, full=1)
    (row,) = outcome.frame.to_dict("records")
    assert row["status"] == "ok" and row["simulated"] == [1, 2] and outcome.runs["full runs"] == 0
    assert row["error"].startswith("its full run failed: gen llm: the pipeline stages together pass")
    assert row["step_s"] == pytest.approx(full_ns * 1e-9, rel=1e-9)
    out = io.StringIO()
    _print(Console(file=out, width=200), outcome, 1)
    assert f"{row['short']}: screened only, its full run failed: gen llm:" in out.getvalue()


def test_cli_prints_the_fastest_and_writes_every_layout(tmp_path):
    model = tmp_path / "tiny.yaml"
    model.write_text(yaml.safe_dump({k: v for k, v in MODEL.__dict__.items() if k != "source"}))
    network = tmp_path / "network.yml"
    network.write_text(yaml.safe_dump(NETWORK))
    out = tmp_path / "plan.json"
    args = ["plan", "--model", str(model), "--network", str(network), "--global-batch", "64", "--tp", "2"]
    args += [
        "--cp",
        "1",
        "--micro-batch",
        "1",
        "--recompute",
        "none",
        "-j",
        "1",
        "--no-cache",
        "--json",
        str(out),
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "simulated layouts" in result.output and "runs made:" in result.output
    data = json.loads(out.read_text())
    assert data["layouts"] and all(r["tp"] == 2 for r in data["layouts"])
    assert sum(r["status"] in ("ok", "bounded") for r in data["layouts"]) == len(data["layouts"])


def test_cli_one_line_when_nothing_fits(tmp_path):
    network = tmp_path / "network.yml"
    network.write_text(
        yaml.safe_dump(
            {**NETWORK, "npus_count": [8]} | {"topology": ["Switch"], "bandwidth": [419.0], "latency": [300]}
        )
    )
    args = [
        "plan",
        "--model",
        "llama3-405b",
        "--network",
        str(network),
        "--global-batch",
        "8",
        "--no-cache",
        "-j",
        "1",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code != 0
    assert result.output.strip().count("\n") == 0 and "fits" in result.output
