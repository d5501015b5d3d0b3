"""Values no real run can have are one-line TraceErrors naming the file and the ET nodes.

Upstream reads comm_size, num_ops and tensor_size as uint64 (a negative value wraps), and
protobuf decodes many byte strings as a message with every field unset: before these checks
such traces ran to a plausible but wrong result.
"""

from __future__ import annotations

import pytest

from astra_core.errors import TraceError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra import read_rank_trace, read_workload
from astra_core.workload.writer import make_attr, make_node, write_rank_trace

COLL, SEND, RECV, COMP = pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE, pb.COMP_NODE


def _coll(id: int, size, **kw):
    return make_node(id, f"ar{id}", COLL, comm_type=pb.ALL_REDUCE, comm_size=size, **kw)


def _error(path) -> str:
    with pytest.raises(TraceError) as info:
        read_rank_trace(path)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    "node, expected",
    [
        (_coll(4, -1048576), "node 4: COMM_COLL_NODE needs comm_size > 0 bytes, got -1048576"),
        (_coll(4, 0), "node 4: COMM_COLL_NODE needs comm_size > 0 bytes, got 0"),
        (
            make_node(4, "ar", COLL, comm_type=pb.ALL_REDUCE),
            "node 4: COMM_COLL_NODE needs comm_size > 0 bytes, got none",
        ),
        (
            make_node(4, "s", SEND, comm_src=0, comm_dst=1, comm_tag=0, comm_size=-8),
            "node 4: COMM_SEND_NODE needs comm_size > 0 bytes, got -8",
        ),
        (
            make_node(4, "r", RECV, comm_src=1, comm_dst=0, comm_tag=0),
            "node 4: COMM_RECV_NODE needs comm_size > 0 bytes, got none",
        ),
        (
            make_node(4, "k", COMP, num_ops=-5, tensor_size=10),
            "node 4: num_ops must be a finite number >= 0, got -5",
        ),
        (
            make_node(4, "k", COMP, num_ops=float("nan"), tensor_size=10),
            "node 4: num_ops must be a finite number >= 0, got nan",
        ),
        (
            make_node(4, "k", COMP, num_ops=float("inf"), tensor_size=10),
            "node 4: num_ops must be a finite number >= 0, got inf",
        ),
        (make_node(4, "k", COMP, num_ops=-0.5), "node 4: num_ops must be a finite number >= 0, got -0.5"),
        (_coll(4, 64, comm_stream=-1), "node 4: comm_stream must be an integer >= 0, got -1"),
        (_coll(4, 64, comm_stream=1.5), "node 4: comm_stream must be an integer >= 0, got 1.5"),
        (_coll(4, 64, comm_stream=True), "node 4: comm_stream must be an integer >= 0, got True"),
        (_coll(4, 64, comm_sms=-1), "node 4: comm_sms must be an integer >= 0, got -1"),
        (_coll(4, 64, comm_sms=2.5), "node 4: comm_sms must be an integer >= 0, got 2.5"),
    ],
)
def test_bad_values_name_file_and_node(tmp_path, node, expected):
    path = write_rank_trace(tmp_path / "w.0.et", [_coll(1, 1024), node])
    assert _error(path) == f"{path}: {expected}"


def test_negative_tensor_size(tmp_path):
    node = make_node(9, "load", pb.MEM_LOAD_NODE)
    node.attr.append(make_attr("tensor_size", -4096, "int64_val"))  # Chakra writes uint64; any int case reads
    path = write_rank_trace(tmp_path / "w.0.et", [node])
    assert _error(path) == f"{path}: node 9: tensor_size must be >= 0 bytes, got -4096"


def test_valid_edge_values_are_kept(tmp_path):
    # A CPU-side collective (PyTorch host op) is replayed, so it needs no comm_size; zero num_ops
    # and tensor_size are upstream's "not given"; a fractional num_ops is fine.
    nodes = [
        make_node(1, "c10d::allreduce_", COLL, is_cpu_op=True, duration_micros=5),
        make_node(2, "k", COMP, num_ops=0, tensor_size=0),
        make_node(3, "k2", COMP, num_ops=2.5e12, tensor_size=1 << 20),
        make_node(4, "skip", pb.INVALID_NODE),
    ]  # a named INVALID node: upstream skips it
    trace = read_rank_trace(write_rank_trace(tmp_path / "w.0.et", nodes))
    assert [n.id for n in trace.nodes] == [1, 2, 3, 4] and trace.nodes[2].num_ops == 2.5e12


def test_many_bad_nodes_make_one_short_line(tmp_path):
    nodes = [_coll(i, -i - 1) for i in range(500)]
    path = write_rank_trace(tmp_path / "w.0.et", nodes)
    message = _error(path)
    assert message == (
        f"{path}: node 0: COMM_COLL_NODE needs comm_size > 0 bytes, got -1; "
        "node 1: COMM_COLL_NODE needs comm_size > 0 bytes, got -2; "
        "node 2: COMM_COLL_NODE needs comm_size > 0 bytes, got -3; and 497 more bad nodes"
    )


@pytest.mark.parametrize("data", [b"\x00\x00", b"\x00" * 64, b"\x00\x02\x08\x05"])
def test_bytes_that_decode_as_empty_nodes(tmp_path, data):
    # b"\x00\x00": an empty GlobalMetadata, then an empty Node; b"\x00\x02\x08\x05": a node
    # that sets only id 5. Protobuf accepts both; neither is a node.
    path = tmp_path / "w.0.et"
    path.write_bytes(data)
    assert _error(path) == (
        f"{path}: node #0 (byte 1): decodes as an empty INVALID node "
        "(no type, name or attributes): not a Chakra ET file, or corrupt"
    )


def test_workload_names_the_bad_rank_file(tmp_path):
    for rank in range(4):
        write_rank_trace(tmp_path / f"w.{rank}.et", [_coll(0, 1024 if rank != 2 else -1024)])
    with pytest.raises(
        TraceError, match=rf"^{tmp_path}/w\.2\.et: node 0: COMM_COLL_NODE needs comm_size > 0"
    ):
        read_workload(tmp_path / "w", 4)


def test_stray_rank_files_past_a_gap(tmp_path):
    # 4 NPUs, and w.6.et left from a bigger run: an error naming it (the first 4 ranks alone would
    # simulate part of a bigger job). Before, only w.4.et, w.5.et, ... in a row were found.
    for rank in (0, 1, 2, 3, 6):
        write_rank_trace(tmp_path / f"w.{rank}.et", [_coll(0, 1024)])
    prefix = tmp_path / "w"
    with pytest.raises(TraceError) as info:
        read_workload(prefix, 4)
    assert (
        str(info.value)
        == f"{prefix}: 4 NPUs need 4 trace files {prefix}.<rank>.et, found 5: extra {prefix}.6.et"
    )
    for rank in (9, 12, 30):
        write_rank_trace(tmp_path / f"w.{rank}.et", [_coll(0, 1024)])
    with pytest.raises(TraceError) as info:
        read_workload(prefix, 4)
    assert str(info.value).endswith(f"found 8: extra {prefix}.6.et, {prefix}.9.et, {prefix}.12.et and 1 more")
    (tmp_path / "w.x.et").write_bytes(b"")  # not a rank number: not a trace of this prefix
    (tmp_path / "wide.7.et").write_bytes(b"")
    for rank in (6, 9, 12, 30):
        (tmp_path / f"w.{rank}.et").unlink()
    assert len(read_workload(prefix, 4)) == 4
