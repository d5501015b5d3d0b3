"""Single-collective microbenchmark traces (``astra gen micro``).

Every rank's trace holds one COMM_COLL node per iteration, as Chakra's own
microbenchmark generator writes them (``src/generator/generator.py``
``one_comm_coll_node_*``; the traces in ``tests/data/reference/workload/micro``):
node name ``<COLLECTIVE>``, attributes ``is_cpu_op`` false, ``comm_type``,
``comm_size`` in bytes. Iterations run back to back (each depends on the
previous one); an optional ``pg_name`` selects a comm group. Every rank numbers
its nodes from 0 (identical files, read once), or with ``chakra_ids`` from
``rank x iterations`` as Chakra's generator's one counter does.
"""

from __future__ import annotations

import os
import re
from decimal import Decimal
from pathlib import Path

from astra_core.errors import ConfigError
from astra_core.outputs import write_bytes
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.trace_set import staged_trace_set
from astra_core.workload.trace_size import TraceSetSize, check_npus, check_rank_nodes, check_trace_set
from astra_core.workload.writer import make_node, trace_bytes

__all__ = ["COLLECTIVE_TYPES", "parse_size", "write_micro"]

#: CLI spelling -> Chakra CollectiveCommType name.
COLLECTIVE_TYPES = {
    "all-reduce": "ALL_REDUCE",
    "all-gather": "ALL_GATHER",
    "reduce-scatter": "REDUCE_SCATTER",
    "all-to-all": "ALL_TO_ALL",
}

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "k": 2**10,
    "m": 2**20,
    "g": 2**30,
}
_MAX_SIZE = 2**63 - 1  # comm_size is an int64 attribute in Chakra's generators
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*\Z")


def parse_size(text: str) -> int:
    """Bytes in ``text``: ``1048576``, ``64MiB``, ``1GiB``, ``1.5MB`` (SI), ``64M`` (binary).

    Raises ConfigError for anything else, a size that is not a whole number of
    bytes, or one past int64 (what ``comm_size`` holds).
    """
    match = _SIZE.match(str(text))
    unit = match.group(2).lower() if match else None
    if not match or unit not in _UNITS:
        raise ConfigError(f"size: expected a byte count like 1048576, 64MiB or 1GB, got '{text}'")
    value = Decimal(match.group(1)) * _UNITS[unit]  # exact: no float rounding of large counts
    if value != int(value) or value <= 0:
        raise ConfigError(f"size: '{text}' is not a positive whole number of bytes")
    if value > _MAX_SIZE:
        raise ConfigError(f"size: '{text}' is more than a Chakra comm_size holds (int64, {_MAX_SIZE} bytes)")
    return int(value)


def write_micro(
    collective: str,
    size_bytes: int,
    npus: int,
    prefix: str | os.PathLike,
    iterations: int = 1,
    pg_name: str | None = None,
    chakra_ids: bool = False,
) -> list[Path]:
    """Write ``<prefix>.<rank>.et`` for ``npus`` ranks: ``iterations`` back-to-back collectives.

    ``collective`` is a key of :data:`COLLECTIVE_TYPES` (or a Chakra name such as
    ``ALL_REDUCE``); ``size_bytes`` the collective's size. Returns the paths.
    Raises ConfigError for an unknown collective, a bad count, or an
    unwritable output folder.
    """
    kind = COLLECTIVE_TYPES.get(collective.lower(), collective.upper())
    if kind not in COLLECTIVE_TYPES.values():
        raise ConfigError(
            f"--collective: unknown collective '{collective}' (expected one of {', '.join(COLLECTIVE_TYPES)})"
        )
    if npus < 1 or iterations < 1 or size_bytes < 1:
        raise ConfigError(
            f"micro: npus, iterations and size must be >= 1, got {npus}, {iterations}, {size_bytes}"
        )

    def node(first_id: int, i: int) -> pb.Node:
        return make_node(
            first_id + i,
            kind,
            pb.COMM_COLL_NODE,
            data_deps=[first_id + i - 1] if i else [],
            is_cpu_op=False,
            comm_type=pb.CollectiveCommType.Value(kind),
            comm_size=size_bytes,
            pg_name=pg_name,
        )

    def nodes(first_id: int):
        return (node(first_id, i) for i in range(iterations))

    check_npus("--npus", npus)
    check_rank_nodes("--iterations", iterations)
    data = trace_bytes(nodes(0))  # every rank's file, unless numbered as Chakra does
    size = TraceSetSize(npus, npus * iterations, iterations, npus * len(data))
    check_trace_set(f"micro: {npus:,} NPUs x {iterations:,} iterations", size, prefix)
    with staged_trace_set(prefix) as stage:
        for rank in range(npus):
            write_bytes(
                stage.trace(rank), trace_bytes(nodes(rank * iterations)) if chakra_ids and rank else data
            )
    return [Path(f"{os.fspath(prefix)}.{rank}.et") for rank in range(npus)]
