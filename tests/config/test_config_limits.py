"""Arithmetic extremes in config files: every number is finite and in range,
and values the parsers cannot build are one-line errors naming the file."""

from __future__ import annotations

import json
import math
import time
import warnings

import pytest

from astra_core.api import simulate
from astra_core.config.comm_groups import load_comm_groups
from astra_core.config.issues import ConfigWarning, show
from astra_core.config.limits import MAX_NPUS
from astra_core.config.memory import load_memory
from astra_core.config.network import Dimension, NetworkConfig, TopologyKind, load_network
from astra_core.config.system import SystemConfig, load_system
from astra_core.errors import ConfigError

SYSTEM = {
    "scheduling-policy": "LIFO",
    "collective-optimization": "baseline",
    "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring"],
}


def network_yml(npus="[4]", bandwidth="[50]", latency="[500]", topology="[Ring]") -> str:
    return f"topology: {topology}\nnpus_count: {npus}\nbandwidth: {bandwidth}\nlatency: {latency}\n"


def error(loader, path) -> str:
    with pytest.raises(ConfigError) as info:
        loader(path)
    return str(info.value)


# -- values the parsers cannot build ---------------------------------------------


@pytest.mark.parametrize(
    "name, text, loader, kind",
    [
        ("system.json", '{"endpoint-delay": ' + "7" * 5000 + "}", load_system, "JSON"),
        ("network.yml", network_yml(latency="[" + "7" * 5000 + "]"), load_network, "YAML"),
        ("memory.json", '{"remote-mem-bw": ' + "7" * 5000 + "}", load_memory, "JSON"),
    ],
)
def test_integer_past_pythons_digit_limit_is_one_line(write, name, text, loader, kind):
    # Python's int() refuses > 4300 digits with ValueError inside json/yaml:
    # that escaped as a traceback.
    path = write(name, text)
    message = error(loader, path)
    assert message == (
        f"{path}: invalid {kind}: an integer literal longer than 4300 digits (no config value needs one)"
    )


@pytest.mark.parametrize(
    "name, loader, kind", [("system.json", load_system, "JSON"), ("network.yml", load_network, "YAML")]
)
def test_nesting_past_the_recursion_limit_is_one_line(write, name, loader, kind):
    path = write(name, "[" * 100_000 + "]" * 100_000)
    assert error(loader, path) == f"{path}: invalid {kind}: lists or mappings nested too deeply"


# -- network.yml ----------------------------------------------------------------------


def test_a_billion_npus_is_refused_at_once_with_the_count(write, tmp_path):
    path = write("network.yml", network_yml(npus="[1000000000]"))
    system = write("system.json", json.dumps(SYSTEM))
    started = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        # Refused before scanning a billion trace file names.
        simulate(str(tmp_path / "no_such_workload"), system, path)
    assert time.perf_counter() - started < 10  # a hang or a 10^9-name scan, not a speed test
    assert str(info.value) == (
        f"{path}: npus_count[0]: 1,000,000,000 NPUs, more than astra's limit of 1,048,576 "
        "(2^20); that run would read 1,000,000,000 trace files and keep a rank engine for each"
    )


def test_the_npu_limit_is_on_the_product_of_the_dimensions(write):
    path = write(
        "network.yml",
        network_yml(
            npus="[1024, 1024, 2]", bandwidth="[1, 1, 1]", latency="[1, 1, 1]", topology="[Ring, Ring, Ring]"
        ),
    )
    assert error(load_network, path) == (
        f"{path}: npus_count: [1024, 1024, 2] is 2,097,152 NPUs, more than astra's limit of "
        "1,048,576 (2^20); that run would read 2,097,152 trace files and keep a rank engine "
        "for each"
    )
    at_limit = write(
        "ok.yml",
        network_yml(npus="[1024, 1024]", bandwidth="[1, 1]", latency="[1, 1]", topology="[Ring, Ring]"),
    )
    assert load_network(at_limit).npus_count == MAX_NPUS
    with pytest.raises(ConfigError, match=r"<python>: npus_count: \[2048, 1024\] is 2,097,152 NPUs"):
        NetworkConfig(
            (Dimension(TopologyKind.RING, 2048, 1.0, 1.0), Dimension(TopologyKind.RING, 1024, 1.0, 1.0))
        )


