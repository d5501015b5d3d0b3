"""The channels NCCL gives a send or receive with a peer on another node, and their rate.

NCCL splits the traffic between two ranks over ``p2pnChannelsPerPeer`` channels
(``ncclTopoGetNchannels`` and ``ncclTopoComputeP2pChannels``, ``src/graph/paths.cc``).
Over the network each channel is one proxy stream of ``NCCL_P2P_NET_CHUNKSIZE``
pieces, ``NCCL_STEPS`` of them in flight. NCCL rates such a stream at
``NCCL_P2P_PER_CHANNEL_NET_BW`` = 14 GB/s when it decides how many a NIC needs
(2.29 on), so one peer's data crosses the network at no more than that per channel.
How many channels a peer gets changed between releases
(:attr:`~.tuning.TunerConstants.p2p_net_channels`):

* ``"fixed"`` (2.19): ``NCCL_NCHANNELS_PER_NET_PEER``, 2;
* ``"ranks"`` (2.20 to 2.28.9): 2, halved while ``2 x ranks > 4 x p2pnChannels``
  ("avoid overloading channels with 8+ operations"), at least one per NIC;
* ``"bandwidth"`` (2.29.2 on): one channel per 14 GB/s of the GPU's NICs, then, with
  more than one node, halved while ``channels x ceil(ranks / 8)`` exceeds
  ``p2pnChannels`` (8 peers per channel and round: ``NCCL_MAX_DEV_WORK_P2P_PER_BATCH``).

``p2pnChannels`` is the communicator's channel count (``comm->nChannels``, at most
``MAXCHANNELS`` 64) rounded up to a power of two, and so is the count per peer.

Checked, not fitted, against public nccl-tests ``sendrecv_perf`` logs of 10 nodes of
8 H100 with one 400 Gb/s NIC per GPU (NCCL 2.29.2; tests/data/nccl_tests): with 1, 2
and 4 GPUs per node NCCL gives a peer 2 channels and 25-26 GB/s were measured, with
8 it gives 1 channel and 15.2 GB/s were measured (docs/validation-nccl.md).
"""

from __future__ import annotations

import math
from typing import Literal

#: One network channel's rate as NCCL sizes the count (``NCCL_P2P_PER_CHANNEL_NET_BW``,
#: src/graph/paths.cc, 2.29 on) [GB/s].
PER_CHANNEL_NET_GBPS = 14.0
#: Peers one p2p channel serves per round (``NCCL_MAX_DEV_WORK_P2P_PER_BATCH``, src/include/device.h).
PEERS_PER_ROUND = 8
MAX_CHANNELS = 64  # MAXCHANNELS (src/include/device.h)


def _pow2_up(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def net_peer_channels(
    rule: Literal["bandwidth", "ranks", "fixed"], ranks: int, nodes: int, comm_channels: int, nic_gbps: float
) -> int:
    """The channels NCCL gives one peer on another node (see the module docstring).

    ``ranks`` and ``nodes``: the communicator's; ``comm_channels``: its ``nChannels``;
    ``nic_gbps``: the port speed of the GPU's NIC as NCCL reads it [GB/s] (one NIC per
    GPU: a rail-optimised node)."""
    p2p = _pow2_up(max(1, min(comm_channels, MAX_CHANNELS)))
    if rule == "bandwidth":
        per = _pow2_up(max(1, math.ceil(int(nic_gbps) / PER_CHANNEL_NET_GBPS)))
        if nodes > 1:
            while per * math.ceil(ranks / PEERS_PER_ROUND) > p2p and per > 1:
                per //= 2
            return per
        return min(per, p2p)
    per = 2  # a power of two, as p2p is: their minimum needs no rounding
    if rule == "ranks":
        while per * ranks > p2p * 4 and per > 1:
            per //= 2
    return min(per, p2p)


def net_peer_gbps(channels: int, nic_gbps: float) -> float:
    """What one peer's send reaches over the network with ``channels`` channels: their
    rate as NCCL sizes them, at most the NIC's line rate [GB/s]."""
    return min(nic_gbps, channels * PER_CHANNEL_NET_GBPS)
