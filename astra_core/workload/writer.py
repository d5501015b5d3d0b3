"""Write Chakra execution traces (ET) that Chakra's tools and upstream ASTRA-sim read.

A file is a varint-length-delimited ``GlobalMetadata`` message followed by
varint-length-delimited ``Node`` messages, as Chakra's ``protolib.encodeMessage``
writes them.

Attributes the system layer uses get the oneof case Chakra's own generators
use (``src/generator/generator.py``, the text converter, the reference traces):
``is_cpu_op`` bool_val, ``comm_type`` int64_val, ``comm_size`` int64_val,
``comm_src``/``comm_dst``/``comm_tag``/``comm_priority`` int32_val,
``involved_dim`` bool_list, ``num_ops`` int64_val (double_val if a float),
``tensor_size`` uint64_val, ``pg_name`` string_val. Any other attribute gets a
case from its Python type (see :func:`make_attr`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from astra_core.outputs import write_bytes
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra import ETNode

__all__ = [
    "CHAKRA_VERSION",
    "encode_varint",
    "make_attr",
    "make_node",
    "node_to_proto",
    "trace_bytes",
    "write_rank_trace",
]

#: GlobalMetadata.version that Chakra's generator writes.
CHAKRA_VERSION = "0.0.4"

_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1

# Oneof case per known attribute, after Chakra's generators.
_KNOWN_CASES = {
    "is_cpu_op": "bool_val",
    "comm_type": "int64_val",
    "comm_size": "int64_val",
    "comm_src": "int32_val",
    "comm_dst": "int32_val",
    "comm_tag": "int32_val",
    "comm_priority": "int32_val",
    "involved_dim": "bool_list",
    "num_ops": "int64_val",
    "tensor_size": "uint64_val",
    "pg_name": "string_val",
}

_CASES = frozenset(f.name for f in pb.AttributeProto.DESCRIPTOR.oneofs_by_name["value"].fields)

_LIST_TYPES = {
    "double_list": pb.DoubleList,
    "float_list": pb.FloatList,
    "int32_list": pb.Int32List,
    "int64_list": pb.Int64List,
    "uint32_list": pb.Uint32List,
    "uint64_list": pb.Uint64List,
    "sint32_list": pb.Sint32List,
    "sint64_list": pb.Sint64List,
    "fixed32_list": pb.Fixed32List,
    "fixed64_list": pb.Fixed64List,
    "sfixed32_list": pb.Sfixed32List,
    "sfixed64_list": pb.Sfixed64List,
    "bool_list": pb.BoolList,
    "string_list": pb.StringList,
    "bytes_list": pb.BytesList,
}


def _case_for(value: Any) -> str:
    """The oneof case a Python value is written with when no case is given."""
    if isinstance(value, bool):
        return "bool_val"
    if isinstance(value, int):
        return "int64_val" if value <= _INT64_MAX else "uint64_val"
    if isinstance(value, float):
        return "double_val"
    if isinstance(value, str):
        return "string_val"
    if isinstance(value, (bytes, bytearray)):
        return "bytes_val"
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, bool) for v in value):
            return "bool_list"  # also the empty list
        if all(isinstance(v, int) for v in value):
            return "int64_list" if all(v <= _INT64_MAX for v in value) else "uint64_list"
        if all(isinstance(v, (int, float)) for v in value):
            return "double_list"
        if all(isinstance(v, str) for v in value):
            return "string_list"
        if all(isinstance(v, (bytes, bytearray)) for v in value):
            return "bytes_list"
    raise TypeError(f"cannot store {type(value).__name__} value {value!r} in a Chakra attribute")


def make_attr(name: str, value: Any, case: str | None = None) -> pb.AttributeProto:
    """Build one ``AttributeProto``.

    ``case`` is the oneof field (e.g. ``"uint64_val"``, ``"bool_list"``); by
    default the case Chakra uses for a known attribute name, else one from the
    Python type: bool -> bool_val, int -> int64_val (uint64_val past int64),
    float -> double_val, str -> string_val, bytes -> bytes_val, and lists of
    those -> the matching ``*_list``.

    Raises TypeError for a value no case can hold, ValueError for an unknown
    case or a value out of the case's range.
    """
    if case is None:
        case = _KNOWN_CASES.get(name)
        if case == "int64_val" and isinstance(value, float):
            case = "double_val"  # e.g. a fractional num_ops
        elif case is None:
            case = _case_for(value)
    if case not in _CASES:
        raise ValueError(f"attribute {name}: unknown attribute case {case!r}")
    attr = pb.AttributeProto(name=name)
    try:
        if case in _LIST_TYPES:
            getattr(attr, case).CopyFrom(_LIST_TYPES[case](values=list(value)))
        else:
            setattr(attr, case, value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"attribute {name}: cannot store {value!r} as {case}: {exc}") from None
    return attr


def make_node(
    id: int,
    name: str,
    type: int,
    *,
    data_deps: Iterable[int] = (),
    ctrl_deps: Iterable[int] = (),
    duration_micros: int = 0,
    inputs_values: str = "",
    **attrs: Any,
) -> pb.Node:
    """Build a Chakra ``Node`` message.

    ``type`` is a ``NodeType`` value (e.g. ``et_def_pb2.COMP_NODE``);
    ``duration_micros`` in microseconds; ``inputs_values`` fills
    ``inputs.values`` (METADATA nodes carry process-group JSON there).
    Keyword ``attrs`` become attributes in the given order, encoded by
    :func:`make_attr` (``comm_size=1048576`` -> int64_val, ``involved_dim=
    [True, False]`` -> bool_list, ...); a value of None is skipped.
    """
    node = pb.Node(
        id=id,
        name=name,
        type=cast("pb.NodeType", type),  # a NodeType value; the stubs want the enum type
        data_deps=list(data_deps),
        ctrl_deps=list(ctrl_deps),
        duration_micros=duration_micros,
    )
    if inputs_values:
        node.inputs.values = inputs_values
    node.attr.extend(make_attr(k, v) for k, v in attrs.items() if v is not None)
    return node


def node_to_proto(node: ETNode) -> pb.Node:
    """Encode an :class:`ETNode` as a ``Node`` message.

    ``is_cpu_op`` is always written (as Chakra's generator does); the other
    known attributes only when they differ from the reader's defaults; then
    ``node.attrs`` in order. Reading the message back gives an equal ETNode.
    """
    known = {"is_cpu_op": node.is_cpu_op}
    for field, default in (
        ("comm_type", None),
        ("comm_size", 0),
        ("comm_src", None),
        ("comm_dst", None),
        ("comm_tag", None),
        ("comm_priority", 0),
        ("involved_dim", None),
        ("pg_name", None),
        ("num_ops", 0),
        ("tensor_size", 0),
    ):
        value = getattr(node, field)
        if value != default:
            known[field] = value
    msg = make_node(
        node.id,
        node.name,
        node.type,
        data_deps=node.data_deps,
        ctrl_deps=node.ctrl_deps,
        duration_micros=node.duration_micros,
        inputs_values=node.inputs_values,
        **known,
    )
    msg.attr.extend(make_attr(k, v) for k, v in node.attrs.items())
    return msg


def encode_varint(value: int) -> bytes:
    """``value`` (>= 0) as a protobuf base-128 varint (the ET file's length prefix)."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def trace_bytes(
    nodes: Iterable[pb.Node | ETNode],
    metadata_attrs: Mapping[str, Any] | None = None,
    version: str = CHAKRA_VERSION,
) -> bytes:
    """The bytes of one ``.et`` file: GlobalMetadata, then ``nodes`` in the given order.

    ``nodes`` are ``Node`` messages (e.g. from :func:`make_node`) or
    :class:`ETNode` objects; ``metadata_attrs`` become GlobalMetadata
    attributes (encoded by :func:`make_attr`).
    """
    meta = pb.GlobalMetadata(version=version)
    if metadata_attrs:
        meta.attr.extend(make_attr(k, v) for k, v in metadata_attrs.items())
    chunks = []
    for message in (meta, *nodes):
        if isinstance(message, ETNode):
            message = node_to_proto(message)
        payload = message.SerializeToString()
        chunks.append(encode_varint(len(payload)))
        chunks.append(payload)
    return b"".join(chunks)


def write_rank_trace(
    path: str | os.PathLike,
    nodes: Iterable[pb.Node | ETNode],
    metadata_attrs: Mapping[str, Any] | None = None,
    version: str = CHAKRA_VERSION,
) -> Path:
    """Write one ``.et`` file of :func:`trace_bytes`. Returns the path written.
    Written atomically (:func:`astra_core.outputs.write_bytes`); raises
    ConfigError if the file cannot be written.
    """
    return write_bytes(path, trace_bytes(nodes, metadata_attrs, version))