@pytest.mark.parametrize(
    "key, value, expected",
    [
        # 1e308 GB/s * 2^30 / 1e9 overflowed to inf bytes/ns.
        ("bandwidth", "1e308", "bandwidth[0]: must be <= 1e+12, got 1e+308"),
        ("bandwidth", "1.0e-300", "bandwidth[0]: must be >= 1e-06 GB/s, got 1e-300"),
        ("bandwidth", ".nan", "bandwidth[0]: expected a finite number, got nan"),
        ("bandwidth", ".inf", "bandwidth[0]: expected a finite number, got inf"),
        ("latency", "-1", "latency[0]: must be >= 0, got -1"),
        ("latency", "1.0e+300", "latency[0]: must be <= 1e+12, got 1e+300"),
        ("latency", "-.inf", "latency[0]: expected a finite number, got -inf"),
        ("latency", str(10**400), "latency[0]: must be <= 1e+12, got an integer of about 401 digits"),
        ("npus", "[1.0e+300]", "npus_count[0]: must be <= 1,048,576, got an integer of about 301 digits"),
        ("npus", "[2, 3]", "npus_count: expected 1 entries (one per dimension), got 2"),
    ],
)
def test_network_numbers_are_finite_and_in_range(write, key, value, expected):
    text = network_yml(npus=value) if key == "npus" else network_yml(**{key: f"[{value}]"})
    path = write("network.yml", text)
    assert error(load_network, path) == f"{path}: {expected}"


def test_exponent_numbers_read_as_numbers_as_upstreams_yaml_cpp(write):
    # PyYAML alone reads 1e3 and 2.5e2 as strings (YAML 1.1); yaml-cpp and YAML 1.2
    # read numbers, and upstream's network.yml files may use them.
    path = write("network.yml", network_yml(bandwidth="[1e3]", latency="[2.5e2]"))
    dim = load_network(path).dims[0]
    assert (dim.bandwidth_gbps, dim.latency_ns) == (1000.0, 250.0)
    assert dim.bandwidth_bytes_per_ns == 1000 * 2**30 / 1e9


def test_largest_accepted_values_stay_finite():
    dim = NetworkConfig.from_dict(
        {"topology": ["Ring"], "npus_count": [2], "bandwidth": [1e12], "latency": [1e12]}
    ).dims[0]
    assert math.isfinite(dim.bandwidth_bytes_per_ns)
    slow = NetworkConfig.from_dict(
        {"topology": ["Ring"], "npus_count": [2], "bandwidth": [1e-6], "latency": [0]}
    ).dims[0]
    assert math.isfinite(2**64 / slow.bandwidth_bytes_per_ns)


# -- system.json ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, raw, expected",
    [
        ("endpoint-delay", "1" + "0" * 30, "must be <= 1,000,000,000,000, got an integer of about 31 digits"),
        ("endpoint-delay", "NaN", "expected an integer, got nan"),
        ("local-reduction-delay", "-1", "must be >= 0, got -1"),
        ("preferred-dataset-splits", "1000000000", "must be <= 1,048,576, got 1000000000"),
        (
            "active-chunks-per-dimension",
            "1e300",
            "must be <= 2,147,483,647, got an integer of about 301 digits",
        ),
        ("peak-perf", "Infinity", "expected a finite number, got inf"),
        ("peak-perf", "1e-300", "must be 0 (unset) or >= 1e-06 TFLOP/s, got 1e-300"),
        ("local-mem-bw", "1e400", "expected a finite number, got inf"),
        ("local-mem-bw", "1e13", "must be <= 1e+12, got 10000000000000.0"),
        ("L", "-Infinity", "expected a finite number, got -inf"),
        ("G", "1e15", "must be <= 1e+12, got 1000000000000000.0"),
    ],
)
def test_system_numbers_are_finite_and_in_range(write, key, raw, expected):
    base = {k: v for k, v in SYSTEM.items() if k != key}
    text = json.dumps(base)[:-1] + f', "{key}": {raw}}}'
    path = write("system.json", text)
    assert error(load_system, path) == f"{path}: {key}: {expected}"


def test_huge_system_values_from_python_are_range_checked_too():
    with pytest.raises(ConfigError) as info:
        SystemConfig("LIFO", "baseline", 4, endpoint_delay_ns=10**5000)
    assert str(info.value) == (
        "<python>: endpoint-delay: must be <= 1,000,000,000,000, got an integer of about 5001 digits"
    )


