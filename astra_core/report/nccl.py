"""What the NCCL model chose, per communicator and size: the ``--json`` ``nccl``
list and the lines ``astra run`` prints, modelled on NCCL's own tuning log.

NCCL with ``NCCL_DEBUG=INFO`` (subsystem ``TUNING``) prints, on rank 0 of a
communicator, one line per collective it launches (``src/enqueue.cc``,
NCCL 2.23 and later)::

    INFO(NCCL_TUNING, "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}", ...)
    NCCL INFO AllReduce: 4194304 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..31}

where the bytes are NCCL's ``count x type size`` (an all-gather's send count,
a reduce-scatter's receive count: one rank's part). astra prints one such
line per distinct (communicator, collective, size), with the channels it
launches as ``{0..channels-1}``, the communicator's group and size, how many
calls it covers, and NCCL's predicted time. Algorithm and protocol names are
NCCL's ``NCCL_ALGO`` / ``NCCL_PROTO`` spellings (``Ring``, ``NVLSTree``,
``Simple``), which NCCL's log prints in capitals.
"""

from __future__ import annotations

from typing import Any

from astra_core.report.results import RunResult
from astra_core.system.comm_types import CHAKRA_COLLECTIVE_NAMES

#: NCCL's function names (``ncclFuncToString``); all-to-all is NCCL's grouped send/receive.
NCCL_FUNCS = {
    "ALL_REDUCE": "AllReduce",
    "ALL_GATHER": "AllGather",
    "REDUCE_SCATTER": "ReduceScatter",
    "ALL_TO_ALL": "AllToAll",
    "BROADCAST": "Broadcast",
    "REDUCE": "Reduce",
}


def nccl_choices(result: RunResult) -> list[dict[str, Any]]:
    """One entry per distinct (communicator, collective, size, choice) the NCCL
    model ran, in first-issue order: ``type`` (Chakra name), ``group`` (""
    for all NPUs), ``ranks``, ``bytes`` (the trace's size), ``algorithm``,
    ``protocol``, ``channels``, ``nccl_predicted_ns`` and ``calls`` (how many
    such collectives the lowest simulated rank that ran one issued). Empty when
    no collective ran on the NCCL model."""
    entries: dict[tuple, dict[str, Any]] = {}
    first_rank: dict[tuple, int] = {}
    for record in sorted(result.collectives, key=lambda r: (r.rank, r.dataset.start_ns)):
        choice = record.dataset.nccl_choice
        if choice is None:
            continue
        node = record.node
        kind = CHAKRA_COLLECTIVE_NAMES.get(node.comm_type, str(node.comm_type))
        key = (node.pg_name or "", kind, node.comm_size, choice)
        entry = entries.get(key)
        if entry is None:
            first_rank[key] = record.rank
            entries[key] = {
                "type": kind,
                "group": node.pg_name or "",
                "ranks": choice.ranks,
                "bytes": node.comm_size,
                "algorithm": choice.algorithm,
                "protocol": choice.protocol,
                "channels": choice.channels,
                "nccl_predicted_ns": choice.predicted_ns,
                "calls": 1,
            }
        elif first_rank[key] == record.rank:
            entry["calls"] += 1
    return list(entries.values())


def nccl_bytes(entry: dict[str, Any]) -> int:
    """The bytes NCCL's tuning line shows for ``entry``: ``count x type size``,
    one rank's output for a reduce-scatter (the trace's size is its input)."""
    if entry["type"] == "REDUCE_SCATTER":
        return int(entry["bytes"]) // max(1, int(entry["ranks"]))
    return int(entry["bytes"])


def tuning_line(entry: dict[str, Any]) -> str:
    """One :func:`nccl_choices` entry as NCCL's ``NCCL_DEBUG=INFO`` tuning line,
    followed by the communicator, the calls and NCCL's predicted time (µs)."""
    func = NCCL_FUNCS.get(entry["type"], entry["type"])
    group = entry["group"] or "all"
    calls = entry["calls"]
    return (
        f"NCCL {func}: {nccl_bytes(entry)} Bytes -> Algo {entry['algorithm']} proto {entry['protocol']} "
        f"channel{{Lo..Hi}}={{0..{entry['channels'] - 1}}} comm {group} [nranks={entry['ranks']}] "
        f"x{calls} call{'s' if calls != 1 else ''}; NCCL predicts {entry['nccl_predicted_ns'] / 1000:,.1f} µs"
    )


def tuning_lines(result: RunResult, limit: int = 20) -> list[str]:
    """The terminal summary: a :func:`tuning_line` per entry, at most ``limit``,
    then one line counting the rest. Empty when NCCL ran nothing."""
    entries = nccl_choices(result)
    lines = [tuning_line(entry) for entry in entries[:limit]]
    if len(entries) > limit:
        lines.append(f"... {len(entries) - limit} more NCCL choices: see --json (nccl) or --csv")
    return lines
