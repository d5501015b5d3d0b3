"""Convert ASTRA-sim 1.0 text workloads to Chakra execution traces.

For the formats MLCommons Chakra's text converter handles (DATA, MODEL,
HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_DLRM[_ENHANCED], MICRO) the
traces have Chakra's node names, types, durations, attributes and data
dependencies, in Chakra's order, so they simulate exactly as the traces
upstream ran (``tests/data/reference/workload/models``). With
``chakra_ids=True`` the node ids also follow Chakra's one counter across ranks
and the files are byte-identical to Chakra's; by default every rank numbers
its nodes from 0, so symmetric ranks get identical files (read once).

Chakra's converter runs every collective over all NPUs. ASTRA-sim 1.0, which
defined the format, gives each parallelism's collectives their own NPUs
(``Workload::decode_involved_dimensions``): model-parallel collectives (forward
and input-gradient) on the model-parallel dimensions, data-parallel ones
(weight gradient) on the others. Here that becomes groups of NPUs:

* ``HYBRID_DATA_MODEL`` and transformers: model-parallel groups are ``M``
  consecutive ranks (dimension 0 first, as upstream), data-parallel groups take
  every ``M``-th rank;
* ``HYBRID_MODEL_DATA``: data-parallel groups are ``N/M`` consecutive ranks,
  model-parallel groups take every ``N/M``-th rank;
* ``HYBRID_CUSTOMIZED``: each layer's own parallelism (its last column).

``M`` is ``model_parallel_NPU_group:`` from a transformer header or the
``model_parallel_npus`` argument (required by HYBRID_CUSTOMIZED; without it
HYBRID_DATA_MODEL/HYBRID_MODEL_DATA keep Chakra's all-NPU collectives). A
group of all NPUs needs nothing; a group of one NPU means no communication
and its collective is left out; other groups are written to a comm-group JSON
and named by each collective's ``pg_name``, or, when the network's dimension
sizes are given (``dims``) and a group is a whole set of dimensions, by an
``involved_dim`` list instead (so the per-dimension algorithms still apply).

Training loops (node dependencies) follow ASTRA-sim 1.0's
``Workload::iterate_*``, as Chakra's converter encodes them: forward
collectives block the next layer; input-gradient collectives are
non-blocking but the next layer's input gradient waits for them; weight-
gradient collectives overlap with the rest of the backward pass and block
only the next pass's forward of their layer. HYBRID_TRANSFORMER blocks on its
input-gradient collective (layer 0 included), as upstream's
``iterate_hybrid_parallel_Transformer``; FWD_IN_BCKWD re-runs the forward
pass from the last checkpoint before each ``checkpoint_initiates`` layer.

Deliberate differences from Chakra: a ``NONE`` collective is left out
(Chakra would write a 0-byte all-reduce) and the update-delay column is
ignored, as Chakra does.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from astra_core.errors import ConfigError
from astra_core.outputs import write_bytes
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.converters.text_format import TextLayer, TextWorkload
from astra_core.workload.converters.text_loops import LOOPS, Graph, Template
from astra_core.workload.network_fit import GENERATED_DIMS_ATTR
from astra_core.workload.trace_set import staged_trace_set
from astra_core.workload.trace_size import TraceSetSize, check_npus, check_rank_nodes, check_trace_set
from astra_core.workload.writer import make_node, trace_bytes

__all__ = ["ConvertedText", "GroupPlan", "convert_text", "convert_text_workload", "write_converted"]

#: GlobalMetadata ``schema`` Chakra's text converter writes (the reference traces have it).
CHAKRA_TEXT_SCHEMA = "1.0.2-chakra.0.0.4"

# Which NPUs each phase's collectives span, per parallelism (ASTRA-sim 1.0
# decode_involved_dimensions): (forward, input gradient, weight gradient).
_SCOPES = {
    "DATA": ("none", "none", "all"),
    "MICRO": ("none", "none", "all"),
    "HYBRID_DLRM": ("none", "none", "all"),
    "HYBRID_DLRM_ENHANCED": ("none", "none", "all"),
    "MODEL": ("all", "all", "none"),
    "HYBRID_DATA_MODEL": ("model", "model", "data"),
    "HYBRID_MODEL_DATA": ("model", "model", "data"),
    "HYBRID_TRANSFORMER": ("model", "model", "data"),
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD": ("model", "model", "data"),
}
_LAYOUT = {"HYBRID_MODEL_DATA": "data_consecutive"}  # others: model groups consecutive


@dataclass
class GroupPlan:
    """How the collectives of one role (model/data) are placed, for every rank.

    ``kind`` is ``"all"``, ``"skip"`` (one NPU: no communication),
    ``"dims"`` (``involved_dim`` list ``dims``) or ``"groups"`` (``group_of[rank]``
    is the comm-group id string).
    """

    kind: str
    dims: tuple[bool, ...] = ()
    group_of: list[str] = field(default_factory=list)


@dataclass
class ConvertedText:
    """Converted workload: per-rank node templates plus group placement.

    ``comm_groups`` maps group id -> member ranks (empty when every collective
    spans all NPUs or is placed by ``involved_dim``).
    """

    workload: TextWorkload
    npus: int
    templates: list[Template]
    plans: dict[tuple[str, str], GroupPlan]
    comm_groups: dict[str, list[int]]
    chakra_ids: bool = False
    dims: list[int] | None = None  # the network dimension sizes given (recorded in the traces)

    def rank_nodes(self, rank: int) -> list[pb.Node]:
        """The Node messages of ``rank`` in file order."""
        offset = rank * len(self.templates) if self.chakra_ids else 0
        out = []
        for i, t in enumerate(self.templates):
            attrs: dict[str, Any] = {}
            if t.type == pb.COMM_COLL_NODE:
                attrs["comm_type"] = t.comm_type
                attrs["comm_size"] = t.comm_size
                plan = self.plans[cast("tuple[str, str]", t.scope)]  # collectives have a scope
                if plan.kind == "dims":
                    attrs["involved_dim"] = list(plan.dims)
                elif plan.kind == "groups":
                    attrs["pg_name"] = plan.group_of[rank]
            out.append(
                make_node(
                    i + offset,
                    t.name,
                    t.type,
                    data_deps=[d + offset for d in t.deps],
                    duration_micros=t.duration,
                    **attrs,
                )
            )
        return out


# -- group placement -----------------------------------------------------------------


def _prefix_dims(dims: Sequence[int] | None, block: int) -> int | None:
    """k such that the first k dimensions hold ``block`` NPUs, else None."""
    if not dims:
        return None
    size = 1
    for k, d in enumerate(dims):
        if size == block:
            return k
        size *= d
    return len(dims) if size == block else None


def _plan_groups(npus: int, mp: int | None, scopes: set[tuple[str, str]], dims, source: str):
    """GroupPlan per (layout, role) and the comm-group table."""
    plans: dict[tuple[str, str], GroupPlan] = {}
    table: dict[tuple[int, ...], str] = {}

    def group_id(members: tuple[int, ...]) -> str:
        return table.setdefault(members, str(len(table) + 1))

    for layout, role in sorted(scopes):
        if role in ("all", "none"):
            plans[(layout, role)] = GroupPlan("all" if role == "all" else "skip")
            continue
        if mp is None:  # Chakra's semantics: every collective over all NPUs
            plans[(layout, role)] = GroupPlan("all")
            continue
        block = mp if layout == "model_consecutive" else npus // mp
        consecutive = (role == "model") == (layout == "model_consecutive")
        size = block if consecutive else npus // block
        if size == 1:
            plans[(layout, role)] = GroupPlan("skip")
            continue
        if size == npus:
            plans[(layout, role)] = GroupPlan("all")
            continue
        k = _prefix_dims(dims, block)
        if k is not None:
            involved = tuple(i < k for i in range(len(dims)))
            plans[(layout, role)] = GroupPlan(
                "dims", involved if consecutive else tuple(not b for b in involved)
            )
            continue
        group_of = []
        for rank in range(npus):
            if consecutive:
                start = rank // block * block
                members = tuple(range(start, start + block))
            else:
                members = tuple(range(rank % block, npus, block))
            group_of.append(group_id(members))
        plans[(layout, role)] = GroupPlan("groups", group_of=group_of)
    groups = {gid: list(members) for members, gid in table.items()}
    return plans, groups


def convert_text_workload(
    wl: TextWorkload,
    npus: int,
    *,
    model_parallel_npus: int | None = None,
    dims: Sequence[int] | None = None,
    passes: int = 1,
    chakra_ids: bool = False,
) -> ConvertedText:
    """Convert a parsed text workload for ``npus`` NPUs (see the module docstring).

    ``model_parallel_npus`` (M) overrides/sets the model-parallel group size;
    ``dims`` are the network's dimension sizes (product ``npus``), used to
    place whole-dimension groups with ``involved_dim``; ``passes`` training
    iterations; ``chakra_ids`` numbers nodes with one counter across ranks.
    Raises ConfigError for an M that does not divide ``npus``, a missing M
    where the parallelism needs one, bad ``dims``, or more NPUs or nodes per
    rank than astra's limits (:mod:`astra_core.workload.trace_size`).
    """
    src = wl.source
    if npus < 1:
        raise ConfigError(f"{src}: --npus must be >= 1, got {npus}")
    if passes < 1:
        raise ConfigError(f"{src}: passes must be >= 1, got {passes}")
    check_npus(f"{src}: --npus", npus)
    # every layer has at least one node per pass (a MICRO layer: its collective)
    check_rank_nodes(src, passes * len(wl.layers), f"{passes:,} passes x {len(wl.layers):,} layers")
    mp = model_parallel_npus if model_parallel_npus is not None else wl.model_parallel_npus
    kind = wl.parallelism
    if mp is not None:
        if mp < 1 or npus % mp:
            raise ConfigError(f"{src}: model-parallel group of {mp} NPUs does not divide {npus} NPUs")
    elif kind == "HYBRID_CUSTOMIZED" and any(  # its layers all have a parallelism column
        cast(str, layer.parallelism).startswith("HYBRID") for layer in wl.layers
    ):
        raise ConfigError(
            f"{src}: HYBRID_CUSTOMIZED with hybrid layers needs the model-parallel group "
            f"size (--model-parallel-npus M)"
        )
    if dims is not None:
        dims = list(dims)
        product = 1
        for d in dims:
            product *= d
        if not dims or min(dims) < 1 or product != npus:
            raise ConfigError(f"{src}: dimension sizes {dims} do not multiply to {npus} NPUs")

    def scope(layer: TextLayer, phase: int) -> tuple[str, str]:
        policy = layer.parallelism or kind
        role = _SCOPES[policy][phase]
        if wl.parallelism.startswith("HYBRID_DLRM") and layer is wl.layers[0]:
            role = "all"  # upstream: the embedding layer's collectives span every NPU
        return (_LAYOUT.get(policy, "model_consecutive"), role)

    all_scopes = {scope(layer, p) for layer in wl.layers for p in range(3)}
    plans, groups = _plan_groups(npus, mp, all_scopes, dims, src)
    g = Graph(lambda s: plans[s].kind != "skip")
    LOOPS[kind](wl, g, passes, scope)
    return ConvertedText(wl, npus, g.nodes, plans, groups, chakra_ids, dims)


def write_converted(
    conv: ConvertedText, prefix: str | os.PathLike, comm_groups_path: str | os.PathLike | None = None
) -> tuple[list[Path], Path | None]:
    """Write ``<prefix>.<rank>.et`` for every rank, and the comm-group JSON if needed.

    The comm groups go to ``comm_groups_path`` (default
    ``<prefix>.comm_groups.json``). Returns (trace paths, comm-group path or
    None). Raises ConfigError for a set past astra's limits
    (:func:`~astra_core.workload.trace_size.check_trace_set`, before anything is
    written) or an output folder that cannot be written. All files or none are
    written (:func:`~astra_core.workload.trace_set.staged_trace_set`).
    """
    prefix = os.fspath(prefix)
    meta: dict[str, Any] = {"schema": CHAKRA_TEXT_SCHEMA, "input_file": conv.workload.text}
    if conv.dims:  # involved_dim lists only mean this on these dimensions (network_fit checks)
        meta[GENERATED_DIMS_ATTR] = list(conv.dims)

    def key(rank: int) -> tuple:
        """Ranks of equal keys write the same bytes (serialized once); with Chakra's ids each
        rank its own."""
        if conv.chakra_ids:
            return (rank,)
        return tuple(p.group_of[rank] if p.kind == "groups" else None for p in conv.plans.values())

    first = trace_bytes(conv.rank_nodes(0), meta, version="")
    cache: dict[tuple, bytes] = {key(0): first}
    size = TraceSetSize(
        conv.npus, conv.npus * len(conv.templates), len(conv.templates), conv.npus * len(first)
    )
    check_trace_set(f"{conv.workload.source}: {conv.npus:,} NPUs", size, prefix)
    groups_path = Path(comm_groups_path or f"{prefix}.comm_groups.json") if conv.comm_groups else None
    with staged_trace_set(prefix) as stage:
        for rank in range(conv.npus):
            data = cache.get(key(rank))
            if data is None:
                data = trace_bytes(conv.rank_nodes(rank), meta, version="")
                if not conv.chakra_ids:
                    cache[key(rank)] = data
            write_bytes(stage.trace(rank), data)
        if groups_path is not None:
            stage.later(groups_path, (json.dumps(conv.comm_groups, indent=1) + "\n").encode())
    return [Path(f"{prefix}.{rank}.et") for rank in range(conv.npus)], groups_path


def convert_text(
    path: str | os.PathLike,
    npus: int,
    prefix: str | os.PathLike,
    *,
    model_parallel_npus: int | None = None,
    dims: Sequence[int] | None = None,
    passes: int = 1,
    chakra_ids: bool = False,
    comm_groups_path: str | os.PathLike | None = None,
) -> tuple[list[Path], Path | None]:
    """Read a text workload file, convert it for ``npus`` NPUs and write the traces.

    Keyword arguments as :func:`convert_text_workload`; returns what
    :func:`write_converted` returns. Raises ConfigError.
    """
    from astra_core.workload.converters.text_format import read_text_workload

    conv = convert_text_workload(
        read_text_workload(path),
        npus,
        model_parallel_npus=model_parallel_npus,
        dims=dims,
        passes=passes,
        chakra_ids=chakra_ids,
    )
    return write_converted(conv, prefix, comm_groups_path)