# -- remote memory json --------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, raw, expected",
    [
        ("remote-mem-bw", "1e300", "must be <= 1,000,000,000,000, got an integer of about 301 digits"),
        ("remote-mem-latency", "1e13", "must be <= 1,000,000,000,000, got 10000000000000"),
        ("num-npus-per-node", "1e9", "must be <= 1,048,576, got 1000000000"),
    ],
)
def test_memory_numbers_are_in_range(write, key, raw, expected):
    data = {
        "memory-type": "PER_NODE_MEMORY_EXPANSION",
        "remote-mem-latency": 1,
        "remote-mem-bw": 50,
        "num-nodes": 2,
        "num-npus-per-node": 4,
    }
    text = json.dumps({k: v for k, v in data.items() if k != key})[:-1] + f', "{key}": {raw}}}'
    path = write("memory.json", text)
    assert error(load_memory, path) == f"{path}: {key}: {expected}"


# -- messages stay short ---------------------------------------------------------------------


def test_shown_values_are_short():
    assert show(10**5000) == "an integer of about 5001 digits"
    assert show(-(10**100)) == "a negative integer of about 101 digits"
    assert len(show("x" * 10_000)) <= 60
    assert len(show(list(range(1000)))) <= 60


# -- comm groups ------------------------------------------------------------------------------


@pytest.mark.parametrize("group_id, shown", [("1" * 5000, "1" * 12 + "..."), ("3000000000", "3000000000")])
def test_group_ids_past_upstreams_int_are_one_line(write, group_id, shown):
    # A 5000-digit id raised ValueError from int() (Python's digit limit).
    path = write("groups.json", '{"' + group_id + '": [0, 1], "1": [2, 3]}')
    with pytest.raises(ConfigError) as info:
        load_comm_groups(path, 4)
    assert str(info.value) == (
        f"{path}: group {shown}: group id must be <= 2,147,483,647 (upstream reads it with stoi into an int)"
    )


def test_dimension_with_an_int_too_large_for_a_float_is_a_config_error():
    # Dimension() converted it with float(), an OverflowError.
    with pytest.raises(ConfigError) as info:
        NetworkConfig((Dimension(TopologyKind.RING, 4, 10**400, 1),))
    assert str(info.value) == ("<python>: bandwidth[0]: must be <= 1e+12, got an integer of about 401 digits")


def test_memory_keys_the_memory_type_never_reads_warn(write):
    path = write(
        "memory.json",
        json.dumps(
            {"memory-type": "MEMORY_POOL", "remote-mem-bw": 5, "num-nodes": 3, "num-npus-per-node": 0}
        ),
    )
    with pytest.warns(ConfigWarning) as caught:
        load_memory(path)
    assert [str(w.message) for w in caught] == [f"{path}: num-nodes: no effect with memory-type MEMORY_POOL"]
    quiet = write("quiet.json", json.dumps({"memory-type": "NO_MEMORY_EXPANSION", "remote-mem-bw": 0}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_memory(quiet)


def test_alias_bomb_in_yaml_is_reported_at_once(write):
    # Eight levels of YAML aliases make 9^8 (43 million) items from a short file;
    # the error message rendered every one of them (json.dumps, ~5 s) before it
    # was cut, and each further level costs nine times more.
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 8)]
    path = write(
        "network.yml", "\n".join(lines) + "\ntopology: [*l7]\nnpus_count: [4]\nbandwidth: [1]\nlatency: [1]\n"
    )
    started = time.perf_counter()
    message = error(load_network, path)
    assert time.perf_counter() - started < 10  # a hang or a 10^9-name scan, not a speed test
    assert f"{path}: topology[0]: expected one of Ring, FullyConnected, Switch, got [[[[" in message
    assert all(len(line.replace(str(path), "")) < 160 for line in message.splitlines())


def test_a_device_or_endless_file_is_refused_not_read_forever(tmp_path, monkeypatch):
    """/dev/zero as system.json is refused, not read until memory runs out."""
    from astra_core.config import files
    from astra_core.config.system import load_system

    with pytest.raises(ConfigError, match=r"^/dev/zero: not a regular file; expected a config file$"):
        load_system("/dev/zero")
    monkeypatch.setattr(files, "MAX_CONFIG_BYTES", 1024)
    big = tmp_path / "system.json"
    big.write_text("{" + " " * 2048 + "}")
    with pytest.raises(ConfigError, match=r"system.json: longer than 1,024 bytes; expected a config file"):
        files.read_bounded_text(big, files.MAX_CONFIG_BYTES)


def test_control_characters_in_yaml_are_one_line_naming_the_file(tmp_path):
    """PyYAML's reader refuses them while the loader is built: one line naming the file, not a
    ReaderError traceback."""
    from astra_core.config.network import load_network

    path = tmp_path / "network.yml"
    path.write_bytes(b"topology: [Ring]\x1f\n")
    with pytest.raises(ConfigError, match=r"network.yml: invalid YAML.*special characters"):
        load_network(path)
