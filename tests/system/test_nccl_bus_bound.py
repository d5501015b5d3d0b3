"""The NCCL model's line-rate floor (astra_core.system.collectives.nccl.bus_bound):
no profile makes a collective faster than its bytes over its links' line rate."""

from __future__ import annotations

import pytest

from astra_core.config.nccl import NcclConfig
from astra_core.config.nccl_profile import NcclProfile
from astra_core.config.network import NetworkConfig
from astra_core.system.collectives.nccl.bus_bound import line_rate_floor_us
from astra_core.system.collectives.nccl.model import NcclModel
from astra_core.system.collectives.nccl.tuning import Algo, Func, Proto, constants_for, with_profile
from astra_core.system.comm_types import CommType

MIB = 2**20
NVLINK_GBPS = 450.0  # H100 SXM: 18 NVLink4 links x 25 GB/s per direction
NIC_GBPS = 50.0  # one 400 Gb/s NDR port per GPU
# network.yml counts 1 GB as 2^30 bytes: 450 GB/s is 419.095 there
ONE_NODE = {"topology": ["Switch"], "npus_count": [8], "bandwidth": [419.095], "latency": [300]}
FOUR_NODES = {
    "topology": ["Switch", "Switch"],
    "npus_count": [8, 4],
    "bandwidth": [419.095, 46.566],
    "latency": [300, 1350],
}


def model(efficiency: float, network: dict, **nccl) -> NcclModel:
    """8 H100s a node whose profile multiplies every cell's bus bandwidth by
    ``efficiency`` (built in Python: the profile loader refuses more than 1)."""
    profile = NcclProfile(
        bw_efficiency={(scope, a, p): efficiency for scope in (0, 1) for a in Algo for p in Proto}
    )
    config = NcclConfig.model_validate({"gpu": "H100", **nccl})
    constants = with_profile(constants_for(config.version), profile)
    return NcclModel(config, NetworkConfig.from_dict(network), "system.json", constants)


@pytest.mark.parametrize("efficiency", [1.0, 1.2, 5.0, 20.0, 1e6])
@pytest.mark.parametrize("proto", ["Simple", "LL128", "LL"])
def test_a_ring_all_reduce_on_8_h100s_never_beats_nvlink(efficiency, proto):
    # bw-efficiency 5 read as given would make a 64 MiB ring all-reduce take 121 µs (Simple).
    floor_us = 2 * 7 / 8 * 64 * MIB / (NVLINK_GBPS * 1e3)  # 261 µs
    nccl = model(efficiency, ONE_NODE, NCCL_ALGO="Ring", NCCL_PROTO=proto)
    algo, chosen, _, time_us, nbytes = nccl.choose(CommType.ALL_REDUCE, tuple(range(8)), 64 * MIB)
    assert (algo, chosen.name, nbytes) == (Algo.RING, proto.upper(), 64 * MIB)
    assert time_us >= floor_us * (1 - 1e-9)
    if efficiency == 1e6:
        assert time_us == pytest.approx(floor_us, rel=1e-5)  # the floor is what is left


@pytest.mark.parametrize("efficiency", [1.0, 5.0, 1e6])
def test_nvls_reduces_in_the_switch_and_is_floored_at_the_buffer_over_nvlink(efficiency):
    """NVLS's switch reduces: a GPU sends its 64 MiB once and receives the sum once."""
    nccl = model(efficiency, ONE_NODE)
    algo, _, _, time_us, _ = nccl.choose(CommType.ALL_REDUCE, tuple(range(8)), 64 * MIB)
    assert algo == Algo.NVLS
    assert time_us >= 64 * MIB / (NVLINK_GBPS * 1e3) * (1 - 1e-9)


@pytest.mark.parametrize(
    ("comm_type", "size", "bus_bytes"),
    [
        (CommType.ALL_GATHER, 8 * MIB, 7 * 8 * MIB),  # a rank's 8 MiB part: 7 parts come in
        (CommType.REDUCE_SCATTER, 64 * MIB, 7 / 8 * 64 * MIB),  # 7 shares of the input go out
    ],
)
def test_gathers_and_scatters_never_beat_nvlink(comm_type, size, bus_bytes):
    nccl = model(1e6, ONE_NODE)
    time_us = nccl.choose(comm_type, tuple(range(8)), size)[3]
    assert time_us == pytest.approx(bus_bytes / (NVLINK_GBPS * 1e3), rel=1e-5)


def test_a_ring_all_reduce_on_4_nodes_never_beats_their_nics():
    """Across 4 nodes the node's 8 NICs (400 GB/s) carry 2 x 3/4 of the buffer each
    way; a GPU's NVLinks and the NICs together carry 2 x 31/32 of it."""
    nccl = model(1e6, FOUR_NODES, NCCL_ALGO="Ring")
    time_us = nccl.choose(CommType.ALL_REDUCE, tuple(range(32)), 64 * MIB)[3]
    per_node = 2 * 3 / 4 * 64 * MIB / (8 * NIC_GBPS * 1e3)
    per_gpu = 2 * 31 / 32 * 64 * MIB / ((NVLINK_GBPS + 8 * NIC_GBPS) * 1e3)
    assert per_node > per_gpu
    assert time_us == pytest.approx(per_node, rel=1e-5)


@pytest.mark.parametrize("network", [ONE_NODE, FOUR_NODES], ids=["one-node", "four-nodes"])
def test_nccls_own_times_lie_above_the_floor(network):
    """NCCL's tables rate links below their line rate: without a profile the floor
    never decides a time (it would be too high if it did)."""
    nccl = NcclModel(NcclConfig.model_validate({"gpu": "H100"}), NetworkConfig.from_dict(network))
    nodes = network["npus_count"][1] if len(network["npus_count"]) > 1 else 1
    n = 8 * nodes
    nics = NIC_GBPS * 8 if nodes > 1 else 0.0
    for comm_type, func in (
        (CommType.ALL_REDUCE, Func.ALL_REDUCE),
        (CommType.ALL_GATHER, Func.ALL_GATHER),
        (CommType.REDUCE_SCATTER, Func.REDUCE_SCATTER),
    ):
        for size in (8, 64 * 1024, 64 * MIB, 4096 * MIB):
            algo, _, _, time_us, nbytes = nccl.choose(comm_type, tuple(range(n)), size)
            floor = line_rate_floor_us(func, algo, nbytes, n, nodes, NVLINK_GBPS, nics)
            assert time_us > floor * 1.05, (comm_type, size, algo)
