"""Fuzz: every config file gives a valid config or one ConfigError line that
names the file, and every config that loads runs (or fails in one line) with
finite, non-negative times."""

from __future__ import annotations

import json
import math

import yaml
from hypothesis import given
from hypothesis import strategies as st

from astra_core.api import simulate
from astra_core.config.comm_groups import load_comm_groups
from astra_core.config.memory import load_memory
from astra_core.config.network import load_network
from astra_core.config.system import load_system
from astra_core.errors import ConfigError
from astra_core.workload.generators.micro import write_micro
from tests.fuzz.budget import answer_or_one_line_error, assert_sane_times, check_error_text, fuzz_settings
from tests.fuzz.strategies import MEMORY_KEYS, NETWORK_KEYS, SYSTEM_KEYS, mutated, nasty_values

BASE_SYSTEM = {
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
BASE_NETWORK = {"topology": ["Ring"], "npus_count": [4], "bandwidth": [50.0], "latency": [500.0]}
BASE_MEMORY = {"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 100, "remote-mem-bw": 50}


def _json_text(doc) -> str:
    # allow_nan: users' tools write NaN/Infinity into JSON, and Python reads it back
    return json.dumps(doc, allow_nan=True)


def _check_error_names_file(loader, path, *args):
    """The loader's config, or None after a ConfigError whose every line names the file."""
    try:
        return loader(path, *args)
    except ConfigError as exc:
        for line in check_error_text(exc):
            assert path.name in line, f"error line does not name {path.name}: {line}"
        return None


def _load_written(tmp_path_factory, name: str, text: str, loader, *args):
    """Write ``text`` to a fresh ``name`` and load it: the config, or None after
    a short ConfigError naming the file."""
    path = tmp_path_factory.mktemp("cfg") / name
    path.write_text(text)
    return answer_or_one_line_error(_check_error_names_file, loader, path, *args, limit_s=5)


@fuzz_settings(150)
@given(doc=mutated(BASE_SYSTEM, SYSTEM_KEYS))
def test_system_json(tmp_path_factory, doc):
    _load_written(tmp_path_factory, "system.json", _json_text(doc), load_system)


@fuzz_settings(150)
@given(doc=mutated(BASE_NETWORK, NETWORK_KEYS))
def test_network_yml(tmp_path_factory, doc):
    net = _load_written(tmp_path_factory, "network.yml", yaml.safe_dump(doc), load_network)
    if net is not None:
        assert net.npus_count >= 2
        for dim in net.dims:
            assert math.isfinite(dim.bandwidth_gbps) and dim.bandwidth_gbps > 0
            assert math.isfinite(dim.latency_ns) and dim.latency_ns >= 0


@fuzz_settings(100)
@given(doc=mutated(BASE_MEMORY, MEMORY_KEYS))
def test_memory_json(tmp_path_factory, doc):
    _load_written(tmp_path_factory, "memory.json", _json_text(doc), load_memory)


@fuzz_settings(100)
@given(
    doc=st.one_of(
        nasty_values,
        st.dictionaries(st.text(max_size=4), nasty_values, max_size=4),
        st.dictionaries(
            st.text(max_size=4), st.lists(st.integers(min_value=-3, max_value=10), max_size=6), max_size=4
        ),
    )
)
def test_comm_groups_json(tmp_path_factory, doc):
    groups = _load_written(tmp_path_factory, "groups.json", _json_text(doc), load_comm_groups, 8)
    for members in (groups or {}).values():
        assert members and len(set(members)) == len(members)
        assert all(0 <= m < 8 for m in members)


@fuzz_settings(60)
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=200)))
def test_garbage_files(tmp_path_factory, raw):
    """Binary or text garbage in any config file is one ConfigError line."""
    folder = tmp_path_factory.mktemp("junk")
    for name, loader, extra in (
        ("system.json", load_system, ()),
        ("network.yml", load_network, ()),
        ("memory.json", load_memory, ()),
        ("groups.json", load_comm_groups, (8,)),
    ):
        path = folder / name
        path.write_bytes(raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass"))
        answer_or_one_line_error(_check_error_names_file, loader, path, *extra, limit_s=5)


@fuzz_settings(40)
@given(
    system=mutated(BASE_SYSTEM, SYSTEM_KEYS),
    network=mutated(BASE_NETWORK, NETWORK_KEYS),
    collective=st.sampled_from(["all-reduce", "all-gather", "reduce-scatter", "all-to-all"]),
    size=st.sampled_from([1, 4096, 1 << 20]),
)
def test_configs_end_to_end(tmp_path_factory, system, network, collective, size):
    """Whatever loads, runs: a 4-NPU collective gives sane times or one error line."""
    folder = tmp_path_factory.mktemp("e2e")
    (folder / "system.json").write_text(_json_text(system))
    (folder / "network.yml").write_text(yaml.safe_dump(network))
    prefix = folder / "w" / "micro"
    prefix.parent.mkdir()
    write_micro(collective, size, 4, prefix)
    result = answer_or_one_line_error(
        simulate,
        str(prefix),
        folder / "system.json",
        folder / "network.yml",
        backend="analytical",
        limit_s=20,
    )
    if result is not None:
        assert_sane_times(result)
        assert result.step_ns > 0, "a collective of >= 1 byte took 0 ns"
