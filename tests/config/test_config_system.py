"""system.json: every reference file loads with upstream's defaults; mistakes are one line."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from astra_core.config.collective_impl import AlgorithmKind, CollectiveAlgorithm, parse_algorithm
from astra_core.config.issues import ConfigWarning
from astra_core.config.system import (
    CollectiveOptimization,
    SchedulingPolicy,
    SystemConfig,
    load_system,
)
from astra_core.errors import ConfigError

BASE = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-to-all-implementation": ["ring"],
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
    "boost-mode": 0,
}


def error_of(write, data, **kwargs) -> tuple[str, str]:
    path = write("system.json", json.dumps(data) if not isinstance(data, str) else data)
    with pytest.raises(ConfigError) as info:
        load_system(path, **kwargs)
    return str(path), str(info.value)


ALGORITHM_FILES = {
    "direct_1d.json": "direct",
    "doubleBinaryTree_1d.json": "doubleBinaryTree",
    "halvingDoubling_1d.json": "halvingDoubling",
    "oneDirect_1d.json": "oneDirect",
    "oneHalvingDoubling_1d.json": "oneHalvingDoubling",
    "oneRing_1d.json": "oneRing",
    "ring_1d.json": "ring",
}


@pytest.mark.parametrize("name, algorithm", sorted(ALGORITHM_FILES.items()))
def test_reference_algorithm_files(reference_dir, name, algorithm):
    config = load_system(reference_dir / "system" / name, dims=1)
    for collective in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        assert config.algorithms(collective) == (algorithm,)
        assert config.algorithms(collective)[0].kind is AlgorithmKind(algorithm)
    assert config.scheduling_policy is SchedulingPolicy.LIFO
    assert config.collective_optimization is CollectiveOptimization.LOCAL_BW_AWARE
    assert config.endpoint_delay_ns == 10
    assert config.active_chunks_per_dimension == 1
    assert config.preferred_dataset_splits == 4
    assert config.local_mem_bw_gbps == 1600.0
    assert config.peak_perf_tflops == 900.0
    assert config.roofline_enabled is False
    # upstream 2.0 does not read boost-mode; it is kept as a legacy no-op.
    assert config.legacy == (("boost-mode", False),)


def test_every_reference_system_loads(reference_dir):
    files = sorted((reference_dir / "system").glob("*.json"))
    assert len(files) >= 14
    for path in files:
        config = load_system(path)
        assert config.source == str(path)


def test_defaults_are_upstreams(reference_dir):
    # text_converter_system.json leaves out roofline-enabled and peak-perf.
    config = load_system(reference_dir / "system" / "text_converter_system.json")
    assert config.local_reduction_delay_ns == 1  # Sys::Sys
    assert config.peak_perf_tflops == 0.0
    assert config.roofline_enabled is False
    assert config.model_shared_bus is False
    assert (config.L, config.o, config.g, config.G) == (0.0, 0.0, 0.0, 0.0)
    assert config.trace_enabled is False and config.replay_only is False
    assert config.track_local_mem is False
    assert config.local_mem_trace_filename == "local_mem_trace"
    assert config.all_reduce_implementation_custom is None


def test_reference_variants(reference_dir):
    system = reference_dir / "system"
    assert load_system(system / "ring_1d_chunks2_splits8.json").active_chunks_per_dimension == 2
    assert load_system(system / "ring_1d_chunks2_splits8.json").preferred_dataset_splits == 8
    fifo = load_system(system / "ring_1d_fifo_baseline.json")
    assert fifo.scheduling_policy is SchedulingPolicy.FIFO
    assert fifo.collective_optimization is CollectiveOptimization.BASELINE
    two_d = load_system(system / "ring_2d.json", dims=2)
    assert two_d.all_reduce_implementation == ("ring", "ring")
    hgx = load_system(system / "upstream_HGX-H100-validated.json")
    assert hgx.active_chunks_per_dimension == 2 and hgx.local_mem_bw_gbps == 3350.0


def test_roofline_units_match_upstream_result(reference_dir):
    # expected.json: ROOFLINE_COMP (1e12 FLOPs over 1e9 bytes) took 1111111 ns
    # with peak-perf 900 TFLOP/s and local-mem-bw 1600 GB/s (1 GB = 1e9 B).
    config = load_system(reference_dir / "system" / "ring_1d_roofline.json")
    assert config.roofline_enabled is True
    assert config.peak_perf_flops == 900e12
    assert config.local_mem_bw_bytes_per_s == 1600e9
    assert config.roofline_time_ns(1e12, 1e9) == 1111111


@pytest.mark.parametrize(
    "text, kind, window",
    [
        ("ring", AlgorithmKind.RING, None),
        ("oneRing", AlgorithmKind.ONE_RING, None),
        ("direct", AlgorithmKind.DIRECT, None),
        ("direct8", AlgorithmKind.DIRECT, 8),
        ("oneDirect", AlgorithmKind.ONE_DIRECT, None),
        ("oneDirect16", AlgorithmKind.ONE_DIRECT, 16),
        ("halvingDoubling", AlgorithmKind.HALVING_DOUBLING, None),
        ("oneHalvingDoubling", AlgorithmKind.ONE_HALVING_DOUBLING, None),
        ("doubleBinaryTree", AlgorithmKind.DOUBLE_BINARY_TREE, None),
    ],
)
def test_algorithm_names(text, kind, window):
    algorithm = CollectiveAlgorithm(text)
    assert algorithm == text
    assert (algorithm.kind, algorithm.window) == (kind, window)
    assert parse_algorithm(text) == (kind, window)
    assert algorithm.kind.spans_all_dims == text.startswith("one")


@pytest.mark.parametrize(
    "data, expected",
    [
        ({**BASE, "foo-bar": 1}, "unknown key 'foo-bar'"),
        ({**BASE, "endpoint_delay": 1}, "unknown key 'endpoint_delay'; did you mean 'endpoint-delay'?"),
        ({**BASE, "active-chunks-per-dimension": 0}, "active-chunks-per-dimension: must be >= 1, got 0"),
        ({**BASE, "preferred-dataset-splits": "4"}, "preferred-dataset-splits: expected an integer, got '4'"),
        ({**BASE, "endpoint-delay": -1}, "endpoint-delay: must be >= 0, got -1"),
        ({**BASE, "endpoint-delay": 2.5}, "endpoint-delay: expected an integer, got 2.5"),
        (
            {**BASE, "scheduling-policy": "RANDOM"},
            "scheduling-policy: expected one of LIFO, FIFO, EXPLICIT, got 'RANDOM'",
        ),
        (
            {**BASE, "scheduling-policy": "lifo"},
            "scheduling-policy: expected one of LIFO, FIFO, EXPLICIT, got 'lifo' (names are case-sensitive: use 'LIFO')",
        ),
        (
            {**BASE, "collective-optimization": "fast"},
            "collective-optimization: expected one of baseline, localBWAware, got 'fast'",
        ),
        ({**BASE, "roofline-enabled": 2}, "roofline-enabled: expected 0 or 1, got 2"),
        ({**BASE, "local-mem-bw": -1}, "local-mem-bw: must be >= 0, got -1"),
        (
            {**BASE, "all-reduce-implementation": "ring"},
            "all-reduce-implementation: expected a list of algorithm names (one per dimension), got 'ring'",
        ),
        (
            {**BASE, "all-reduce-implementation": []},
            "all-reduce-implementation: needs at least one algorithm name (one per dimension)",
        ),
        (
            {**BASE, "all-reduce-implementation": ["Ring"]},
            "all-reduce-implementation[0]: expected one of ring, oneRing, direct, direct<N>, oneDirect, oneDirect<N>, halvingDoubling, oneHalvingDoubling, doubleBinaryTree, nccl, plugin:<name>, got 'Ring' (names are case-sensitive: use 'ring')",
        ),
        (
            {**BASE, "all-to-all-implementation": ["direct0"]},
            "all-to-all-implementation[0]: window of 'direct0' must be >= 1",
        ),
        (
            {**BASE, "all-to-all-implementation": ["directX"]},
            "all-to-all-implementation[0]: expected one of ring, oneRing, direct, direct<N>, oneDirect, oneDirect<N>, halvingDoubling, oneHalvingDoubling, doubleBinaryTree, nccl, plugin:<name>, got 'directX'",
        ),
        (
            {**BASE, "all-gather-implementation": ["ring", 3]},
            "all-gather-implementation[1]: expected an algorithm name (a string), got 3",
        ),
        (
            {**BASE, "all-reduce-implementation": ["oneRing", "ring"]},
            "all-reduce-implementation: 'oneRing' spans all dimensions and must be the only entry, got 2 entries",
        ),
        (
            {**BASE, "all-reduce-implementation-custom": ["a", "b"]},
            "all-reduce-implementation-custom: expected a list with exactly one Chakra ET prefix, got 2 entries",
        ),
        (
            {**BASE, "roofline-enabled": 1, "peak-perf": 0},
            "peak-perf: must be > 0 (TFLOP/s) when roofline-enabled is 1, got 0",
        ),
        (
            {k: v for k, v in BASE.items() if k != "preferred-dataset-splits"},
            "missing required key 'preferred-dataset-splits'",
        ),
        (
            {**BASE, "intra-dimension-scheduling": "fastest"},
            "intra-dimension-scheduling: expected one of FIFO, RG, SCF, smallestFirst, lessRemainingPhaseFirst, got 'fastest'",
        ),
        ([1, 2], "expected a mapping of keys to values, got a list"),
        (
            {**BASE, "all-reduce-implementation": ["nccl"]},
            'all-reduce-implementation: "nccl" needs a "nccl" section naming the machine, '
            'e.g. "nccl": {"gpu": "H100"}',
        ),
        ({**BASE, "nccl": None}, "nccl: expected a mapping of NCCL settings, got null"),
        (
            {**BASE, "all-gather-implementation-custom": None},
            "all-gather-implementation-custom: expected a list with exactly one Chakra ET prefix, got null",
        ),
        # attribute names are Python's; the file has upstream's keys
        ({**BASE, "endpoint_delay_ns": 5}, "unknown key 'endpoint_delay_ns'; did you mean 'endpoint-delay'?"),
        ({**BASE, "legacy": []}, "unknown key 'legacy'"),
    ],
)
def test_each_mistake_is_one_line(write, data, expected):
    path, message = error_of(write, data)
    assert message == f"{path}: {expected}"


def test_algorithm_list_must_match_dims(write, reference_dir):
    path, message = error_of(write, BASE, dims=2)
    assert message.splitlines() == [
        f"{path}: {c}-implementation: expected 2 entries (one per dimension), got 1"
        for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
    ]
    # a sole one* entry spans every dimension
    one = {
        **BASE,
        **{
            f"{c}-implementation": ["oneRing"]
            for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
        },
    }
    assert SystemConfig.from_dict(one, dims=3).all_reduce_implementation == ("oneRing",)
    # two entries on a one-dimensional network
    with pytest.raises(ConfigError, match="expected 1 entries"):
        load_system(reference_dir / "system" / "ring_2d.json", dims=1)


def test_invalid_json(write):
    path, message = error_of(write, '{"scheduling-policy": "LIFO",\n}')
    assert message.startswith(f"{path}: invalid JSON at line 2 column 1")
    assert "\n" not in message


def test_duplicate_key(write):
    text = json.dumps(BASE)[:-1] + ', "endpoint-delay": 20}'
    path, message = error_of(write, text)
    assert message == f"{path}: duplicate key 'endpoint-delay'"


def test_several_mistakes_give_one_line_each(write):
    data = {**BASE, "foo": 1, "active-chunks-per-dimension": 0, "scheduling-policy": "X"}
    path, message = error_of(write, data)
    assert message.splitlines() == [  # the keys in the table's order, unknown keys last
        f"{path}: scheduling-policy: expected one of LIFO, FIFO, EXPLICIT, got 'X'",
        f"{path}: active-chunks-per-dimension: must be >= 1, got 0",
        f"{path}: unknown key 'foo'",
    ]


def test_all_upstream_keys_are_accepted():
    # Every key upstream reads loads with a value astra models; the features
    # astra does not model load only switched off (test_system_keys.py).
    data = {
        **BASE,
        "scheduling-policy": "EXPLICIT",
        "local-reduction-delay": 3,
        "all-reduce-implementation": ["direct4"],
        "roofline-enabled": 1,
        "peak-perf": 312.5,
        "model-shared-bus": 0,
        "L": 1,
        "o": 2,
        "g": 3,
        "G": 0.5,
        "trace-enabled": 0,
        "replay-only": 1,
        "track-local-mem": False,
        "local-mem-trace-filename": "mem.json",
        "intra-dimension-scheduling": "SCF",
        "inter-dimension-scheduling": "themis",
        "seprate-log": 1,
    }
    with pytest.warns(ConfigWarning, match="no effect"):  # the bus parameters, SCF, themis
        config = SystemConfig.from_dict(data, source="<dict>")
    assert config.scheduling_policy is SchedulingPolicy.EXPLICIT
    assert config.all_reduce_implementation[0].window == 4
    assert config.custom_implementation("all-reduce") is None
    assert config.model_shared_bus is False and config.trace_enabled is False
    assert config.replay_only is True and config.track_local_mem is False
    assert (config.L, config.o, config.g, config.G) == (1.0, 2.0, 3.0, 0.5)
    assert dict(config.legacy) == {
        "boost-mode": False,
        "intra-dimension-scheduling": "SCF",
        "inter-dimension-scheduling": "themis",
        "seprate-log": True,
    }
    with pytest.warns(ConfigWarning):
        assert SystemConfig.from_dict(config.to_dict()) == config


def test_direct_construction():
    config = SystemConfig("LIFO", "baseline", 4, all_reduce_implementation=["ring", "direct8"])
    assert config.scheduling_policy is SchedulingPolicy.LIFO
    assert config.all_reduce_implementation == ("ring", "direct8")
    assert isinstance(config.all_reduce_implementation[1], CollectiveAlgorithm)
    assert config.all_gather_implementation == ()
    config.check_dims(2)
    with pytest.raises(ConfigError) as info:
        config.check_dims(3)
    assert (
        str(info.value)
        == "<python>: all-reduce-implementation: expected 3 entries (one per dimension), got 2"
    )
    with pytest.raises(ConfigError) as info:
        SystemConfig("LIFO", "baseline", 0)
    assert str(info.value) == "<python>: preferred-dataset-splits: must be >= 1, got 0"
    with pytest.raises(ConfigError) as info:
        SystemConfig("LIFO", "baseline", 4, endpoint_delay=5)
    assert str(info.value) == "<python>: unknown key 'endpoint_delay'; did you mean 'endpoint-delay'?"
    with pytest.raises(TypeError, match="multiple values for scheduling_policy"):
        SystemConfig("LIFO", "baseline", 4, scheduling_policy="FIFO")


def test_legacy_from_python_takes_pairs_or_a_mapping():
    pairs = SystemConfig("LIFO", "baseline", 4, legacy=[("gap-denominator", 2), ("boost-mode", 0)])
    mapping = SystemConfig("LIFO", "baseline", 4, legacy={"boost-mode": False, "gap-denominator": 2.0})
    assert pairs.legacy == mapping.legacy == (("boost-mode", False), ("gap-denominator", 2))
    assert pairs == mapping and hash(pairs) == hash(mapping)
    assert pairs != SystemConfig("LIFO", "baseline", 4)
    with pytest.raises(ConfigError) as info:
        SystemConfig("LIFO", "baseline", 4, legacy={"boost-mode": 2, "seprate-log": "x"})
    assert str(info.value).splitlines() == [
        "<python>: boost-mode: expected 0 or 1, got 2",
        "<python>: seprate-log: expected 0 or 1, got 'x'",
    ]
    with pytest.raises(ConfigError) as info:
        SystemConfig("LIFO", "baseline", 4, legacy={"boost_mode": 1})
    assert str(info.value) == "<python>: unknown key 'boost_mode'; did you mean 'boost-mode'?"


def test_configs_from_different_files_are_equal_when_their_values_are(write):
    first = load_system(write("a.json", json.dumps(BASE)))
    second = SystemConfig.from_dict(BASE, "b.json")
    assert first.source != second.source
    assert first == second and hash(first) == hash(second)
    with pytest.raises(ValidationError):  # frozen
        first.endpoint_delay_ns = 5
