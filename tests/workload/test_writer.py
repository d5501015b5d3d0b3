"""Writing Chakra .et files: Chakra's oneof cases, and write-then-read round trips."""

from __future__ import annotations

import pytest

from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra import ETNode, read_rank_trace
from astra_core.workload.writer import make_attr, make_node, node_to_proto, write_rank_trace


def _cases(node: pb.Node) -> dict[str, str]:
    return {a.name: a.WhichOneof("value") for a in node.attr}


def test_known_attributes_use_chakras_cases():
    node = make_node(
        0,
        "n",
        pb.COMM_COLL_NODE,
        is_cpu_op=False,
        comm_type=pb.ALL_REDUCE,
        comm_size=1 << 20,
        involved_dim=[True, False],
        num_ops=10,
        tensor_size=20,
        pg_name="3",
        comm_src=1,
        comm_dst=2,
        comm_tag=5,
        comm_priority=1,
    )
    assert _cases(node) == {
        "is_cpu_op": "bool_val",
        "comm_type": "int64_val",
        "comm_size": "int64_val",
        "involved_dim": "bool_list",
        "num_ops": "int64_val",
        "tensor_size": "uint64_val",
        "pg_name": "string_val",
        "comm_src": "int32_val",
        "comm_dst": "int32_val",
        "comm_tag": "int32_val",
        "comm_priority": "int32_val",
    }


def test_same_bytes_as_chakras_generator(tmp_path, reference_dir):
    """The micro traces were made by Chakra's generator; we write the same bytes."""
    theirs = reference_dir / "workload/micro/ALL_REDUCE_8npus_1MB/ALL_REDUCE.5.et"
    node = make_node(
        5, "ALL_REDUCE", pb.COMM_COLL_NODE, is_cpu_op=False, comm_type=pb.ALL_REDUCE, comm_size=1 << 20
    )
    ours = write_rank_trace(tmp_path / "x.0.et", [node])
    assert ours.read_bytes() == theirs.read_bytes()


def test_other_attributes_by_python_type():
    assert make_attr("a", True).WhichOneof("value") == "bool_val"
    assert make_attr("a", -3).WhichOneof("value") == "int64_val"
    assert make_attr("a", 2**64 - 1).WhichOneof("value") == "uint64_val"
    assert make_attr("a", 0.5).WhichOneof("value") == "double_val"
    assert make_attr("a", "s").WhichOneof("value") == "string_val"
    assert make_attr("a", b"s").WhichOneof("value") == "bytes_val"
    assert make_attr("a", [1, 2]).WhichOneof("value") == "int64_list"
    assert make_attr("a", [1, 0.5]).WhichOneof("value") == "double_list"
    assert make_attr("a", ["x"]).WhichOneof("value") == "string_list"
    assert make_attr("a", [b"x"]).WhichOneof("value") == "bytes_list"
    assert make_attr("a", [True]).WhichOneof("value") == "bool_list"
    assert make_attr("num_ops", 2.5).WhichOneof("value") == "double_val"
    assert make_attr("comm_size", 7, case="uint64_val").uint64_val == 7
    assert list(make_attr("d", [1, 2], case="sint32_list").sint32_list.values) == [1, 2]


def test_bad_attributes():
    with pytest.raises(TypeError):
        make_attr("a", {"no": "dicts"})
    with pytest.raises(ValueError, match="unknown attribute case"):
        make_attr("a", 1, case="name")
    with pytest.raises(ValueError, match="cannot store -1 as uint64_val"):
        make_attr("a", -1, case="uint64_val")


def test_round_trip_of_etnodes(tmp_path):
    nodes = [
        ETNode(10, "load", pb.MEM_LOAD_NODE, tensor_size=4096),
        ETNode(
            11, "gemm", pb.COMP_NODE, data_deps=(10,), duration_micros=25, num_ops=2.5e12, tensor_size=1 << 30
        ),
        ETNode(
            12,
            "ar",
            pb.COMM_COLL_NODE,
            data_deps=(11,),
            ctrl_deps=(10, 11),
            comm_type=pb.REDUCE_SCATTER,
            comm_size=3 << 40,
            involved_dim=(True, False, True),
            pg_name="2",
            comm_priority=1,
        ),
        ETNode(13, "send", pb.COMM_SEND_NODE, comm_src=0, comm_dst=3, comm_tag=9, comm_size=64),
        ETNode(
            14, "recv", pb.COMM_RECV_NODE, comm_src=3, comm_dst=0, comm_tag=9, comm_size=64, is_cpu_op=True
        ),
        ETNode(15, "pg", pb.METADATA_NODE, inputs_values='[[{"pg_name": "2", "ranks": []}]]'),
        ETNode(
            16,
            "host",
            pb.COMP_NODE,
            is_cpu_op=True,
            duration_micros=3,
            attrs={"op_schema": "aten::add", "seq_id": -1, "shape": [2, 3], "scale": 0.5, "raw": b"\x01"},
        ),
        ETNode(17, "", pb.INVALID_NODE),
    ]
    path = write_rank_trace(tmp_path / "rt.0.et", nodes, metadata_attrs={"schema": "1.0.1", "pid": 7})
    trace = read_rank_trace(path)
    assert trace.nodes == nodes
    assert trace.version == "0.0.4"
    assert trace.metadata == {"schema": "1.0.1", "pid": 7}


def test_round_trip_of_a_real_trace(tmp_path, reference_dir):
    original = read_rank_trace(reference_dir / "pytorch" / "ddp_step.0.et")
    path = write_rank_trace(
        tmp_path / "ddp.0.et", original.nodes, original.metadata, version=original.version
    )
    again = read_rank_trace(path)
    assert again.nodes == original.nodes
    assert again.metadata == original.metadata


def test_node_to_proto_writes_is_cpu_op_always():
    msg = node_to_proto(ETNode(1, "x", pb.COMP_NODE))
    assert [(a.name, a.bool_val) for a in msg.attr] == [("is_cpu_op", False)]


def test_traces_are_written_atomically(tmp_path, monkeypatch):
    """A trace replaces the old file in one os.replace from a temporary beside
    it, so a reader (or a killed `astra gen`) never leaves half a trace."""
    import os

    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    path = tmp_path / "w.0.et"
    path.write_bytes(b"old")
    moves = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (moves.append((src, dst)), real_replace(src, dst)))
    write_rank_trace(path, [make_node(1, "c", pb.COMP_NODE, duration_micros=5)])
    assert len(moves) == 1 and os.fspath(moves[0][1]) == os.fspath(path)
    assert os.path.dirname(moves[0][0]) == str(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.0.et"]
    assert path.read_bytes() != b"old"


def test_a_trace_under_a_file_is_one_error_line(tmp_path):
    from astra_core.errors import ConfigError
    from astra_core.workload.generators.micro import write_micro

    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigError, match=r"f/w\.0\.et.*cannot write: .*is a file"):
        write_micro("all-reduce", 1024, 2, tmp_path / "f" / "w")
