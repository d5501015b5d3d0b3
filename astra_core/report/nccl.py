"""What the NCCL model chose, per communicator and size: the ``--json`` ``nccl``
list and the lines ``astra run`` prints, modelled on NCCL's own tuning log.

NCCL with ``NCCL_DEBUG=INFO`` (subsystem ``TUNING``) prints, on rank 0 of a
communicator, one line per collective it launches (``src/enqueue.cc``,
NCCL 2.23 and later)::

    INFO(NCCL_TUNING, "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}", ...)
    NCCL INFO AllReduce: 4194304 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..31}

where the bytes are NCCL's ``count x type size`` (an all-gather's send count,
a reduce-scatter's receive count: one rank's part). astra prints one such
line per collective, communicator size, size class (sizes from ``2^k`` to
``2^(k+1)``) and choice, with the channels it launches as
``{0..channels-1}``, the communicators (groups of the same shape share a
line), how many calls it covers, and NCCL's predicted time. Algorithm and protocol names are
NCCL's ``NCCL_ALGO`` / ``NCCL_PROTO`` spellings (``Ring``, ``NVLSTree``,
``Simple``), which NCCL's log prints in capitals.
"""

from __future__ import annotations

from typing import Any

from astra_core.results import RunResult, nccl_choice_entries

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
    return nccl_choice_entries(result.collectives)


def nccl_bytes(entry: dict[str, Any]) -> int:
    """The bytes NCCL's tuning line shows for ``entry``: ``count x type size``,
    one rank's output for a reduce-scatter (the trace's size is its input)."""
    if entry["type"] == "REDUCE_SCATTER":
        return int(entry["bytes"]) // max(1, int(entry["ranks"]))
    return int(entry["bytes"])


def size_class(nbytes: int) -> int:
    """The power-of-two class of a size: ``k`` for ``2^k <= nbytes < 2^(k+1)`` (0 for 0)."""
    return max(0, int(nbytes).bit_length() - 1)


def _span(values: list, show) -> str:
    low, high = show(min(values)), show(max(values))
    return low if low == high else f"{low}..{high}"


def _comms(groups: list[str], whole: bool) -> str:
    """The communicators' group names; a collective without a group runs over all
    NPUs (``whole``) or over the trace's involved dimensions."""
    names = sorted(set(groups), key=lambda g: (len(g), g))
    if len(names) == 1:
        return names[0] or ("all" if whole else "of-involved-dims")
    shown = ", ".join(names[:3]) if len(names) <= 3 else f"{names[0]}, {names[1]}, ..., {names[-1]}"
    return f"{shown} ({len(names)} comms)"


def tuning_line(entries: list[dict[str, Any]], npus: int | None = None) -> str:
    """One line for :func:`nccl_choices` entries of the same collective, choice,
    communicator size and size class, as NCCL's ``NCCL_DEBUG=INFO`` tuning
    line (the bytes as a range when they differ), followed by the
    communicators, the calls and NCCL's predicted time (µs). ``npus``: the
    run's NPUs (a communicator without a group name that spans fewer is the
    trace's involved dimensions)."""
    first = entries[0]
    func = NCCL_FUNCS.get(first["type"], first["type"])
    calls = sum(e["calls"] for e in entries)
    nbytes = _span([nccl_bytes(e) for e in entries], str)
    predicted = _span([e["nccl_predicted_ns"] / 1000 for e in entries], lambda us: f"{us:,.1f}")
    return (
        f"NCCL {func}: {nbytes} Bytes -> Algo {first['algorithm']} proto {first['protocol']} "
        f"channel{{Lo..Hi}}={{0..{first['channels'] - 1}}} comm {_comms([e['group'] for e in entries], npus in (None, first['ranks']))} "
        f"[nranks={first['ranks']}] x{calls} call{'s' if calls != 1 else ''}; NCCL predicts {predicted} µs"
    )


def tuning_lines(result: RunResult, limit: int = 20) -> list[str]:
    """The terminal summary: one :func:`tuning_line` per (collective, communicator
    size, size class, choice), communicators of the same shape together, at
    most ``limit`` lines, then one line counting the rest. Empty when NCCL ran
    nothing."""
    classes: dict[tuple, list[dict[str, Any]]] = {}
    for entry in nccl_choices(result):
        key = (
            entry["type"],
            entry["ranks"],
            size_class(nccl_bytes(entry)),
            entry["algorithm"],
            entry["protocol"],
            entry["channels"],
        )
        classes.setdefault(key, []).append(entry)
    npus = len(result.ranks)
    lines = [tuning_line(entries, npus) for entries in list(classes.values())[:limit]]
    if len(classes) > limit:
        lines.append(f"... {len(classes) - limit} more NCCL choices: see --json (nccl) or --csv")
    return lines
