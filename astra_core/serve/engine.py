"""A serving run: requests routed to replicas, each stepping its scheduler in simulated time.

Requests arrive at their times and a router gives each to a replica (to one of its
engines, under data-parallel attention):
``round-robin`` (in arrival order) or ``least-loaded`` (the replica with the fewest
requests waiting, running or on their way to it; ties to the lowest index). A replica that is idle starts a
step at once; a busy one takes the request into its waiting queue at its next step. A
replica steps back to back while it has work: each step's work is what its scheduler
(:class:`~astra_core.serve.scheduler.Replica`) chooses at the step's start, and its
duration what :class:`~astra_core.serve.step_time.StepClock` gives that work. A request
that arrives at the very time a step ends is seen by the next step.

**Disaggregated prefill and decode** (a prefill pool and a decode pool, as vLLM runs
them with a KV connector): a request's prompt runs on a prefill replica (a request of
one output token, which the prefill side discards), then every prefill GPU sends its
share of the request's KV cache (the prompt's tokens times its KV bytes per token) to
the decode replica the router picks, over the network backend, as messages between the
GPUs' NPU ids (prefill replicas first, then decode replicas, ``tp`` NPUs each). When the
last share arrives the decode replica queues the request with all but its last prompt
token cached (vLLM's remote prefill computes the last one again to sample), and it
produces every output token. Transfers between the pools share the network with each
other on backends that model sharing (``flow``, ``ns3``); the replicas' own
tensor-parallel collectives are timed apart on their NVLink domain (the network's
first dimension).

:func:`serve_requests` returns a :class:`~astra_core.serve.results.ServingResult`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field, replace
from typing import Any

from astra_core.errors import ConfigError, SimulationDeadlock
from astra_core.serve.collectives import CollectiveClock
from astra_core.serve.deployment import Deployment, kv_blocks, kv_bytes_per_token
from astra_core.serve.requests import Request
from astra_core.serve.results import RequestRecord, ServingResult
from astra_core.serve.scheduler import Replica, Sequence
from astra_core.serve.step_time import StepClock

__all__ = ["ROUTERS", "Pool", "serve_requests"]

ROUTERS = ("round-robin", "least-loaded")


@dataclass
class Pool:
    """Replicas of one role (``serve``, ``prefill`` or ``decode``) of ``deployment``:
    their engines' schedulers (``dp`` per replica, replica by replica), whether each
    replica is stepping, the step clock, KV blocks per engine and the NPU id of the
    pool's first GPU (engine ``e``'s GPUs follow it, ``tp`` each)."""

    role: str
    deployment: Deployment
    clock: StepClock
    blocks: int
    first_npu: int
    engines: list[Replica] = field(default_factory=list)
    busy: list[bool] = field(default_factory=list)
    inbound: list[int] = field(default_factory=list)  # requests routed here whose KV cache is on its way
    routed: int = 0

    def npu(self, engine: int, gpu: int) -> int:
        return self.first_npu + engine * self.deployment.tp + gpu


def _check(d: Deployment, requests: Seq[Request], blocks: int, role: str) -> None:
    where = "deployment" if role == "serve" else role
    if d.dp > 1 and not (d.model.experts and d.expert_parallel and d.tp == 1):
        raise ConfigError(
            f"{where}: dp {d.dp}: data-parallel attention is modelled for a mixture of experts with "
            "expert parallelism at TP 1 (a dense model's data-parallel engines are replicas)"
        )
    if d.max_num_batched_tokens < d.max_num_seqs:
        raise ConfigError(
            f"{where}: max_num_batched_tokens ({d.max_num_batched_tokens}) must be at least "
            f"max_num_seqs ({d.max_num_seqs}), as vLLM requires"
        )
    biggest = max(requests, key=lambda r: r.prompt_tokens + r.output_tokens)
    need = -(-(biggest.prompt_tokens + biggest.output_tokens) // d.block_size)
    if need > blocks:
        raise ConfigError(
            f"requests: request {biggest.id} needs {need:,} KV blocks of {d.block_size} tokens "
            f"({biggest.prompt_tokens:,} prompt + {biggest.output_tokens:,} output tokens); "
            f"{'a' if role == 'serve' else f'a {role}'} replica holds {blocks:,}"
        )


def tp_network(network: Any, gpus: int) -> dict[str, list[Any]]:
    """The network.yml (as a dict) of one replica's (or data-parallel group's) ``gpus``
    GPUs: ``network`` itself when it has that many NPUs, else that many of its first
    dimension (the NVLink domain) when it holds them, else its first dimensions whose
    NPUs multiply to ``gpus``. Raises ConfigError."""
    net = _network(network)
    if net.npus_count == gpus:
        return net.to_dict()
    dims = net.dims
    if dims[0].npus >= gpus and dims[0].npus % gpus == 0:
        dims, counts = dims[:1], [gpus]
    else:
        size, count = 1, 0
        while count < len(dims) and size < gpus:
            size, count = size * dims[count].npus, count + 1
        if size != gpus:
            raise ConfigError(
                f"{net.source}: {gpus} GPUs are neither within the first dimension ({dims[0].npus} NPUs) "
                "nor the NPUs of its first dimensions"
            )
        dims = dims[:count]
        counts = [d.npus for d in dims]
    return {
        "topology": [str(d.kind) for d in dims],
        "npus_count": counts,
        "bandwidth": [d.bandwidth_gbps for d in dims],
        "latency": [d.latency_ns for d in dims],
    }


def _network(network: Any) -> Any:
    """A NetworkConfig from a path, a NetworkConfig or a dict shaped like network.yml."""
    from astra_core.config.network import NetworkConfig, load_network

    if isinstance(network, NetworkConfig):
        return network
    if isinstance(network, Mapping):
        return NetworkConfig.from_dict(dict(network), source="network")
    return load_network(network)


def _pool(role: str, d: Deployment, requests: Seq[Request], first_npu: int, timing: dict[str, Any]) -> Pool:
    blocks = kv_blocks(d)
    _check(d, requests, blocks, role)
    collectives = _collectives(role, d, d.tp, timing, f"TP {d.tp}") if d.tp > 1 else None
    dp_collectives = _collectives(role, d, d.dp * d.tp, timing, f"dp {d.dp}") if d.dp > 1 else None
    pool = Pool(role, d, StepClock(d, collectives, dp_collectives), blocks, first_npu)
    pool.busy = [False] * d.replicas
    for _ in range(d.engines):
        pool.engines.append(
            Replica(
                blocks,
                d.block_size,
                d.max_num_batched_tokens,
                d.max_num_seqs,
                d.chunked_prefill,
                d.prefix_caching,
                d.no_evict,
            )
        )
        pool.inbound.append(0)
    return pool


def _collectives(role: str, d: Deployment, gpus: int, timing: dict[str, Any], what: str) -> CollectiveClock:
    """The clock of collectives over ``gpus`` GPUs (a replica's, or a data-parallel
    group's) on the network's first dimensions."""
    from astra_core.config.system import nccl_system

    if timing["network"] is None:
        raise ConfigError(
            f"{role}: {what} needs a network (network.yml whose first dimensions hold {gpus} NPUs)"
        )
    system = timing["system"] or nccl_system(d.gpu.name)
    return CollectiveClock(gpus, tp_network(timing["network"], gpus), system, timing["backend"])


class _Run:
    """One serving run on an event clock (``now()``, ``schedule(delay, fn, arg)``) and,
    for disaggregation, a network backend that moves the KV caches (``send``)."""

    def __init__(
        self, pools: list[Pool], requests: Seq[Request], router: str, clock: Any, network: Any = None,
        concurrency: int | None = None,
    ):  # fmt: skip
        self.pools, self.router, self.clock, self.network = pools, router, clock, network
        self.concurrency = concurrency or len(requests)
        self.in_flight = 0
        self.held: deque[RequestRecord] = deque()
        self.starting: list[tuple[Pool, int]] | None = None  # idle replicas to start once arrivals are in
        self.records = [RequestRecord(r) for r in requests]
        self.itl: list[tuple[int, int, int]] = []  # (step end ns, gap ns, tokens)
        self.steps: list[tuple[int, str, int, int, int, int]] = []
        self.next_arrival = 0
        self.shares_left: dict[int, int] = {}

    def start(self) -> None:
        if self.records:
            self.clock.schedule(self.records[0].request.arrival_ns, self._arrive, None)

    def _arrive(self, _: Any) -> None:
        """Every request that arrives now (an idle replica starts its step after all of
        them are queued, as an engine takes every request waiting at its step's start)."""
        now = self.records[self.next_arrival].request.arrival_ns
        self.starting = []
        while (
            self.next_arrival < len(self.records)
            and self.records[self.next_arrival].request.arrival_ns == now
        ):
            record = self.records[self.next_arrival]
            self.next_arrival += 1
            if self.in_flight >= self.concurrency:
                self.held.append(record)
            else:
                self._send(record)
        if self.next_arrival < len(self.records):
            later = self.records[self.next_arrival].request.arrival_ns
            self.clock.schedule(later - self.clock.now(), self._arrive, None)
        starting, self.starting = self.starting, None
        for pool, group in starting:
            if not pool.busy[group]:
                self._step(pool, group)

    def _send(self, record: RequestRecord) -> None:
        """The client sends ``record``'s request now: its latencies count from here."""
        self.in_flight += 1
        now = int(self.clock.now())
        if record.request.arrival_ns != now:
            record.request = replace(record.request, arrival_ns=now)
        pool = self.pools[0]
        request = record.request
        if pool.role == "prefill":
            request = replace(request, output_tokens=1)
        seq = record.first = Sequence(request)
        self._enqueue(pool, seq)

    def _finished(self, count: int) -> None:
        """``count`` requests finished: the client sends as many held ones."""
        self.in_flight -= count
        while self.held and self.in_flight < self.concurrency:
            self._send(self.held.popleft())

    def _enqueue(self, pool: Pool, seq: Sequence) -> None:
        index = seq.replica = _route(self.router, pool)
        pool.engines[index].waiting.append(seq)
        self._wake(pool, index // pool.deployment.dp)

    def _wake(self, pool: Pool, group: int) -> None:
        """Start replica ``group``'s step unless it is stepping (or arrivals are still
        coming in at this instant: it starts after them)."""
        if pool.busy[group]:
            return
        if self.starting is not None:
            self.starting.append((pool, group))
        else:
            self._step(pool, group)

    def _step(self, pool: Pool, group: int) -> None:
        """Start the step of replica ``group``: its engines (``dp`` of them) step together."""
        dp, now = pool.deployment.dp, int(self.clock.now())
        engines = pool.engines[group * dp : (group + 1) * dp]
        works = [engine.schedule(now) for engine in engines]
        tokens = sum(w.tokens for w in works)
        if tokens == 0:
            if any(engine.busy for engine in engines):
                raise SimulationDeadlock(
                    f"{pool.role} replica {group}: requests wait but none can be scheduled", {}
                )
            pool.busy[group] = False
            return
        ns = max(1, round(pool.clock.group_step_ns(works)))
        pool.busy[group] = True
        self.clock.schedule(ns, self._step_end, (pool, group, ns))
        used = max(e.total_blocks - e.free for e in engines)
        self.steps.append((now + ns, pool.role, group, ns, tokens, used))

    def _step_end(self, arg: tuple[Pool, int, int]) -> None:
        pool, group, ns = arg
        dp = pool.deployment.dp
        for replica in pool.engines[group * dp : (group + 1) * dp]:
            done = len(replica.finished)
            for gap, count in replica.complete(int(self.clock.now()), ns):
                if pool.role != "prefill":
                    self.itl.append((int(self.clock.now()), gap, count))
            if pool.role == "prefill":
                for seq in replica.finished[done:]:
                    self._send_kv(pool, seq)
            elif len(replica.finished) > done:
                self._finished(len(replica.finished) - done)
        self._step(pool, group)

    def _send_kv(self, prefill: Pool, seq: Sequence) -> None:
        """Every prefill GPU sends its share of ``seq``'s KV cache to the decode replica."""
        decode = self.pools[1]
        record = self.records[seq.request.id]
        target = record.decode_replica = _route(self.router, decode)
        decode.inbound[target] += 1
        share = max(1, round(seq.request.prompt_tokens * kv_bytes_per_token(prefill.deployment)))
        tp_p, tp_d = prefill.deployment.tp, decode.deployment.tp
        self.shares_left[seq.request.id] = tp_p
        for gpu in range(tp_p):
            src, dst = prefill.npu(seq.replica, gpu), decode.npu(target, gpu % tp_d)
            self.network.send(src, dst, share, self._kv_arrived, seq.request.id)

    def _kv_arrived(self, request_id: int) -> None:
        self.shares_left[request_id] -= 1
        if self.shares_left[request_id]:
            return
        del self.shares_left[request_id]
        record = self.records[request_id]
        record.kv_arrived_ns = int(self.clock.now())
        seq = record.second = Sequence(record.request, cached=record.request.prompt_tokens - 1)
        decode = self.pools[1]
        seq.replica = record.decode_replica
        decode.inbound[seq.replica] -= 1
        decode.engines[seq.replica].waiting.append(seq)
        self._wake(decode, seq.replica // decode.deployment.dp)


def serve_requests(
    deployment: Deployment,
    requests: Seq[Request],
    *,
    decode: Deployment | None = None,
    network: Any = None,
    topology: Any = None,
    system: Any = None,
    backend: str | None = None,
    backend_config: Any = None,
    router: str = "round-robin",
    concurrency: int | None = None,
) -> ServingResult:
    """Serve ``requests`` (sorted by arrival, ids 0.. in that order) on ``deployment``'s
    replicas, or, with ``decode``, their prompts on ``deployment``'s (the prefill pool)
    and their outputs on ``decode``'s (see the module docstring).

    ``network`` (network.yml path or dict) and ``system`` (system.json path or dict;
    default: NCCL's model of the GPU) time the tensor-parallel collectives on
    ``backend`` (a replica's GPUs on the network's first dimension); with ``decode`` the
    network (and ``topology``, a physical topology, for backends that model links) also
    carries the KV transfers: it must hold both pools' GPUs. Raises ConfigError (one
    line) for a request no replica's KV cache can hold, a deployment that does not fit,
    a network too small, or a bad router. ``concurrency``: at most this many requests in
    flight (a client's limit, as ``benchmark_serving.py --max-concurrency``): a request
    that arrives with as many in flight is sent when one finishes, and its latencies
    count from then (None: no limit)."""
    from astra_core.events import EventQueue

    if router not in ROUTERS:
        raise ConfigError(f"router: unknown router {router!r}; known: {', '.join(ROUTERS)}")
    if not requests:
        raise ConfigError("requests: no requests")
    timing = {"network": network, "system": system, "backend": backend}
    if decode is None:
        pools = [_pool("serve", deployment, requests, 0, timing)]
        run = _Run(pools, requests, router, _Clock(EventQueue()), concurrency=concurrency)
    else:
        prefill = _pool("prefill", deployment, [replace(r, output_tokens=1) for r in requests], 0, timing)
        pools = [prefill, _pool("decode", decode, requests, deployment.gpus, timing)]
        net = _kv_network(network, topology, backend, backend_config, deployment.gpus + decode.gpus)
        run = _Run(pools, requests, router, net, net, concurrency)
    run.start()
    run.clock.run()
    return ServingResult.of(pools, run.records, run.itl, run.steps)


def _kv_network(network: Any, topology: Any, backend: str | None, config: Any, gpus: int) -> Any:
    """The backend that carries KV transfers, built on the network (and topology)."""
    from astra_core.api import resolve_network
    from astra_core.backend import Topology
    from astra_core.plugins import BackendRegistry, load_settings, make_plugin_manager

    net, physical = resolve_network(_network(network), topology, None)
    if net.npus_count < gpus:
        raise ConfigError(
            f"network: {net.npus_count} NPUs, but the prefill and decode pools have {gpus} GPUs"
        )
    settings = load_settings()
    info = BackendRegistry(make_plugin_manager(settings=settings), settings.default_backend).get(backend)
    return info.build(Topology(net, physical), config)


class _Clock:
    """An event queue with a backend's face (``now()``) for runs without a network."""

    def __init__(self, events: Any):
        self.events = events

    def now(self) -> float:
        return self.events.now

    def schedule(self, delay_ns: float, callback: Any, arg: Any = None) -> None:
        self.events.schedule(delay_ns, callback, arg)

    def run(self) -> None:
        self.events.run()


def _route(router: str, pool: Pool) -> int:
    """The engine of ``pool`` that takes the next request (module docstring)."""
    engines = pool.engines
    if router == "round-robin":
        pool.routed += 1
        return (pool.routed - 1) % len(engines)
    return min(
        range(len(engines)),
        key=lambda i: (len(engines[i].waiting) + engines[i].running + pool.inbound[i], i),
    )
