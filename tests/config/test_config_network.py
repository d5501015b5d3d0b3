"""network.yml: every reference file loads; each kind of mistake is one clear line."""

from __future__ import annotations

import pytest

from astra_core.config.network import Dimension, NetworkConfig, TopologyKind, load_network
from astra_core.errors import ConfigError

GOOD = """\
topology: [ Ring, Switch ]
npus_count: [ 4, 4 ]
bandwidth: [ 100.0, 50.0 ]  # GB/s
latency: [ 200.0, 500.0 ]  # ns
"""


def one_line_error(path, key_text):
    """Load ``path``, expect a one-line ConfigError naming the file and ``key_text``."""
    with pytest.raises(ConfigError) as info:
        load_network(path)
    message = str(info.value)
    assert "\n" not in message, message
    assert message.startswith(f"{path}: "), message
    assert key_text in message, message
    return message


EXPECTED = {
    # file: [(kind, npus, GB/s, ns), ...]
    "fc8.yml": [("FullyConnected", 8, 50.0, 500.0)],
    "ring4_sw4.yml": [("Ring", 4, 100.0, 200.0), ("Switch", 4, 50.0, 500.0)],
    "ring8.yml": [("Ring", 8, 50.0, 500.0)],
    "sw8.yml": [("Switch", 8, 50.0, 500.0)],
    "text_converter_network.yml": [("Ring", 8, 50.0, 500.0)],
    "upstream_HGX-H100-validated.yml": [("Switch", 8, 400.0, 936.25)],
    "upstream_Ring_16npus.yml": [("Ring", 16, 50.0, 500.0)],
    "upstream_Ring_4npus.yml": [("Ring", 4, 50.0, 500.0)],
    "upstream_Ring_8npus.yml": [("Ring", 8, 50.0, 500.0)],
}


