"""NCCL releases 2.19 to 2.30: which constants and rules each one's cost model has,
and the choices that follow on H100 machines.

Expected values are closed forms of NCCL's tuning.cc at each release's tag, written
out here (the constants named beside them), never read back from astra's tables.
The machines are test_nccl_model's: one 8 x H100 node (the search gives Ring 12 x 30
GB/s, NVLS 8 x (40 intra, 60 inter)) and 4 such nodes with 8 x 50 GB/s NICs (Ring and
Tree 8 x 48, NVLSTree 8 x (40, 48))."""

from __future__ import annotations

import pytest

from astra_core.config.nccl import NCCL_RELEASES, NcclConfig
from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.errors import ConfigError
from astra_core.system.collectives.nccl.model import NcclModel
from astra_core.system.collectives.nccl.topology import communicator
from astra_core.system.collectives.nccl.tuning import (
    DEFAULT_CONSTANTS,
    NCCL_VERSIONS,
    TREE_CORRECTION,
    Algo,
    Func,
    Proto,
    constants_for,
    tune,
)
from astra_core.system.comm_types import CommType
from tests.system.test_nccl_model import h100_4nodes, h100_configs, h100_node

MIB = 1 << 20
AR, AG = Func.ALL_REDUCE, Func.ALL_GATHER
OLD_NVLS = ("2.19.3", "2.20.5")  # hwLat NVLink NVLS 23 µs, llMaxBws Hopper N1 87.7, Ring LL x 1/4


def before(version: str, minor: tuple[int, int]) -> bool:
    """``version`` is older than NCCL 2.``minor``."""
    return tuple(int(part) for part in version.split("."))[:2] < minor


def one_node(version: str):
    return tune(communicator(h100_node()), constants=NCCL_VERSIONS[version])


def four_nodes(version: str):
    return tune(communicator(h100_4nodes()), constants=NCCL_VERSIONS[version])


# -- the table of releases -------------------------------------------------------------


def test_every_named_release_has_constants_and_the_newest_is_the_default():
    assert tuple(NCCL_VERSIONS) == NCCL_RELEASES
    assert NCCL_VERSIONS[NCCL_RELEASES[-1]] is DEFAULT_CONSTANTS
    assert constants_for(None) is DEFAULT_CONSTANTS


@pytest.mark.parametrize(
    "written, release",
    [
        ("2.24.3", "2.24.3"),
        ("2.24", "2.24.3"),
        ("2.28", "2.28.9"),  # a minor alone: its newest modelled release
        ("v2.28.7-1", "2.28.7"),  # NCCL's tag
        ("2.28.8", "2.28.7"),  # a patch between: the modelled one before it
        ("2.28.10", "2.28.9"),
        ("2.26.6", "2.26.2"),
        ("2.19.1", "2.19.3"),  # older than every modelled 2.19: the first
        ("2.30", "2.30.7"),
    ],
)
def test_versions_resolve_to_a_modelled_release(written, release):
    assert constants_for(written) is NCCL_VERSIONS[release]


@pytest.mark.parametrize("version", ["2.18", "2.31.0", "3.0", "latest"])
def test_an_unmodelled_version_is_one_line_naming_the_key_and_the_releases(version):
    with pytest.raises(ConfigError) as raised:
        constants_for(version)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"nccl.version: unknown or unmodelled NCCL version {version!r}; modelled: ")
    assert message.endswith(", ".join(NCCL_RELEASES))


def system(nccl: dict) -> SystemConfig:
    return SystemConfig.from_dict(
        {
            "scheduling-policy": "LIFO",
            "collective-optimization": "baseline",
            "preferred-dataset-splits": 1,
            "all-reduce-implementation": ["nccl"],
            "nccl": nccl,
        }
    )


def test_system_json_reports_a_bad_version_as_one_line():
    with pytest.raises(ConfigError) as raised:
        system({"gpu": "H100", "version": "2.18.5"})
    lines = [line for line in str(raised.value).splitlines() if "nccl.version" in line]
    assert len(lines) == 1
    assert "unknown or unmodelled NCCL version '2.18.5'; modelled: 2.19.3, 2.20.5" in lines[0]
    with pytest.raises(ConfigError, match=r"nccl\.version: .*got the number 2\.24: write it in quotes"):
        system({"gpu": "H100", "version": 2.24})


