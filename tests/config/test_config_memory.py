"""Remote-memory JSON: reference files load; types need their keys; upstream's timing."""

from __future__ import annotations

import json

import pytest

from astra_core.config.issues import ConfigWarning
from astra_core.config.memory import MemoryConfig, MemoryType, load_memory
from astra_core.errors import ConfigError

PER_NODE = {
    "memory-type": "PER_NODE_MEMORY_EXPANSION",
    "remote-mem-latency": 100,
    "remote-mem-bw": 50,
    "num-nodes": 2,
    "num-npus-per-node": 4,
}


@pytest.mark.parametrize("name", ["no_memory_expansion.json", "text_converter_remote_memory.json"])
def test_reference_memory_loads(reference_dir, name):
    config = load_memory(reference_dir / "memory" / name)
    assert config.memory_type is MemoryType.NO_MEMORY_EXPANSION
    assert not config.expands_memory
    assert (config.remote_mem_latency_ns, config.remote_mem_bw_gbps) == (0, 0)
    with pytest.raises(ValueError, match="NO_MEMORY_EXPANSION"):
        config.access_time_ns(1024)


def test_every_reference_memory_is_covered(reference_dir):
    assert len(list((reference_dir / "memory").glob("*.json"))) == 2


def test_access_time_is_upstreams_formula():
    config = MemoryConfig.from_dict(PER_NODE)
    # latency + size / (50 GB/s with 1 GB = 1e9 B), truncated to whole ns
    assert config.access_time_ns(1 << 20) == 100 + 20971
    assert config.access_time_ns(0) == 100
    assert config.queue_of(0) == 0 and config.queue_of(3) == 0 and config.queue_of(4) == 1
    config.check_npus_count(8)
    with pytest.raises(ConfigError, match="cover 8 NPUs, but the network has 16"):
        config.check_npus_count(16)


def test_queues_per_type():
    pool = MemoryConfig(MemoryType.MEMORY_POOL, remote_mem_bw_gbps=10)
    assert pool.queue_of(7) == 0
    per_npu = MemoryConfig("PER_NPU_MEMORY_EXPANSION", remote_mem_bw_gbps=10)
    assert per_npu.memory_type is MemoryType.PER_NPU_MEMORY_EXPANSION
    assert per_npu.queue_of(7) is None
    assert per_npu.access_time_ns(1000) == 100
    assert MemoryConfig.from_dict(PER_NODE).to_dict() == PER_NODE


@pytest.mark.parametrize(
    "data, expected",
    [
        ({"memory-type": "NO_MEMORY_EXPANSION", "extra": 1}, "unknown key 'extra'"),
        ({"memory_type": "NO_MEMORY_EXPANSION"}, "unknown key 'memory_type'; did you mean 'memory-type'?"),
        ({}, "missing required key 'memory-type'"),
        (
            {"memory-type": "CXL"},
            "memory-type: expected one of NO_MEMORY_EXPANSION, PER_NODE_MEMORY_EXPANSION, PER_NPU_MEMORY_EXPANSION, MEMORY_POOL, got 'CXL'",
        ),
        (
            {"memory-type": "MEMORY_POOL"},
            "missing required key 'remote-mem-bw' (GB/s; MEMORY_POOL divides by it)",
        ),
        (
            {"memory-type": "MEMORY_POOL", "remote-mem-bw": 0},
            "remote-mem-bw: must be >= 1 (GB/s; MEMORY_POOL divides by it), got 0",
        ),
        (
            {"memory-type": "MEMORY_POOL", "remote-mem-bw": 1.5},
            "remote-mem-bw: expected an integer, got 1.5 (upstream stores it as an unsigned integer)",
        ),
        ({**PER_NODE, "remote-mem-latency": -1}, "remote-mem-latency: must be >= 0, got -1"),
        (
            {**PER_NODE, "num-npus-per-node": 0},
            "num-npus-per-node: must be >= 1 (needed by PER_NODE_MEMORY_EXPANSION), got 0",
        ),
        (
            {k: v for k, v in PER_NODE.items() if k != "num-nodes"},
            "missing required key 'num-nodes' (needed by PER_NODE_MEMORY_EXPANSION)",
        ),
    ],
)
def test_each_mistake_is_one_line(write, data, expected):
    path = write("memory.json", json.dumps(data))
    with pytest.raises(ConfigError) as info:
        load_memory(path)
    assert str(info.value) == f"{path}: {expected}"


def test_invalid_json(write):
    path = write("memory.json", "{memory-type: NO_MEMORY_EXPANSION}")
    with pytest.raises(ConfigError) as info:
        load_memory(path)
    assert str(info.value).startswith(f"{path}: invalid JSON at line 1 column 2")


def test_direct_construction_is_validated():
    with pytest.raises(ConfigError) as info:
        MemoryConfig(MemoryType.PER_NPU_MEMORY_EXPANSION)
    assert (
        str(info.value)
        == "<python>: remote-mem-bw: must be >= 1 (GB/s; PER_NPU_MEMORY_EXPANSION divides by it), got 0"
    )


def test_type_errors_come_first_then_what_the_type_needs(write):
    # The keys a memory type needs are checked once every given key is valid on its own.
    path = write(
        "memory.json", json.dumps({"memory-type": "PER_NODE_MEMORY_EXPANSION", "remote-mem-bw": "5"})
    )
    with pytest.raises(ConfigError) as info:
        load_memory(path)
    assert str(info.value) == (
        f"{path}: remote-mem-bw: expected an integer, got '5' (upstream stores it as an unsigned integer)"
    )
    path = write("memory.json", json.dumps({"memory-type": "PER_NODE_MEMORY_EXPANSION", "remote-mem-bw": 5}))
    with pytest.raises(ConfigError) as info:
        load_memory(path)
    assert str(info.value).splitlines() == [
        f"{path}: missing required key 'num-nodes' (needed by PER_NODE_MEMORY_EXPANSION)",
        f"{path}: missing required key 'num-npus-per-node' (needed by PER_NODE_MEMORY_EXPANSION)",
    ]


def test_a_misspelt_needed_key_is_one_mistake(write):
    path = write("memory.json", json.dumps({"memory-type": "MEMORY_POOL", "remote-mem-bww": 5}))
    with pytest.raises(ConfigError) as info:
        load_memory(path)
    assert str(info.value) == f"{path}: unknown key 'remote-mem-bww'; did you mean 'remote-mem-bw'?"


def test_only_the_files_keys_are_read(write):
    path = write("memory.json", json.dumps({"memory-type": "MEMORY_POOL", "remote_mem_bw_gbps": 5}))
    with pytest.raises(ConfigError) as info:
        load_memory(path)
    assert str(info.value) == f"{path}: unknown key 'remote_mem_bw_gbps'"


def test_a_config_built_in_python_warns_once_naming_python():
    with pytest.warns(ConfigWarning) as caught:
        config = MemoryConfig("NO_MEMORY_EXPANSION", remote_mem_latency_ns=5)
    assert [str(w.message) for w in caught] == [
        "<python>: remote-mem-latency: no effect with memory-type NO_MEMORY_EXPANSION"
    ]
    with pytest.warns(ConfigWarning, match="^<dict>: remote-mem-latency: no effect"):
        same = MemoryConfig.from_dict(
            {"memory-type": "NO_MEMORY_EXPANSION", "remote-mem-latency": 5}, "<dict>"
        )
    assert config == same and same.source == "<dict>"
    assert config.source == "<python>"
