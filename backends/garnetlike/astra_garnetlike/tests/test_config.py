"""garnetlike configuration: documented defaults, TOML and YAML files, every problem named."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

import astra_garnetlike.config as config_module
from astra_core.backend import Topology
from astra_core.config.network import NetworkConfig
from astra_core.errors import ConfigError
from astra_core.plugins import backend_registry
from astra_garnetlike.config import KEYS, GarnetConfig, load_config

RING8 = NetworkConfig.from_dict(
    {"topology": ["Ring"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]}
)


def test_the_documented_defaults_are_the_defaults():
    # The table in the module docstring: ``key``  default  meaning
    rows = re.findall(r"^``(\w+)``\s+(\S+)", config_module.__doc__, flags=re.M)
    documented = dict(rows)
    assert set(documented) == set(KEYS)
    defaults = GarnetConfig().as_dict()
    for key, text in documented.items():
        value = defaults[key]
        shown = (
            {True: "true", False: "false", None: "(none)"}.get(value, str(value))
            if isinstance(value, (bool, type(None)))
            else str(value)
        )
        assert shown == text, key


def test_toml_and_yaml_files(tmp_path):
    toml = tmp_path / "g.toml"
    toml.write_text('flit_bytes = 64\nrouting = "table"\natomic_vc_allocation = true\n')
    yaml = tmp_path / "g.yml"
    yaml.write_text("flit_bytes: 64\nrouting: table\natomic_vc_allocation: true\n")
    for path in (toml, yaml):
        cfg = load_config(path)
        assert (cfg.flit_bytes, cfg.routing, cfg.atomic_vc_allocation) == (64, "table", True)
        assert cfg.vcs_per_vnet == 4 and cfg.source == str(path)


def test_every_problem_is_reported_with_file_and_key(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(
        'flit_byte = 64\nvcs_per_vnet = 0\nrouting = "xy"\nclock_ghz = -1\nbuffers_cover_round_trip = 1\n'
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    lines = str(info.value).splitlines()
    name = str(path)
    assert lines == [  # in the order of the keys (the module docstring's), unknown keys last
        f"{name}: clock_ghz: must be in [1e-06, 1000], got -1",
        f"{name}: vcs_per_vnet: must be in [1, 64], got 0",
        f"{name}: buffers_cover_round_trip: expected true or false, got 1",
        f"{name}: routing: expected one of auto, dimension_order, table, up_down, got 'xy'",
        f"{name}: unknown key 'flit_byte'; did you mean 'flit_bytes'?",
    ]


def test_the_packet_size_is_checked_against_the_flit_size_once_both_are_valid():
    with pytest.raises(ConfigError) as info:
        load_config({"flit_bytes": 1, "packet_bytes": 65537, "vcs_per_vnet": 2.0}, source="g.yml")
    assert (
        str(info.value)
        == "g.yml: packet_bytes: 65537 bytes is 65537 flits of 1 bytes; at most 65536 flits per packet"
    )
    assert load_config({"flit_bytes": 1, "packet_bytes": 65536}).packet_bytes == 65536
    with pytest.raises(ConfigError) as info:  # flit_bytes is wrong: the packet is not measured in it
        load_config({"flit_bytes": 0, "packet_bytes": 65537}, source="g.yml")
    assert str(info.value) == "g.yml: flit_bytes: must be in [1, 2^30], got 0"


def test_file_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"missing\.toml: file not found"):
        load_config(tmp_path / "missing.toml")
    (tmp_path / "g.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"g\.json: garnetlike config must be TOML"):
        load_config(tmp_path / "g.json")
    (tmp_path / "g.toml").write_text("flit_bytes = [")
    with pytest.raises(ConfigError, match=r"g\.toml: invalid TOML"):
        load_config(tmp_path / "g.toml")
    (tmp_path / "l.yml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match=r"l\.yml: expected a mapping"):
        load_config(tmp_path / "l.yml")
    with pytest.raises(ConfigError) as info:
        load_config(42)
    assert str(info.value) == "garnetlike config: expected a file path, a mapping or a GarnetConfig, got int"


def test_the_registry_passes_the_config_to_the_factory(tmp_path):
    registry = backend_registry()
    assert registry.get("garnetlike").config_class() is GarnetConfig
    path = tmp_path / "g.toml"
    path.write_text("flit_bytes = 1024\nbuffer_depth_flits = 300\n")
    net = registry.create("garnetlike", Topology(RING8), str(path))
    assert net.config.flit_bytes == 1024
    assert {port.down.depth for port in net.link_ports} == {300}  # deeper than the round trip
    net = registry.create("garnetlike", Topology(RING8), {"vcs_per_vnet": 6})
    assert len(net.link_ports[0].down.vcs) == 6
    with pytest.raises(ConfigError, match=r"<python>: packet_bytes: must be in \[1, 2\^40\], got 0"):
        registry.create("garnetlike", Topology(RING8), {"packet_bytes": 0})


def test_replace_validates_and_the_config_is_immutable(tmp_path):
    path = tmp_path / "g.toml"
    path.write_text("vcs_per_vnet = 2\n")
    cfg = load_config(path).replace(flit_bytes=32)
    assert (cfg.flit_bytes, cfg.packet_bytes, cfg.vcs_per_vnet, cfg.source) == (32, 65536, 2, str(path))
    with pytest.raises(ConfigError) as info:
        cfg.replace(flit_bytes=0, routing="xy")
    assert str(info.value).splitlines() == [
        f"{path}: flit_bytes: must be in [1, 2^30], got 0",
        f"{path}: routing: expected one of auto, dimension_order, table, up_down, got 'xy'",
    ]
    with pytest.raises(ConfigError, match=r"^<python>: flit_bytes: must be in \[1, 2\^30\], got 0$"):
        GarnetConfig(flit_bytes=0)  # direct construction validates too, reported alike
    with pytest.raises(ValidationError, match="frozen"):
        cfg.flit_bytes = 64  # type: ignore[misc]
    # Equal (and hashed alike) when the keys are, whichever file each came from.
    assert cfg == load_config({"flit_bytes": 32, "vcs_per_vnet": 2}, source=str(path))
    assert cfg == GarnetConfig(flit_bytes=32, vcs_per_vnet=2) and len({cfg, cfg.replace()}) == 1
    assert cfg != cfg.replace(flit_bytes=64) and hash(cfg) == hash(
        GarnetConfig(flit_bytes=32, vcs_per_vnet=2)
    )
