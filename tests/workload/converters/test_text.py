"""ASTRA-sim 1.0 text workloads -> Chakra: upstream's traces and times, and the formats it cannot convert."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from astra_core.api import simulate
from astra_core.cli import main
from astra_core.config.system import upstream_system
from astra_core.errors import ConfigError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra import read_rank_trace
from astra_core.workload.converters.text import convert_text, convert_text_workload, write_converted
from astra_core.workload.converters.text_format import parse_text_workload, read_text_workload
from tests.conftest import one_error_line

MODELS = [
    "DLRM_HybridParallel",
    "MLP_HybridParallel_Data_Model",
    "MLP_HybridParallel_Model_Data",
    "MLP_ModelParallel",
    "Resnet50_DataParallel",
    "microAllReduce",
    "microAllToAll",
]


def _text_cases(reference_dir):
    cases = json.loads((reference_dir / "expected.json").read_text())["cases"]
    return [c for c in cases if c["name"].startswith("text_")]


@pytest.mark.parametrize("name", MODELS)
def test_chakra_ids_give_chakras_bytes(reference_dir, tmp_path, name):
    # With Chakra's one node counter across ranks the files are the very bytes Chakra's text
    # converter wrote for upstream's runs.
    paths, groups = convert_text(reference_dir / "text" / f"{name}.txt", 8, tmp_path / name, chakra_ids=True)
    assert groups is None
    for rank, path in enumerate(paths):
        assert (
            path.read_bytes()
            == (reference_dir / "workload" / "models" / f"{name}_8npus" / f"{name}.{rank}.et").read_bytes()
        )


def test_reproduces_every_upstream_text_case(reference_dir, tmp_path):
    # Every text_* case of expected.json (both analytical backends), from our own conversion
    # with per-rank node ids, within 0.5 % of upstream's finish and exposed-communication times.
    cases = _text_cases(reference_dir)
    assert len(cases) == 14
    converted = {}
    for case in cases:
        name = case["workload"].rsplit("/", 1)[1]
        if name not in converted:
            converted[name] = convert_text(reference_dir / "text" / f"{name}.txt", 8, tmp_path / name)
        result = simulate(
            tmp_path / name,
            reference_dir / case["system"],
            reference_dir / case["network"],
            memory=reference_dir / case["memory"],
            backend=case["backend"],
        )
        for rank, expected in zip(result.ranks, case["finish_ns"]):
            assert rank.finish_ns == pytest.approx(expected, rel=0.005), case["name"]
        for rank, expected in zip(result.ranks, case["exposed_comm_ns"]):
            assert rank.exposed_comm_ns == pytest.approx(expected, rel=0.005, abs=1), case["name"]


def _network(tmp_path, dims, bandwidth=50.0):
    path = tmp_path / "network.yml"
    path.write_text(
        f"topology: [ {', '.join(['Ring'] * len(dims))} ]\nnpus_count: [ {', '.join(map(str, dims))} ]\n"
        f"bandwidth: [ {', '.join([str(bandwidth)] * len(dims))} ]\n"
        f"latency: [ {', '.join(['500.0'] * len(dims))} ]\n"
    )
    system = tmp_path / "system.json"
    system.write_text(json.dumps(upstream_system("ring", len(dims))))
    return path, system


def _compute_us(wl, recompute=()) -> int:
    return sum(x.fwd_compute + x.ig_compute + x.wg_compute for x in wl.layers) + sum(
        wl.layers[i].fwd_compute for i in recompute
    )


@pytest.mark.parametrize(
    "name, recompute",
    [
        ("Transformer_HybridParallel", ()),
        # checkpoints 2 and 11, re-computation started at layers 19 and 10: forward of 11..18 and 2..9 again
        ("Transformer_HybridParallel_Fwd_In_Bckwd", tuple(range(11, 19)) + tuple(range(2, 10))),
    ],
)
def test_transformer_with_model_parallel_groups(reference_dir, tmp_path, name, recompute):
    # model_parallel_NPU_group: 4 on 16 NPUs: forward/input-gradient collectives in the 4 groups
    # of 4 consecutive NPUs, weight-gradient ones in the 4 groups of every 4th NPU (ASTRA-sim 1.0).
    wl = read_text_workload(reference_dir / "text" / f"{name}.txt")
    conv = convert_text_workload(wl, 16)
    paths, groups_path = write_converted(conv, tmp_path / name)
    groups = json.loads(groups_path.read_text())
    assert sorted(map(tuple, groups.values())) == sorted(
        [tuple(range(s, s + 4)) for s in range(0, 16, 4)] + [tuple(range(s, 16, 4)) for s in range(4)]
    )
    nodes = read_rank_trace(paths[5]).nodes
    by_id = {n.id: n for n in nodes}
    phases = set()
    for node in nodes:
        if node.type == pb.COMM_COLL_NODE:
            phase = by_id[node.data_deps[0]].name.rsplit("_", 1)[1]  # the compute it follows
            phases.add(phase)
            expected = [1, 5, 9, 13] if phase == "WG" else [4, 5, 6, 7]
            assert groups[node.pg_name] == expected, node.name
    assert phases == {"FWD", "IG", "WG"} | ({"RECOMPUTE"} if recompute else set())
    network, system = _network(tmp_path, [4, 4])
    result = simulate(tmp_path / name, system, network, comm_groups=groups_path)
    # every rank computes each layer's forward, input and weight gradient once (plus the
    # re-computed forwards), durations in microseconds as Chakra's converter copies them
    for rank in result.ranks:
        assert rank.compute_ns == _compute_us(wl, recompute) * 1000
    # the same groups as whole network dimensions (involved_dim) give the same step
    conv_dims = convert_text_workload(wl, 16, dims=[4, 4])
    assert not conv_dims.comm_groups
    write_converted(conv_dims, tmp_path / "dims")
    assert simulate(tmp_path / "dims", system, network).step_ns == result.step_ns


def test_customized_hybrid(reference_dir, tmp_path):
    # Per-layer parallelism (ASTRA-sim 1.0 HYBRID_CUSTOMIZED) with a model-parallel group of 2 on
    # 8 NPUs: DATA layers reduce weight gradients over all NPUs, MODEL layers have no weight
    # gradient collective, hybrid layers use the groups.
    path = reference_dir / "text" / "sample_per_layer_parallel_HybridCustomized.txt"
    with pytest.raises(ConfigError, match="needs the model-parallel group size"):
        convert_text(path, 8, tmp_path / "x")
    wl = read_text_workload(path)
    paths, groups_path = convert_text(path, 8, tmp_path / "c", model_parallel_npus=2)
    nodes = read_rank_trace(paths[0]).nodes
    by_name = {n.name: n for n in nodes}
    assert by_name["COMM_COLL_NODE_layer_64_2_mlp2_ALLREDUCE"].pg_name is None  # DATA: all NPUs
    assert "COMM_COLL_NODE_layer_64_2_mlp3_REDUCESCATTER" not in by_name  # MODEL layer has no WG comm ...
    assert by_name["COMM_COLL_NODE_layer_64_2_mlp3_ALLGATHER"].pg_name is None  # ... and FWD over all
    groups = json.loads(groups_path.read_text())
    hybrid = by_name["COMM_COLL_NODE_layer_64_2_mlp0_ALLGATHER"]  # HYBRID_DATA_MODEL forward: model group
    assert groups[hybrid.pg_name] == [0, 1]
    model_data = by_name["COMM_COLL_NODE_layer_64_2_mlp1_ALLGATHER"]  # HYBRID_MODEL_DATA: stride 4
    assert groups[model_data.pg_name] == [0, 4]
    network, system = _network(tmp_path, [8])
    result = simulate(tmp_path / "c", system, network, comm_groups=groups_path)
    assert all(r.compute_ns == _compute_us(wl) * 1000 for r in result.ranks)


def test_hybrid_without_group_size_keeps_chakras_all_npu_collectives(reference_dir, tmp_path):
    wl = read_text_workload(reference_dir / "text" / "MLP_HybridParallel_Data_Model.txt")
    conv = convert_text_workload(wl, 16)
    assert not conv.comm_groups
    conv = convert_text_workload(wl, 16, model_parallel_npus=16)  # model-parallel over everything:
    kinds = {t.name for t in conv.templates if t.type == pb.COMM_COLL_NODE}
    assert kinds and not any(k.endswith("_ALLREDUCE") and "_IG_COMM_" not in k for k in kinds)  # no WG comm


def test_resnet50_at_1024_npus(reference_dir, tmp_path):
    # ResNet-50 data parallel converts for any NPU count; on [8, 8, 16] every rank computes the
    # same 54 layers, so all ranks finish together, after their compute.
    paths, groups = convert_text(reference_dir / "text" / "Resnet50_DataParallel.txt", 1024, tmp_path / "r")
    assert len(paths) == 1024 and groups is None
    network = tmp_path / "network.yml"
    network.write_text(
        "topology: [ Ring, FullyConnected, Switch ]\nnpus_count: [ 8, 8, 16 ]\n"
        "bandwidth: [ 200.0, 100.0, 50.0 ]\nlatency: [ 100.0, 500.0, 1000.0 ]\n"
    )
    system = json.loads((reference_dir / "system" / "text_converter_system.json").read_text())
    for key in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        system[f"{key}-implementation"] = ["ring"] * 3
    (tmp_path / "system.json").write_text(json.dumps(system))
    wl = read_text_workload(reference_dir / "text" / "Resnet50_DataParallel.txt")
    result = simulate(tmp_path / "r", tmp_path / "system.json", network)
    compute = (_compute_us(wl) - wl.layers[0].ig_compute) * 1000  # DATA: the first layer has no IG pass
    assert len({r.finish_ns for r in result.ranks}) == 1
    assert all(r.compute_ns == compute for r in result.ranks)
    assert result.step_ns > compute


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty workload"),
        ("PIPELINE\n1\n", "unknown parallelism 'PIPELINE'"),
        ("DATA\n2\nl1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 8 5\n", "announces 2 layers, the file has 1"),
        (
            "DATA\n1\nl1 -1 5 NONE 0 5 NONE 0 5 BROADCAST 8 5\n",
            "t.txt:3: layer l1: unknown comm type 'BROADCAST'",
        ),
        ("DATA\n1\nl1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 8\n", "t.txt:3: expected 12 columns"),
        ("DATA\n1\nl1 -1 x NONE 0 5 NONE 0 5 ALLREDUCE 8 5\n", "expected an integer, got 'x'"),
        ("HYBRID_TRANSFORMER\n1\nl1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 8 5\n", "model_parallel_NPU_group"),
        ("HYBRID_DLRM 5\n1\nl1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 8 5\n", "last bottom layer 5 out of range"),
    ],
)
def test_bad_text_is_a_one_line_error(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_text_workload(text, "t.txt")


def test_group_size_must_divide_npus(reference_dir):
    wl = read_text_workload(reference_dir / "text" / "Transformer_HybridParallel.txt")
    with pytest.raises(ConfigError, match="group of 4 NPUs does not divide 6 NPUs"):
        convert_text_workload(wl, 6)


def test_a_collective_of_zero_bytes_is_nothing_to_communicate(tmp_path):
    # A layer with a comm type but 0 bytes is left out like NONE, keeping the deps: a
    # COMM_COLL node of comm_size 0 is one the reader rejects (no message to send).
    wl = parse_text_workload(
        "DATA\n2\na -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 0 10\nb -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1024 10\n",
        "zero.txt",
    )
    paths, _ = write_converted(convert_text_workload(wl, 4), tmp_path / "z")
    colls = [n for n in read_rank_trace(paths[0]).nodes if n.type == pb.COMM_COLL_NODE]
    assert [(n.name, n.comm_size) for n in colls] == [("COMM_COLL_NODE_b_ALLREDUCE", 1024)]


@pytest.mark.parametrize(
    "line, column, what, field",
    [
        ("a -1 5 NONE 0 5 NONE 0 5 ALLREDUCE {big} 10", 11, "weight-gradient comm bytes", "int64 comm_size"),
        ("a -1 {big} NONE 0 5 NONE 0 5 ALLREDUCE 8 10", 3, "forward compute", "uint64 duration_micros"),
    ],
)
def test_a_value_past_its_chakra_field_names_file_line_and_column(tmp_path, line, column, what, field):
    """A 40-digit comm size is one line, not a ValueError traceback from the ET writer."""
    big = "1234567890123456789012345678901234567890"
    text = tmp_path / "big.txt"
    text.write_text(f"DATA\n1\n{line.format(big=big)}\n")
    most = f"{2**63 - 1:,}" if "comm" in field else f"{2**64 - 1:,}"
    result = CliRunner().invoke(
        main, ["convert", "text", str(text), "--npus", "4", "--output", str(tmp_path / "o")]
    )
    assert one_error_line(result) == (
        f"error: {text}:3: layer a column {column} ({what}): an integer of about 40 digits "
        f"is more than a Chakra {field} holds ({most})"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.txt"]


def test_the_largest_comm_size_chakra_holds_is_kept(tmp_path):
    wl = parse_text_workload(f"DATA\n1\na -1 5 NONE 0 5 NONE 0 5 ALLREDUCE {2**63 - 1} 10\n", "max.txt")
    paths, _ = write_converted(convert_text_workload(wl, 2), tmp_path / "m")
    colls = [n for n in read_rank_trace(paths[0]).nodes if n.type == pb.COMM_COLL_NODE]
    assert [n.comm_size for n in colls] == [2**63 - 1]


def test_comm_groups_onto_a_rank_trace_is_refused(reference_dir, tmp_path):
    result = CliRunner().invoke(
        main,
        [
            "convert",
            "text",
            str(reference_dir / "text" / "Transformer_HybridParallel.txt"),
            "--npus",
            "8",
            "--output",
            str(tmp_path / "t"),
            "--comm-groups",
            str(tmp_path / "t.7.et"),
        ],
    )
    assert one_error_line(result) == (
        f"error: --comm-groups {tmp_path / 't.7.et'}: is rank 7's trace of --output {tmp_path / 't'}; "
        "give another file"
    )
    assert list(tmp_path.iterdir()) == []
