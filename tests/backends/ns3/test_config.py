"""The ns3 backend's configuration file: defaults, per-speed ECN maps, clear errors."""

from __future__ import annotations

import pytest

from astra_core.errors import ConfigError
from astra_ns3.config import Ns3Config, load_config


def test_defaults_name_their_sources():
    cfg = Ns3Config()
    assert cfg.cc == "dcqcn" and cfg.payload_bytes == 4096 and cfg.buffer_bytes == 32 << 20
    # Upstream's KMIN_MAP/KMAX_MAP at 100 Gbps: 400 KB and 1600 KB (KB = 1000 B), Pmax 0.2.
    assert cfg.ecn.thresholds(100.0) == (400_000.0, 1_600_000.0, 0.2)
    # A speed between entries scales the closest one with bandwidth: 50 GB/s of
    # network.yml is 429.4967296 Gbps, closest to 400 Gbps (Kmin 800 KB).
    kmin, kmax, pmax = cfg.ecn.thresholds(429.4967296)
    assert kmin == pytest.approx(800_000 * 429.4967296 / 400)
    assert kmax == pytest.approx(3_200_000 * 429.4967296 / 400) and pmax == 0.2


@pytest.mark.parametrize("mode, name", [(1, "dcqcn"), (3, "hpcc"), ("HPCC", "hpcc"), ("none", "none")])
def test_upstream_cc_mode_numbers_are_accepted(mode, name):
    assert load_config({"cc": mode}).cc == name


def test_toml_and_yaml_files_load_the_same(tmp_path):
    toml = tmp_path / "cc.toml"
    toml.write_text('cc = "hpcc"\nseed = 3\n[pfc]\nenabled = false\n[ecn]\nkmax_kb = {100 = 800}\n'
                    '[hpcc]\neta = 0.99\n')
    yaml = tmp_path / "cc.yaml"
    yaml.write_text("cc: hpcc\nseed: 3\npfc: {enabled: false}\necn: {kmax_kb: {100: 800}}\n"
                    "hpcc: {eta: 0.99}\n")
    a, b = load_config(toml), load_config(yaml)
    assert a == b
    assert a.hpcc.eta == 0.99 and not a.pfc.enabled and a.ecn.kmax_kb == {100.0: 800.0}


def test_every_problem_is_one_line_naming_the_file_and_key(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('cc = 7\npayload_bytes = 10\nbufer_bytes = 5\n[dcqcn]\ng = 2\nrate_ai = 1\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    lines = str(err.value).splitlines()
    assert all(line.startswith(f"{path}: ") for line in lines)
    text = str(err.value)
    assert "cc: CC_MODE 7 TIMELY is not modelled" in text
    assert "payload_bytes: Input should be greater than or equal to 64, got 10" in text
    assert "unknown key 'bufer_bytes'" in text
    assert "dcqcn.g: Input should be less than or equal to 1, got 2" in text
    assert "unknown key 'dcqcn.rate_ai'" in text
    assert len(lines) == 5


def test_unreadable_files_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="missing.toml: file not found"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("cc = \n")
    with pytest.raises(ConfigError, match="bad.toml: invalid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="expected a file path, a mapping or an Ns3Config"):
        load_config(42)
