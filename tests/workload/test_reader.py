"""Reading Chakra .et files: the reference traces, and every way a file can be bad."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from astra_core.errors import TraceError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra import ETNode, read_rank_trace, read_workload, trace_path
from astra_core.workload.writer import make_node, write_rank_trace

MiB = 1 << 20
SIZES = {"1MB": MiB, "64MB": 64 * MiB, "1GB": 1024 * MiB}


def _workload_dirs(reference_dir: Path) -> list[Path]:
    return sorted(p.parent for p in (reference_dir / "workload").glob("*/*/*.0.et"))


def _prefix_and_count(folder: Path) -> tuple[Path, int]:
    (first,) = folder.glob("*.0.et")
    prefix = folder / first.name[: -len(".0.et")]
    return prefix, len(list(folder.glob("*.et")))


def test_every_reference_workload_parses(reference_dir):
    folders = _workload_dirs(reference_dir)
    assert len(folders) == 47
    for folder in folders:
        prefix, count = _prefix_and_count(folder)
        traces = read_workload(prefix, count)
        assert [t.rank for t in traces] == list(range(count))
        assert all(t.nodes for t in traces), folder


@pytest.mark.parametrize("collective", ["ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL"])
@pytest.mark.parametrize("npus", [8, 16])
@pytest.mark.parametrize("size", ["1MB", "64MB", "1GB"])
def test_micro_collectives(reference_dir, collective, npus, size):
    prefix = reference_dir / "workload" / "micro" / f"{collective}_{npus}npus_{size}" / collective
    for rank, trace in enumerate(read_workload(prefix, npus)):
        assert trace.version == "0.0.4"
        (node,) = trace.nodes
        assert node.id == rank
        assert node.type == pb.COMM_COLL_NODE
        assert node.comm_type == pb.CollectiveCommType.Value(collective)
        assert node.comm_size == SIZES[size]
        assert node.is_cpu_op is False
        assert node.involved_dim is None and node.pg_name is None and node.attrs == {}
        assert node.data_deps == node.ctrl_deps == ()


def test_micro_all_reduce_8npus_1mb(reference_dir):
    trace = read_rank_trace(reference_dir / "workload/micro/ALL_REDUCE_8npus_1MB/ALL_REDUCE.3.et")
    # Chakra's generator numbers nodes with one counter across ranks: rank 3's node is id 3.
    assert trace.nodes == [
        ETNode(3, "ALL_REDUCE", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=1048576)
    ]


@pytest.mark.parametrize("folder", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
@pytest.mark.parametrize("npus", [4, 8, 16])
def test_upstream_example_collectives(reference_dir, folder, npus):
    prefix = reference_dir / "workload" / folder / f"{npus}npus_1MB" / folder
    for trace in read_workload(prefix, npus):
        (node,) = trace.nodes
        assert node.name == f"{folder}_{npus}npus_1MB"
        assert node.comm_type == pb.CollectiveCommType.Value(folder.upper())
        assert node.comm_size == MiB


def test_custom_all_gather_on_dim0_only(reference_dir):
    for trace in read_workload(reference_dir / "workload/custom/ALL_GATHER_DIM0ONLY_16npus_1MB/ag", 16):
        (node,) = trace.nodes
        assert (node.comm_type, node.comm_size, node.involved_dim) == (pb.ALL_GATHER, MiB, (True, False))


def test_custom_chain(reference_dir):
    trace = read_rank_trace(reference_dir / "workload/custom/CHAIN_COMP_AR_COMP_8npus/chain.0.et")
    fwd, ar, bwd = trace.nodes
    assert (fwd.type, fwd.duration_micros, fwd.data_deps) == (pb.COMP_NODE, 10, ())
    assert (ar.type, ar.comm_type, ar.comm_size, ar.data_deps) == (
        pb.COMM_COLL_NODE,
        pb.ALL_REDUCE,
        64 * MiB,
        (0,),
    )
    assert (bwd.type, bwd.duration_micros, bwd.data_deps) == (pb.COMP_NODE, 10, (1,))


def test_custom_p2p_ring_shift(reference_dir):
    for rank, trace in enumerate(
        read_workload(reference_dir / "workload/custom/P2P_RINGSHIFT_8npus_1MB/p2p", 8)
    ):
        send, recv = trace.nodes
        assert send.type == pb.COMM_SEND_NODE and recv.type == pb.COMM_RECV_NODE
        assert (send.comm_src, send.comm_dst) == (rank, (rank + 1) % 8)
        assert (recv.comm_src, recv.comm_dst) == ((rank - 1) % 8, rank)
        assert send.comm_size == recv.comm_size == MiB
        assert send.comm_tag == recv.comm_tag == 7


def test_custom_roofline(reference_dir):
    (node,) = read_rank_trace(reference_dir / "workload/custom/ROOFLINE_COMP_8npus/comp.5.et").nodes
    assert (node.type, node.duration_micros, node.is_cpu_op) == (pb.COMP_NODE, 0, False)
    assert (node.num_ops, node.tensor_size) == (10**12, 10**9)


def test_text_converted_models(reference_dir):
    """Chakra's text converter: no version, no is_cpu_op (so false), data deps only."""
    expected = {  # folder: (nodes per rank, COMP, COMM_COLL, comm types)
        "Resnet50_DataParallel_8npus": (215, 161, 54, {pb.ALL_REDUCE}),
        "DLRM_HybridParallel_8npus": (32, 23, 9, {pb.ALL_REDUCE, pb.ALL_TO_ALL}),
        "MLP_ModelParallel_8npus": (29, 18, 11, {pb.ALL_REDUCE, pb.ALL_GATHER}),
        "microAllReduce_8npus": (1, 0, 1, {pb.ALL_REDUCE}),
        "microAllToAll_8npus": (1, 0, 1, {pb.ALL_TO_ALL}),
    }
    for folder, (n, comp, coll, comm_types) in expected.items():
        prefix, count = _prefix_and_count(reference_dir / "workload" / "models" / folder)
        assert count == 8
        for trace in read_workload(prefix, 8):
            assert trace.version == ""
            nodes = trace.nodes
            assert len(nodes) == n
            assert sum(x.type == pb.COMP_NODE for x in nodes) == comp
            colls = [x for x in nodes if x.type == pb.COMM_COLL_NODE]
            assert len(colls) == coll
            assert {x.comm_type for x in colls} == comm_types
            assert all(x.comm_size > 0 for x in colls)
            assert not any(x.is_cpu_op or x.ctrl_deps or x.attrs for x in nodes)


