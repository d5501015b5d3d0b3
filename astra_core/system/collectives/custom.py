"""Custom collectives: one collective's sends, receives and reductions per rank, as data.

Two sources, chosen by system.json's ``<collective>-implementation-custom``
(a one-entry list, as upstream):

* **A Chakra ET prefix** (upstream ASTRA-sim's custom collectives,
  ``astraccl/custom_collectives/CustomAlgorithm.cc``): the rank at position
  ``p`` of the communicator reads ``<prefix>.<p>.et``; ``COMM_SEND_NODE`` sends
  ``comm_size`` bytes to ``comm_dst``, ``COMM_RECV_NODE`` receives from
  ``comm_src`` (positions in the communicator, mapped to ranks),
  ``COMP_NODE`` takes its ``duration_micros`` (at least 1 ns; upstream reads
  them as the reduction); nodes start when their data and control
  dependencies are done. The sizes are the ET's; the workload's collective
  size is not used (as upstream).
* **An MSCCL algorithm XML file** (``.xml``; the format of microsoft/msccl-tools
  and NCCL's MSCCL runtime): per GPU, thread blocks (``tb``, with one ``send``
  and one ``recv`` peer) run their ``step``s in order; a step moves ``cnt``
  chunks (the rank's input buffer split into the GPU's ``i_chunks``) and may
  also wait for step ``deps`` of thread block ``depid``. Step types: ``s``
  send, ``r`` receive, ``rrc`` receive-reduce-copy, ``rcs`` receive-copy-send,
  ``rrs`` receive-reduce-send, ``rrcs`` receive-reduce-copy-send, ``re``
  reduce, ``cpy`` copy, ``nop``. A reduction takes the system layer's
  reduction time of its bytes (``RankSystem.reduction_delay_ns``); copies
  are free. ``proto`` LL and LL128 put 16 bytes on the wire per 8, 128 per 120.

A send is done when its message is delivered (upstream's send handler runs
at arrival); the collective is done on a rank when all its operations are.
Errors name the file and the node or step.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astra_core.errors import ConfigError, TraceError
from astra_core.events import kernel
from astra_core.workload.chakra_types import COMM_RECV as _COMM_RECV
from astra_core.workload.chakra_types import COMM_SEND as _COMM_SEND
from astra_core.workload.chakra_types import COMP as _COMP

#: Operation kinds (the kernel's numbers).
SEND, RECV, COMP, REDUCE = 0, 1, 2, 3
_WIRE = {"LL": 2.0, "LL128": 128 / 120, "Simple": 1.0, "SIMPLE": 1.0}


@dataclass(frozen=True)
class Op:
    """One operation: ``kind`` SEND/RECV (``peer``: a position in the
    communicator, ``size`` bytes, ``tag``), COMP (``duration_ns``) or REDUCE
    (of ``size`` bytes); ``deps``: indices of operations that finish first."""

    kind: int
    deps: tuple[int, ...]
    peer: int = -1
    size: int = 0
    tag: int = 0
    duration_ns: int = 0


@dataclass(frozen=True)
class Program:
    """One rank's operations for one collective (checked acyclic); ``compiled`` is
    the kernel's ``OpProgram`` of them, which the phases of every chunk share."""

    ops: tuple[Op, ...]
    source: str
    compiled: Any = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        compiled = kernel().OpProgram(
            [(op.kind, op.peer, op.size, op.tag, op.duration_ns, op.deps) for op in self.ops]
        )
        object.__setattr__(self, "compiled", compiled)


# -- Chakra ET ----------------------------------------------------------------------------


@lru_cache(maxsize=256)
def chakra_program(prefix: str, position: int) -> Program:
    """The program of position ``position`` from ``<prefix>.<position>.et``."""
    from astra_core.workload.chakra import read_rank_trace

    path = f"{prefix}.{position}.et"
    if not os.path.exists(path):
        raise ConfigError(
            f"{path}: no such custom-collective ET (position {position} of the "
            f"communicator); *-implementation-custom names the prefix"
        )
    trace = read_rank_trace(path)
    index = {node.id: i for i, node in enumerate(trace.nodes)}
    ops = []
    for node in trace.nodes:
        deps = []
        for dep in tuple(node.data_deps) + tuple(node.ctrl_deps):
            if dep not in index:
                raise TraceError(
                    f"{path}: node {node.id} ({node.name}) depends on node {dep}, which is not in the file"
                )
            deps.append(index[dep])
        if node.type == _COMM_SEND:
            if node.comm_dst is None:
                raise TraceError(f"{path}: node {node.id} ({node.name}): COMM_SEND_NODE without comm_dst")
            ops.append(
                Op(SEND, tuple(deps), node.comm_dst, int(node.comm_size or 0), int(node.comm_tag or 0))
            )
        elif node.type == _COMM_RECV:
            if node.comm_src is None:
                raise TraceError(f"{path}: node {node.id} ({node.name}): COMM_RECV_NODE without comm_src")
            ops.append(
                Op(RECV, tuple(deps), node.comm_src, int(node.comm_size or 0), int(node.comm_tag or 0))
            )
        elif node.type == _COMP:
            micros = node.duration_micros or 0
            ops.append(Op(COMP, tuple(deps), duration_ns=int(micros * 1000) if micros else 1))
        else:
            raise TraceError(
                f"{path}: node {node.id} ({node.name}): a custom collective has "
                "only COMM_SEND, COMM_RECV and COMP nodes"
            )
    return Program(_topological(ops, path), path)


