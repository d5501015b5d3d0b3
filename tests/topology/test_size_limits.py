"""Absurd topology sizes are refused at once with their estimate (astra_core.topology.size).

Node and link counts are closed forms of each generator: a k-ary fat-tree has
k^3/4 hosts, 5k^2/4 switches and 3k^3/4 cables; a leaf-spine H hosts + L*S
cables; a torus of n >= 3 per dimension one cable per node per dimension; a
GPU cluster two cables per GPU plus L*S. Each refusal must come well under a
second; an alarm turns a build that would exhaust memory into a failure.
"""

from __future__ import annotations

import signal

import pytest
from click.testing import CliRunner

from astra_core.cli import main
from astra_core.config.network import NetworkConfig
from astra_core.errors import ConfigError
from astra_core.topology import generators
from astra_core.topology.logical import from_network
from astra_core.topology.ns3_format import parse_ns3_topology
from astra_core.topology.physical import PhysicalTopology
from astra_core.topology.size import MAX_LINKS, MAX_NODES, MAX_NPUS, check_topology_size

LIMITS = f"astra's limit is {MAX_NODES:,} nodes, {MAX_NPUS:,} NPUs and {MAX_LINKS:,} directed links"


@pytest.fixture(autouse=True)
def _deadline():
    """Fail (instead of hanging or eating the machine's memory) after 5 s."""

    def expire(signum, frame):
        raise TimeoutError("not refused quickly")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(5)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_the_limits_are_as_documented():
    assert (MAX_NPUS, MAX_NODES, MAX_LINKS) == (2**20, 2**21, 2**22)
    check_topology_size("x", MAX_NODES, MAX_LINKS, MAX_NPUS)  # at the limit: accepted
    for nodes, links, npus in (
        (MAX_NODES + 1, 0, 1),
        (2, MAX_LINKS + 1, 2),
        (MAX_NPUS + 1,) * 2 + (MAX_NPUS + 1,),
    ):
        with pytest.raises(ConfigError, match="too large"):
            check_topology_size("x", nodes, links, npus)


def test_fat_tree_k_1000():
    with pytest.raises(ConfigError) as info:
        generators.fat_tree(1000)
    assert str(info.value) == (
        "fat-tree k=1000: too large: 251,250,000 nodes (250,000,000 NPUs) and 1,500,000,000 "
        f"directed links, about 600 GB of memory; {LIMITS}"
    )


@pytest.mark.parametrize(
    "build, name, nodes, npus, links",
    [
        (
            lambda: generators.leaf_spine(1000, 1000, 100_000),
            "leaf-spine 1000 hosts/1000 leaves/100000 spines",
            101_000 + 1000,
            1000,
            2 * (1000 + 1000 * 100_000),
        ),
        (lambda: generators.torus([100_000, 100_000]), "torus 100000x100000", 10**10, 10**10, 4 * 10**10),
        (
            lambda: generators.torus([1024, 1024, 2]),
            "torus 1024x1024x2",
            2**21,
            2**21,
            2 * (2**21 + 2**21 + 2**20),
        ),
        (lambda: generators.mesh([3000, 3000]), "mesh 3000x3000", 9 * 10**6, 9 * 10**6, 2 * 2 * 3000 * 2999),
        (
            lambda: generators.gpu_cluster(1_000_000, 8),
            "gpu-cluster 1000000x8",
            8 * 10**6 + 10**6 + 16,
            8 * 10**6,
            2 * (2 * 8 * 10**6 + 64),
        ),
    ],
)
def test_other_generators(build, name, nodes, npus, links):
    with pytest.raises(ConfigError) as info:
        build()
    message = str(info.value)
    assert message.startswith(
        f"{name}: too large: {nodes:,} nodes ({npus:,} NPUs) and {links:,} directed links"
    )
    assert message.endswith(LIMITS)


def test_a_fabric_inside_the_limits_is_still_built():
    assert generators.torus([4, 4]).links_count == 2 * 32  # 16 nodes, 2 cables each


def test_topology_file_header_of_a_billion_nodes():
    with pytest.raises(ConfigError) as info:
        parse_ns3_topology("1000000000 0 0\n", "huge.txt")
    assert str(info.value) == (
        f"huge.txt: line 1: too large: 1,000,000,000 nodes (1,000,000,000 NPUs) and 0 directed links; {LIMITS}"
    )


def test_topology_file_header_of_too_many_links():
    with pytest.raises(
        ConfigError,
        match=r"^t.txt: line 1: too large: 10 nodes \(8 NPUs\) and "
        r"20,000,000 directed links",
    ):
        parse_ns3_topology("10 2 10000000\n8 9\n", "t.txt")


def test_physical_topology_refuses_before_allocating_per_node_lists():
    with pytest.raises(ConfigError, match=r"^api: too large: 1,000,000,000,000 nodes"):
        PhysicalTopology(10**12, [], [], source="api")


def test_network_yml_fully_connected_dimension_too_large_for_physical_links():
    net = NetworkConfig.from_dict(
        {"topology": ["FullyConnected"], "npus_count": [4096], "bandwidth": [50.0], "latency": [500.0]},
        source="big.yml",
    )
    with pytest.raises(
        ConfigError,
        match=r"^big.yml: too large: 4,096 nodes \(4,096 NPUs\) and "
        r"16,773,120 directed links",
    ):
        from_network(net)


@pytest.mark.parametrize(
    "args",
    [
        ["fat-tree", "--k", "1000"],
        ["torus", "--dims", "100000x100000"],
        ["gpu-cluster", "--nodes", "1000000", "--gpus", "8"],
        ["leaf-spine", "--hosts", "1000", "--leaves", "1000", "--spines", "100000"],
    ],
)
def test_cli_refuses_in_one_line(args):
    result = CliRunner().invoke(main, ["topology", *args])
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "too large" in lines[0]
    assert lines[0].endswith(LIMITS)


@pytest.mark.parametrize(
    "build, key",
    [
        (lambda: generators.fat_tree(4, float("inf")), "bandwidth_gbps must be finite, got inf"),
        (lambda: generators.torus([4, 4], 100.0, float("inf")), "latency_ns must be finite, got inf"),
        (lambda: generators.fat_tree(4, "100"), "bandwidth_gbps must be a number, got '100'"),
        (lambda: generators.fat_tree(True), "k must be an even integer >= 2, got True"),
    ],
)
def test_generator_numbers_must_be_finite_numbers(build, key):
    with pytest.raises(ConfigError, match=key):
        build()


@pytest.mark.parametrize(
    "rate, delay, problem",
    [
        ("1e999Gbps", "1ns", "rate must be finite, got 1e999Gbps"),
        ("100Gbps", "1e999s", "delay must be finite, got 1e999s"),
    ],
)
def test_topology_file_infinite_rate_or_delay(rate, delay, problem):
    with pytest.raises(ConfigError) as info:
        parse_ns3_topology(f"2 0 1\n0 1 {rate} {delay} 0\n", "inf.txt")
    assert str(info.value) == f"inf.txt: line 2: {problem}"