def test_the_version_is_kept_as_written():
    config = system({"gpu": "H100", "version": "2.24"}).nccl
    assert isinstance(config, NcclConfig)
    assert config.version == "2.24"
    assert config.to_dict() == {"gpu": "H100", "version": "2.24"}
    assert system({"gpu": "H100"}).nccl.version is None  # type: ignore[union-attr]


# -- one node: NVLS all-reduce ----------------------------------------------------------


@pytest.mark.parametrize("version", NCCL_RELEASES)
def test_nvls_latency_is_23_us_before_2_21_and_25_after(version):
    # NVLS latency = hwLat[NVLINK][NVLS][Simple] on one node (its base latency is 0)
    expected = 23.0 if version in OLD_NVLS else 25.0
    assert one_node(version).latency_us[AR][Algo.NVLS][Proto.SIMPLE] == pytest.approx(expected)


@pytest.mark.parametrize("version", NCCL_RELEASES)
def test_one_mib_all_reduce_on_one_node_is_nvls_on_2_19_and_2_20_ring_ll_after(version):
    nbytes = MIB
    tuning = one_node(version)
    algo, proto, time_us = tuning.choose(AR, nbytes)
    if version in OLD_NVLS:
        # NVLS: min(bwIntra 40, bwInter 60) x 8 channels x 5/6, 23 µs
        assert (algo, proto) == (Algo.NVLS, Proto.SIMPLE)
        assert time_us == pytest.approx(23.0 + nbytes / (1e3 * 8 * 40 * 5 / 6))
        # what lost: Ring/LL at min(llMaxBws 87.7, 12 x 30 / 4) x 8/14, 6.6 + 14 x 0.6 µs
        ring_ll = 6.6 + 14 * 0.6 + nbytes / (1e3 * min(87.7, 12 * 30 / 4) * 8 / 14)
        assert tuning.time_us(AR, Algo.RING, Proto.LL, nbytes) == pytest.approx(ring_ll)
        assert time_us < ring_ll
    else:
        # Ring/LL at min(llMaxBws 141, 12 x 30 x 0.5) x 8/14
        assert (algo, proto) == (Algo.RING, Proto.LL)
        assert time_us == pytest.approx(6.6 + 14 * 0.6 + nbytes / (1e3 * min(141.0, 12 * 30 * 0.5) * 8 / 14))


@pytest.mark.parametrize("version", NCCL_RELEASES)
def test_nvls_all_reduce_bandwidth_by_release(version):
    tuning = one_node(version)
    if before(version, (2, 28)):
        bus = 8 * min(40.0, 60.0) * 5 / 6  # min(bwIntra, bwInter), the fixed 5/6
    else:  # nvlsEfficiency 0.85 x (c-1)/c, x 2 for an all-reduce, capped by bwInter; x ranks/steps
        bus = 8 * min(40 * 0.85 * 7 / 8 * 2, 60.0) * 8 / 14
    assert tuning.bandwidth_gbps[AR][Algo.NVLS][Proto.SIMPLE] == pytest.approx(bus)


# -- one node: NVLS all-gather ----------------------------------------------------------


def ring_all_gather_us(proto: Proto, nbytes: int, version: str) -> float:
    """Ring all-gather on one 8 x H100 node: 7 NVLink steps, bus x 8/7."""
    ring = 12 * 30.0
    if proto == Proto.LL:
        bus = min(87.7, ring / 3) if version in OLD_NVLS else min(141.0, ring * 0.5)
        return 6.6 + 7 * 0.6 + nbytes / (1e3 * bus * 8 / 7)
    if proto == Proto.LL128:
        return 14.0 + 7 * 1.9 + nbytes / (1e3 * min(ring * 0.92, 12 * 36.7) * 8 / 7)
    return 8.4 + 7 * 3.4 + nbytes / (1e3 * ring * 8 / 7)


