"""NCCL's own cost model: per (collective, algorithm, protocol) a latency and a
bus bandwidth, the time of an operation of ``n`` bytes, and NCCL's choice.

This is the model NCCL itself uses to pick an algorithm and a protocol for
every collective call (``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime`` in
``src/graph/tuning.cc``, ``topoGetAlgoInfo`` in ``src/enqueue.cc``; NCCL
commit 5067397c, June 2026, whose tuning.cc is v2.30.7-1's). Every constant
below is a value of that file, cited by the name NCCL gives it. Older
releases, 2.19 to 2.29, are :data:`NCCL_VERSIONS`: the same model with the
values and the few rules that changed since (:class:`TunerConstants`). What
NCCL derives from its topology search (channels and per-channel bandwidths of
each algorithm's graph) is an input here: :class:`Graph`.

Units: latencies in µs, bandwidths in GB/s (1 GB = 1e9 bytes, NCCL's unit:
``time_us = latency_us + bytes / (1000 * bw_GBps)``), sizes in bytes.

The model, per algorithm ``a`` and protocol ``p`` (``bw`` = the graph's
per-channel bandwidth, intra-node up to 2 nodes, inter-node beyond):

* bus bandwidth = channels x bw, then capped or scaled per protocol (LL moves
  8 bytes of data per 16 on the wire, LL128 120 of 128) and per algorithm;
  NVLS uses the NVSwitch's multicast efficiency per GPU generation;
* algorithm bandwidth = bus bandwidth x ranks / steps for Ring and NVLS
  (steps: 2(n-1) for all-reduce, n-1 for all-gather and reduce-scatter, n
  otherwise), x 1/2 for Tree and CollNet all-reduce;
* latency = a base latency per (algorithm, protocol) plus per step the
  hardware latency of the link kind crossed (NVLink, PCI, network).

Raises :class:`~astra_core.errors.ConfigError` for an ``NCCL_ALGO`` /
``NCCL_PROTO`` string NCCL would reject.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Literal

from astra_core.config.nccl import nccl_release
from astra_core.config.nccl_env import ALGO_NAMES, FUNC_NAMES, PROTO_NAMES, parse_env_list
from astra_core.config.nccl_profile import NcclProfile
from astra_core.errors import ConfigError


class Func(IntEnum):
    """NCCL's collective functions, in NCCL's order (``ncclFuncStr``)."""

    BROADCAST = 0
    REDUCE = 1
    ALL_GATHER = 2
    REDUCE_SCATTER = 3
    ALL_REDUCE = 4


class Algo(IntEnum):
    """NCCL's algorithms, in NCCL's order (``ncclAlgoStr``)."""

    TREE = 0
    RING = 1
    COLLNET_DIRECT = 2
    COLLNET_CHAIN = 3
    NVLS = 4
    NVLS_TREE = 5
    PAT = 6


class Proto(IntEnum):
    """NCCL's protocols, in NCCL's order (``ncclProtoStr``)."""

    LL = 0
    LL128 = 1
    SIMPLE = 2


# -- constants of ncclTunerConstantsDefaults (tuning.cc) ---------------------------------
#: baseLatencies [algo][proto], µs.
BASE_LATENCY_US = (
    (6.8, 14.0, 8.4),
    (6.6, 14.0, 8.4),
    (0, 0, 0),
    (0, 0, 0),
    (0, 0, 0),
    (0, 0, 0),
    (8.0, 8.0, 8.0),
)
NVLINK, PCI, NET = 0, 1, 2
#: hwLatencies [link kind][algo][proto], µs per step.
HW_LATENCY_US = (
    ((0.6, 1.25, 4.0), (0.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 25), (0, 0, 25), (0, 0, 4.0)),
    ((1.0, 1.9, 4.0), (1.0, 2.5, 5.7), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 0), (0, 0, 0), (0, 0, 4.0)),
    ((5.0, 8.5, 14), (2.7, 4.0, 14.0), (0, 0, 31), (0, 0, 30), (0, 0, 18), (0, 0, 20.9), (0, 0, 14)),
)
VOLTA, AMPERE, HOPPER, BLACKWELL = 0, 1, 2, 3
#: llMaxBws [GPU generation on one node; Intel / AMD CPU across nodes][1, 2, >2 nodes], GB/s.
LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))
#: perChMaxRingLL128Bws [generation][1, 2, >2 nodes], GB/s per channel.
RING_LL128_MAX_BW = ((20.0,) * 3, (20.0,) * 3, (36.7,) * 3, (40.0,) * 3)
#: perChMaxTreeLL128Bws.
TREE_LL128_MAX_BW = ((20.0,) * 3, (20.0,) * 3, (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))
#: perChMaxTreeBws.
TREE_MAX_BW = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))
#: perChMaxNVLSTreeBws.
NVLS_TREE_MAX_BW = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 80.0))
#: nvlsEfficiency per generation: NVSwitch multicast/reduce efficiency.
NVLS_EFFICIENCY = (0.0, 0.0, 0.85, 0.74)
#: treeCorrectionFactor [proto][log2(bytes / 64)] for Tree all-reduce, 64 B to 256 MiB.
TREE_CORRECTION = (
    (
        1.0,
        1.0,
        1.0,
        1.0,
        0.9,
        0.8,
        0.7,
        0.7,
        0.7,
        0.7,
        0.6,
        0.5,
        0.4,
        0.4,
        0.5,
        0.6,
        0.7,
        0.8,
        0.9,
        1.0,
        1.0,
        1.0,
        1.0,
        1.0,
    ),
    (
        1.0,
        1.0,
        1.0,
        1.0,
        1.0,
        0.9,
        0.8,
        0.8,
        0.8,
        0.7,
        0.6,
        0.6,
        0.6,
        0.6,
        0.6,
        0.6,
        0.8,
        0.9,
        0.9,
        0.9,
        0.9,
        1.0,
        1.0,
        1.0,
    ),
    (
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.8,
        0.7,
        0.6,
        0.6,
        0.5,
        0.5,
        0.5,
        0.5,
        0.6,
        0.7,
        0.8,
        0.7,
        0.7,
        0.8,
        0.9,
        0.9,
        0.9,
    ),
)
#: Network post overhead, µs (getNetOverhead: 1 on Intel and other CPUs, 2 on AMD).
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0, "other": 1.0}
#: NCCL_MAX_NVLS_ARITY and NCCL_MAX_DIRECT_ARITY (src/include/device.h).
MAX_NVLS_ARITY, MAX_DIRECT_ARITY = 32, 7


#: The host's time to launch one NCCL call (enqueue and kernel launch), µs: a
#: collective takes at least this long, and an nccl-tests loop whose thread drives
#: ``g`` GPUs (``-g g``: ``g`` calls per iteration from one thread, common.cu
#: ``startColl``) at least ``g`` times it per row. Measured, not fitted: an
#: all_reduce_perf ``-t 1 -g 8`` on one node of 8 A100 (OCI BM.GPU4.8; the log in
#: tests/data/nccl_tests/a100_1node_g8_all_reduce.txt) is flat at 32.0 µs from 64 B
#: to 32 KiB, where NCCL's own model gives 15 µs: 32.0 / 8 calls.
LAUNCH_US = 4.0


def _table(value: float) -> tuple[tuple[float, ...], ...]:
    return tuple((value,) * 3 for _ in range(7))


@dataclass(frozen=True)
class TunerConstants:
    """The constants of NCCL's cost model for one NCCL version, and a calibrated
    profile's corrections (:mod:`astra_core.calibrate.nccl_profile`).

    The first fields are NCCL's own tables, named as in ``ncclTunerConstants``
    (NCCL 2.25 on, which a tuner plugin may override; file-level arrays of
    ``tuning.cc`` before): ``base_latency_us`` [algo][proto] (``baseLatencies``),
    ``hw_latency_us`` [NVLINK, PCI, NET][algo][proto] (``hwLatencies``), the
    per-protocol bandwidth caps (``llMaxBws``, ``perChMax*Bws``) and
    ``nvls_efficiency`` per GPU generation. Their defaults are the values at
    the top of this module.

    The fields after ``nvls_efficiency`` are the rules of NCCL's model that
    changed between releases (:data:`NCCL_VERSIONS`); each says, in its
    comment, what it was and where (file, function, release). Their defaults
    are 5067397c's.

    ``bw_efficiency`` [one node, several nodes][algo][proto] multiplies the bus
    bandwidth NCCL's model gives (1: NCCL's own figure; a profile fitted to a
    user's measurements sets it). ``launch_us`` is the host's time to launch
    one NCCL call, which no collective beats (:data:`LAUNCH_US`).
    """

    base_latency_us: tuple[tuple[float, ...], ...] = BASE_LATENCY_US
    hw_latency_us: tuple[tuple[tuple[float, ...], ...], ...] = HW_LATENCY_US
    ll_max_bw: tuple[tuple[float, ...], ...] = LL_MAX_BW
    ring_ll128_max_bw: tuple[tuple[float, ...], ...] = RING_LL128_MAX_BW
    tree_ll128_max_bw: tuple[tuple[float, ...], ...] = TREE_LL128_MAX_BW
    tree_max_bw: tuple[tuple[float, ...], ...] = TREE_MAX_BW
    nvls_tree_max_bw: tuple[tuple[float, ...], ...] = NVLS_TREE_MAX_BW
    nvls_efficiency: tuple[float, ...] = NVLS_EFFICIENCY
    #: Ring/LL bus bandwidth factor (tuning.cc ``ncclTopoTuneModel``): (an
    #: all-reduce or reduce, or several nodes; an all-gather, reduce-scatter or
    #: broadcast on one node). 0.5 for both from 2.21; (1/4, 1/3) before.
    ring_ll_factor: tuple[float, float] = (0.5, 0.5)
    #: Ring/LL128 bus bandwidth factor with one GPU per node (``ppn < 2``); 0.92
    #: (120/128) with more. The same 0.92 from 2.23; 0.7 before.
    ring_ll128_ppn1_factor: float = 0.92
    #: NVLS and NVLSTree bandwidth per channel (tuning.cc): ``"efficiency"``
    #: (2.28 on): the graph's bwIntra x ``nvls_efficiency`` x (c-1)/c, x 2 for an
    #: all-reduce, x (ppn-1)/ppn otherwise, capped by bwInter (x 2 for NVLSTree
    #: on up to 2 nodes) and ``nvls_tree_max_bw``; ``"min"`` (2.19 to 2.26):
    #: NVLS min(bwIntra, bwInter), NVLSTree min(bwIntra, bwInter, halved beyond
    #: 2 nodes); ``"min-gather"`` (2.27): as ``"min"``, but an NVLS all-gather or
    #: reduce-scatter min(bwIntra x (ppn-1)/ppn, bwInter x 0.9).
    nvls_bw_rule: Literal["efficiency", "min", "min-gather"] = "efficiency"
    #: NVLS and NVLSTree bus-to-algorithm bandwidth ratio: None, ranks / steps as
    #: a ring's (2.28 on); 5/6 before.
    nvls_ratio: float | None = None
    #: That ratio applies to NVLS all-gather and reduce-scatter too (2.19 to
    #: 2.22); from 2.23 a non-ring all-gather or reduce-scatter has none.
    nvls_gather_ratio: bool = False
    #: A ring all-reduce across nodes crosses the network ``2 * nodes`` times
    #: in NCCL's latency (``nInterSteps``, 2.19 to 2.22); ``2 * (nodes - 1)`` from 2.23.
    ring_inter_steps_2n: bool = False
    #: With one GPU per node the inter-node latency is the tree's network one
    #: (2.23 on); before, each algorithm's own.
    ppn1_tree_net_latency: bool = True
    #: treeCorrectionFactor below 64 bytes: ``log2i(0)`` was 0 until 2.21, so
    #: the first column applied (``ncclTopoGetAlgoTime``); from 2.22 none applies.
    tree_correction_below_64b: bool = False
    #: treeCorrectionFactor also for NVLSTree all-reduce on SM 100 (2.29 on).
    nvls_tree_correction: bool = True
    #: ``comm->nChannels`` doubles across nodes on SM 90 while it is below this
    #: (connect.cc ``ncclTopoPostset``): 16 from 2.20; 2.19's ``2 * nChannels
    #: <= MAXCHANNELS`` is 33.
    double_channels_below: int = 16
    #: NVLS needs this many GPUs of the communicator on a node (nvls.cc
    #: ``ncclNvlsInit``: ``gpuCount < 2`` is off from 2.28.9, ``<= 2`` before).
    nvls_min_gpus: int = 2
    #: The release knows Blackwell (2.25 on). Before, SM 100 took Hopper's rows
    #: (``compCapIndex``), the channel doubling needed SM 90 exactly, and NVLS
    #: ran ``NCCL_NVLS_NCHANNELS``' 16.
    blackwell: bool = True
    #: NVLS channels on SM 100 (nvls.cc): (one node, several). (24, 32) from
    #: 2.27 (``NVLS_NCHANNELS_SM100_NVL``, ``NVLS_NCHANNELS_SM100``); 32 in 2.25 and 2.26.
    nvls_channels_sm100: tuple[int, int] = (24, 32)
    #: The release has PAT (2.23 on), and PAT's bandwidth factor: 0.75 from
    #: 2.24, 0.85 in 2.23.
    pat: bool = True
    pat_bw_factor: float = 0.75
    #: The channels a send or receive with a peer on another node runs (graph/paths.cc
    #: ``ncclTopoGetNchannels``; :mod:`.p2p`): ``"bandwidth"`` (2.29.2 on), ``"ranks"``
    #: (2.20 to 2.28.9), ``"fixed"`` (2.19).
    p2p_net_channels: Literal["bandwidth", "ranks", "fixed"] = "bandwidth"
    bw_efficiency: tuple[tuple[tuple[float, ...], ...], ...] = (_table(1.0), _table(1.0))
    launch_us: float = LAUNCH_US


#: NCCL's constants at commit 5067397c, no corrections.
DEFAULT_CONSTANTS = TunerConstants()


def generation(compcap: int, c: TunerConstants = DEFAULT_CONSTANTS) -> int:
    """NCCL's compute-capability index (``compCapIndex``): SM 100+, 90+, 80+, else
    Volta; SM 100 is Hopper's in a release before Blackwell's rows (2.25)."""
    if compcap >= 100 and c.blackwell:
        return BLACKWELL
    return HOPPER if compcap >= 90 else AMPERE if compcap >= 80 else VOLTA


def _put(table: tuple, index: tuple[int, ...], value: object) -> tuple:
    """``table`` (nested tuples) with the cell at ``index`` set to ``value``."""
    if len(index) == 1:
        return table[: index[0]] + (value,) + table[index[0] + 1 :]
    inner = _put(table[index[0]], index[1:], value)
    return table[: index[0]] + (inner,) + table[index[0] + 1 :]


# -- NCCL releases ----------------------------------------------------------------------
# Each release is the next newer one with what that release changed undone, read from
# NCCL's src/graph/tuning.cc (ncclTopoTuneModel, ncclTopoGetAlgoTime), src/enqueue.cc,
# src/graph/connect.cc, src/graph/paths.cc and src/transport/nvls.cc at its tag (v2.19.3-1 ... v2.30.7-1).
_S = Proto.SIMPLE
_2_30_7 = DEFAULT_CONSTANTS  # 5067397c: tuning.cc as at v2.30.7-1
_2_29_7 = replace(_2_30_7, nvls_tree_max_bw=_put(_2_30_7.nvls_tree_max_bw, (BLACKWELL, 2), 43.8))
_2_29_2 = replace(
    _2_29_7, ring_ll128_max_bw=_put(_2_29_7.ring_ll128_max_bw, (BLACKWELL,), (34.5, 34.6, 34.5))
)
_2_28_9 = replace(
    _2_29_2,
    ring_ll128_max_bw=_put(_2_29_2.ring_ll128_max_bw, (BLACKWELL,), (73.4, 34.6, 73.4)),
    nvls_tree_correction=False,
    p2p_net_channels="ranks",
)
_2_28_7 = replace(
    _2_28_9,
    hw_latency_us=_put(_2_28_9.hw_latency_us, (NET, Algo.NVLS_TREE, _S), 14.0),  # 20.9 from 2.28.9
    nvls_tree_max_bw=_put(_2_28_9.nvls_tree_max_bw, (BLACKWELL, 2), 43.1),
    nvls_min_gpus=3,
)
_2_28_3 = replace(_2_28_7, ring_ll128_max_bw=_put(_2_28_7.ring_ll128_max_bw, (BLACKWELL,), (73.4,) * 3))
# 2.28.3 brought ncclTunerConstants, nvlsEfficiency and perChMaxNVLSTreeBws
_2_27_3 = replace(
    _2_28_3,
    nvls_bw_rule="min-gather",
    nvls_ratio=5.0 / 6.0,
    tree_ll128_max_bw=_put(_2_28_3.tree_ll128_max_bw, (BLACKWELL,), (73.4, 73.4, 58.0)),
    tree_max_bw=_put(_2_28_3.tree_max_bw, (BLACKWELL,), (77.4, 82.8, 72.0)),
)
_2_26_2 = replace(_2_27_3, nvls_bw_rule="min", nvls_channels_sm100=(32, 32))
_2_25_1 = _2_26_2  # 2.26 changed nothing this model reads
_2_24_3 = replace(_2_25_1, blackwell=False)  # Blackwell's rows came with 2.25
_2_23_4 = replace(_2_24_3, pat_bw_factor=0.85)
_2_22_3 = replace(
    _2_23_4,
    base_latency_us=_put(_2_23_4.base_latency_us, (Algo.TREE, _S), 0.0),
    hw_latency_us=_put(
        _put(_put(_2_23_4.hw_latency_us, (NVLINK, Algo.TREE, _S), 28.0), (PCI, Algo.TREE, _S), 28.0),
        (NET, Algo.TREE, _S),
        28.0,
    ),
    ring_ll128_ppn1_factor=0.7,
    nvls_gather_ratio=True,
    ring_inter_steps_2n=True,
    ppn1_tree_net_latency=False,
    pat=False,
)
_2_21_5 = replace(_2_22_3, tree_correction_below_64b=True)
_2_20_5 = replace(
    _2_21_5,
    hw_latency_us=_put(
        _put(_2_21_5.hw_latency_us, (NVLINK, Algo.NVLS, _S), 23.0), (NVLINK, Algo.NVLS_TREE, _S), 23.0
    ),
    ll_max_bw=_put(_2_21_5.ll_max_bw, (HOPPER,), (87.7, 22.5, 19.0)),
    ring_ll_factor=(0.25, 1.0 / 3.0),
)
_2_19_3 = replace(_2_20_5, double_channels_below=33, p2p_net_channels="fixed")

#: NCCL's constants per release (:data:`astra_core.config.nccl.NCCL_RELEASES`), oldest
#: first; the last is :data:`DEFAULT_CONSTANTS`. What differs on an H100 machine:
#: docs/nccl.md, "NCCL versions".
NCCL_VERSIONS: dict[str, TunerConstants] = {
    "2.19.3": _2_19_3,
    "2.20.5": _2_20_5,
    "2.21.5": _2_21_5,
    "2.22.3": _2_22_3,
    "2.23.4": _2_23_4,
    "2.24.3": _2_24_3,
    "2.25.1": _2_25_1,
    "2.26.2": _2_26_2,
    "2.27.3": _2_27_3,
    "2.28.3": _2_28_3,
    "2.28.7": _2_28_7,
    "2.28.9": _2_28_9,
    "2.29.2": _2_29_2,
    "2.29.7": _2_29_7,
    "2.30.7": _2_30_7,
}


def constants_for(version: str | None) -> TunerConstants:
    """NCCL's constants for the release ``version`` names (system.json's
    ``nccl.version``): ``"2.24.3"``, ``"2.24"`` (that minor's newest modelled
    release); a patch release not modelled takes its minor's modelled release at
    or before it (:func:`astra_core.config.nccl.nccl_release`). None: the newest,
    :data:`DEFAULT_CONSTANTS`. Raises ConfigError naming ``nccl.version`` and the
    modelled releases for any other."""
    if version is None:
        return DEFAULT_CONSTANTS
    release, error = nccl_release(version)
    if release is None:
        raise ConfigError(f"nccl.version: {error}")
    return NCCL_VERSIONS[release]


def _log2i(n: int) -> int:
    """floor(log2(n)), -1 for n <= 0 (NCCL's log2i)."""
    return n.bit_length() - 1 if n > 0 else -1


@dataclass(frozen=True)
class Graph:
    """What NCCL's topology search found for one algorithm's channels.

    ``n_channels``; ``bw_intra_gbps`` / ``bw_inter_gbps``: bandwidth per
    channel inside a node / across nodes (GB/s, NCCL's ``bwIntra``,
    ``bwInter``); ``latency_inter_us``: the network's extra latency
    (``latencyInter``); ``nvlink``: intra-node links are NVLink (else PCI);
    ``tree_pattern``: the tree is a plain tree (``NCCL_TOPO_PATTERN_TREE``:
    -15 % bandwidth); ``same_channels``: broadcast/reduce channels share
    their ring; ``ll128_ok``: the paths allow LL128 (NVLink or PCI switch
    inside, up to PXN across nodes).
    """

    n_channels: int
    bw_intra_gbps: float
    bw_inter_gbps: float
    latency_inter_us: float = 0.0
    nvlink: bool = True
    tree_pattern: bool = False
    same_channels: bool = True
    ll128_ok: bool = True


@dataclass(frozen=True)
class Communicator:
    """The machine NCCL tunes for: ranks, nodes, GPU generation, CPU, features.

    ``compcap``: the GPUs' compute capability x10 (80 A100, 90 H100/H200,
    100 B200); ``graphs``: a :class:`Graph` per algorithm NCCL could build
    (absent: not possible here); ``cpu_vendor``: ``intel``, ``amd`` or
    ``other``; ``collnet``: the fabric offloads reductions (SHARP);
    ``nvls``: NVSwitch multicast (NVLink SHARP) is usable; ``nvswitch``: the
    node has NVSwitches; ``pat``: PAT is enabled (NCCL: one GPU per node).
    """

    n_ranks: int
    n_nodes: int
    compcap: int
    graphs: dict[Algo, Graph]
    cpu_vendor: str = "intel"
    collnet: bool = False
    nvls: bool = False
    nvswitch: bool = True
    pat: bool | None = None

    @property
    def ranks_per_node(self) -> float:
        return self.n_ranks / self.n_nodes

    @property
    def local_ranks(self) -> int:
        return self.n_ranks // self.n_nodes

    @property
    def pat_enabled(self) -> bool:
        """NCCL_PAT_ENABLE's default: SM 60+ and one GPU per node."""
        if self.pat is not None:
            return self.pat
        return self.compcap >= 60 and self.n_nodes == self.n_ranks


@dataclass
class Tuning:
    """NCCL's latency (µs) and bus-to-algorithm bandwidth (GB/s) tables for one
    communicator, indexed ``[Func][Algo][Proto]``; a bandwidth of 0 means NCCL
    will not use that combination."""

    comm: Communicator
    constants: TunerConstants = DEFAULT_CONSTANTS
    latency_us: list[list[list[float]]] = field(default_factory=list)
    bandwidth_gbps: list[list[list[float]]] = field(default_factory=list)
    _fewer: dict = field(default_factory=dict, repr=False, compare=False)

    def time_us(self, func: Func, algo: Algo, proto: Proto, nbytes: int) -> float | None:
        """Predicted time of one operation of ``nbytes`` (NCCL's ``ncclTopoGetAlgoTime``
        with one pipelined op), or None if NCCL would not use it."""
        bw = self.bandwidth_gbps[func][algo][proto]
        if bw == 0:
            return None
        latency = self.latency_us[func][algo][proto]
        c = self.constants
        log_size = _log2i(nbytes >> 6)
        if log_size < 0 and c.tree_correction_below_64b:
            log_size = 0  # NCCL's log2i(0) was 0 until 2.21
        if algo == Algo.TREE and func == Func.ALL_REDUCE and 0 <= log_size < 23:
            bw *= TREE_CORRECTION[proto][log_size]
        if (
            algo == Algo.NVLS_TREE
            and func == Func.ALL_REDUCE
            and 0 <= log_size < 24
            and self.comm.compcap >= 100
            and c.nvls_tree_correction
            and c.blackwell
        ):
            bw *= TREE_CORRECTION[proto][log_size]
        graph = self.comm.graphs.get(Algo.RING)
        channels = graph.n_channels if graph else 1
        if (
            algo == Algo.RING
            and proto == Proto.SIMPLE
            and self.comm.n_nodes > 1
            and func == Func.ALL_REDUCE
            and nbytes // (channels * self.comm.n_ranks) >= 64
        ):
            latency *= 1.9 if self.comm.compcap < 80 else 1.4  # "plateau effect of ring"
        return latency + nbytes / (1000 * bw)

    def runtime_channels(self) -> int:
        """Channels a ring or tree collective may launch (``comm->nChannels``): the
        ring and tree graphs' smaller count (init.cc), doubled when rings are
        connected (connect.cc ``connectRings``; up to ``MAXCHANNELS`` 64), and
        doubled again on SM 90+ across nodes when a ring channel runs above 45
        GB/s on fewer than 16 channels (the release's
        :attr:`TunerConstants.double_channels_below`)."""
        c = self.constants
        graphs = self.comm.graphs
        counts = [graphs[a].n_channels for a in (Algo.RING, Algo.TREE) if a in graphs]
        nc = min(64, 2 * min(counts)) if counts else 1
        ring = graphs.get(Algo.RING)
        compcap = self.comm.compcap
        if (
            (compcap >= 90 if c.blackwell else compcap == 90)
            and self.comm.n_nodes > 1
            and ring is not None
            and ring.bw_intra_gbps > 45.0
            and nc < c.double_channels_below
        ):
            nc *= 2
        return nc

    def channels(self, func: Func, algo: Algo, proto: Proto, nbytes: int) -> int:
        """Channels NCCL launches for ``nbytes`` (``topoGetAlgoInfo``): a ring or
        tree drops channels from :meth:`runtime_channels` while each would get
        less than ``threads x threshold`` bytes (threads: 512 for Simple and
        LL, 640 for LL128; threshold per thread: ``NCCL_SIMPLE_THREAD_THRESHOLD``
        64 bytes, ``NCCL_LL_THREAD_THRESHOLD`` 8 (x ranks on a ring),
        ``NCCL_LL128_THREAD_THRESHOLD`` 8); NVLS runs ``NVLS_NCHANNELS`` (16 on
        SM 90, 24 on one SM 100 node, 32 on several; as the release has them:
        :attr:`TunerConstants.nvls_channels_sm100`)."""
        comm = self.comm
        if algo in (Algo.NVLS, Algo.NVLS_TREE):
            if comm.compcap >= 100 and self.constants.blackwell:
                return self.constants.nvls_channels_sm100[1 if comm.n_nodes > 1 else 0]
            return 16
        if algo in (Algo.COLLNET_DIRECT, Algo.COLLNET_CHAIN):
            return comm.graphs[algo].n_channels  # the search's channels (heads for Direct)
        nc = self.runtime_channels()
        threads = 640 if proto == Proto.LL128 else 512
        threshold = {Proto.LL: 8, Proto.LL128: 8, Proto.SIMPLE: 64}[proto]
        if algo == Algo.RING and proto == Proto.LL:
            threshold *= comm.n_ranks
        while nc >= 2 and nbytes < nc * threads * threshold:
            nc -= 1
        return nc

    def time_with_channels_us(
        self, func: Func, algo: Algo, proto: Proto, nbytes: int, channels: int
    ) -> float | None:
        """:meth:`time_us` when NCCL launches ``channels`` of its
        :meth:`runtime_channels` (small buffers): the graph's bandwidth in
        proportion, before the per-protocol caps."""
        graph = self.comm.graphs.get(algo)
        full = self.runtime_channels()
        if (
            graph is None
            or algo not in (Algo.RING, Algo.TREE)
            or channels >= full
            or self.bandwidth_gbps[func][algo][proto] == 0
        ):
            return self.time_us(func, algo, proto, nbytes)
        key = (func, algo, proto, channels)
        fewer = self._fewer.get(key)
        if fewer is None:
            # a fractional channel count on purpose: the graph's bandwidth in proportion
            share = replace(graph, n_channels=graph.n_channels * channels / full)  # type: ignore[arg-type]
            comm = replace(self.comm, graphs={**self.comm.graphs, algo: share})
            fewer = self._fewer[key] = tune(comm, constants=self.constants)
        return fewer.time_us(func, algo, proto, nbytes)

    def usable(self, func: Func, algo: Algo) -> bool:
        """Whether NCCL considers ``algo`` for ``func`` on this communicator at all
        (``updateCollCostTable``'s filters)."""
        comm = self.comm
        if algo in (Algo.COLLNET_DIRECT, Algo.COLLNET_CHAIN):
            return comm.collnet and comm.local_ranks <= MAX_DIRECT_ARITY + 1
        if algo in (Algo.NVLS, Algo.NVLS_TREE):
            if not comm.nvls or (func != Func.ALL_REDUCE and comm.local_ranks > MAX_NVLS_ARITY):
                return False
            return not (algo == Algo.NVLS and not comm.collnet and comm.n_nodes > 1)
        return True

    def choose(self, func: Func, nbytes: int) -> tuple[Algo, Proto, float]:
        """NCCL's pick: the (algorithm, protocol) of least predicted time, first in
        NCCL's order on a tie; raises ConfigError when nothing is enabled."""
        best = None
        for algo in Algo:
            if not self.usable(func, algo):
                continue
            for proto in Proto:
                t = self.time_us(func, algo, proto, nbytes)
                if t is not None and (best is None or t < best[2]):
                    best = (algo, proto, t)
        if best is None:
            raise ConfigError(
                f"NCCL has no algorithm and protocol enabled for {FUNC_NAMES[func]} "
                "(check NCCL_ALGO / NCCL_PROTO)"
            )
        return best


def tune(
    comm: Communicator,
    nccl_algo: str | None = None,
    nccl_proto: str | None = None,
    constants: TunerConstants = DEFAULT_CONSTANTS,
) -> Tuning:
    """NCCL's tables for ``comm`` (``ncclTopoTuneModel``), with ``NCCL_ALGO`` /
    ``NCCL_PROTO`` given as NCCL reads them (None: NCCL's defaults), from the
    ``constants`` of one NCCL version (and a profile's corrections)."""
    n, nodes = comm.n_ranks, comm.n_nodes
    gen = generation(comm.compcap, constants)
    node_index = min(nodes, 3) - 1
    ll_row = gen if nodes == 1 else (1 if comm.cpu_vendor == "amd" else 0)
    ll_max_bw = constants.ll_max_bw[ll_row][node_index]
    tuning = Tuning(comm, constants)
    for func in Func:
        steps = (
            2 * (n - 1)
            if func == Func.ALL_REDUCE
            else (n - 1 if func in (Func.ALL_GATHER, Func.REDUCE_SCATTER) else n)
        )
        lat_row, bw_row = [], []
        for algo in Algo:
            lat_cells, bw_cells = [], []
            for proto in Proto:
                lat, bw = _entry(comm, constants, func, algo, proto, steps, node_index, ll_max_bw)
                lat_cells.append(lat)
                bw_cells.append(bw)
            lat_row.append(lat_cells)
            bw_row.append(bw_cells)
        tuning.latency_us.append(lat_row)
        tuning.bandwidth_gbps.append(bw_row)
    _apply_enables(tuning, nccl_algo, nccl_proto)
    return tuning


def _applies(func: Func, algo: Algo, proto: Proto, comm: Communicator, c: TunerConstants) -> bool:
    """The (function, algorithm, protocol) combinations NCCL implements."""
    if func in (Func.BROADCAST, Func.REDUCE) and algo != Algo.RING:
        return False
    if func in (Func.ALL_GATHER, Func.REDUCE_SCATTER) and algo not in (
        Algo.PAT,
        Algo.RING,
        Algo.NVLS,
        Algo.COLLNET_DIRECT,
    ):
        return False
    if func == Func.ALL_REDUCE and algo == Algo.PAT:
        return False
    if algo in (Algo.NVLS, Algo.NVLS_TREE) and proto != Proto.SIMPLE:
        return False
    if algo == Algo.PAT and (proto != Proto.SIMPLE or not comm.pat_enabled or not c.pat):
        return False
    return True


def _entry(
    comm: Communicator,
    c: TunerConstants,
    func: Func,
    algo: Algo,
    proto: Proto,
    steps: int,
    node_index: int,
    ll_max_bw: float,
) -> tuple[float, float]:
    """(latency µs, algorithm bandwidth GB/s) of one cell of NCCL's tables."""
    graph = comm.graphs.get(algo)
    if graph is None or not _applies(func, algo, proto, comm, c):
        return 0.0, 0.0
    n, nodes = comm.n_ranks, comm.n_nodes
    gen = generation(comm.compcap, c)
    ppn = comm.ranks_per_node
    collnet = algo in (Algo.COLLNET_DIRECT, Algo.COLLNET_CHAIN)
    bw = graph.bw_intra_gbps if nodes <= 2 or collnet else graph.bw_inter_gbps
    if algo in (Algo.NVLS, Algo.NVLS_TREE):
        if graph.n_channels < 2 and c.nvls_bw_rule == "efficiency":
            return 0.0, 0.0
        bw = _nvls_bw(comm, c, func, algo, graph, node_index)
    bus = graph.n_channels * bw
    channels = graph.n_channels
    if algo == Algo.RING and proto == Proto.LL:
        wide = nodes > 1 or func in (Func.ALL_REDUCE, Func.REDUCE)
        bus = min(ll_max_bw, bus * c.ring_ll_factor[0 if wide else 1])
    if algo == Algo.RING and proto == Proto.LL128:
        factor = c.ring_ll128_ppn1_factor if ppn < 2 else 0.92
        bus = min(bus * factor, channels * c.ring_ll128_max_bw[gen][node_index])
    if algo == Algo.TREE and func == Func.ALL_REDUCE:
        bus = min(bus * 0.92, channels * c.tree_max_bw[gen][node_index])
    if algo == Algo.TREE and proto == Proto.LL:
        bus = min(bus / 3.8, ll_max_bw)
    if algo == Algo.TREE and proto == Proto.LL128:
        bus = min(
            bus * (7.0 / 9.0 if nodes == 1 else 120.0 / 128.0),
            channels * c.tree_ll128_max_bw[gen][node_index],
        )
    if algo == Algo.TREE and graph.tree_pattern:
        bus *= 0.85
    if algo == Algo.PAT:
        bus *= c.pat_bw_factor
    if collnet and proto != Proto.SIMPLE:
        bus = 0.0
    if algo == Algo.COLLNET_DIRECT and proto == Proto.SIMPLE:
        if func in (Func.ALL_GATHER, Func.REDUCE_SCATTER):
            bus = ppn * min(graph.bw_intra_gbps, graph.bw_inter_gbps * 0.9)
        else:
            factor = ppn / channels  # GPUs per NIC: full speed needs a NIC per GPU
            factor -= (factor - 1) / 2
            bus /= factor
            if comm.compcap >= 90:
                bus *= 0.85
    if (
        algo in (Algo.NVLS, Algo.COLLNET_DIRECT)
        and proto == Proto.SIMPLE
        and func in (Func.ALL_GATHER, Func.REDUCE_SCATTER)
        and nodes > 1
    ):
        bus = 0.0  # needs the fabric's all-gather/reduce-scatter offload, not modelled
    bus *= _alg_ratio(c, func, algo, n, steps)
    bus *= c.bw_efficiency[0 if nodes == 1 else 1][algo][proto]
    return _latency(comm, c, func, algo, proto, steps, graph, ppn), bus


def _nvls_bw(
    comm: Communicator, c: TunerConstants, func: Func, algo: Algo, graph: Graph, node_index: int
) -> float:
    """NVLS / NVLSTree bandwidth per channel, GB/s, by the release's rule
    (:attr:`TunerConstants.nvls_bw_rule`)."""
    nodes, ppn = comm.n_nodes, comm.ranks_per_node
    if c.nvls_bw_rule == "efficiency":
        gen = generation(comm.compcap, c)
        intra = graph.bw_intra_gbps * c.nvls_efficiency[gen] * (graph.n_channels - 1) / graph.n_channels
        intra *= 2.0 if func == Func.ALL_REDUCE else (ppn - 1) / ppn  # all-reduce pipelines two ops
        inter = graph.bw_inter_gbps * (2 if nodes <= 2 and algo == Algo.NVLS_TREE else 1)
        return min(intra, inter, c.nvls_tree_max_bw[gen][node_index] if algo == Algo.NVLS_TREE else math.inf)
    if algo == Algo.NVLS_TREE:
        return min(graph.bw_intra_gbps, graph.bw_inter_gbps if nodes <= 2 else graph.bw_inter_gbps / 2)
    if c.nvls_bw_rule == "min-gather" and func in (Func.ALL_GATHER, Func.REDUCE_SCATTER):
        return min(graph.bw_intra_gbps * (ppn - 1) / ppn, graph.bw_inter_gbps * 0.9)
    return min(graph.bw_intra_gbps, graph.bw_inter_gbps)


def _alg_ratio(c: TunerConstants, func: Func, algo: Algo, n: int, steps: int) -> float:
    """Bus bandwidth to algorithm bandwidth: ranks / steps for a ring, NVLS's by
    the release (:attr:`TunerConstants.nvls_ratio`), 1/2 for the others; none
    for a non-ring all-gather or reduce-scatter (but NVLS's up to 2.22)."""
    nvls = algo in (Algo.NVLS, Algo.NVLS_TREE)
    gather = func in (Func.ALL_GATHER, Func.REDUCE_SCATTER)
    if algo != Algo.RING and gather and not (nvls and c.nvls_gather_ratio):
        return 1.0
    if algo == Algo.RING:
        return n / steps
    if nvls:
        return n / steps if c.nvls_ratio is None else c.nvls_ratio
    return 0.5


def _latency(
    comm: Communicator,
    c: TunerConstants,
    func: Func,
    algo: Algo,
    proto: Proto,
    steps: int,
    graph: Graph,
    ppn: float,
) -> float:
    """NCCL's latency of one operation, µs."""
    n, nodes = comm.n_ranks, comm.n_nodes
    intra_kind = NVLINK if graph.nvlink else PCI
    kind = intra_kind if nodes == 1 else NET
    hw = c.hw_latency_us
    latency = c.base_latency_us[algo][proto]
    intra = hw[intra_kind][algo][proto]
    # with one GPU per node every step is exposed: NCCL takes the tree's network latency
    inter = (
        hw[NET][Algo.TREE if ppn == 1 and c.ppn1_tree_net_latency else algo][proto] + graph.latency_inter_us
    )
    if proto == Proto.SIMPLE:
        inter += graph.latency_inter_us  # the flush
    local = n // nodes
    if algo == Algo.RING:
        hop = hw[kind][algo][proto]
        if func in (Func.REDUCE, Func.BROADCAST):
            if graph.same_channels:
                return latency + hop
            if proto == Proto.SIMPLE:
                hop = hw[kind][Algo.TREE][proto]
            return latency + steps * hop
        overhead = 0.0
        if nodes > 1:
            overhead = NET_OVERHEAD_US.get(comm.cpu_vendor, 1.0) * (3 if proto == Proto.SIMPLE else 1)
        intra = max(intra, overhead)
        inter_steps = 0 if nodes == 1 else 2 * (nodes - 1) if func == Func.ALL_REDUCE else nodes - 1
        if c.ring_inter_steps_2n and nodes > 1 and func == Func.ALL_REDUCE:
            inter_steps = 2 * nodes
        return latency + (steps - inter_steps) * intra + inter_steps * inter
    if algo == Algo.TREE:
        if func == Func.ALL_REDUCE:
            latency += 2 * ((local - 1) * intra + _log2i(nodes) * inter)
        return latency
    if algo == Algo.COLLNET_DIRECT:  # + 0.4 µs arity serialization per local rank
        return latency + 2 * (min(1, local - 1) * intra + (local - 1) * 0.4) + inter
    if algo == Algo.COLLNET_CHAIN:
        return latency + 2 * (local - 1) * intra + inter
    if algo == Algo.NVLS:
        return intra + (inter if nodes > 1 else 0.0)
    if algo == Algo.NVLS_TREE:
        return latency + intra + 2 * _log2i(nodes) * inter
    if func in (Func.ALL_GATHER, Func.REDUCE_SCATTER):  # PAT
        return latency + _log2i(nodes) * (inter / 3.5) + n * 2.8
    return latency


def _apply_enables(tuning: Tuning, nccl_algo: str | None, nccl_proto: str | None) -> None:
    """Zero the bandwidth of what NCCL's defaults and the user's NCCL_ALGO /
    NCCL_PROTO disable."""
    comm = tuning.comm
    algos = parse_env_list(nccl_algo, FUNC_NAMES, ALGO_NAMES, "NCCL_ALGO") if nccl_algo else None
    protos = parse_env_list(nccl_proto, FUNC_NAMES, PROTO_NAMES, "NCCL_PROTO") if nccl_proto else None
    for func in Func:
        for algo in Algo:
            chosen = algos[func] if algos is not None else None
            off = (
                (chosen is not None and not chosen[algo])
                or (comm.n_nodes == 1 and algo == Algo.NVLS_TREE)
                or (
                    not comm.collnet
                    and (
                        algo in (Algo.COLLNET_DIRECT, Algo.COLLNET_CHAIN)
                        or (algo == Algo.NVLS and comm.n_nodes > 1)
                    )
                )
                or (not comm.nvswitch and algo == Algo.COLLNET_DIRECT)
                or (algo in (Algo.NVLS, Algo.NVLS_TREE) and comm.local_ranks < tuning.constants.nvls_min_gpus)
            )
            graph = comm.graphs.get(algo)
            named = protos[func] if protos is not None else None
            for proto in Proto:
                enabled = named[proto] if named is not None else True
                if proto == Proto.LL128 and named is None:
                    # LL128 by default only where NCCL trusts its ordering: Hopper and later
                    # up to PXN, older GPUs up to PXB, NVLink or PCI switch inside
                    enabled = enabled and graph is not None and graph.ll128_ok and comm.compcap >= 70
                if off or not enabled:
                    tuning.bandwidth_gbps[func][algo][proto] = 0.0


def with_profile(constants: TunerConstants, profile: NcclProfile) -> TunerConstants:
    """``constants`` with a calibrated profile's cells replaced
    (:mod:`astra_core.config.nccl_profile`): base and hardware latencies,
    bandwidth efficiencies, the launch time."""

    base, hw, eff = constants.base_latency_us, constants.hw_latency_us, constants.bw_efficiency
    for cell, value in profile.base_latency_us.items():
        base = _put(base, cell, value)
    for cell3, value in profile.hw_latency_us.items():
        hw = _put(hw, cell3, value)
    for cell3, value in profile.bw_efficiency.items():
        eff = _put(eff, cell3, value)
    return replace(
        constants,
        base_latency_us=base,
        hw_latency_us=hw,
        bw_efficiency=eff,
        launch_us=constants.launch_us if profile.launch_us is None else profile.launch_us,
    )