def _topological(ops: list[Op], source: str) -> tuple[Op, ...]:
    """Check the dependencies form no cycle (TraceError naming ``source``)."""
    state = [0] * len(ops)
    for start in range(len(ops)):
        stack = [(start, 0)]
        while stack:
            i, k = stack.pop()
            if k == 0:
                if state[i] == 2:
                    continue
                state[i] = 1
            deps = ops[i].deps
            if k < len(deps):
                stack.append((i, k + 1))
                j = deps[k]
                if state[j] == 1:
                    raise TraceError(f"{source}: operation {i} depends on itself through operation {j}")
                if state[j] == 0:
                    stack.append((j, 0))
            else:
                state[i] = 2
    return tuple(ops)


# -- MSCCL XML ----------------------------------------------------------------------------

_RECEIVES = {"r", "rrc", "rcs", "rrs", "rrcs"}
_SENDS = {"s", "rcs", "rrs", "rrcs"}
_REDUCES = {"rrc", "rrs", "rrcs", "re"}
_KNOWN = _RECEIVES | _SENDS | _REDUCES | {"cpy", "nop"}


@lru_cache(maxsize=64)
def _msccl_tree(path: str) -> ET.Element:
    try:
        return ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise ConfigError(f"{path}: not a readable MSCCL algorithm XML file ({exc})") from None


#: Bounds of the MSCCL runtime (microsoft/msccl ``src/include/msccl/msccl_struct.h``):
#: a step moves at most ``MSCCL_MAX_COUNT`` = 72 chunks (``mscclTransmission::count``
#: is a uint8_t); channels ``chan`` are below ``MAXCHANNELS`` = 32.
MSCCL_MAX_COUNT = 72
MSCCL_MAX_CHANNELS = 32
_NO_LIMIT = 1 << 62


def _int(
    element: ET.Element,
    name: str,
    path: str,
    where: str,
    minimum: int = -(1 << 62),
    maximum: int = _NO_LIMIT,
    default: int | None = None,
) -> int:
    """Attribute ``name`` of ``element`` as an integer in ``[minimum, maximum]``
    (``default`` when absent and a default is given). ConfigError naming the
    file, the element (``where``) and the attribute otherwise."""
    raw = element.attrib.get(name)
    if raw is None and default is not None:
        return default
    try:
        value = int(raw) if raw is not None else None
    except ValueError:
        value = None
    if value is None:
        raise ConfigError(f"{path}: {where}: needs an integer attribute {name!r}, got {raw!r}")
    if not minimum <= value <= maximum:
        bound = f">= {minimum}" if maximum == _NO_LIMIT else f"in {minimum}..{maximum}"
        raise ConfigError(f"{path}: {where}: attribute {name!r} must be {bound}, got {value}")
    return value


