"""Per-collective records as flat rows: what ``--csv`` / ``--parquet`` write.

One row per collective per rank (a symmetric run's rank 0 records are
mirrored to every rank, with each rank's own node ids and names). Columns, in
order (times in ns, sizes in bytes):

``rank, node_id, name, type, bytes, group, chunks, start_ns, end_ns, duration_ns``
    ``type`` is the Chakra collective name (``ALL_REDUCE``...); ``group`` the
    communicator group ("" for all NPUs); ``chunks`` how many chunks
    (``preferred-dataset-splits``) it was split into; ``start_ns`` when the
    rank issued it, ``end_ns`` when its last chunk finished.
``in_flight_ns, wait_ns``
    of ``duration_ns``, the time during which at least one of this rank's
    messages was on the network (:attr:`RankTimeline.in_flight`; a message of
    another collective or a send/receive running beside it counts too), and
    the rest: the collective open with nothing of this rank moving (blocked
    on a peer, or its local steps). They add up to ``duration_ns``.
``<phase>_dim<d>_ns`` (one column per phase kind in the run)
    wall time during which at least one chunk of this collective was in that
    phase on that network dimension, e.g. ``reduce_scatter_dim0_ns``,
    ``all_reduce_dim1_ns``; empty (NaN) where a collective has no such phase.
    Time a chunk waits for its turn on a dimension is not phase time, so the
    phases of a collective may add up to less than its duration.
``nccl_algorithm, nccl_protocol, nccl_channels, nccl_predicted_ns`` (last; in a run where the NCCL model ran a collective)
    what the NCCL model chose for the collective, as ``NCCL_DEBUG=INFO``
    reports it: the algorithm as ``NCCL_ALGO`` spells it (``Ring``,
    ``Tree``, ``NVLS``, ``NVLSTree``, ``CollNetDirect``, ``CollNetChain``;
    ``SendRecv`` for an all-to-all), the protocol (``LL``, ``LL128``,
    ``Simple``), the channels it launches, and NCCL's own predicted time
    (its cost model, the floor of the collective's time); empty for a
    collective the NCCL model did not run.

:func:`phase_rows` has every phase of every chunk, one row each.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from astra_core.intervals import flat_covered, total, union
from astra_core.results import CollectiveRecord, RunResult, whole_ns
from astra_core.workload.chakra_types import COLLECTIVE_NAMES as CHAKRA_COLLECTIVE_NAMES

BASE_COLUMNS = (
    "rank",
    "node_id",
    "name",
    "type",
    "bytes",
    "group",
    "chunks",
    "start_ns",
    "end_ns",
    "duration_ns",
    "in_flight_ns",
    "wait_ns",
)
NCCL_COLUMNS = ("nccl_algorithm", "nccl_protocol", "nccl_channels", "nccl_predicted_ns")
PHASE_COLUMNS = ("rank", "node_id", "dim", "phase", "start_ns", "end_ns", "duration_ns")
_PHASE_ORDER = {"reduce-scatter": 0, "all-reduce": 1, "all-gather": 2, "all-to-all": 3}


def phase_column(phase_type: str, dim: int) -> str:
    """Column name of a phase kind: ``("reduce-scatter", 0)`` -> ``reduce_scatter_dim0_ns``."""
    return f"{phase_type.replace('-', '_')}_dim{dim}_ns"


def _records(result: RunResult) -> Iterator[tuple[int, Any, CollectiveRecord]]:
    """(rank, ET node, record) per collective, mirrored over ranks in symmetric runs."""
    if not result.symmetric:
        for record in result.collectives:
            yield record.rank, record.node, record
        return
    graphs = result.graphs
    mapping = result.representative
    by_rep: dict[int, list[CollectiveRecord]] = {}
    for record in result.collectives:
        by_rep.setdefault(record.rank, []).append(record)
    positions = {t.rank: {id(node): pos for pos, node in enumerate(t.nodes)} for t in result.traces}
    for r in result.ranks:
        rep = mapping[r.rank] if mapping else 0
        position = positions.get(rep, {})
        for record in by_rep.get(rep, []):
            pos = position.get(id(record.node))
            node = graphs[r.rank].nodes[pos] if pos is not None and r.rank < len(graphs) else record.node
            yield r.rank, node, record


def phase_kinds(result: RunResult) -> list[tuple[str, int]]:
    """The (phase type, dimension) pairs that occur in the run, in execution order."""
    kinds = {(t, d) for record in result.collectives for d, t, _, _ in record.phase_times}
    return sorted(kinds, key=lambda k: (_PHASE_ORDER.get(k[0], 9), k[0], k[1]))


def collective_rows(result: RunResult) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows, column names): one dict per collective per rank; see the module docstring."""
    kinds = phase_kinds(result)
    columns = list(BASE_COLUMNS) + [phase_column(t, d) for t, d in kinds]
    nccl = any(record.nccl_choice is not None for record in result.collectives)
    if nccl:
        columns += NCCL_COLUMNS
    per_record: dict[int, dict[str, float]] = {}
    flights = {t.rank: t.in_flight for t in result.traces}
    rows = []
    for rank, node, record in _records(result):
        ds = record
        phases = per_record.get(id(record))
        if phases is None:
            grouped: dict[tuple[str, int], list[tuple[float, float]]] = {}
            for d, t, start, end in ds.phase_times:
                grouped.setdefault((t, d), []).append((start, end))
            phases = per_record[id(record)] = {
                phase_column(t, d): float(total(union(spans))) for (t, d), spans in grouped.items()
            }
        finish = ds.finish_ns
        duration = in_flight = None
        if finish is not None:
            duration = whole_ns(finish) - whole_ns(ds.start_ns)
            moving = flat_covered(flights.get(record.rank, ()), ds.start_ns, finish)
            in_flight = min(whole_ns(moving), duration)  # whole ns each: never above the duration
        row = {
            "rank": rank,
            "node_id": node.id,
            "name": node.name,
            "type": CHAKRA_COLLECTIVE_NAMES.get(node.comm_type, str(node.comm_type)),
            "bytes": node.comm_size,
            "group": node.pg_name or "",
            "chunks": ds.chunks,
            "start_ns": whole_ns(ds.start_ns),
            "end_ns": None if finish is None else whole_ns(finish),
            "duration_ns": duration,
            "in_flight_ns": in_flight,
            "wait_ns": None if duration is None or in_flight is None else duration - in_flight,
        }
        for t, d in kinds:
            column = phase_column(t, d)
            row[column] = phases.get(column, float("nan"))
        if nccl:
            row.update(nccl_fields(ds.nccl_choice))
        rows.append(row)
    rows.sort(key=lambda row: (row["rank"], row["start_ns"], row["node_id"]))
    return rows, columns


