"""Chakra's enums, taken from the generated protobuf module (``et_def.proto``).

The one place astra names them: ``NodeType`` (``COMP_NODE`` = 4,
``COMM_COLL_NODE`` = 7, ...) and ``CollectiveType`` (Chakra's
``CollectiveCommType``: ``ALL_REDUCE`` = 0, ``ALL_TO_ALL`` = 6, ...), as
``IntEnum`` so that they compare equal to the integers in a trace.
"""

from __future__ import annotations

from enum import IntEnum

from astra_core.workload import et_def_pb2 as _pb

#: ``pg_name`` values that name no communicator group: none, empty, or PyTorch's default
#: group "0" (the whole world). A collective with one of them runs on its
#: ``involved_dim`` (or on every NPU); the engine and rank symmetry read it so.
NO_GROUP = (None, "", "0")
#: Node attribute: the GPU stream (an int, 0 the default) a send or collective is launched
#: on; astra's own, read where every collective runs on NCCL (:mod:`astra_core.system.engine`).
COMM_STREAM = "comm_stream"
#: Node attribute: the SMs a collective's kernels hold while it runs (an int >= 0) where
#: that is not the NCCL model's channel count: DeepEP's and HybridEP's kernels (``astra gen
#: llm``'s flex dispatcher), Transformer Engine's userbuffers kernels; 0: SMs the compute
#: beside it leaves free, so it slows no compute; astra's own, read by the
#: compute-contention model (:mod:`astra_core.system.contention`).
COMM_SMS = "comm_sms"
#: Node attributes: a send's or receive's communicator as the ``comm_group_size`` ranks
#: ``comm_group_stride`` apart that hold its rank (ints); astra's own, written by
#: ``astra gen llm`` (a pipeline neighbour's sends run on the pipeline's group: one
#: value for every rank, where a ``pg_name`` would differ) and read by the NCCL model's
#: send cost (:meth:`astra_core.system.engine.RankEngine._p2p_communicator`).
COMM_GROUP_STRIDE, COMM_GROUP_SIZE = "comm_group_stride", "comm_group_size"


class NodeType(IntEnum):
    """Chakra's ``NodeType``; values from the generated module."""

    INVALID_NODE = _pb.INVALID_NODE
    METADATA_NODE = _pb.METADATA_NODE
    MEM_LOAD_NODE = _pb.MEM_LOAD_NODE
    MEM_STORE_NODE = _pb.MEM_STORE_NODE
    COMP_NODE = _pb.COMP_NODE
    COMM_SEND_NODE = _pb.COMM_SEND_NODE
    COMM_RECV_NODE = _pb.COMM_RECV_NODE
    COMM_COLL_NODE = _pb.COMM_COLL_NODE


class CollectiveType(IntEnum):
    """Chakra's ``CollectiveCommType``; values from the generated module."""

    ALL_REDUCE = _pb.ALL_REDUCE
    REDUCE = _pb.REDUCE
    ALL_GATHER = _pb.ALL_GATHER
    GATHER = _pb.GATHER
    SCATTER = _pb.SCATTER
    BROADCAST = _pb.BROADCAST
    ALL_TO_ALL = _pb.ALL_TO_ALL
    REDUCE_SCATTER = _pb.REDUCE_SCATTER
    REDUCE_SCATTER_BLOCK = _pb.REDUCE_SCATTER_BLOCK
    BARRIER = _pb.BARRIER


#: The node types as plain ints, for the loops that test every node's type (an
#: ``IntEnum`` compares several times slower than an ``int``).
INVALID, METADATA, MEM_LOAD, MEM_STORE, COMP, COMM_SEND, COMM_RECV, COMM_COLL = (
    int(t)
    for t in (
        NodeType.INVALID_NODE,
        NodeType.METADATA_NODE,
        NodeType.MEM_LOAD_NODE,
        NodeType.MEM_STORE_NODE,
        NodeType.COMP_NODE,
        NodeType.COMM_SEND_NODE,
        NodeType.COMM_RECV_NODE,
        NodeType.COMM_COLL_NODE,
    )
)

#: NodeType value -> name, e.g. 7 -> "COMM_COLL_NODE".
NODE_TYPE_NAMES: dict[int, str] = {t.value: t.name for t in NodeType}
#: CollectiveType value -> name, e.g. 6 -> "ALL_TO_ALL".
COLLECTIVE_NAMES: dict[int, str] = {t.value: t.name for t in CollectiveType}
