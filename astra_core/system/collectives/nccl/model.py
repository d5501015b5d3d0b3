"""The NCCL collective model of one run: machine, NCCL's choices, phases.

:class:`NcclModel` reads the machine from network.yml and system.json's
``nccl`` section: GPUs per node (network dimension 0, the NVSwitch domain,
unless ``gpus-per-node`` says otherwise), the NVLink rate of a GPU
(dimension 0's link bandwidth), NICs per node (``nics-per-node``, by default
one per GPU: rail-optimized) and their rate (dimension 1's link bandwidth).
For each communicator it runs NCCL's topology search
(:mod:`.topology`) and cost model (:mod:`.tuning`) once, and for each
collective it builds the rank's :class:`~.phase.NcclPhase`: the algorithm
and protocol NCCL would choose for the size (or ``NCCL_ALGO`` /
``NCCL_PROTO``), the channels it would launch, the message lanes
(:mod:`.schedule`), and NCCL's predicted time.

Sizes: an all-reduce and all-to-all of ``S`` bytes move ``S`` per rank; an
all-gather's ``S`` is one rank's part (NCCL's operation is ``n * S``); a
reduce-scatter's ``S`` is one rank's input (its output ``S / n``).
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import cast

from astra_core.config.gpus import gpu_model
from astra_core.config.issues import ConfigWarning
from astra_core.config.nccl import NcclConfig
from astra_core.config.nccl_profile import find_profile, read_profile
from astra_core.config.network import NetworkConfig, TopologyKind
from astra_core.errors import ConfigError
from astra_core.system.collectives.nccl.bus_bound import line_rate_floor_us
from astra_core.system.collectives.nccl.p2p import net_peer_channels, net_peer_gbps
from astra_core.system.collectives.nccl.phase import FoldedNcclPhase, NcclChoice, NcclPhase
from astra_core.system.collectives.nccl.schedule import Layout, Schedule, schedule_for
from astra_core.system.collectives.nccl.topology import Machine, communicator
from astra_core.system.collectives.nccl.tuning import (
    ALGO_NAMES,
    PROTO_NAMES,
    Algo,
    Func,
    Proto,
    TunerConstants,
    Tuning,
    constants_for,
    generation,
    tune,
    with_profile,
)
from astra_core.system.collectives.uneven import Uneven
from astra_core.system.comm_types import CommType

_FUNCS = {
    CommType.ALL_REDUCE: Func.ALL_REDUCE,
    CommType.ALL_GATHER: Func.ALL_GATHER,
    CommType.REDUCE_SCATTER: Func.REDUCE_SCATTER,
    CommType.BROADCAST: Func.BROADCAST,
    CommType.REDUCE: Func.REDUCE,
}
P2P_LL_THRESHOLD = 16384  # NCCL_P2P_LL_THRESHOLD (enqueue.cc): LL up to this size


def _check_placement(config: NcclConfig, network: NetworkConfig, source: str) -> None:
    """Refuse (ConfigError naming ``source`` and the key) a network the NCCL model
    cannot place: NCCL's topology (``ncclTopoCompute``) knows a node's GPUs,
    their NVLinks / NVSwitches and PCI, and its NICs; the network beyond a NIC is
    one ``NET`` vertex per port, rated at the port's speed (``topo.cc``:
    ``net.bw = speed / 8000``), a flat non-blocking fabric. So the model places
    network dimension 0 (a node: ``gpus-per-node`` GPUs on NVSwitches) and
    dimension 1 (the NIC rails joining nodes) and nothing else: a third
    dimension, or a node that is not dimension 0, has no
    place in NCCL's model (and the ``analytical`` backend, which times a message
    on the first dimension its ends differ in, would not see it either)."""
    dims = network.dims
    if len(dims) > 2:
        sizes = [d.npus for d in dims]
        raise ConfigError(
            f"{source}: nccl: the NCCL model places 2 network dimensions, a node's NVSwitch (0) "
            f"and the NIC rails between nodes (1); network npus_count {sizes} has dimension "
            f"2 beyond them: give the fabric past the NICs as dimension 1, or as a "
            "--topology on a backend that routes links"
        )
    per_node = config.gpus_per_node
    if per_node is not None and len(dims) > 1 and per_node != dims[0].npus:
        raise ConfigError(
            f"{source}: nccl.gpus-per-node: {per_node} contradicts the network: a node is "
            f"network dimension 0, which has {dims[0].npus} NPUs; leave gpus-per-node out "
            f"or make it {dims[0].npus}"
        )


#: The caches of the latest models' inputs: a process that simulates many steps on one
#: cluster (``astra plan``'s workers, sweeps) finds each communicator and collective once.
_SHARED: OrderedDict[str, tuple[dict, dict]] = OrderedDict()
_SHARED_INPUTS = 2


def _shared_caches(inputs: str) -> tuple[dict, dict]:
    """The (communicators, phase data) caches of models of ``inputs`` (their repr: the
    nccl section, the network and the constants), kept for the last few inputs."""
    caches = _SHARED.pop(inputs, None) or ({}, {})
    _SHARED[inputs] = caches
    while len(_SHARED) > _SHARED_INPUTS:
        _SHARED.popitem(last=False)
    return caches


class NcclModel:
    """NCCL for one run (see the module docstring).

    Raises ConfigError (naming ``source``) when the network does not fit the
    model: a node is network dimension 0 and must be a ``Switch`` (NVSwitch)
    unless a node has one GPU; several nodes need a dimension 1 (the rails);
    nothing may lie beyond dimension 1, and ``gpus-per-node`` must be dimension
    0's size (:func:`_check_placement`). Warns (:class:`ConfigWarning`) when
    dimension 0 is faster than the named GPU's NVLinks (its datasheet rate,
    :mod:`.hardware`). NCCL chooses with the constants of the release
    ``version`` names (:func:`~.tuning.constants_for`). ``constants``, if
    given, replace NCCL's constants and the ``profile`` as what a collective
    costs (the calibration's fit uses it).
    """

    def __init__(
        self,
        config: NcclConfig,
        network: NetworkConfig,
        source: str = "system.json",
        constants: TunerConstants | None = None,
    ):
        self.config = config
        self.network = network
        self.source = source
        self.gpu = gpu_model(config.gpu, source)
        dims = network.dims
        _check_placement(config, network, source)
        self.gpus_per_node = config.gpus_per_node or dims[0].npus
        total = self.npus = network.npus_count
        if total % self.gpus_per_node:
            raise ConfigError(
                f"{source}: nccl.gpus-per-node: {self.gpus_per_node} does not divide "
                f"the network's {total} NPUs"
            )
        if self.gpus_per_node > 1 and dims[0].kind is not TopologyKind.SWITCH:
            raise ConfigError(
                f"{source}: the NCCL model needs network dimension 0 to be a Switch "
                f"(the NVSwitches of a node), got {dims[0].kind.value}"
            )
        # network.yml bandwidths are bytes/ns = GB/s with 1 GB = 1e9 B (NCCL's unit)
        self.nvlink_line_gbps = dims[0].bandwidth_bytes_per_ns if self.gpus_per_node > 1 else 0.0
        rail = dims[1] if len(dims) > 1 else (dims[0] if self.gpus_per_node == 1 else None)
        if rail is None and total > self.gpus_per_node:
            raise ConfigError(
                f"{source}: the NCCL model needs a network dimension 1 for the NICs "
                f"between nodes ({total} NPUs, {self.gpus_per_node} per node)"
            )
        self.nic_line_gbps = rail.bandwidth_bytes_per_ns if rail is not None else 0.0
        if self.gpus_per_node > 1 and self.nvlink_line_gbps > self.gpu.nvlink_gbps * (1 + 1e-3):
            warnings.warn(
                f"{source}: nccl.gpu: {self.gpu.name} has {self.gpu.nvlinks} NVLinks x "
                f"{self.gpu.nvlink_line_gbps:g} GB/s = {self.gpu.nvlink_gbps:g} GB/s per GPU and "
                f"direction ({self.gpu.nvlink_source.split(';')[0]}), but network dimension 0 (bandwidth[0]) gives "
                f"{self.nvlink_line_gbps:.1f} GB/s: NCCL's search finds more channels than an "
                f"{self.gpu.name} has; lower bandwidth[0] or name a faster GPU",
                ConfigWarning,
                stacklevel=2,
            )
        self.nics_per_node = config.nics_per_node or self.gpus_per_node
        #: NCCL's own constants, with which it chooses: those of the release
        #: ``nccl.version`` names (the newest modelled, 5067397c = 2.30.7, by default)
        self.nccl_constants = constants_for(config.version)
        #: what a collective costs: NCCL's constants with a profile's corrections
        self.constants = constants if constants is not None else self._constants()
        # per communicator, and a rank's phase data per collective: equal gradient buckets,
        # layers and micro-batches repeat the same collective many times (the schedules are
        # read, never changed); shared by the models of the same inputs in this process
        self._comms, self._phases = _shared_caches(repr((config, network, self.constants)))
        #: a send's rate to a peer on another node, per communicator (:meth:`net_peer_gbps`)
        self._p2p_rates: dict[int, tuple[tuple[int, ...] | None, float]] = {}
        #: Under rank symmetry: the collectives (comm type, members, bytes) run folded and
        #: what is told when one starts (:class:`~.phase.FoldedNcclPhase`); set by the run.
        self.folding: tuple[frozenset, Callable[[FoldedNcclPhase], None]] | None = None

    def _constants(self) -> TunerConstants:
        """NCCL's constants, with the ``profile``'s corrections if one is named
        (looked up from the working directory, then from the system.json's folder;
        ConfigError naming ``nccl.profile`` if neither has it). A profile fitted
        on another GPU is a warning."""
        constants = self.nccl_constants
        entry = self.config.profile
        if entry is None:
            return constants
        found = find_profile(entry, self.source)
        if found is None:
            raise ConfigError(
                f"{self.source}: nccl.profile: no file {entry} (relative paths are looked up from "
                "the working directory, then from the system.json's folder)"
            )
        profile = read_profile(found)
        if profile.gpu is not None and profile.gpu != self.gpu.name:
            warnings.warn(
                f"{self.source}: nccl.profile: {found} was fitted on {profile.gpu} GPUs, "
                f"this run has {self.gpu.name}",
                ConfigWarning,
                stacklevel=3,
            )
        return with_profile(constants, profile)

    @property
    def nvlink_gbps(self) -> float:
        """One GPU's NVLinks as NCCL rates them (line rate x the GPU's NCCL efficiency)."""
        return self.nvlink_line_gbps * self.gpu.nvlink_efficiency

    def machine(self, members: tuple[int, ...]) -> tuple[Layout, Tuning, Tuning]:
        """(layout, NCCL's tuning, the timing) of the communicator over ``members``,
        cached: NCCL chooses with its own tables (:attr:`nccl_constants`); a
        calibrated profile changes what the choice costs, not the choice."""
        cached = self._comms.get(members)
        if cached is not None:
            return cached
        L = self.gpus_per_node
        nodes: dict[int, int] = {}
        for m in members:
            nodes[m // L] = nodes.get(m // L, 0) + 1
        per_node = max(nodes.values())
        if any(count != per_node for count in nodes.values()):
            raise ConfigError(
                f"{self.source}: the NCCL model needs as many members of a "
                f"communicator on every node; {sorted(nodes.items())[:4]} "
                "(node, members) differ"
            )
        ordered = tuple(sorted(members, key=lambda m: (m // L, m)))
        machine = Machine(
            ranks=len(members),
            gpus_per_node=per_node,
            gpu=self.gpu,
            nvlink_gbps=self.nvlink_gbps,
            nic_gbps=self.nic_line_gbps,
            nics_per_node=max(1, self.nics_per_node * per_node // L),
            nvls=self.config.nvls,
            collnet=self.config.collnet,
            cpu_vendor=self.config.cpu,
        )
        comm = communicator(machine)
        tuning = tune(comm, self.config.nccl_algo, self.config.nccl_proto, self.nccl_constants)
        timing = tuning if self.constants is self.nccl_constants else tune(comm, constants=self.constants)
        cached = self._comms[members] = (Layout(ordered, per_node), tuning, timing)
        return cached

    def choose(
        self, comm_type: CommType, members: tuple[int, ...], size: int, uneven: Uneven | None = None
    ) -> tuple[Algo, Proto, int, float, int]:
        """(algorithm, protocol, channels, NCCL's time in µs, operation bytes) of
        one collective of ``size`` bytes (see the module docstring for sizes). The
        time is at least the launch and the line-rate floor of the links it
        crosses (:func:`~.bus_bound.line_rate_floor_us`), whatever a profile says.
        ``uneven``: one rank's bytes to and from each member of an all-to-all
        (:class:`~astra_core.system.collectives.uneven.Uneven`)."""
        layout, tuning, timing = self.machine(members)
        n = layout.n
        launch = self.constants.launch_us
        if comm_type is CommType.ALL_TO_ALL:
            latency = self.p2p_latency_us(False, layout.nodes == 1)
            wire_us = self._all_to_all_us(layout, size, uneven)
            return Algo.RING, Proto.SIMPLE, 1, max(launch, latency + wire_us), size
        func = _FUNCS[comm_type]
        nbytes = size * n if comm_type is CommType.ALL_GATHER else size
        algo, proto, _ = tuning.choose(func, nbytes)
        channels = tuning.channels(func, algo, proto, nbytes)
        # a time: NCCL's pick has one (its bandwidth is not 0, with fewer channels too)
        time_us = cast(float, timing.time_with_channels_us(func, algo, proto, nbytes, channels))
        if algo == Algo.NVLS and func == Func.ALL_REDUCE and layout.nodes == 1:
            time_us = timing.latency_us[func][algo][proto] + nbytes / (1e3 * self._nvls_gbps(n))
        # no table and no profile beats the links' line rate
        nics = self.nic_line_gbps * self.nics_per_node
        floor = line_rate_floor_us(func, algo, nbytes, n, layout.nodes, self.nvlink_line_gbps, nics)
        return algo, proto, channels, max(launch, time_us, floor), nbytes

    def _nvls_gbps(self, n: int) -> float:
        """Algorithm bandwidth of an NVLS all-reduce on ``n`` GPUs of one node, GB/s.

        NCCL's cost table rates NVLS by its search's channel speeds (at most 60
        GB/s each), which undercounts below 8 GPUs. The data an NVLS all-reduce
        moves per GPU is ``(n + 1) / n`` of the buffer each way (NVIDIA's
        nccl-tests PR #239: algbw = busbw x n / (n + 1)), through the GPU's
        NVLinks as NCCL rates them, at the NVSwitch's multicast efficiency
        (NCCL's ``nvlsEfficiency``, 0.85 on SM 90): ``B x eff x n / (n + 1)``.
        Checked, not fitted, against NVIDIA/nccl issue #1455 (4 to 8 GPUs,
        validation/nccl.py)."""
        c = self.constants
        efficiency = (
            c.nvls_efficiency[generation(self.gpu.compcap)] * c.bw_efficiency[0][Algo.NVLS][Proto.SIMPLE]
        )
        return self.nvlink_gbps * efficiency * n / (n + 1)

    def _all_to_all_us(self, layout: Layout, size: int, uneven: Uneven | None = None) -> float:
        """Bandwidth time of an all-to-all: each rank's bytes to its node's other
        GPUs over its NVLinks and to other nodes over its share of the NICs,
        at the rates NCCL's topology assumes. ``uneven`` (one rank's bytes to and
        from each member): the larger of what that rank sends and receives, inside
        its node and across nodes (a link carries each direction at its bandwidth)."""
        if uneven is None:
            n, L = layout.n, layout.per_node
            part = size / n
            intra, inter = part * (L - 1), part * (n - L)
        else:
            intra, inter = uneven.bytes_by_scope(layout.members, layout.per_node)
        nics = self.nic_line_gbps * max(1, self.nics_per_node) / self.gpus_per_node
        t = intra / (1e3 * self.nvlink_gbps) if intra and self.nvlink_gbps else 0.0
        if inter:
            t = max(t, inter / (1e3 * nics)) if nics else float("inf")
        return t

    def p2p_latency_us(self, ll: bool, same_node: bool) -> float:
        """NCCL's latency of one send/receive (or grouped all-to-all), µs. NCCL's cost
        model has no entry for it; it is taken as one ring step's: the ring's base
        latency plus one hop (tuning.cc ``baseLat`` / ``hwLat``: LL 6.6 + 0.6 µs over
        NVLink or 2.7 over the network; Simple 8.4 + 3.4 or 8.4 + 14), from the
        calibrated constants when a profile is named."""
        proto = Proto.LL if ll else Proto.SIMPLE
        c = self.constants
        link = 0 if same_node else 2  # NVLINK, NET
        return c.base_latency_us[Algo.RING][proto] + c.hw_latency_us[link][Algo.RING][proto]

    def p2p_ns(self, src: int, dst: int, size: int, members: tuple[int, ...] | None = None) -> int:
        """NCCL's cost of one send/receive of ``size`` bytes between two ranks of the
        communicator ``members`` (None: every NPU, the default process group), ns:
        LL up to ``NCCL_P2P_LL_THRESHOLD`` (16 KiB per channel; one channel
        for a small message) else Simple, each with its base and one hop's
        latency (tuning.cc: LL 6.6 + 0.6 µs over NVLink, 6.6 + 2.7 µs over the
        network; Simple 8.4 + 3.4 and 8.4 + 14), then the bytes at the rate one
        GPU reaches to one peer: its NVLinks inside a node; across nodes the
        channels NCCL gives the peer in that communicator at the rate NCCL sizes
        them by, at most the NIC's (:mod:`.p2p`)."""
        same_node = src // self.gpus_per_node == dst // self.gpus_per_node
        ll = size <= P2P_LL_THRESHOLD
        latency = self.p2p_latency_us(ll, same_node)
        rate = self.nvlink_gbps if same_node else self.net_peer_gbps(members)
        wire = 2 * size if ll else size  # LL: 8 flag bytes per 8 of data
        time_us = max(self.constants.launch_us, latency + (wire / (1e3 * rate) if rate > 0 else 0.0))
        return int(round(time_us * 1000))

    def net_peer_gbps(self, members: tuple[int, ...] | None = None) -> float:
        """The rate of one send to a peer on another node in the communicator
        ``members`` (None: every NPU) [GB/s] (:mod:`.p2p`), cached per communicator
        object: keyed by its identity, which the entry keeps alive (a send's group is
        asked for again and again, and hashing its ranks each time would cost more)."""
        entry = self._p2p_rates.get(id(members))
        if entry is not None and entry[0] is members:
            return entry[1]
        layout, tuning, _ = self.machine(members if members is not None else tuple(range(self.npus)))
        rule = self.nccl_constants.p2p_net_channels
        channels = net_peer_channels(
            rule, layout.n, layout.nodes, tuning.runtime_channels(), self.nic_line_gbps
        )
        rate = net_peer_gbps(channels, self.nic_line_gbps)
        self._p2p_rates[id(members)] = (members, rate)
        return rate

    def schedule(
        self, comm_type: CommType, rank: int, members: tuple[int, ...], size: int
    ) -> tuple[Schedule, int]:
        """(rank ``rank``'s messages, NCCL's predicted time in ns) of a collective of
        ``size`` bytes: what :meth:`phase` runs, folded or not."""
        cached = self._phase_data(comm_type, rank, members, size)
        return cached[1], cached[3]

    def frozen_schedule(
        self, comm_type: CommType, rank: int, members: tuple[int, ...], size: int
    ) -> tuple[tuple[tuple, tuple], int]:
        """:meth:`schedule` with the messages as the kernel runs them (lanes and receives
        as tuples, :meth:`~.schedule.Schedule.frozen`), frozen once with the phase's."""
        cached = self._phase_data(comm_type, rank, members, size)
        return cached[2], cached[3]

    def phase(
        self,
        comm_type: CommType,
        rank: int,
        members: tuple[int, ...],
        size: int,
        uneven: Uneven | None = None,
    ) -> NcclPhase:
        """Rank ``rank``'s :class:`NcclPhase` of a collective of ``size`` bytes (a
        :class:`FoldedNcclPhase` if :attr:`folding` names the collective; never an
        ``uneven`` all-to-all, whose members' parts differ)."""
        final, schedule, (lanes, recvs), floor_ns, label, choice = self._phase_data(
            comm_type, rank, members, size, uneven
        )
        folding = self.folding if uneven is None else None
        if folding is not None and (comm_type, tuple(sorted(members)), size) in folding[0]:
            return FoldedNcclPhase(comm_type, rank, size, final, members, floor_ns, label, choice, folding[1])
        return NcclPhase(comm_type, rank, size, final, schedule, lanes, recvs, floor_ns, label, choice)

    def _phase_data(
        self,
        comm_type: CommType,
        rank: int,
        members: tuple[int, ...],
        size: int,
        uneven: Uneven | None = None,
    ) -> tuple:
        key = (comm_type, members, size, rank, uneven)
        cached = self._phases.get(key)
        if cached is None:
            layout = self.machine(members)[0]
            algo, proto, channels, time_us, nbytes = self.choose(comm_type, members, size, uneven)
            schedule = schedule_for(comm_type.label, algo, proto, layout, rank, nbytes, channels, uneven)
            n = layout.n
            final = (
                size * n
                if comm_type is CommType.ALL_GATHER
                else (size // n if comm_type is CommType.REDUCE_SCATTER else size)
            )
            label = (
                "p2p"
                if comm_type is CommType.ALL_TO_ALL
                else f"{ALGO_NAMES[algo]}/{PROTO_NAMES[proto]} x{channels}"
            )
            floor_ns = int(round(time_us * 1000))
            choice = NcclChoice(
                "SendRecv" if comm_type is CommType.ALL_TO_ALL else ALGO_NAMES[algo],
                PROTO_NAMES[proto],
                channels,
                floor_ns,
                n,
            )
            cached = self._phases[key] = (final, schedule, schedule.frozen(), floor_ns, label, choice)
        return cached
