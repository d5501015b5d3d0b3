"""The ns3 backend's configuration file: defaults, per-speed ECN maps, clear errors."""

from __future__ import annotations

import typing
import warnings

import pytest
from pydantic import BaseModel

from astra_core.config.issues import ConfigWarning
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


@pytest.mark.parametrize(
    "mode, name",
    [
        (1, "dcqcn"),
        (3, "hpcc"),
        (7, "timely"),
        (8, "dctcp"),
        (10, "hpcc-pint"),
        ("HPCC", "hpcc"),
        ("none", "none"),
    ],
)
def test_upstream_cc_mode_numbers_are_accepted(mode, name):
    assert load_config({"cc": mode}).cc == name
    if not isinstance(mode, str):  # upstream's own key, as in its config.txt
        assert load_config({"CC_MODE": mode}).cc == name


def test_cc_and_cc_mode_together_are_an_error():
    with pytest.raises(ConfigError, match="give cc or CC_MODE, not both"):
        load_config({"cc": "hpcc", "CC_MODE": 3})


def test_dctcp_marks_at_one_threshold_instead_of_the_red_maps():
    # The HPCC artifact's DCTCP setting: K = 3 KB per Gbps, Kmin = Kmax, Pmax 1.
    cfg = load_config({"cc": "dctcp"})
    assert cfg.marking(100.0) == (300_000.0, 300_000.0, 1.0)
    assert cfg.marking(50.0) == pytest.approx((150_000.0, 150_000.0, 1.0))
    assert load_config({"cc": "dcqcn"}).marking(100.0) == (400_000.0, 1_600_000.0, 0.2)
    assert load_config({"cc": "dctcp", "ecn": {"enabled": False}}).marking(100.0) == (0, 0, 0)


def test_new_algorithms_reach_the_native_settings_in_its_units():
    with pytest.warns(ConfigWarning, match=r"\[hpcc_pint\], \[dctcp\] not used with cc = 'timely'"):
        cfg = load_config(
            {
                "cc": "timely",
                "timely": {"t_low_us": 40, "rate_ai_mbps": 20},
                "dctcp": {"g": 0.125},
                "hpcc_pint": {"log_base": 1.01, "probability": 0.0625},
            }
        )
    native = cfg.native_settings()
    assert native["cc"] == 7 and native["timely_t_low_us"] == 40
    assert native["timely_rate_ai"] == 20e6 and native["dctcp_g"] == 0.125
    assert native["pint_log_base"] == 1.01 and native["pint_prob"] == 0.0625


def test_fast_forward_is_on_by_default_and_reaches_the_native_settings():
    # The C++ model reads fast_forward (1/0) and ff_tolerance (relative).
    native = Ns3Config().native_settings()
    assert (native["fast_forward"], native["ff_tolerance"]) == (1.0, 0.01)
    native = load_config({"fast_forward": False, "fast_forward_tolerance": 0.5}).native_settings()
    assert (native["fast_forward"], native["ff_tolerance"]) == (0.0, 0.5)
    assert load_config({"fast_forward": 0}).fast_forward is False  # upstream's 0/1 form


def test_toml_and_yaml_files_load_the_same(tmp_path):
    toml = tmp_path / "cc.toml"
    toml.write_text(
        'cc = "hpcc"\nseed = 3\n[pfc]\nenabled = false\n[ecn]\nkmax_kb = {100 = 800}\n[hpcc]\neta = 0.99\n'
    )
    yaml = tmp_path / "cc.yaml"
    yaml.write_text(
        "cc: hpcc\nseed: 3\npfc: {enabled: false}\necn: {kmax_kb: {100: 800}}\nhpcc: {eta: 0.99}\n"
    )
    a, b = load_config(toml), load_config(yaml)
    assert a == b
    assert a.hpcc.eta == 0.99 and not a.pfc.enabled and a.ecn.kmax_kb == {100.0: 800.0}