def nccl_fields(choice: Any) -> dict[str, Any]:
    """The :data:`NCCL_COLUMNS` of one collective: its
    :class:`~astra_core.system.collectives.nccl.phase.NcclChoice`, or empty
    values (``""``, None) when the NCCL model did not run it."""
    if choice is None:
        return {"nccl_algorithm": "", "nccl_protocol": "", "nccl_channels": None, "nccl_predicted_ns": None}
    return {
        "nccl_algorithm": choice.algorithm,
        "nccl_protocol": choice.protocol,
        "nccl_channels": choice.channels,
        "nccl_predicted_ns": choice.predicted_ns,
    }


def phase_rows(result: RunResult) -> list[dict[str, Any]]:
    """One row per phase of every chunk: rank, node_id, dim, phase, start_ns, end_ns, duration_ns."""
    rows = []
    for rank, node, record in _records(result):
        for d, t, start, end in record.phase_times:
            rows.append(
                {
                    "rank": rank,
                    "node_id": node.id,
                    "dim": d,
                    "phase": t,
                    "start_ns": whole_ns(start),
                    "end_ns": whole_ns(end),
                    "duration_ns": whole_ns(end) - whole_ns(start),
                }
            )
    rows.sort(key=lambda row: (row["rank"], row["start_ns"], row["node_id"], row["dim"]))
    return rows
