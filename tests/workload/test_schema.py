"""Field numbers and enum values are the interface with Chakra: pin them."""

from __future__ import annotations

from astra_core.workload import et_def_pb2 as pb


def _numbers(message) -> dict[str, int]:
    return {f.name: f.number for f in message.DESCRIPTOR.fields}


def test_node_fields():
    assert _numbers(pb.Node) == {
        "id": 1,
        "name": 2,
        "type": 3,
        "ctrl_deps": 4,
        "data_deps": 5,
        "start_time_micros": 6,
        "duration_micros": 7,
        "inputs": 8,
        "outputs": 9,
        "attr": 10,
    }


def test_metadata_io_tensor_fields():
    assert _numbers(pb.GlobalMetadata) == {"version": 1, "attr": 2}
    assert _numbers(pb.IOInfo) == {"values": 1, "shapes": 2, "types": 3, "strides": 4}
    assert _numbers(pb.Tensor) == {
        "tensor_id": 1,
        "storage_id": 2,
        "offset": 3,
        "num_elem": 4,
        "elem_bytes": 5,
        "device": 6,
    }


def test_attribute_oneof():
    kinds = [
        "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
        "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes",
    ]  # fmt: skip
    expected = {"name": 1, "doc_string": 2}
    for i, kind in enumerate(kinds):
        expected[f"{kind}_val"] = 3 + 2 * i
        expected[f"{kind}_list"] = 4 + 2 * i
    assert _numbers(pb.AttributeProto) == expected
    oneof = pb.AttributeProto.DESCRIPTOR.oneofs_by_name["value"]
    assert {f.name for f in oneof.fields} == set(expected) - {"name", "doc_string"}
    assert pb.AttributeProto.DESCRIPTOR.fields_by_name["bool_list"].message_type.name == "BoolList"


def test_enums():
    assert dict(pb.NodeType.items()) == {
        "INVALID_NODE": 0,
        "METADATA_NODE": 1,
        "MEM_LOAD_NODE": 2,
        "MEM_STORE_NODE": 3,
        "COMP_NODE": 4,
        "COMM_SEND_NODE": 5,
        "COMM_RECV_NODE": 6,
        "COMM_COLL_NODE": 7,
    }
    assert dict(pb.CollectiveCommType.items()) == {
        "ALL_REDUCE": 0,
        "REDUCE": 1,
        "ALL_GATHER": 2,
        "GATHER": 3,
        "SCATTER": 4,
        "BROADCAST": 5,
        "ALL_TO_ALL": 6,
        "REDUCE_SCATTER": 7,
        "REDUCE_SCATTER_BLOCK": 8,
        "BARRIER": 9,
    }