def nvls_all_gather_us(nbytes: int, version: str) -> float:
    if version in OLD_NVLS:
        return 23.0 + nbytes / (1e3 * 8 * 40 * 5 / 6)  # the 5/6 ratio, 2.19 to 2.22
    if before(version, (2, 27)):
        return 25.0 + nbytes / (1e3 * 8 * 40)  # no ratio for a non-ring all-gather (2.23 on)
    if before(version, (2, 28)):
        return 25.0 + nbytes / (1e3 * 8 * min(40 * 7 / 8, 60 * 0.9))  # bwIntra x (ppn-1)/ppn
    return 25.0 + nbytes / (1e3 * 8 * min(40 * 0.85 * 7 / 8 * 7 / 8, 60.0))


@pytest.mark.parametrize(
    "version, nbytes, algo",
    [
        ("2.20.5", 3_000_000, Algo.NVLS),  # 2.19 and 2.20: NVLS from 1.97 MB
        ("2.24.3", 3_000_000, Algo.RING),
        ("2.24.3", 4_700_000, Algo.NVLS),  # 2.23 to 2.26: a sliver at 4.64 to 4.78 MB
        ("2.26.2", 4_700_000, Algo.NVLS),
        ("2.27.3", 4_700_000, Algo.RING),  # 2.27 on: never NVLS
        ("2.30.7", 4_700_000, Algo.RING),
    ],
)
def test_nvls_all_gather_on_one_node_by_release(version, nbytes, algo):
    tuning = one_node(version)
    times = {(Algo.RING, p): ring_all_gather_us(p, nbytes, version) for p in Proto}
    times[Algo.NVLS, Proto.SIMPLE] = nvls_all_gather_us(nbytes, version)
    best = min(times, key=lambda key: times[key])
    chosen = tuning.choose(AG, nbytes)
    assert chosen[0] == algo == best[0]
    assert chosen[1:] == (best[1], pytest.approx(times[best]))


# -- four nodes ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", NCCL_RELEASES)
def test_inter_node_ring_steps(version):
    comm = communicator(h100_4nodes())
    tuning = tune(comm, constants=NCCL_VERSIONS[version])
    # Ring/LL: base 6.6; an NVLink step max(0.6, the 1 µs Intel net overhead); a network
    # step 2.7 + the graph's latencyInter. All-reduce: 62 steps, 2 x 4 of them on the
    # network before 2.23 (nInterSteps = 2 nNodes), 2 x 3 after; all-gather: 31 and 3.
    net = 2.7 + comm.graphs[Algo.RING].latency_inter_us
    inter = 8 if before(version, (2, 23)) else 6
    assert tuning.latency_us[AR][Algo.RING][Proto.LL] == pytest.approx(6.6 + (62 - inter) * 1.0 + inter * net)
    assert tuning.latency_us[AG][Algo.RING][Proto.LL] == pytest.approx(6.6 + 28 * 1.0 + 3 * net)


@pytest.mark.parametrize("version", NCCL_RELEASES)
def test_channels_double_to_32_on_2_19_only(version):
    tuning = four_nodes(version)
    # 2 x min(ring 8, tree 8) = 16 channels, doubled on SM 90 across nodes (ring bwIntra
    # 48 > 45) while 2 x 16 <= MAXCHANNELS in 2.19.3, while below 16 from 2.20
    expected = 32 if version == "2.19.3" else 16
    assert tuning.runtime_channels() == expected
    algo, proto, _ = tuning.choose(AR, MIB)
    assert (algo, proto) == (Algo.TREE, Proto.LL128)
    assert tuning.channels(AR, algo, proto, MIB) == expected  # 1 MiB >= 32 x 640 threads x 8 B


def nvls_tree_us(nbytes: int, net_us: float) -> float:
    """NVLSTree all-reduce on 4 nodes, 2.28 on: 25 + 2 log2(4) x the network latency;
    per channel min(40 x 0.85 x 7/8 x 2, bwInter 48, perChMaxNVLSTreeBws 45.5), x 32/62."""
    return 25.0 + 4 * net_us + nbytes / (1e3 * 8 * min(40 * 0.85 * 7 / 8 * 2, 48.0, 45.5) * 32 / 62)