def test_every_problem_is_one_line_naming_the_file_and_key(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("cc = 12\npayload_bytes = 10\nbufer_bytes = 5\n[dcqcn]\ng = 2\nrate_ai = 1\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    lines = str(err.value).splitlines()
    assert all(line.startswith(f"{path}: ") for line in lines)
    text = str(err.value)
    assert "cc: CC_MODE 12 is not an upstream congestion control" in text
    assert "payload_bytes: must be in [64, 65000] bytes, got 10" in text
    assert "unknown key 'bufer_bytes'" in text
    assert "dcqcn.g: must be in (0, 1], got 2" in text
    assert "dcqcn: unknown key 'rate_ai'" in text
    assert len(lines) == 5


def test_unreadable_files_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="missing.toml: file not found"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("cc = \n")
    with pytest.raises(ConfigError, match="bad.toml: invalid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="expected a file path, a mapping or a Ns3Config"):
        load_config(42)


# -- ranges: what the C++ model can represent and finish with ----------------------------------
# rto_us = inf, 1e300 or 1e-9 must not reach the C++ model, as a timer of INT64_MIN
# or 0 ps (static_cast of an out-of-range double; rounding) would spin the worker
# forever at one instant; seed 1e23 would overflow the uint64 cast.


@pytest.mark.parametrize(
    "text, line",
    [
        ("rto_us = inf", "rto_us: must be in [1, 1e+12] us, got inf"),
        ("rto_us = 1e300", "rto_us: must be in [1, 1e+12] us, got 1e+300"),
        ("rto_us = 1e-9", "rto_us: must be in [1, 1e+12] us, got 1e-09"),
        ("seed = 1e23", "seed: must be in [0, 4294967294], got 1e+23"),
        ("seed = 4294967295", "seed: must be in [0, 4294967294], got 4294967295"),
        ("seed = -1", "seed: must be in [0, 4294967294], got -1"),
        ("buffer_bytes = 1e20", "buffer_bytes: must be in [1, 9007199254740992] bytes, got 1e+20"),
        ("ack_interval = 4294967296", "ack_interval: must be in [1, 4294967295], got 4294967296"),
        ("watchdog_s = 0.5", "watchdog_s: must be in [1, 1e+06] s, got 0.5"),
        ("max_packet_hops = -1", "max_packet_hops: must be in [0, 1e+18], got -1"),
        ("[pfc]\nalpha = nan", "pfc.alpha: must be in (0, 1e+06], got nan"),
        ("[pfc]\nheadroom_bytes = -5", "pfc.headroom_bytes: must be in [0, 9007199254740992] bytes, got -5"),
        ("[dcqcn]\nalpha_timer_us = 1e-9", "dcqcn.alpha_timer_us: must be in [0.1, 1e+12] us, got 1e-09"),
        (
            "[dcqcn]\nrate_increase_timer_us = inf",
            "dcqcn.rate_increase_timer_us: must be in [0.1, 1e+12] us, got inf",
        ),
        ("[dcqcn]\ncnp_interval_us = -1", "dcqcn.cnp_interval_us: must be in [0, 1e+12] us, got -1"),
        (
            "[dcqcn]\nbyte_counter_bytes = 0",
            "dcqcn.byte_counter_bytes: must be in [1, 9007199254740992] bytes, got 0",
        ),
        (
            "[dcqcn]\nfast_recovery_steps = 3e9",
            "dcqcn.fast_recovery_steps: must be in [0, 2147483647], got 3000000000.0",
        ),
        ("[dcqcn]\nrate_ai_mbps = 1e300", "dcqcn.rate_ai_mbps: must be in [0, 1e+09] Mbps, got 1e+300"),
        ("[dcqcn]\nmin_rate_mbps = 0", "dcqcn.min_rate_mbps: must be in (0, 1e+09] Mbps, got 0"),
        ("[hpcc]\neta = 0", "hpcc.eta: must be in (0, 1], got 0"),
        ("[hpcc]\nmax_stage = -1", "hpcc.max_stage: must be in [0, 2147483647], got -1"),
        ("[monitor]\ninterval_us = 1e-9", "monitor.interval_us: must be in [0.1, 1e+12] us or 0, got 1e-09"),
        ("[ecn]\npmax = {100 = 1.5}", "ecn.pmax.100: must be in [0, 1], got 1.5"),
        ("[ecn]\nkmax_kb = {0 = 10}", "ecn.kmax_kb.0.[key]: must be in (0, 1e+06] Gbps, got '0'"),
        # fast-forward's switch and tolerance
        ('fast_forward = "false"', "fast_forward: expected 0 or 1, got 'false'"),
        ("fast_forward = 2", "fast_forward: expected 0 or 1, got 2"),
        ("fast_forward_tolerance = 0", "fast_forward_tolerance: must be in (0, 0.5], got 0"),
        ("fast_forward_tolerance = 0.6", "fast_forward_tolerance: must be in (0, 0.5], got 0.6"),
        ("fast_forward_tolerance = true", "fast_forward_tolerance: expected a number, got true"),
    ],
)
def test_every_number_is_range_checked_with_the_allowed_range(tmp_path, text, line):
    path = tmp_path / "ns3.toml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}: {line}"


def test_the_edges_of_the_ranges_are_accepted():
    cfg = load_config(
        {
            "seed": 4294967294,
            "rto_us": 1,
            "buffer_bytes": 2**53,
            "monitor": {"interval_us": 0},
            "dcqcn": {"cnp_interval_us": 0},
            "max_packet_hops": 0,
        }
    )
    assert cfg.native_settings()["seed"] == 4294967294 and cfg.rto_us == 1.0


# -- booleans and strings are not numbers; inverted pairs; unused sections -------------------


def numeric_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every int or float key of ``model`` and its sections, dotted (``timely.t_low_us``)."""
    keys = []
    for name, field in model.model_fields.items():
        kind = typing.get_origin(field.annotation) or field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            keys += numeric_keys(kind, f"{prefix}{name}.")
        elif kind in (int, float):
            keys.append(prefix + name)
    return keys


def nested(key: str, value) -> dict:
    head, _, rest = key.partition(".")
    return {head: nested(rest, value) if rest else value}


NUMERIC_KEYS = numeric_keys(Ns3Config)


def test_the_numeric_keys_are_all_found():
    assert (
        len(NUMERIC_KEYS) == 36
        and "fast_forward_tolerance" in NUMERIC_KEYS
        and "timely.t_low_us" in NUMERIC_KEYS
        and "dcqcn.g" in NUMERIC_KEYS
    )


@pytest.mark.parametrize("value, shown", [(True, "true"), (False, "false"), ("64", "'64'")])
@pytest.mark.parametrize("key", NUMERIC_KEYS)
def test_a_boolean_or_a_string_is_not_a_number(key, value, shown):
    # Not pydantic's lax int and float, which make true 1 and "64" 64.
    with pytest.raises(ConfigError) as err, warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigWarning)
        load_config(nested(key, value))
    assert str(err.value) == f"<python>: {key}: expected a number, got {shown}"


@pytest.mark.parametrize("table", ["kmin_kb", "kmax_kb", "pmax"])
def test_a_boolean_in_a_per_speed_table_is_not_a_number(tmp_path, table):
    path = tmp_path / "ns3.toml"
    path.write_text(f"[ecn.{table}]\n100 = true\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}: ecn.{table}.100: expected a number, got true"


def test_per_speed_tables_still_take_toml_keys_which_are_strings(tmp_path):
    path = tmp_path / "ns3.toml"
    path.write_text("[ecn.kmin_kb]\n100 = 300\n[ecn.kmax_kb]\n100 = 900\n")
    assert load_config(path).ecn.thresholds(100.0) == (300_000, 900_000, 0.2)


def test_timely_t_low_above_t_high_is_refused_naming_both(tmp_path):
    path = tmp_path / "ns3.toml"
    path.write_text('cc = "timely"\n[timely]\nt_low_us = 900\nt_high_us = 100\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}: timely.t_low_us: 900 us is above timely.t_high_us 100 us"
    assert load_config({"cc": "timely", "timely": {"t_low_us": 100, "t_high_us": 100}}).timely.t_low_us == 100


def test_ecn_kmin_above_kmax_is_refused_naming_both(tmp_path):
    path = tmp_path / "ns3.toml"
    path.write_text("[ecn]\nkmin_kb = {100 = 2000, 25 = 100}\nkmax_kb = {100 = 1600, 25 = 400}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}: ecn.kmin_kb: 2000 KB at 100 Gbps is above ecn.kmax_kb's 1600 KB there"


@pytest.mark.parametrize(
    "text, line",
    [
        (
            'cc = "timely"\n[dcqcn]\ng = 0.5\n[hpcc_pint]\nlog_base = 1.1\n',
            "dcqcn.g, [hpcc_pint] not used with cc = 'timely' (it reads [timely], dcqcn.min_rate_mbps)",
        ),
        (
            'cc = "dctcp"\n[dcqcn]\ng = 0.5\nmin_rate_mbps = 10\n',
            "dcqcn.g not used with cc = 'dctcp' (it reads [dctcp], dcqcn.min_rate_mbps)",
        ),
        ("[timely]\n[hpcc]\neta = 0.9\n", "[hpcc] not used with cc = 'dcqcn' (it reads [dcqcn])"),
        (
            'cc = "none"\n[dcqcn]\ng = 0.5\n',
            "[dcqcn] not used with cc = 'none' (it reads no algorithm section)",
        ),
    ],
)
def test_sections_of_algorithms_not_selected_are_one_warning(tmp_path, text, line):
    path = tmp_path / "ns3.toml"
    path.write_text(text)
    with pytest.warns(ConfigWarning) as caught:
        load_config(path)
    assert [str(w.message) for w in caught] == [f"{path}: {line}"]


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"cc": "dcqcn", "dcqcn": {"g": 0.5}},
        {"cc": "hpcc-pint", "hpcc_pint": {"log_base": 1.1}, "hpcc": {"eta": 0.9}},
        {"cc": "timely", "timely": {"beta": 0.5}, "dcqcn": {"min_rate_mbps": 10}},
        {"cc": "hpcc", "timely": {"t_low_us": 50.0, "beta": 0.8}},  # the defaults, restated
    ],
)
def test_sections_the_selected_algorithm_reads_give_no_warning(config):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_config(config)