@lru_cache(maxsize=256)
def msccl_program(path: str, position: int, ranks: int, input_bytes: int) -> Program:
    """The program of GPU ``position`` in MSCCL XML ``path`` for an input buffer of
    ``input_bytes`` per rank. Raises ConfigError naming the file, the
    element (algo, GPU, thread block or step) and the attribute at fault:
    every count is an integer in its range (``ngpus``, ``nchunksperloop``,
    ``i_chunks``, ``nchannels`` >= 1, ``cnt`` too but for a ``nop``; ``cnt`` at most
    :data:`MSCCL_MAX_COUNT` and the chunks of the GPU's largest buffer;
    ``chan`` below ``nchannels`` and :data:`MSCCL_MAX_CHANNELS`; ``s``, ``id``
    >= 0; ``send``, ``recv``, ``depid``, ``deps`` >= -1), and a chunk (the
    input buffer over ``i_chunks``) is at least 1 byte."""
    root = _msccl_tree(path)
    ngpus = _int(root, "ngpus", path, "algo", minimum=1)
    if ngpus != ranks:
        raise ConfigError(f"{path}: the algorithm is for {ngpus} GPUs; the collective has {ranks}")
    wire = _WIRE.get(root.attrib.get("proto", "Simple"))
    if wire is None:
        raise ConfigError(f"{path}: algo proto {root.attrib.get('proto')!r}: expected LL, LL128 or Simple")
    nchannels = _int(root, "nchannels", path, "algo", 1, MSCCL_MAX_CHANNELS, default=MSCCL_MAX_CHANNELS)
    gpu = next((g for g in root.iter("gpu") if g.attrib.get("id") == str(position)), None)
    if gpu is None:
        raise ConfigError(f'{path}: no <gpu id="{position}">')
    here = f"gpu {position}"
    _int(root, "nchunksperloop", path, "algo", minimum=1, default=1)  # MSCCL's loop; checked only
    i_chunks = _int(gpu, "i_chunks", path, here, minimum=1)
    if input_bytes < i_chunks:
        raise ConfigError(
            f"{path}: {here}: attribute 'i_chunks' {i_chunks} splits the {input_bytes}-byte "
            "input buffer into chunks smaller than 1 byte"
        )
    buffer_chunks = max(
        [i_chunks] + [_int(gpu, key, path, here, minimum=0, default=0) for key in ("o_chunks", "s_chunks")]
    )
    reader = _MscclGpu(
        path, here, ngpus, nchannels, min(MSCCL_MAX_COUNT, buffer_chunks), input_bytes / i_chunks, wire
    )
    for tb in gpu.iter("tb"):
        reader.thread_block(tb)
    return Program(_topological(reader.linked_ops(), f"{path} {here}"), path)


class _MscclGpu:
    """The operations of one GPU of an MSCCL algorithm, read thread block by thread
    block: ``chunk`` bytes per chunk, ``wire`` bytes on the wire per byte of data
    (the protocol), counts up to ``max_count`` chunks, channels below ``nchannels``."""

    def __init__(
        self, path: str, here: str, ngpus: int, nchannels: int, max_count: int, chunk: float, wire: float
    ):
        self.path, self.here, self.ngpus, self.nchannels = path, here, ngpus, nchannels
        self.max_count, self.chunk, self.wire = max_count, chunk, wire
        self.ops: list[Op] = []
        self.last_of_step: dict[tuple[int, int], int] = {}
        self.pending: list[tuple[int, int, int, str]] = []  # (op index, depid, deps, where)

    def thread_block(self, tb: ET.Element) -> None:
        """Append the ops of ``tb``'s steps, each after the one before it."""
        path = self.path
        tb_id = _int(tb, "id", path, self.here, minimum=0)
        where = f"{self.here} tb {tb_id}"
        peers = (_int(tb, "send", path, where, minimum=-1), _int(tb, "recv", path, where, minimum=-1))
        # a message goes from a thread block to the peer's thread block of the same channel
        channel = _int(tb, "chan", path, where, 0, self.nchannels - 1, default=0)
        previous = -1
        for step in tb.iter("step"):
            s = _int(step, "s", path, where, minimum=0)
            previous = self._step(step, f"{where} step {s}", peers, channel, previous)
            self.last_of_step[(tb_id, s)] = previous

    def _step(self, step: ET.Element, where: str, peers: tuple[int, int], channel: int, previous: int) -> int:
        """Append one step's ops (receive, reduce, send, or a point in the order);
        returns the index of its last."""
        path, ops = self.path, self.ops
        kind = step.attrib.get("type", "")
        if kind not in _KNOWN:
            raise ConfigError(f"{path}: {where}: unknown step type {kind!r}")
        # a nop moves nothing: its count does not matter
        size = int(_int(step, "cnt", path, where, int(kind != "nop"), self.max_count) * self.chunk)
        deps = (previous,) if previous >= 0 else ()
        depid = _int(step, "depid", path, where, minimum=-1)
        dep_step = _int(step, "deps", path, where, minimum=-1)
        first = len(ops)
        send_peer, recv_peer = peers
        if kind in _RECEIVES:
            _check_peer(recv_peer, self.ngpus, path, where, "recv")
            ops.append(Op(RECV, deps, recv_peer, max(1, round(size * self.wire)), channel))
            deps = (len(ops) - 1,)
        if kind in _REDUCES:
            ops.append(Op(REDUCE, deps, size=size))
            deps = (len(ops) - 1,)
        if kind in _SENDS:
            _check_peer(send_peer, self.ngpus, path, where, "send")
            ops.append(Op(SEND, deps, send_peer, max(1, round(size * self.wire)), channel))
            deps = (len(ops) - 1,)
        if len(ops) == first:  # cpy, nop: a point in the order
            ops.append(Op(COMP, deps))
        if depid >= 0:
            self.pending.append((first, depid, dep_step, where))
        return len(ops) - 1

    def linked_ops(self) -> list[Op]:
        """The ops with each cross-thread-block dependency (``depid``/``deps``) added.
        Raises ConfigError for a dependency on a step this GPU does not have."""
        ops = self.ops
        for index, depid, dep_step, where in self.pending:
            target = self.last_of_step.get((depid, dep_step))
            if target is None:
                raise ConfigError(
                    f"{self.path}: {where}: depends on tb {depid} step {dep_step}, which "
                    f"{self.here} does not have"
                )
            op = ops[index]
            ops[index] = Op(op.kind, op.deps + (target,), op.peer, op.size, op.tag, op.duration_ns)
        return ops


