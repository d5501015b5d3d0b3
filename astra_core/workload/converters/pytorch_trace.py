"""Read PyTorch execution traces and Kineto traces (the inputs of ``astra convert pytorch``).

Host execution trace (``torch.profiler.ExecutionTraceObserver``, schema
``1.0.x-chakra.0.0.4`` .. ``1.1.x``): a JSON object with ``schema`` and
``nodes``; each node has ``id``, ``name``, ``ctrl_deps`` (the id of the
enclosing operator: the record-function nesting), ``inputs``/``outputs``
(``values``, ``shapes``, ``types``) and ``attrs`` (``rf_id``, ``tid``,
``seq_id``, ``op_schema``, ...). Tensors appear as
``[tensor_id, storage_id, offset, numel, element_size, device]``. The node
``## process_group:init ##`` carries the process groups as JSON.

Kineto trace (``prof.export_chrome_trace``): Chrome trace events; host
operators are ``cat == "cpu_op"`` (or ``user_annotation``) events whose
``args["Record function id"]`` equals the ET node's ``rf_id``; GPU kernels
(``cat == "kernel"``) link to the launching operator through
``args["External id"]``.

Errors are :class:`~astra_core.errors.TraceError` naming the file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astra_core.errors import TraceError

__all__ = ["HostNode", "HostTrace", "KinetoTimes", "read_host_trace", "read_kineto", "tensors_in"]


@dataclass
class HostNode:
    """One execution-trace node (see the module docstring); ``tid`` is the host thread."""

    id: int
    name: str
    parent: int
    rf_id: int
    tid: int
    inputs: Any
    input_types: list
    outputs: Any
    children: list[HostNode] = field(default_factory=list)


@dataclass
class HostTrace:
    """A parsed host execution trace: nodes by id, thread roots, process groups."""

    path: str
    schema: str
    nodes: dict[int, HostNode]
    roots: list[int]  # ids of the [pytorch|profiler|execution_trace|thread/process] nodes
    process_groups: list[dict]


def tensors_in(value: Any):
    """Yield every tensor descriptor ``[id, storage, offset, numel, elem_size, device]`` in a value."""
    if isinstance(value, list):
        if (
            len(value) == 6
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value[:5])
            and isinstance(value[5], str)
        ):
            yield value
        else:
            for v in value:
                yield from tensors_in(v)


def read_host_trace(path: str | os.PathLike) -> HostTrace:
    """Parse a host execution-trace JSON. Raises TraceError naming the file."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise TraceError(f"{path}: not a JSON execution trace: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise TraceError(f"{path}: not a PyTorch execution trace (expected an object with 'nodes')")
    schema = str(data.get("schema", ""))
    if not schema.startswith("1."):
        raise TraceError(f"{path}: unsupported execution-trace schema '{schema}' (expected 1.x)")
    nodes: dict[int, HostNode] = {}
    roots, groups = [], []
    for index, raw in enumerate(data["nodes"]):
        try:
            attrs = {a["name"]: a.get("value") for a in raw.get("attrs", [])}
            node = HostNode(
                int(raw["id"]),
                str(raw["name"]),
                int(raw.get("ctrl_deps", 0)),
                int(attrs.get("rf_id", raw["id"])),
                int(attrs.get("tid", 0)),
                raw.get("inputs", {}).get("values", []),
                raw.get("inputs", {}).get("types", []),
                raw.get("outputs", {}).get("values", []),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceError(f"{path}: node #{index}: malformed ({exc})") from None
        if node.id in nodes:
            raise TraceError(f"{path}: node id {node.id} appears twice")
        nodes[node.id] = node
        if node.name.startswith("[pytorch|profiler|execution_trace|"):
            roots.append(node.id)
        elif node.name == "## process_group:init ##" and node.inputs:
            try:
                groups = json.loads(node.inputs[0])
            except (TypeError, ValueError):
                raise TraceError(f"{path}: node {node.id}: process-group JSON is malformed") from None
    for node in nodes.values():
        parent = nodes.get(node.parent)
        if parent is not None and parent is not node:
            parent.children.append(node)
    for node in nodes.values():
        node.children.sort(key=lambda n: n.rf_id)
    return HostTrace(str(path), schema, nodes, roots, groups if isinstance(groups, list) else [])


@dataclass
class KinetoTimes:
    """Durations from a Kineto trace [us]: host operators by rf_id, GPU kernel time by rf_id."""

    host_us: dict[int, float]
    start_us: dict[int, float]
    gpu_us: dict[int, float]
    rank: int | None


def read_kineto(path: str | os.PathLike) -> KinetoTimes:
    """Host-operator durations and GPU-kernel time per operator. Raises TraceError."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise TraceError(f"{path}: not a JSON Kineto trace: {exc}") from None
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if not isinstance(events, list):
        raise TraceError(f"{path}: not a Kineto trace (expected an object with 'traceEvents')")
    host: dict[int, float] = {}
    start: dict[int, float] = {}
    by_external: dict[int, int] = {}  # External id -> the host operator's rf_id
    kernels: dict[int, float] = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        args = e.get("args") or {}
        cat = e.get("cat")
        if cat in ("cpu_op", "user_annotation") and "Record function id" in args:
            rf = int(args["Record function id"])
            host[rf] = float(e.get("dur", 0.0))
            start[rf] = float(e.get("ts", 0.0))
            if "External id" in args:
                by_external[int(args["External id"])] = rf
        elif cat in ("kernel", "gpu_memcpy", "gpu_memset") and "External id" in args:
            ext = int(args["External id"])
            kernels[ext] = kernels.get(ext, 0.0) + float(e.get("dur", 0.0))
    gpu: dict[int, float] = {}
    for ext, us in kernels.items():
        op_rf = by_external.get(ext)
        if op_rf is not None:
            gpu[op_rf] = gpu.get(op_rf, 0.0) + us
    info = data.get("distributedInfo") or {}
    rank = info.get("rank") if isinstance(info, dict) else None
    return KinetoTimes(host, start, gpu, rank if isinstance(rank, int) else None)