def test_every_reference_network_is_covered(reference_dir):
    assert {p.name for p in (reference_dir / "network").glob("*.yml")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_reference_network_loads(reference_dir, name):
    config = load_network(reference_dir / "network" / name)
    got = [(d.kind.value, d.npus, d.bandwidth_gbps, d.latency_ns) for d in config.dims]
    assert got == EXPECTED[name]
    npus = 1
    for _, n, _, _ in EXPECTED[name]:
        npus *= n
    assert config.npus_count == npus


def test_ring4_sw4_units(reference_dir):
    config = load_network(reference_dir / "network" / "ring4_sw4.yml")
    assert config.dims_count == 2
    assert config.npus_count == 16
    assert config.dims[0].kind is TopologyKind.RING
    assert config.dims[1].kind is TopologyKind.SWITCH
    # 1 GB = 2^30 B, as upstream's bw_GBps_to_Bpns: 100 GB/s -> 107.3741824 B/ns.
    assert config.dims[0].bandwidth_bytes_per_ns == pytest.approx(107.3741824, rel=1e-12)
    assert config.dims[1].bandwidth_bytes_per_ns == pytest.approx(53.6870912, rel=1e-12)


def test_direct_construction_and_round_trip():
    config = NetworkConfig(
        dims=(Dimension("Ring", 4, 100, 200), Dimension(TopologyKind.SWITCH, 4, 50.0, 500.0))
    )
    assert config.dims[0].kind is TopologyKind.RING
    assert config.npus_count == 16
    again = NetworkConfig.from_dict(config.to_dict(), source="<dict>")
    assert again == config


def test_direct_construction_is_validated():
    with pytest.raises(ConfigError) as info:
        NetworkConfig(dims=(Dimension("Ring", 1, 100.0, 200.0),))
    assert str(info.value) == "<python>: npus_count[0]: must be >= 2, got 1"


def test_from_dict_names_its_source():
    with pytest.raises(ConfigError) as info:
        NetworkConfig.from_dict(
            {"topology": ["Ring"], "npus_count": [4], "bandwidth": [0], "latency": [1]}, source="<dict>"
        )
    assert str(info.value) == "<dict>: bandwidth[0]: must be > 0, got 0"


@pytest.mark.parametrize(
    "text, expected",
    [
        (GOOD + "extra: 1\n", "unknown key 'extra'"),
        (GOOD.replace("npus_count", "npu_count"), "unknown key 'npu_count'; did you mean 'npus_count'?"),
        (
            GOOD.replace("Switch", "switch"),
            "topology[1]: expected one of Ring, FullyConnected, Switch, got 'switch' (names are case-sensitive: use 'Switch')",
        ),
        (
            GOOD.replace("Switch", "Torus"),
            "topology[1]: expected one of Ring, FullyConnected, Switch, got 'Torus'",
        ),
        (
            GOOD.replace("[ 100.0, 50.0 ]", "[ 100.0 ]"),
            "bandwidth: expected 2 entries (one per dimension), got 1",
        ),
        (GOOD.replace("[ 100.0, 50.0 ]", "[ 0, 50.0 ]"), "bandwidth[0]: must be > 0, got 0"),
        (GOOD.replace("[ 100.0, 50.0 ]", "[ fast, 50.0 ]"), "bandwidth[0]: expected a number, got 'fast'"),
        (GOOD.replace("[ 200.0, 500.0 ]", "[ 200.0, -5 ]"), "latency[1]: must be >= 0, got -5"),
        (GOOD.replace("[ 4, 4 ]", "[ 4, 1 ]"), "npus_count[1]: must be >= 2, got 1"),
        (GOOD.replace("[ 4, 4 ]", "[ 4, 2.5 ]"), "npus_count[1]: expected an integer, got 2.5"),
        (GOOD.replace("[ 4, 4 ]", "[ 4, true ]"), "npus_count[1]: expected an integer, got true"),
        (GOOD.replace("latency: [ 200.0, 500.0 ]  # ns\n", ""), "missing required key 'latency'"),
        (
            GOOD.replace("[ 200.0, 500.0 ]", "300"),
            "latency: expected a list (one entry per dimension), got 300",
        ),
        (GOOD.replace("[ Ring, Switch ]", "[]"), "topology: needs at least one dimension"),
        (GOOD + "latency: [ 1, 2 ]\n", "duplicate key 'latency'"),
        ("- Ring\n- Switch\n", "expected a mapping of keys to values, got a list"),
        ("", "file is empty (expected a mapping of keys to values)"),
        ("topology: [ Ring\n", "invalid YAML at line"),
    ],
)
def test_each_mistake_is_one_line(write, text, expected):
    path = write("network.yml", text)
    message = one_line_error(path, expected)
    if not expected.startswith("invalid YAML"):
        assert message == f"{path}: {expected}"


def test_several_mistakes_give_one_line_each(write):
    path = write(
        "network.yml",
        "topology: [ Ring, ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 0, 1 ]\nlatency: [ -1, 0 ]\nfoo: 1\n",
    )
    with pytest.raises(ConfigError) as info:
        load_network(path)
    lines = str(info.value).splitlines()
    assert lines == [
        f"{path}: topology[1]: expected one of Ring, FullyConnected, Switch, got 'ring' (names are case-sensitive: use 'Ring')",
        f"{path}: npus_count: expected 2 entries (one per dimension), got 1",
        f"{path}: bandwidth[0]: must be > 0, got 0",
        f"{path}: latency[0]: must be >= 0, got -1",
        f"{path}: unknown key 'foo'",
    ]


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yml"
    with pytest.raises(ConfigError) as info:
        load_network(path)
    assert str(info.value) == f"{path}: file not found"


def test_the_npu_product_is_checked_with_the_other_keys_problems(write):
    path = write(
        "network.yml",
        "topology: [ Ring, Ring ]\nnpus_count: [ 2048, 1024 ]\nbandwidth: [ 0, 1 ]\nlatency: [ 1, 1 ]\n",
    )
    with pytest.raises(ConfigError) as info:
        load_network(path)
    assert str(info.value).splitlines() == [
        f"{path}: npus_count: [2048, 1024] is 2,097,152 NPUs, more than astra's limit of 1,048,576 "
        "(2^20); that run would read 2,097,152 trace files and keep a rank engine for each",
        f"{path}: bandwidth[0]: must be > 0, got 0",
    ]


def test_only_the_files_keys_are_read(write):
    # The Python names of the fields, and the constructor's dims, are no network.yml keys.
    path = write("network.yml", GOOD + "npus_per_dim: [ 4, 4 ]\ndims: []\n")
    with pytest.raises(ConfigError) as info:
        load_network(path)
    assert str(info.value).splitlines() == [
        f"{path}: unknown key 'npus_per_dim'",
        f"{path}: unknown key 'dims'",
    ]


def test_direct_construction_refuses_what_is_not_a_dimension():
    with pytest.raises(ConfigError) as info:
        NetworkConfig([Dimension("Ring", 4, 1.0, 1.0), (TopologyKind.RING, 4, 1.0, 1.0)])
    assert str(info.value) == '<python>: dims[1]: expected a Dimension, got ["Ring", 4, 1.0, 1.0]'
    with pytest.raises(ConfigError) as info:
        NetworkConfig(dims=())
    assert str(info.value) == "<python>: topology: needs at least one dimension"


def test_configs_are_immutable_values(write):
    import pickle

    from pydantic import ValidationError

    loaded = load_network(write("network.yml", GOOD))
    built = NetworkConfig.from_dict(loaded.to_dict())
    assert loaded.source.endswith("network.yml") and built.source == "<python>"
    assert loaded == built and hash(loaded) == hash(built) and len({loaded, built}) == 1
    assert loaded != NetworkConfig.from_dict({**loaded.to_dict(), "latency": [200.0, 501.0]})
    assert loaded.npus_per_dim == (4, 4) and loaded.dims_count == 2
    with pytest.raises(ValidationError, match="frozen"):
        loaded.npus_per_dim = (2, 2)  # type: ignore[misc]
    again = pickle.loads(pickle.dumps(loaded))
    assert again == loaded and again.source == loaded.source and again.dims == loaded.dims