def tree_ll128_us(nbytes: int) -> float:
    """Tree/LL128 all-reduce on 4 nodes: bus min(8 x 48 x 0.92, 8 x 36.0) then
    min(x 120/128, 8 x 29.0), x 1/2, x treeCorrectionFactor; 14 + 2 (7 x 1.25 + 2 x 8.5)."""
    bus = min(min(8 * 48 * 0.92, 8 * 36.0) * 120 / 128, 8 * 29.0) / 2
    column = (nbytes >> 6).bit_length() - 1
    return 14.0 + 2 * (7 * 1.25 + 2 * 8.5) + nbytes / (1e3 * bus * TREE_CORRECTION[Proto.LL128][column])


def test_nvls_tree_network_latency_moves_the_crossover_in_2_28_9():
    nbytes = 4 * MIB
    # 2.28.7: hwLat[NET][NVLSTree][Simple] 14 -> NVLSTree (81 µs + bytes) beats Tree/LL128
    old = four_nodes("2.28.7")
    assert old.latency_us[AR][Algo.NVLS_TREE][Proto.SIMPLE] == pytest.approx(25 + 4 * 14.0)
    assert old.choose(AR, nbytes) == (Algo.NVLS_TREE, Proto.SIMPLE, pytest.approx(nvls_tree_us(nbytes, 14.0)))
    assert nvls_tree_us(nbytes, 14.0) < tree_ll128_us(nbytes)
    # 2.28.9: 20.9 -> 108.6 µs of latency, and Tree/LL128 keeps 4 MiB
    new = four_nodes("2.28.9")
    assert new.latency_us[AR][Algo.NVLS_TREE][Proto.SIMPLE] == pytest.approx(25 + 4 * 20.9)
    assert new.choose(AR, nbytes) == (Algo.TREE, Proto.LL128, pytest.approx(tree_ll128_us(nbytes)))
    assert tree_ll128_us(nbytes) < nvls_tree_us(nbytes, 20.9)


def test_old_nvls_tree_bandwidth_and_tree_simple_latency():
    tuning = four_nodes("2.20.5")
    # NVLSTree: min(bwIntra 40, bwInter 48 / 2 beyond 2 nodes) x 8 x 5/6; 23 + 4 x 14 µs
    assert tuning.bandwidth_gbps[AR][Algo.NVLS_TREE][Proto.SIMPLE] == pytest.approx(
        8 * min(40, 48 / 2) * 5 / 6
    )
    assert tuning.latency_us[AR][Algo.NVLS_TREE][Proto.SIMPLE] == pytest.approx(23 + 4 * 14.0)
    # Tree/Simple: base 0, hwLat 28 per NVLink and network step (8.4, 4.0 and 14 from 2.23)
    assert tuning.latency_us[AR][Algo.TREE][Proto.SIMPLE] == pytest.approx(0 + 2 * (7 * 28.0 + 2 * 28.0))
    assert four_nodes("2.23.4").latency_us[AR][Algo.TREE][Proto.SIMPLE] == pytest.approx(
        8.4 + 2 * (7 * 4.0 + 2 * 14.0)
    )


@pytest.mark.parametrize("version, on", [("2.28.7", False), ("2.28.9", True)])
def test_nvls_on_two_gpus_from_2_28_9(version, on):
    # ncclNvlsInit: off when gpuCount <= 2 until 2.28.7, when gpuCount < 2 from 2.28.9
    tuning = tune(communicator(h100_node(2)), constants=NCCL_VERSIONS[version])
    assert (tuning.bandwidth_gbps[AR][Algo.NVLS][Proto.SIMPLE] > 0) is on


# -- through the model -------------------------------------------------------------------


def model(version: str | None) -> NcclModel:
    network, system_config = h100_configs(**({} if version is None else {"version": version}))
    assert isinstance(network, NetworkConfig) and system_config.nccl is not None
    return NcclModel(system_config.nccl, network)


def test_the_run_chooses_with_its_release():
    members = tuple(range(8))
    old = model("2.20")
    assert old.nccl_constants is NCCL_VERSIONS["2.20.5"]
    assert old.choose(CommType.ALL_REDUCE, members, MIB)[:2] == (Algo.NVLS, Proto.SIMPLE)
    newest = model(None)
    assert newest.nccl_constants is DEFAULT_CONSTANTS
    assert newest.choose(CommType.ALL_REDUCE, members, MIB)[:2] == (Algo.RING, Proto.LL)
