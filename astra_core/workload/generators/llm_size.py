"""How large ``astra gen llm``'s step is, counted before it is built, and whether Chakra can hold it.

:func:`check_plan` runs before any stage is built (:func:`.llm.generate_llm`):
the NPU count against ``astra run``'s limit, and a lower bound of the nodes
(every layer's forward and backward pass of every micro-batch has at least an
attention and an MLP node, more with context-parallel or tensor-parallel
rings; every full gradient bucket is one collective) against
:data:`~astra_core.workload.trace_size.MAX_RANK_NODES`, so that
``--microbatches 1000000000``, ``--bucket-mb 0.000001`` or a model of 10^7
layers is refused at once. :func:`check_values` runs on the built stages: every
value must fit the Chakra field it is written to (``num_ops`` and
``comm_size`` int64, ``tensor_size`` and ``duration_micros`` uint64), else
one line names the node, the field and the sizes it came from.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from astra_core.errors import ConfigError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.trace_size import check_npus, check_rank_nodes

if TYPE_CHECKING:
    from astra_core.workload.generators.llm import LLMConfig
    from astra_core.workload.generators.llm_stage import StageNode

__all__ = ["check_plan", "check_values"]

_INT64_MAX, _UINT64_MAX = 2**63 - 1, 2**64 - 1


def _grad_buckets(cfg: LLMConfig, elements: int, group: int) -> int:
    """Full gradient buckets of ``elements`` gradients over a group of ``group`` ranks
    (none when the group is one rank: nothing is reduced)."""
    if group == 1:
        return 0
    return elements * cfg.grad_bytes // max(1, cfg.bucket_bytes or 1)


def check_plan(cfg: LLMConfig, microbatches: int) -> None:
    """Raise ConfigError when the plan's NPUs pass ``astra run``'s limit, or its nodes
    (a lower bound, all pipeline stages together, as the generator holds them) pass
    :data:`~astra_core.workload.trace_size.MAX_RANK_NODES`."""
    npus = cfg.dp * cfg.tp * cfg.pp * cfg.cp
    check_npus(f"dp {cfg.dp} x tp {cfg.tp} x pp {cfg.pp} x cp {cfg.cp}", npus)
    model, T, C = cfg.model, cfg.tp, cfg.cp
    ring = T if cfg.tp_comm_overlap else 1  # tensor-parallel ring steps beside each block
    attention = max(C if cfg.cp_comm_type == "p2p" else 1, ring)  # the ring's C steps
    per_layer = 2 * (attention + ring)  # forward and backward, attention and MLP
    moe = max(0, model.layers - model.dense_layers) if model.experts else 0
    dense_params = (int(model.attention_params_on(T)) + model.norm_params()) * model.layers
    dense_params += (model.layers - moe) * (model.dense_mlp_params() // T)
    expert_params = moe * model.experts // cfg.ep * model.expert_params() // T
    buckets = _grad_buckets(cfg, dense_params, cfg.dp * C) + _grad_buckets(
        cfg, expert_params, cfg.dp // cfg.ep
    )
    nodes = microbatches * model.layers * per_layer + buckets
    why = (
        f"{microbatches:,} micro-batches x {model.layers:,} layers x {per_layer} nodes"
        f"{f' + {buckets:,} gradient buckets of {cfg.bucket_bytes:,} bytes' if buckets else ''}"
    )
    check_rank_nodes("gen llm", math.ceil(nodes / cfg.pp), why + f", over pp {cfg.pp} stages")
    check_rank_nodes("gen llm", nodes, why, per="in all pipeline stages together")


#: Fields a generated node writes, with the largest value Chakra's field holds.
_FIELDS = (
    ("num_ops", "int64", _INT64_MAX),
    ("tensor_size", "uint64", _UINT64_MAX),
    ("comm_size", "int64", _INT64_MAX),
    ("duration_micros", "uint64", _UINT64_MAX),
)


def _values(node: StageNode) -> tuple[float, float, float, float]:
    if node.type == pb.COMP_NODE:
        return node.flops, node.nbytes, 0, node.duration_ns / 1000
    return 0, 0, node.size, node.duration_ns / 1000


def _suspects(nodes: list[StageNode]) -> list[int]:
    """The nodes (indices, ascending) that any of :data:`_FIELDS` may not hold: a value
    within 0.1 % of the field's largest or past it, or NaN, found on arrays (a step
    has millions of nodes); :func:`check_values` compares those exactly."""
    count = len(nodes)
    columns = (
        np.fromiter((n.flops for n in nodes), dtype=np.float64, count=count),
        np.fromiter((n.nbytes for n in nodes), dtype=np.float64, count=count),
        np.fromiter((n.size for n in nodes), dtype=np.float64, count=count),
        np.fromiter((n.duration_ns for n in nodes), dtype=np.float64, count=count) / 1000,
    )
    safe = np.ones(count, dtype=bool)
    for (_, _, most), column in zip(_FIELDS, columns):
        safe &= column < 0.999 * most  # False for NaN
    return np.flatnonzero(~safe).tolist()


def check_values(cfg: LLMConfig, stages: list[list[StageNode]]) -> None:
    """Raise ConfigError naming the first node, the Chakra field and the sizes it came
    from when a value is past what the field holds (a ``seq_len`` of 2^30 makes an
    attention node's FLOPs pass int64)."""
    for nodes in stages:
        for node in map(nodes.__getitem__, _suspects(nodes)):
            for (field, kind, most), value in zip(_FIELDS, _values(node)):
                if not value <= most:  # (also NaN)
                    m = cfg.model
                    raise ConfigError(
                        f"--model {m.name}: seq_len {cfg.sequence_length:,}, hidden {m.hidden:,}, "
                        f"ffn_hidden {m.ffn_hidden:,}, micro-batch {cfg.micro_batch:,}: node {node.name} "
                        f"would need {field} {value:.4g}, more than Chakra's {kind} {field} holds "
                        f"({most:.4g}); use smaller sizes"
                    )
