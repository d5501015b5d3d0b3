"""Decode Chakra execution-trace messages into :class:`ETNode` and :class:`RankTrace`.

The one decoder that both readers share: :func:`astra_core.workload.chakra.read_rank_trace`
(a whole file at once) and :mod:`astra_core.workload.streaming` (a large file node by node).
Attributes are looked up by name the way upstream ASTRA-sim's Chakra feeder (FeederV3)
does (see :mod:`astra_core.workload.chakra`); every problem is a one-line
:class:`~astra_core.errors.TraceError` naming the file and the node.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from google.protobuf.message import DecodeError

from astra_core.errors import TraceError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra_types import COMM_SMS, COMM_STREAM, NODE_TYPE_NAMES

if TYPE_CHECKING:
    from astra_core.workload.streaming import StreamedNodes

__all__ = [
    "ETNode",
    "RankTrace",
    "bad_nodes_error",
    "decode_node",
    "metadata_and_spans",
    "metadata_attrs",
]

_INT_CASES = frozenset(
    (
        "int32_val",
        "int64_val",
        "uint32_val",
        "uint64_val",
        "sint32_val",
        "sint64_val",
        "fixed32_val",
        "fixed64_val",
        "sfixed32_val",
        "sfixed64_val",
        "bool_val",  # bool is an integral type to FeederV3's converter too
    )
)
_FLOAT_CASES = frozenset(("double_val", "float_val"))
_INT_LIST_CASES = frozenset(case[: -len("_val")] + "_list" for case in _INT_CASES)  # includes bool_list


class ETNode:
    """One ET node as the system layer sees it.

    Fields (units in brackets):

    - ``id`` (int), ``name`` (str), ``type`` (int, a ``NodeType`` value),
    - ``data_deps``, ``ctrl_deps`` (tuple[int]): parent node ids, as in the file,
    - ``duration_micros`` (int) [us]: measured runtime, replayed for compute,
    - ``is_cpu_op`` (bool): attribute ``is_cpu_op``; false when absent,
    - ``comm_type`` (int | None): a ``CollectiveCommType`` value, None when absent,
    - ``comm_size`` (int) [bytes]: 0 when absent,
    - ``comm_src``, ``comm_dst``, ``comm_tag`` (int | None): point-to-point peer
      ranks and matching tag, None when absent,
    - ``comm_priority`` (int): 0 when absent,
    - ``involved_dim`` (tuple[bool] | None): which network dimensions a
      collective spans, None when absent (upstream then uses all dimensions),
    - ``pg_name`` (str | None): process-group name, None when absent,
    - ``num_ops`` (int | float) [operations]: 0 when absent (roofline compute),
    - ``tensor_size`` (int) [bytes]: 0 when absent (roofline, remote memory),
    - ``inputs_values`` (str): ``inputs.values`` of METADATA nodes only (where
      PyTorch traces carry process-group JSON); "" for every other node,
    - ``attrs`` (dict[str, Any]): every other attribute, name -> Python value
      (lists as lists).

    Nodes are plain data and shared between ranks whose files are identical;
    treat them as read-only.
    """

    __slots__ = (
        "id",
        "name",
        "type",
        "data_deps",
        "ctrl_deps",
        "duration_micros",
        "is_cpu_op",
        "comm_type",
        "comm_size",
        "comm_src",
        "comm_dst",
        "comm_tag",
        "comm_priority",
        "involved_dim",
        "pg_name",
        "num_ops",
        "tensor_size",
        "inputs_values",
        "attrs",
    )

    def __init__(
        self,
        id: int,
        name: str,
        type: int,
        data_deps: Iterable[int] = (),  # stored as tuples
        ctrl_deps: Iterable[int] = (),
        duration_micros: int = 0,
        is_cpu_op: bool = False,
        comm_type: int | None = None,
        comm_size: int = 0,
        comm_src: int | None = None,
        comm_dst: int | None = None,
        comm_tag: int | None = None,
        comm_priority: int = 0,
        involved_dim: tuple[bool, ...] | None = None,
        pg_name: str | None = None,
        num_ops: int | float = 0,
        tensor_size: int = 0,
        inputs_values: str = "",
        attrs: dict[str, Any] | None = None,
    ):
        self.id = id
        self.name = name
        self.type = type
        self.data_deps = tuple(data_deps)
        self.ctrl_deps = tuple(ctrl_deps)
        self.duration_micros = duration_micros
        self.is_cpu_op = is_cpu_op
        self.comm_type = comm_type
        self.comm_size = comm_size
        self.comm_src = comm_src
        self.comm_dst = comm_dst
        self.comm_tag = comm_tag
        self.comm_priority = comm_priority
        self.involved_dim = None if involved_dim is None else tuple(involved_dim)
        self.pg_name = pg_name
        self.num_ops = num_ops
        self.tensor_size = tensor_size
        self.inputs_values = inputs_values
        self.attrs = {} if attrs is None else attrs

    def copy(self) -> ETNode:
        """A new node of the same field values (shared, not copied). Field by field
        rather than a loop over ``__slots__``: sends and receives of thousands of ranks
        are copies of one node (:mod:`~astra_core.workload.et_peers`), 7x faster so."""
        node = ETNode.__new__(ETNode)
        node.id = self.id
        node.name = self.name
        node.type = self.type
        node.data_deps = self.data_deps
        node.ctrl_deps = self.ctrl_deps
        node.duration_micros = self.duration_micros
        node.is_cpu_op = self.is_cpu_op
        node.comm_type = self.comm_type
        node.comm_size = self.comm_size
        node.comm_src = self.comm_src
        node.comm_dst = self.comm_dst
        node.comm_tag = self.comm_tag
        node.comm_priority = self.comm_priority
        node.involved_dim = self.involved_dim
        node.pg_name = self.pg_name
        node.num_ops = self.num_ops
        node.tensor_size = self.tensor_size
        node.inputs_values = self.inputs_values
        node.attrs = self.attrs
        return node

    def replaced(self, **changes: Any) -> ETNode:
        """A copy of this node with the fields named in ``changes`` set to their values
        (nodes are shared and read-only: a change makes a new node)."""
        node = self.copy()
        for slot, value in changes.items():
            setattr(node, slot, value)
        return node

    @property
    def type_name(self) -> str:
        """The NodeType name, e.g. ``"COMP_NODE"``."""
        return NODE_TYPE_NAMES.get(self.type, str(self.type))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ETNode):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value (unhashable)

    def __repr__(self) -> str:
        parts = [f"id={self.id}", f"name={self.name!r}", f"type={self.type_name}"]
        defaults = _DEFAULTS
        for slot in self.__slots__[3:]:
            value = getattr(self, slot)
            if value != defaults[slot]:
                parts.append(f"{slot}={value!r}")
        return f"ETNode({', '.join(parts)})"


_DEFAULTS = {
    "data_deps": (),
    "ctrl_deps": (),
    "duration_micros": 0,
    "is_cpu_op": False,
    "comm_type": None,
    "comm_size": 0,
    "comm_src": None,
    "comm_dst": None,
    "comm_tag": None,
    "comm_priority": 0,
    "involved_dim": None,
    "pg_name": None,
    "num_ops": 0,
    "tensor_size": 0,
    "inputs_values": "",
    "attrs": {},
}


class RankTrace:
    """The contents of one ``.et`` file.

    ``path`` (str): the file; ``rank`` (int | None): from ``read_workload``;
    ``version`` (str): ``GlobalMetadata.version``; ``metadata`` (dict): the
    GlobalMetadata attributes, name -> value; ``nodes`` (list[ETNode], or a
    :class:`~astra_core.workload.streaming.StreamedNodes` for a streamed file) in
    file order.
    """

    __slots__ = ("path", "rank", "version", "metadata", "nodes")

    def __init__(
        self,
        path: str,
        nodes: list[ETNode] | StreamedNodes,
        version: str = "",
        metadata: dict[str, Any] | None = None,
        rank: int | None = None,
    ):
        self.path = path
        self.rank = rank
        self.version = version
        self.metadata = {} if metadata is None else metadata
        self.nodes = nodes

    def __repr__(self) -> str:
        return f"RankTrace({self.path!r}, rank={self.rank}, {len(self.nodes)} nodes)"


# --- attribute decoding ---------------------------------------------------------


def _attr_value(attr: pb.AttributeProto) -> tuple[str | None, Any]:
    """(oneof case, Python value) of an attribute; lists become lists."""
    case = attr.WhichOneof("value")
    if case is None:
        return None, None
    value = getattr(attr, case)
    if case[-5:] == "_list":
        value = list(value.values)
    return case, value


def _wrong_kind(fname: str, node: ETNode, name: str, case: str | None, expected: str) -> TraceError:
    return TraceError(
        f"{fname}: node {node.id}: attribute {name}: expected {expected}, got {case or 'no value'}"
    )


# Attributes the system layer uses: name -> how to decode the value.
_INT, _BOOL, _NUM, _DIMS, _STR = range(5)
_KNOWN_ATTRS = {
    "is_cpu_op": _BOOL,
    "comm_type": _INT,
    "comm_size": _INT,
    "comm_src": _INT,
    "comm_dst": _INT,
    "comm_tag": _INT,
    "comm_priority": _INT,
    "involved_dim": _DIMS,
    "pg_name": _STR,
    "num_ops": _NUM,
    "tensor_size": _INT,
}
_LIST_CASES = frozenset(f.name for f in pb.AttributeProto.DESCRIPTOR.fields if f.name.endswith("_list"))


def _decode_attrs(node: ETNode, attrs, fname: str) -> None:
    """Fill ``node``'s attribute fields from the repeated ``attr`` of a Node.

    The first attribute of a name wins, as in FeederV3's linear lookup.
    This runs for every attribute of every node: keep it lean.
    """
    rest = node.attrs
    known_get = _KNOWN_ATTRS.get
    int_cases = _INT_CASES
    done: tuple[str, ...] = ()
    for attr in attrs:
        name = attr.name
        case = attr.WhichOneof("value")
        kind = known_get(name)
        if kind is None:
            if name not in rest:
                if case is None:
                    rest[name] = None
                elif case in _LIST_CASES:
                    rest[name] = list(getattr(attr, case).values)
                else:
                    rest[name] = getattr(attr, case)
            continue
        if name in done:
            continue
        done += (name,)
        if kind == _INT:
            if case not in int_cases:
                raise _wrong_kind(fname, node, name, case, "an integer")
            setattr(node, name, int(getattr(attr, case)))
        elif kind == _BOOL:
            if case not in int_cases:
                raise _wrong_kind(fname, node, name, case, "a bool")
            node.is_cpu_op = bool(getattr(attr, case))
        elif kind == _NUM:
            if case in int_cases:
                node.num_ops = int(getattr(attr, case))
            elif case in _FLOAT_CASES:
                node.num_ops = getattr(attr, case)
            else:
                raise _wrong_kind(fname, node, name, case, "a number")
        elif kind == _DIMS:
            if case not in _INT_LIST_CASES:
                raise _wrong_kind(fname, node, name, case, "bool_list")
            node.involved_dim = tuple(bool(v) for v in getattr(attr, case).values)
        else:  # _STR
            if case == "string_val":
                node.pg_name = attr.string_val
            elif case == "bytes_val":
                node.pg_name = attr.bytes_val.decode("utf-8", "replace")
            elif case in int_cases:
                node.pg_name = str(int(getattr(attr, case)))
            else:
                raise _wrong_kind(fname, node, name, case, "a string")


def metadata_attrs(meta: pb.GlobalMetadata) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attr in meta.attr:
        out.setdefault(attr.name, _attr_value(attr)[1])
    return out


# --- files ------------------------------------------------------------------------

_METADATA_NODE = pb.METADATA_NODE
_INVALID_NODE = pb.INVALID_NODE
_VALID_TYPES = frozenset(NODE_TYPE_NAMES)
_COMM_TYPES = frozenset((pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE))
# sends and receives name their peer ranks: their bytes differ from rank to rank
_INF = float("inf")
_SHOWN = 3  # bad nodes named in one error line; the rest are counted


def _value_problem(node: ETNode) -> str | None:
    """What is wrong with the values of a node that has attributes, or None.

    Upstream reads ``comm_size``, ``num_ops`` and ``tensor_size`` as uint64,
    so a negative one wraps to ~1.8e19 there; NaN or infinite ``num_ops``
    makes the roofline time NaN. None of these can describe a real run.
    """
    ops = node.num_ops
    if ops and not 0 < ops < _INF:  # NaN fails both comparisons
        return f"num_ops must be a finite number >= 0, got {ops}"
    if node.tensor_size < 0:
        return f"tensor_size must be >= 0 bytes, got {node.tensor_size}"
    return None


def bad_nodes_error(fname: str, bad: list[tuple[int, str]]) -> TraceError:
    """One line naming the first few bad nodes and counting the rest."""
    shown = "; ".join(f"node {node_id}: {text}" for node_id, text in bad[:_SHOWN])
    more = f"; and {len(bad) - _SHOWN} more bad nodes" if len(bad) > _SHOWN else ""
    return TraceError(f"{fname}: {shown}{more}")


class _Truncated(Exception):
    pass


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """Decode a base-128 varint at ``pos``; return (value, position after it)."""
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise _Truncated
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 64:
            raise ValueError("varint longer than 10 bytes")


def decode_node(payload, fname: str, index: int, pos: int, bad: list[tuple[int, str]]) -> ETNode:
    """Decode the ``index``-th Node message of ``fname`` (its length prefix at byte
    ``pos``) and check it: raises TraceError for what makes the node unreadable,
    appends (node id, problem) to ``bad`` for bad values (reported together)."""
    try:
        msg = _from_string(payload)
    except DecodeError:
        raise TraceError(f"{fname}: node #{index} (byte {pos}): cannot decode") from None
    ntype = msg.type
    if ntype not in _VALID_TYPES:
        raise TraceError(f"{fname}: node {msg.id}: unknown node type {ntype}")
    if ntype == _INVALID_NODE and not msg.name and not msg.attr:
        # Protobuf decodes many byte strings (zeros, other formats) as a message with
        # every field unset: an unnamed INVALID node is garbage, not a node.
        raise TraceError(
            f"{fname}: node #{index} (byte {pos}): decodes as an empty INVALID node "
            "(no type, name or attributes): not a Chakra ET file, or corrupt"
        )
    node = ETNode(
        msg.id,
        msg.name,
        ntype,
        msg.data_deps,  # ETNode makes tuples
        msg.ctrl_deps,
        msg.duration_micros,
    )
    attrs = msg.attr
    if attrs:
        _decode_attrs(node, attrs, fname)
        if node.num_ops or node.tensor_size < 0:
            problem = _value_problem(node)
            if problem is not None:
                bad.append((node.id, problem))
        stream = node.attrs.get(COMM_STREAM, 0)
        if type(stream) is not int or stream < 0:  # a GPU stream's number (system engine)
            bad.append((node.id, f"{COMM_STREAM} must be an integer >= 0, got {stream!r}"))
        sms = node.attrs.get(COMM_SMS, 0)
        if type(sms) is not int or sms < 0:  # SMs a collective holds (compute contention)
            bad.append((node.id, f"{COMM_SMS} must be an integer >= 0, got {sms!r}"))
    if ntype in _COMM_TYPES and node.comm_size <= 0 and not node.is_cpu_op:
        # Upstream reads comm_size as uint64 (absent: an error); CPU-side comm ops are replayed.
        bad.append(
            (
                node.id,
                f"{NODE_TYPE_NAMES[ntype]} needs comm_size > 0 bytes, got "
                f"{node.comm_size if any(a.name == 'comm_size' for a in attrs) else 'none'}",
            )
        )
    if ntype == _METADATA_NODE:
        node.inputs_values = msg.inputs.values
    return node


_from_string = pb.Node.FromString


def metadata_and_spans(data: bytes, fname: str):
    """(GlobalMetadata, spans): ``spans`` yields ``(index, prefix byte, start, stop)``
    of every Node message after the metadata. Raises TraceError (one line naming
    the file and the message) for an empty file, bad or truncated length prefixes
    and undecodable metadata."""
    end = len(data)
    if end == 0:
        raise TraceError(f"{fname}: empty file (expected a GlobalMetadata message)")

    def message_bounds(pos: int, what: str) -> tuple[int, int]:
        try:
            size, start = _varint(data, pos, end)
        except _Truncated:
            raise TraceError(f"{fname}: {what}: truncated length prefix at byte {pos}") from None
        except ValueError:
            raise TraceError(f"{fname}: {what}: bad length prefix at byte {pos}") from None
        if start + size > end:
            raise TraceError(
                f"{fname}: {what}: truncated: message at byte {pos} needs {size} bytes, {end - start} remain"
            )
        return start, start + size

    start, stop = message_bounds(0, "GlobalMetadata")
    try:
        # upb parses any buffer; the stubs say bytes (a slice of a memoryview copies nothing)
        meta = pb.GlobalMetadata.FromString(cast(bytes, memoryview(data)[start:stop]))
    except DecodeError:
        raise TraceError(f"{fname}: GlobalMetadata: cannot decode (not a Chakra ET file?)") from None

    def spans(pos: int = stop):
        index = 0
        while pos < end:
            # Inlined one- and two-byte length prefixes: nearly every node.
            b = data[pos]
            if b < 0x80:
                start = pos + 1
                stop = start + b
            elif pos + 1 < end and data[pos + 1] < 0x80:
                start = pos + 2
                stop = start + ((b & 0x7F) | (data[pos + 1] << 7))
            else:
                start, stop = message_bounds(pos, f"node #{index}")
            if stop > end:
                start, stop = message_bounds(pos, f"node #{index}")  # raises: truncated
            yield index, pos, start, stop
            pos = stop
            index += 1

    return meta, spans()