def _check_peer(peer: int, ngpus: int, path: str, where: str, role: str) -> None:
    if not 0 <= peer < ngpus:
        raise ConfigError(
            f"{path}: {where}: {role} peer {peer} is not a GPU of the algorithm (0..{ngpus - 1})"
        )


# -- running ------------------------------------------------------------------------------


if TYPE_CHECKING:
    from astra_core._astra_kernel import ProgramPhase as _KernelProgramPhase

else:
    _KernelProgramPhase = kernel().ProgramPhase


class CustomPhase(_KernelProgramPhase):
    """One rank's custom collective for one chunk: the kernel's ``ProgramPhase``
    (``astra_core/cpp/kernel/program_phase.h``) runs its :class:`Program`'s
    operations as their dependencies finish, each in index order; ``members[p]``
    is the rank at position ``p``. Message tags are ``2^56 + stream id * 2^24 +``
    the operation's tag, above NCCL's."""

    name = "custom"
    __slots__ = ("program",)

    def __init__(self, comm_type, rank: int, data_size: int, program: Program, members: tuple[int, ...]):
        super().__init__(comm_type, rank, data_size, program.compiled, tuple(members))
        self.program = program

    def waiting_for(self) -> str:
        ops = self.program.ops
        pending = [ops[i] for i in self.pending() if ops[i].kind == RECV]
        peers = ", ".join(str(self.members[op.peer]) for op in pending[:4]) or "-"
        return (
            f"custom {self.comm_type.label} ({Path(self.program.source).name}): "
            f"{self.left} of {len(ops)} operations left; waiting for rank(s) {peers}"
        )


def custom_phase(comm_type, rank: int, members: tuple[int, ...], data_size: int, source: str) -> CustomPhase:
    """Rank ``rank``'s phase of a custom collective from ``source`` (an ET prefix or
    an ``.xml`` file) over ``members``."""
    position = members.index(rank)
    if source.endswith(".xml"):
        program = msccl_program(source, position, len(members), data_size)
    else:
        program = chakra_program(source, position)
    return CustomPhase(comm_type, rank, data_size, program, members)


def custom_sources(system) -> dict:
    """``{CommType: path}`` of the system's ``*-implementation-custom`` entries.

    A relative path is looked up from the working directory (upstream's rule)
    and then from the system.json's folder; ConfigError naming the key if
    neither has it (an ET prefix needs ``<prefix>.0.et``).
    """
    from astra_core.system.comm_types import CONFIGURABLE

    out = {}
    for comm_type in CONFIGURABLE:
        entry = system.custom_implementation(comm_type.label)
        if entry is None:
            continue
        candidates = [Path(entry)]
        if not Path(entry).is_absolute() and os.path.exists(os.path.dirname(system.source) or "."):
            candidates.append(Path(os.path.dirname(system.source)) / entry)
        found = next(
            (
                c
                for c in candidates
                if (c.is_file() if entry.endswith(".xml") else Path(f"{c}.0.et").is_file())
            ),
            None,
        )
        if found is None:
            what = "file" if entry.endswith(".xml") else f"Chakra ET {entry}.0.et"
            raise ConfigError(
                f"{system.source}: {comm_type.label}-implementation-custom: no {what} "
                "(relative paths are looked up from the working directory, then "
                "from the system.json's folder)"
            )
        out[comm_type] = str(found)
    return out
