"""A serving run: requests routed to replicas, each stepping its scheduler in simulated time.

Requests arrive at their times and a router gives each to a replica:
``round-robin`` (in arrival order) or ``least-loaded`` (the replica with the fewest
requests waiting or running; ties to the lowest index). A replica that is idle starts a
step at once; a busy one takes the request into its waiting queue at its next step. A
replica steps back to back while it has work: each step's work is what its scheduler
(:class:`~astra_core.serve.scheduler.Replica`) chooses at the step's start, and its
duration what :class:`~astra_core.serve.step_time.StepClock` gives that work. A request
that arrives at the very time a step ends is seen by the next step.

:func:`serve_requests` returns a :class:`~astra_core.serve.results.ServingResult`.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Sequence as Seq
from typing import Any

from astra_core.errors import ConfigError, SimulationDeadlock
from astra_core.serve.collectives import CollectiveClock
from astra_core.serve.deployment import Deployment, kv_blocks
from astra_core.serve.requests import Request
from astra_core.serve.results import ServingResult
from astra_core.serve.scheduler import Replica, Sequence
from astra_core.serve.step_time import StepClock

__all__ = ["ROUTERS", "serve_requests"]

ROUTERS = ("round-robin", "least-loaded")


def _check(deployment: Deployment, requests: Seq[Request], blocks: int, router: str) -> None:
    if router not in ROUTERS:
        raise ConfigError(f"router: unknown router {router!r}; known: {', '.join(ROUTERS)}")
    if deployment.max_num_batched_tokens < deployment.max_num_seqs:
        raise ConfigError(
            f"deployment: max_num_batched_tokens ({deployment.max_num_batched_tokens}) must be at least "
            f"max_num_seqs ({deployment.max_num_seqs}), as vLLM requires"
        )
    if not requests:
        raise ConfigError("requests: no requests")
    biggest = max(requests, key=lambda r: r.prompt_tokens + r.output_tokens)
    need = -(-(biggest.prompt_tokens + biggest.output_tokens) // deployment.block_size)
    if need > blocks:
        raise ConfigError(
            f"requests: request {biggest.id} needs {need:,} KV blocks of {deployment.block_size} tokens "
            f"({biggest.prompt_tokens:,} prompt + {biggest.output_tokens:,} output tokens); a replica "
            f"holds {blocks:,}"
        )


def serve_requests(
    deployment: Deployment,
    requests: Seq[Request],
    *,
    network: Any = None,
    system: Any = None,
    backend: str | None = None,
    router: str = "round-robin",
) -> ServingResult:
    """Serve ``requests`` (sorted by arrival) on ``deployment`` (see the module docstring).

    ``network`` (network.yml path or dict, ``tp`` NPUs) and ``system`` (system.json path
    or dict; default: NCCL's model of the deployment's GPU) time the tensor-parallel
    collectives on ``backend``; not needed at TP 1. Raises ConfigError (one line) for a
    request no replica's KV cache can hold, a deployment that does not fit, or a bad
    router."""
    from astra_core.config.system import nccl_system

    d = deployment
    blocks = kv_blocks(d)
    _check(d, requests, blocks, router)
    collectives = None
    if d.tp > 1:
        if network is None:
            raise ConfigError(f"deployment: TP {d.tp} needs a network (network.yml of {d.tp} NPUs)")
        collectives = CollectiveClock(d.tp, network, system or nccl_system(d.gpu.name), backend)
    clock = StepClock(d, collectives)
    replicas = [
        Replica(blocks, d.block_size, d.max_num_batched_tokens, d.max_num_seqs, d.chunked_prefill)
        for _ in range(d.replicas)
    ]
    itl: Counter = Counter()
    steps: list[tuple[int, int, int, int, int]] = []  # (end ns, replica, ns, tokens, KV blocks used)
    sequences = [Sequence(r) for r in requests]
    ends: list[tuple[int, int, int]] = []  # (end ns, replica, duration ns)
    busy = [False] * len(replicas)

    def start(index: int, now: int) -> None:
        replica = replicas[index]
        work = replica.schedule(now)
        if work.tokens == 0:
            if replica.busy:
                raise SimulationDeadlock(f"replica {index}: requests wait but none can be scheduled", {})
            busy[index] = False
            return
        ns = max(1, round(clock.step_ns(work)))
        busy[index] = True
        heapq.heappush(ends, (now + ns, index, ns))
        steps.append((now + ns, index, ns, work.tokens, replica.total_blocks - replica.free))

    arrival = 0
    while arrival < len(sequences) or ends:
        if arrival < len(sequences) and (not ends or sequences[arrival].request.arrival_ns <= ends[0][0]):
            seq = sequences[arrival]
            arrival += 1
            index = seq.replica = _route(router, replicas, seq.request.id)
            replicas[index].waiting.append(seq)
            if not busy[index]:
                start(index, seq.request.arrival_ns)
            continue
        now, index, ns = heapq.heappop(ends)
        for gap, count in replicas[index].complete(now, ns):
            itl[gap] += count
        start(index, now)
    return ServingResult.of(d, sequences, itl, steps, blocks, clock)


def _route(router: str, replicas: list[Replica], order: int) -> int:
    if router == "round-robin":
        return order % len(replicas)
    return min(range(len(replicas)), key=lambda i: (len(replicas[i].waiting) + replicas[i].running, i))
