"""What NCCL's topology search finds on NVSwitch nodes joined by rail NICs.

NCCL (``ncclTopoCompute``, ``src/graph/search.cc``, commit 5067397c) looks
for each algorithm's channels by trying per-channel speeds from a fixed list,
fastest first, keeping the solution with the most total bandwidth (NVLS: the
most channels), then duplicating channels and trying faster speeds again.
astra's machines are nodes of ``L`` GPUs on NVSwitches (network dimension 0)
with one or more NICs per node on rails (the dimensions above), so the search
reduces to counting how many channels fit at each speed:

* inside a node every channel enters and leaves each GPU once through its
  NVSwitch link of ``B`` GB/s (the GPU's NVLinks as NCCL rates them), so
  ``floor(B / s)`` channels fit at speed ``s``; across nodes the channel that
  leaves a node does not use the last GPU's NVLink out, so ``L`` channels
  spread over ``L`` exit GPUs load each GPU ``(L-1)/L`` as much, and each
  channel needs a NIC port of at least ``s``;
* an NVLS channel (one head GPU) loads every GPU's NVSwitch link with ``s``
  and its head's twice (``ncclTopoSearchTryNvls``): ``(c + 1) s <= B``; on
  one node it must pull from every GPU (``minChannels = maxChannels = L``).

The constants are NCCL's: the speed lists ``speedArrayIntra/Inter``,
``sm90SpeedArray*``, ``sm100SpeedArray*``; ``MAXCHANNELS / 2`` ring channels;
channel duplication (``ncclTopoDupChannels``: when the speed is at least 25
GB/s, except beyond SM 80 below 50 GB/s with more than 4 channels); pass 2
raising a ring's speed, an NVLS graph's network speed up to twice its NVLink
speed, and a tree's NVLink speed up to twice its network speed.

Not modelled (astra's networks have none of it): PCI-only or NVLink-mesh
nodes, NICs shared through PCI switches slower than the NIC, cross-NIC rings.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from astra_core.config.gpus import GPUSpec
from astra_core.system.collectives.nccl.tuning import Algo, Communicator, Graph

SPEEDS_INTRA = {
    80: (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    90: (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    100: (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
SPEEDS_INTER = {
    80: (
        48.0,
        30.0,
        28.0,
        24.0,
        20.0,
        18.0,
        15.0,
        12.0,
        10.0,
        9.0,
        7.0,
        6.0,
        5.0,
        4.0,
        3.0,
        2.4,
        1.2,
        0.24,
        0.12,
    ),
    90: (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
    100: (
        96.0,
        86.0,
        80.0,
        48.0,
        45.1,
        42.0,
        40.0,
        30.0,
        24.0,
        22.0,
        20.0,
        17.5,
        15.0,
        12.0,
        6.0,
        3.0,
        2.4,
        1.2,
        0.24,
        0.12,
    ),
}
MAX_RING_CHANNELS = 32  # MAXCHANNELS / 2 (device.h MAXCHANNELS 64; init.cc)
MAX_NVLS_ARITY = 32  # NCCL_MAX_NVLS_ARITY
#: PCIe between a GPU and its NIC: Gen5 x16 as NCCL rates it (``width * speed / 80``
#: with 32 GT/s = 320 in 100 Mb/s units: 16 * 320 / 80 = 64 GB/s).
PCIE_GEN5_X16_GBPS = 64.0


def _speeds(table: dict[int, tuple[float, ...]], compcap: int) -> tuple[float, ...]:
    return table[100] if compcap >= 100 else table[90] if compcap >= 90 else table[80]


@dataclass(frozen=True)
class Machine:
    """The hardware one NCCL communicator spans.

    ``ranks``: GPUs in the communicator; ``gpus_per_node``: of them per node
    (the NVSwitch domain); ``gpu``: the model; ``nvlink_gbps``: NCCL's
    NVLink bandwidth of one GPU (line rate x the model's efficiency, GB/s);
    ``nic_gbps``: one NIC port as NCCL rates it; ``nics_per_node``;
    ``nvls``: NVLink SHARP enabled; ``collnet``: the network reduces
    (InfiniBand SHARP); ``cpu_vendor``: ``intel``, ``amd`` or ``other``.
    """

    ranks: int
    gpus_per_node: int
    gpu: GPUSpec
    nvlink_gbps: float
    nic_gbps: float = 0.0
    nics_per_node: int = 0
    nvls: bool = True
    collnet: bool = False
    cpu_vendor: str = "intel"

    @property
    def nodes(self) -> int:
        return self.ranks // self.gpus_per_node


@dataclass(frozen=True)
class _Search:
    """One graph search: channel range and how many channels fit at a speed."""

    speeds: tuple[float, ...]
    max_bw: float
    total_bw: float
    min_channels: int
    max_channels: int
    fits: Callable[[float], int]  # speed -> channels
    nvls: bool = False


def _run(search: _Search, compcap: int) -> tuple[int, float]:
    """NCCL's two search passes: (channels, speed per channel); (0, 0) if none."""
    speeds = search.speeds
    index = 0
    while index < len(speeds) - 1 and (
        speeds[index] > search.max_bw or speeds[index] * search.min_channels > search.total_bw
    ):
        index += 1
    best = (0, 0.0)
    while True:
        s = speeds[index]
        n = min(search.max_channels, search.fits(s))
        if n >= search.min_channels and n > 0:
            better = n > best[0] if search.nvls else n * s > best[0] * best[1]
            if better:
                best = (n, s)
            if n == search.max_channels or n * s >= search.total_bw:
                break
        if index >= len(speeds) - 1 or (best[0] and speeds[index + 1] / best[1] <= 0.49):
            break
        index += 1
    n, s = best
    if n and s >= 25.0 and not (compcap > 80 and s < 50.0 and n > 4) and not search.nvls:
        dup = min(2 * n, search.max_channels)
        s /= math.ceil(dup / n)
        n = dup
    return n, s


def _raise_speed(n: int, s: float, speeds: tuple[float, ...], fits: Callable[[float], int]) -> float:
    """Pass 2: the fastest speed above ``s`` at which ``n`` channels still fit."""
    for faster in sorted(v for v in speeds if v > s):
        if fits(faster) >= n:
            s = faster
    return s


def search_graphs(machine: Machine) -> dict[Algo, Graph]:
    """The :class:`Graph` of each algorithm NCCL can build on ``machine``."""
    m = machine
    cc = m.gpu.compcap
    L, B = m.gpus_per_node, m.nvlink_gbps
    graphs: dict[Algo, Graph] = {}
    if m.nodes == 1:
        if L == 1:
            return graphs
        speeds = _speeds(SPEEDS_INTRA, cc)
        one_node_ring_fits = lambda s: int(B / s + 1e-9)  # noqa: E731
        n, s = _run(_Search(speeds, B, B, 1, MAX_RING_CHANNELS, one_node_ring_fits), cc)
        s = _raise_speed(n, s, speeds, one_node_ring_fits)
        graphs[Algo.RING] = Graph(n, s, s)
        tn, ts = _run(_Search(speeds, B, B, n, n, one_node_ring_fits), cc)
        graphs[Algo.TREE] = Graph(tn, ts, ts)
        if m.nvls and m.gpu.nvls:
            heads = min(MAX_NVLS_ARITY, L)
            nvls_fits = lambda s: heads if (heads + 1) * s <= B + 1e-9 else 0  # noqa: E731
            vn, vs = _run(_Search(speeds, B, B, heads, heads, nvls_fits, nvls=True), cc)
            if vn:
                # pass 2 raises only the (unused on one node) network speed, up to 2x
                inter = max([v for v in speeds if v < 2 * vs] + [vs])
                graphs[Algo.NVLS] = graphs[Algo.NVLS_TREE] = Graph(vn, vs, inter)
        return graphs
    speeds = _speeds(SPEEDS_INTER, cc)
    nic = min(m.nic_gbps, PCIE_GEN5_X16_GBPS)
    nics = m.nics_per_node
    if not nics or nic <= 0:
        return graphs
    total = max(B, PCIE_GEN5_X16_GBPS) if L > 1 else PCIE_GEN5_X16_GBPS

    def ring_fits(s: float) -> int:
        through_nics = nics * int(nic / s + 1e-9)
        if L == 1:
            return through_nics
        return min(through_nics, int(B * L / ((L - 1) * s) + 1e-9))

    n, s = _run(_Search(speeds, nic, total, 1, MAX_RING_CHANNELS, ring_fits), cc)
    if not n:
        return graphs
    s = _raise_speed(n, s, speeds, ring_fits)
    graphs[Algo.RING] = Graph(n, s, s, nvlink=L > 1)
    tree_total = total * nics / (nics - 1) if nics > 1 else total
    tn, ts = _run(_Search(speeds, nic, tree_total, n, n, ring_fits), cc)
    graphs[Algo.TREE] = Graph(tn or n, ts or s, ts or s, nvlink=L > 1)
    if m.nvls and m.gpu.nvls and L > 1:
        heads_max = min(MAX_NVLS_ARITY, L)

        def nvls_fits(s: float) -> int:
            intra = int(B / s + 1e-9) - 1  # (c + 1) s <= B
            return max(0, min(intra, nics * int(nic / s + 1e-9), heads_max))

        vn, vs = _run(_Search(speeds, nic, total, 1, heads_max, nvls_fits, nvls=True), cc)
        if vn:
            inter = vs
            for faster in sorted(v for v in speeds if v > vs):
                if faster < 2 * vs and nics * int(nic / faster + 1e-9) >= vn:
                    inter = faster
            graphs[Algo.NVLS] = graphs[Algo.NVLS_TREE] = Graph(vn, vs, inter)
    if m.collnet:
        # CollNet chain: the ring's channels (init.cc: min = max = ring channels);
        # CollNet direct: one head per NIC, at most NCCL_MAX_DIRECT_ARITY + 1 = 8
        graphs[Algo.COLLNET_CHAIN] = Graph(n, s, s, nvlink=L > 1)
        heads = min(nics, L, 8)
        graphs[Algo.COLLNET_DIRECT] = Graph(heads, s, s, nvlink=L > 1)
    return graphs


def communicator(machine: Machine) -> Communicator:
    """NCCL's :class:`~astra_core.system.collectives.nccl.tuning.Communicator` for ``machine``."""
    return Communicator(
        n_ranks=machine.ranks,
        n_nodes=machine.nodes,
        compcap=machine.gpu.compcap,
        graphs=search_graphs(machine),
        cpu_vendor=machine.cpu_vendor,
        collnet=machine.collnet,
        nvls=machine.nvls and machine.gpu.nvls,
        nvswitch=machine.gpus_per_node > 1,
        pat=False,
    )  # PAT's message pattern is not modelled: NCCL's choice leaves it out