def test_pytorch_ddp_step(reference_dir):
    trace = read_rank_trace(reference_dir / "pytorch" / "ddp_step.0.et")
    assert trace.metadata["schema"] == "1.0.1"
    nodes = trace.nodes
    by_type = {}
    for node in nodes:
        by_type[node.type] = by_type.get(node.type, 0) + 1
    assert by_type == {pb.COMP_NODE: 3643, pb.COMM_COLL_NODE: 21}
    colls = [x for x in nodes if x.type == pb.COMM_COLL_NODE]
    # 7 NCCL kernels carry the collective; 14 are the c10d host ops that launch them.
    kernels = [x for x in colls if not x.is_cpu_op]
    assert len(kernels) == 7 and all(x.name.startswith("ncclKernel_") for x in kernels)
    assert sorted(x.comm_type for x in kernels) == [pb.ALL_REDUCE] * 5 + [pb.BROADCAST] * 2
    assert (
        sum(x.comm_size for x in kernels) == 212480 + 424 + 8196000 + 31502336 + 26255360 + 26550272 + 9724160
    )
    assert all(x.involved_dim == (True,) for x in kernels)
    assert all(x.comm_type is None and x.is_cpu_op for x in colls if x not in kernels)
    assert sum(x.is_cpu_op for x in nodes if x.type == pb.COMP_NODE) == 2434
    assert all(x.pg_name is None for x in nodes)
    assert nodes[0].attrs["op_schema"] == "aten::flatten_dense_tensors(Tensor[] tensors) -> Tensor"
    assert nodes[0].attrs["seq_id"] == -1


# --- bad files -------------------------------------------------------------------------------


