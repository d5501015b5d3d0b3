"""Chrome / Perfetto trace of a run: one process per rank, one slice per ET node.

Open the file in https://ui.perfetto.dev or chrome://tracing. Each rank is a
process named ``rank N`` with threads per hardware lane (CPU, GPU compute,
GPU comm, receive, memory); nodes that run at once on one lane (receives take
no hardware slot) get extra threads of that lane (``receive 2``, ...), so
slices on a thread never overlap. Two more threads per rank come from the
breakdown (:func:`~astra_core.report.breakdown.rank_activity`): ``in flight``,
one slice per interval in which this rank's messages were on the network
(or a remote-memory access ran), and ``waiting``, one slice per interval in
which a communication node was open with nothing of this rank in flight;
both with gaps shorter than :data:`RESOLUTION` of the step time closed (a
pipeline of chunk messages alternates every few µs; the exact totals are in
``--json``).
Times in the file are microseconds (the format's unit), from simulated ns.
"""

from __future__ import annotations

import json
import os

from astra_core import interval_sets as sets
from astra_core.outputs import atomic_output
from astra_core.report.breakdown import activities
from astra_core.results import RunResult

#: The in-flight and waiting threads close gaps shorter than step time x this.
RESOLUTION = 1e-5
_LANES = {4: "GPU compute", 7: "GPU comm", 5: "GPU comm", 6: "receive", 2: "memory", 3: "memory"}
_NODE_TYPES = {
    0: "INVALID",
    1: "METADATA",
    2: "MEM_LOAD",
    3: "MEM_STORE",
    4: "COMP",
    5: "COMM_SEND",
    6: "COMM_RECV",
    7: "COMM_COLL",
}


def timeline_events(result: RunResult) -> list[dict]:
    """Trace-event dicts (``ph: X`` slices plus process/thread names)."""
    events: list[dict] = []
    gap = result.step_ns * RESOLUTION
    # A symmetric run simulated rank 0 only: every rank runs rank 0's timing on
    # its own nodes (same positions, its own ids and names).
    for trace, activity in activities(result):
        rank, records, nodes = trace.rank, trace.records, trace.nodes
        events.append({"ph": "M", "name": "process_name", "pid": rank, "args": {"name": f"rank {rank}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": rank, "args": {"sort_index": rank}})
        # lane -> [(thread id, end of its last slice)], filled first-fit by start time
        threads: dict[str, list[list[float]]] = {}
        for pos, start, end in sorted(records, key=lambda rec: (rec[1], rec[2])):
            node = nodes[pos]
            lane = "CPU" if node.is_cpu_op else _LANES.get(node.type, "other")
            free = threads.setdefault(lane, [])
            slot = next((t for t in free if t[1] <= start), None)
            if slot is None:
                tid = sum(len(v) for v in threads.values())
                slot = [tid, end]
                free.append(slot)
                name = lane if len(free) == 1 else f"{lane} {len(free)}"
                events.append(
                    {"ph": "M", "name": "thread_name", "pid": rank, "tid": tid, "args": {"name": name}}
                )
            slot[1] = end
            args = {"node_id": node.id, "type": _NODE_TYPES.get(node.type, str(node.type))}
            if node.comm_size:
                args["bytes"] = node.comm_size
            events.append(
                {
                    "ph": "X",
                    "name": node.name or f"node {node.id}",
                    "pid": rank,
                    "tid": slot[0],
                    "ts": start / 1000.0,
                    "dur": (end - start) / 1000.0,
                    "args": args,
                }
            )
        tid = sum(len(v) for v in threads.values())
        for offset, (name, intervals) in enumerate(
            (("in flight", activity.in_flight), ("waiting", activity.waiting))
        ):
            events.append(
                {"ph": "M", "name": "thread_name", "pid": rank, "tid": tid + offset, "args": {"name": name}}
            )
            events.extend(
                {
                    "ph": "X",
                    "name": name,
                    "pid": rank,
                    "tid": tid + offset,
                    "ts": start / 1000.0,
                    "dur": (end - start) / 1000.0,
                }
                for start, end in sets.pairs(sets.coarsen(intervals, gap))
            )
    return events


#: Trace events encoded per write: the C JSON encoder at full speed, memory bounded.
_EVENTS_PER_WRITE = 10_000


def write_timeline(result: RunResult, path: str | os.PathLike) -> None:
    """Write the Chrome trace JSON of ``result`` to ``path``, atomically (parent dirs created).

    The events are encoded a batch at a time with ``json.dumps`` (C): ``json.dump`` on a
    file encodes in Python, some 5x slower on the millions of events of a large run.
    Raises ConfigError naming ``path`` when it cannot be written.
    """
    events = timeline_events(result)
    other = {"backend": result.backend, "step_ns": result.step_ns}
    with atomic_output(path, "timeline") as temporary, open(temporary, "w") as f:
        f.write('{"traceEvents": [')
        for i in range(0, len(events), _EVENTS_PER_WRITE):
            if i:
                f.write(", ")
            f.write(json.dumps(events[i : i + _EVENTS_PER_WRITE])[1:-1])
        f.write(f'], "displayTimeUnit": "ns", "otherData": {json.dumps(other)}}}')
