"""Standalone network experiments: synthetic traffic on a mesh or torus of routers.

One load point (:func:`run_noc`) follows the usual open-loop method (Dally &
Towles, ch. 23): every node injects packets by a Bernoulli process at the
offered rate (flits/node/cycle) into an unbounded source queue; after
``warmup`` cycles, packets created during the next ``cycles`` cycles are
measured; the simulation goes on (still injecting) until every measured
packet has arrived, or gives up after ``drain_factor x (warmup + cycles)``
more cycles. A point is *saturated* when measured packets were left over or
the network accepted less than 90 % of the offered load.

* packet latency: creation to tail ejection, source queueing included
  (Garnet's ``average_packet_latency``), in cycles; network latency: from
  entering an injection VC;
* accepted throughput: flits ejected during the measurement window, per node
  per cycle (all packets, measured or not).

Links carry one flit per cycle (width = flit size) and take
``link_latency_cycles`` in all (Garnet's ``link_latency``: serialization of
the one flit plus ``link_latency - 1`` cycles of propagation), so zero-load
latency is ``(hops + 1) x router_pipeline + hops x link_latency + flits``
cycles (every router on the path, every link, and the packet's flits one
cycle apart into the NI) plus source queueing. Defaults are Garnet 2.0's: 1-cycle routers and links, 4 VCs of 4
flits, atomic VC allocation; packets of 4 flits of 16 bytes.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from astra.plugin import BYTES_PER_NS_PER_GBPS, ConfigError, atomic_output, mesh, torus
from astra_garnetlike.config import GarnetConfig, load_config, read_config_file
from astra_garnetlike.traffic import Injector, check_injection_rate, make_pattern

TOPOLOGIES = ("mesh", "torus")

#: Garnet 2.0 defaults for on-chip studies (router_latency 1, link_latency 1,
#: vcs_per_vnet 4, buffers_per_data_vc 4) with 16-byte flits. A NoC that is not
#: deadlocked moves some flit every few cycles, so 1000 still-cycles mean deadlock
#: (Garnet waits 50000, longer than most runs here).
NOC_CONFIG = {
    "flit_bytes": 16,
    "vcs_per_vnet": 4,
    "buffer_depth_flits": 4,
    "router_pipeline_cycles": 1,
    "credit_delay_cycles": 1,
    "atomic_vc_allocation": True,
    "virtual_networks": 1,
    "clock_ghz": 1.0,
    "deadlock_threshold_cycles": 1000,
    "ni_ports": "single",
}
DEFAULT_PACKET_FLITS = 4
#: A load point is saturated when the network accepts less than this share of the
#: offered load, or its measured packets have not all arrived by the end of the drain.
SATURATED = 0.9


@dataclass
class NocResult:
    """One load point. Rates in flits/node/cycle, latencies in cycles."""

    topology: str
    dims: tuple[int, ...]
    pattern: str
    injection_rate: float
    offered: float
    accepted: float
    avg_packet_latency: float
    avg_network_latency: float
    packets_measured: int
    packets_arrived: int
    saturated: bool
    cycles: int
    warmup: int
    flit_hops: int
    wall_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def noc_config(config: Any = None, packet_flits: int = DEFAULT_PACKET_FLITS, **overrides) -> GarnetConfig:
    """The NoC defaults, then the keys ``config`` sets (a TOML/YAML file, a mapping or a
    whole GarnetConfig), then ``overrides`` (None values ignored); ``packet_bytes`` is
    ``packet_flits`` flits. Raises ConfigError naming the file and key."""
    if not isinstance(packet_flits, int) or isinstance(packet_flits, bool) or packet_flits < 1:
        raise ConfigError(f"--packet-flits must be an integer >= 1, got {packet_flits!r}")
    keys = dict(NOC_CONFIG)
    source = "noc"
    if isinstance(config, GarnetConfig):
        keys, source = config.as_dict(), config.source
    elif isinstance(config, (str, os.PathLike)):
        keys.update(read_config_file(config))
        source = os.fspath(config)
    elif config is not None:
        keys.update(config)
    keys.update({k: v for k, v in overrides.items() if v is not None})
    flit_bytes = keys.get("flit_bytes")
    if isinstance(flit_bytes, int) and not isinstance(flit_bytes, bool) and flit_bytes >= 1:
        keys["packet_bytes"] = packet_flits * flit_bytes
    return load_config(keys, source=source)


def build_network(topology: str, dims: Sequence[int], config: GarnetConfig, link_latency_cycles: int = 1):
    """A GarnetNetwork of ``topology`` (mesh or torus) ``dims`` with one-flit-per-cycle links."""
    from astra_garnetlike.network import GarnetNetwork

    if topology not in TOPOLOGIES:
        raise ConfigError(f"--topology: expected one of {', '.join(TOPOLOGIES)}, got {topology!r}")
    if not isinstance(link_latency_cycles, int) or link_latency_cycles < 1:
        raise ConfigError(f"--link-latency must be an integer >= 1 cycle, got {link_latency_cycles!r}")
    gbps = config.flit_bytes * config.clock_ghz / BYTES_PER_NS_PER_GBPS
    latency_ns = (link_latency_cycles - 1) * config.cycle_ps / 1000
    build = mesh if topology == "mesh" else torus
    physical = build(list(dims), bandwidth_gbps=gbps, latency_ns=latency_ns)
    if physical.npus_count < 2:
        raise ConfigError(f"--dims: a network needs at least 2 nodes, got {'x'.join(map(str, dims))}")
    return GarnetNetwork(physical, config, ordered=False)


def run_noc(
    topology: str = "mesh",
    dims: Sequence[int] = (8, 8),
    pattern: str = "uniform_random",
    injection_rate: float = 0.1,
    cycles: int = 10000,
    warmup: int | None = None,
    packet_flits: int = DEFAULT_PACKET_FLITS,
    config: Any = None,
    link_latency_cycles: int = 1,
    seed: int = 1,
    drain_factor: float = 4.0,
    **overrides,
) -> NocResult:
    """Simulate one load point; see the module docstring. ``overrides`` are config keys.

    Raises ConfigError for bad parameters and SimulationDeadlock (with the
    routers and VCs involved) when flits stop moving.
    """
    started = time.perf_counter()
    check_injection_rate(injection_rate)
    if not isinstance(cycles, int) or cycles < 1:
        raise ConfigError(f"--cycles must be an integer >= 1, got {cycles!r}")
    warmup = cycles // 10 if warmup is None else warmup
    if not isinstance(warmup, int) or warmup < 0:
        raise ConfigError(f"--warmup must be an integer >= 0, got {warmup!r}")
    cfg = noc_config(config, packet_flits, **overrides)
    net = build_network(topology, dims, cfg, link_latency_cycles)
    nodes = net.physical.npus_count
    _check_work(cfg, topology, dims, nodes, injection_rate, warmup + cycles)
    cycle = net.cycle_ps
    clock = net.clock
    window = (warmup * cycle, (warmup + cycles) * cycle)
    state = {"created": 0, "arrived": 0, "latency": 0, "network": 0}

    def on_packet(pkt) -> None:
        sent = pkt.msg.sent_ps
        if window[0] <= sent < window[1]:
            state["arrived"] += 1
            state["latency"] += clock.now_ps - sent
            state["network"] += clock.now_ps - pkt.created_ps

    net.packet_hook = on_packet
    packet_bytes = cfg.packet_bytes

    def send(src: int, dst: int) -> None:
        if window[0] <= clock.now_ps < window[1]:
            state["created"] += 1
        net.send(src, dst, packet_bytes, _ignore)

    injector = Injector(
        nodes, make_pattern(pattern, dims), injection_rate, packet_flits, cycle, clock, send, seed
    )
    net.watchdog.arm()
    clock.run_until(window[0])
    ejected_before = net.ejected_flits()
    clock.run_until(window[1])
    ejected = net.ejected_flits() - ejected_before
    limit = window[1] + int(drain_factor * (warmup + cycles)) * cycle
    step = max(cycles // 10, 100) * cycle
    while state["arrived"] < state["created"] and clock.now_ps < limit:
        clock.run_until(min(limit, clock.now_ps + step))
    injector.stopped = True
    arrived = state["arrived"]
    offered = state["created"] * packet_flits / (nodes * cycles)
    accepted = ejected / (nodes * cycles)
    return NocResult(
        topology=topology,
        dims=tuple(dims),
        pattern=pattern,
        injection_rate=injection_rate,
        offered=offered,
        accepted=accepted,
        avg_packet_latency=state["latency"] / arrived / cycle if arrived else math.inf,
        avg_network_latency=state["network"] / arrived / cycle if arrived else math.inf,
        packets_measured=state["created"],
        packets_arrived=arrived,
        saturated=arrived < state["created"] or accepted < SATURATED * offered,
        cycles=cycles,
        warmup=warmup,
        flit_hops=net.flit_hops(),
        wall_s=time.perf_counter() - started,
    )


def _ignore(_arg) -> None:
    pass


def average_hops(topology: str, dims: Sequence[int]) -> float:
    """Mean links between two uniformly random nodes: per dimension of k routers
    (k^2 - 1) / 3k on a line (mesh), about k / 4 on a ring (torus)."""
    if topology == "torus":
        return sum(k / 4 for k in dims)
    return sum((k * k - 1) / (3 * k) for k in dims)


def _check_work(
    cfg: GarnetConfig, topology: str, dims: Sequence[int], nodes: int, rate: float, injected_cycles: int
) -> None:
    """Refuse a load point whose injected traffic alone would pass ``max_flit_hops``
    (before simulating it): nodes x min(rate, 1) x cycles x average hops."""
    from astra.plugin import WorkBudget
    from astra_garnetlike.config import FLIT_HOPS_PER_S

    projected = int(nodes * min(rate, 1.0) * injected_cycles * average_hops(topology, dims))
    shape = "x".join(map(str, dims))
    where = "a --config file" if cfg.source == "noc" else cfg.source
    WorkBudget("garnetlike", "flit-hops", FLIT_HOPS_PER_S, cfg.max_flit_hops, "max_flit_hops", where).add(
        projected,
        lambda: (
            f"noc {topology} {shape} at {rate:g} flits/node/cycle for {injected_cycles} "
            f"cycles (warm-up included)"
        ),
    )


def _run_point(kwargs: dict) -> NocResult:
    return run_noc(**kwargs)


def sweep(
    rates: Sequence[float], jobs: int = 1, stop_after_saturation: bool = True, **kwargs
) -> list[NocResult]:
    """Load points at each offered rate (ascending); with ``jobs > 1`` in worker processes.

    Sequentially, the sweep stops after the first saturated point when
    ``stop_after_saturation``.
    """
    rates = sorted(rates)
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(_run_point, [{**kwargs, "injection_rate": r} for r in rates]))
    results = []
    for rate in rates:
        result = run_noc(injection_rate=rate, **kwargs)
        results.append(result)
        if stop_after_saturation and result.saturated:
            break
    return results


def plot_sweep(results: Sequence[NocResult], path: str) -> None:
    """Latency-load curve and accepted throughput to a PNG at ``path`` (through
    :func:`astra_core.outputs.atomic_output`; ConfigError naming it if it cannot be written)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = results[0]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ok = [r for r in results if not r.saturated]
    ax1.plot([r.offered for r in ok], [r.avg_packet_latency for r in ok], "o-")
    sat = [r for r in results if r.saturated and math.isfinite(r.avg_packet_latency)]
    if sat:
        ax1.plot(
            [r.offered for r in sat],
            [r.avg_packet_latency for r in sat],
            "x",
            color="tab:red",
            label="saturated",
        )
        ax1.legend()
    ax1.set_xlabel("offered load (flits/node/cycle)")
    ax1.set_ylabel("average packet latency (cycles)")
    ax1.set_yscale("log")
    ax1.grid(True, alpha=0.3)
    ax2.plot([r.offered for r in results], [r.accepted for r in results], "o-")
    top = max(r.offered for r in results)
    ax2.plot([0, top], [0, top], ":", color="gray")
    ax2.set_xlabel("offered load (flits/node/cycle)")
    ax2.set_ylabel("accepted throughput (flits/node/cycle)")
    ax2.grid(True, alpha=0.3)
    fig.suptitle(f"{first.topology} {'x'.join(map(str, first.dims))}, {first.pattern}")
    fig.tight_layout()
    try:  # through astra_core.outputs: atomic for a file, written through a FIFO, "-" is stdout
        with atomic_output(path, "--plot") as temporary:
            fig.savefig(temporary, dpi=110, format="png")
    finally:
        plt.close(fig)