def _one_line_error(path, match: str) -> str:
    with pytest.raises(TraceError) as info:
        read_rank_trace(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert re.search(match, message), message
    return message


def _nodes_file(tmp_path, nodes, name="trace.0.et") -> Path:
    return write_rank_trace(tmp_path / name, nodes)


def test_truncated_in_the_middle_of_a_node(tmp_path, reference_dir):
    data = (
        reference_dir / "workload/models/Resnet50_DataParallel_8npus/Resnet50_DataParallel.0.et"
    ).read_bytes()
    cut = tmp_path / "cut.0.et"
    cut.write_bytes(data[: len(data) // 2])
    _one_line_error(cut, r"node #\d+: truncated: message at byte \d+ needs \d+ bytes, \d+ remain")


def test_truncated_length_prefix(tmp_path):
    path = _nodes_file(tmp_path, [make_node(0, "a", pb.COMP_NODE)])
    path.write_bytes(path.read_bytes() + b"\x80")  # a varint cut off after its first byte
    _one_line_error(path, r"node #1: truncated length prefix at byte \d+")


def test_truncated_metadata(tmp_path):
    path = tmp_path / "meta.0.et"
    path.write_bytes(b"\x05ab")
    _one_line_error(path, "GlobalMetadata: truncated")


def test_garbage_node(tmp_path):
    path = _nodes_file(tmp_path, [make_node(0, "a", pb.COMP_NODE)])
    path.write_bytes(path.read_bytes() + b"\x04\xff\xff\xff\xff")
    _one_line_error(path, r"node #1 \(byte \d+\): cannot decode")


def test_garbage_file(tmp_path):
    path = tmp_path / "garbage.0.et"
    path.write_bytes(b"\x06\xff\xff\xff\xff\xff\xff" + bytes(range(256)))
    _one_line_error(path, "GlobalMetadata: cannot decode")


def test_text_file(tmp_path):
    path = tmp_path / "notes.0.et"
    path.write_bytes(b"this is not a trace\n")
    _one_line_error(path, "GlobalMetadata: truncated")


def test_overlong_varint(tmp_path):
    path = tmp_path / "long.0.et"
    path.write_bytes(b"\xff" * 12)
    _one_line_error(path, "GlobalMetadata: bad length prefix")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.0.et"
    path.write_bytes(b"")
    _one_line_error(path, "empty file")


def test_missing_file(tmp_path):
    _one_line_error(tmp_path / "nope.0.et", "cannot read")


def test_unknown_node_type(tmp_path):
    path = _nodes_file(tmp_path, [make_node(0, "ok", pb.COMP_NODE), make_node(17, "bad", 99)])
    message = _one_line_error(path, "node 17: unknown node type 99")
    assert message == f"{path}: node 17: unknown node type 99"


def test_metadata_only_is_an_empty_rank(tmp_path):
    trace = read_rank_trace(_nodes_file(tmp_path, []))
    assert trace.nodes == [] and trace.version == "0.0.4"


def test_wrong_kind_of_attribute(tmp_path):
    node = make_node(3, "ar", pb.COMM_COLL_NODE, comm_type=0)
    node.attr.append(pb.AttributeProto(name="comm_size", string_val="1MB"))
    _one_line_error(
        _nodes_file(tmp_path, [node]), "node 3: attribute comm_size: expected an integer, got string_val"
    )
    node = make_node(4, "ag", pb.COMM_COLL_NODE, comm_type=2)
    node.attr.append(pb.AttributeProto(name="involved_dim", int64_val=1))
    _one_line_error(
        _nodes_file(tmp_path, [node]), "node 4: attribute involved_dim: expected bool_list, got int64_val"
    )


# --- attribute decoding ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    ["int32_val", "int64_val", "uint32_val", "uint64_val", "sint32_val", "sint64_val",
     "fixed32_val", "fixed64_val", "sfixed32_val", "sfixed64_val"],
)  # fmt: skip
def test_integer_attributes_in_any_case(tmp_path, case):
    node = pb.Node(id=1, name="x", type=pb.COMM_COLL_NODE)
    for name, value in (("comm_type", 7), ("comm_size", 12345), ("comm_src", 3), ("comm_dst", 4),
                        ("comm_tag", 9), ("comm_priority", 2), ("tensor_size", 77), ("num_ops", 55)):  # fmt: skip
        node.attr.append(pb.AttributeProto(name=name, **{case: value}))
    (got,) = read_rank_trace(_nodes_file(tmp_path, [node])).nodes
    assert (got.comm_type, got.comm_size, got.comm_src, got.comm_dst, got.comm_tag) == (7, 12345, 3, 4, 9)
    assert (got.comm_priority, got.tensor_size, got.num_ops) == (2, 77, 55)


def test_defaults_and_other_attributes(tmp_path):
    node = pb.Node(id=5, name="k", type=pb.COMP_NODE, duration_micros=12, data_deps=[1, 2], ctrl_deps=[3])
    node.attr.extend(
        [
            pb.AttributeProto(
                name="is_cpu_op", int32_val=1
            ),  # an integer case for a bool, as FeederV3 allows
            pb.AttributeProto(name="num_ops", double_val=2.5),
            pb.AttributeProto(name="pg_name", string_val="7"),
            pb.AttributeProto(name="involved_dim", bool_list=pb.BoolList(values=[False, True, True])),
            pb.AttributeProto(name="pg_name", string_val="ignored: the first of a name wins"),
            pb.AttributeProto(name="note", string_val="hi"),
            pb.AttributeProto(name="blob", bytes_val=b"\x00\x01"),
            pb.AttributeProto(name="shape", int64_list=pb.Int64List(values=[2, 3])),
            pb.AttributeProto(name="scale", float_val=0.5),
            pb.AttributeProto(name="note", string_val="ignored"),
            pb.AttributeProto(name="empty"),
        ]
    )
    (got,) = read_rank_trace(_nodes_file(tmp_path, [node, pb.Node(id=6, type=pb.COMP_NODE)])).nodes[:1]
    assert (got.id, got.name, got.type, got.duration_micros) == (5, "k", pb.COMP_NODE, 12)
    assert (got.data_deps, got.ctrl_deps) == ((1, 2), (3,))
    assert got.is_cpu_op is True and got.num_ops == 2.5 and got.pg_name == "7"
    assert got.involved_dim == (False, True, True)
    assert got.attrs == {"note": "hi", "blob": b"\x00\x01", "shape": [2, 3], "scale": 0.5, "empty": None}
    bare = read_rank_trace(tmp_path / "trace.0.et").nodes[1]
    assert bare == ETNode(6, "", pb.COMP_NODE)
    assert (bare.is_cpu_op, bare.comm_type, bare.comm_size, bare.involved_dim, bare.num_ops) == (
        False,
        None,
        0,
        None,
        0,
    )


def test_metadata_node_keeps_inputs_values(tmp_path):
    pg = '[[{"pg_name": "0", "ranks": [0, 1]}]]'
    path = _nodes_file(tmp_path, [make_node(0, "pg", pb.METADATA_NODE, inputs_values=pg)])
    assert read_rank_trace(path).nodes[0].inputs_values == pg


# --- workloads -------------------------------------------------------------------------------


@pytest.fixture
def ar8(tmp_path, reference_dir) -> Path:
    src = reference_dir / "workload" / "micro" / "ALL_REDUCE_8npus_1MB"
    dst = tmp_path / "ar8"
    shutil.copytree(src, dst)
    return dst / "ALL_REDUCE"


def test_workload_shares_identical_files(ar8, reference_dir):
    traces = read_workload(ar8, 8)
    assert [t.path for t in traces] == [str(trace_path(ar8, r)) for r in range(8)]
    assert len({id(t.nodes) for t in traces}) == 8  # node ids differ per rank
    chain = read_workload(reference_dir / "workload/custom/CHAIN_COMP_AR_COMP_8npus/chain", 8)
    assert [t.rank for t in chain] == list(range(8))
    assert all(t.nodes is chain[0].nodes for t in chain)  # byte-identical files


def test_workload_with_extra_file(ar8):
    with pytest.raises(TraceError) as info:
        read_workload(ar8, 7)
    message = str(info.value)
    assert message == (f"{ar8}: 7 NPUs need 7 trace files {ar8}.<rank>.et, found 8: extra {ar8}.7.et")


def test_workload_with_missing_files(ar8):
    with pytest.raises(TraceError, match=r"9 NPUs need 9 trace files .*, found 8: missing rank 8$"):
        read_workload(ar8, 9)
    trace_path(ar8, 3).unlink()
    trace_path(ar8, 5).unlink()
    with pytest.raises(TraceError, match=r"8 NPUs need 8 trace files .*, found 6: missing ranks 3, 5$"):
        read_workload(ar8, 8)


def test_workload_with_a_bad_rank(ar8):
    trace_path(ar8, 6).write_bytes(b"")
    with pytest.raises(TraceError, match=r"ALL_REDUCE\.6\.et: empty file"):
        read_workload(ar8, 8)
