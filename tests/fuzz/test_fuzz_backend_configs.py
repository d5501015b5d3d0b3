"""Fuzz: garnetlike and ns3 backend configs give a validated config or one
ConfigError line per problem; a config that loads holds only finite numbers."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.budget import answer_or_one_line_error, fuzz_settings
from tests.fuzz.strategies import mutated, nasty_values


def _finite_numbers(value) -> bool:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, (int, float)):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite_numbers(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_finite_numbers(v) for v in value)
    return True


def _garnet():
    from astra_garnetlike.config import KEYS, load_config

    return KEYS, load_config


@fuzz_settings(120)
@given(data=st.data())
def test_garnetlike_config(data):
    keys, load_config = _garnet()
    doc = data.draw(mutated({"clock_ghz": 1.0, "flit_bytes": 256}, list(keys) + ["flit_size"]))
    config = answer_or_one_line_error(load_config, doc, source="garnet.toml", limit_s=5)
    if config is not None:
        assert _finite_numbers(config.as_dict()), config
        assert config.cycle_ps >= 1


NS3_KEYS = [
    "cc",
    "seed",
    "payload_bytes",
    "buffer_bytes",
    "ack_interval",
    "rto_us",
    "watchdog_s",
    "max_packet_hops",
    "ecn",
    "pfc",
    "dcqcn",
    "hpcc",
    "monitor",
    "mtu",
]


@fuzz_settings(120)
@given(
    doc=mutated({"cc": "dcqcn", "seed": 1}, NS3_KEYS),
    section=st.sampled_from(["ecn", "pfc", "dcqcn", "hpcc", "monitor"]),
    inner=st.dictionaries(
        st.sampled_from(
            [
                "enabled",
                "alpha",
                "xoff_bytes",
                "g",
                "cnp_interval_us",
                "eta",
                "max_stage",
                "rate_ai_mbps",
                "interval_us",
                "kmin",
                "kmax",
            ]
        ),
        nasty_values,
        max_size=3,
    ),
)
def test_ns3_config(doc, section, inner):
    from astra_ns3.config import config_from_dict

    doc = {**doc, section: inner}
    config = answer_or_one_line_error(config_from_dict, doc, "ns3.toml", limit_s=5)
    if config is not None:
        assert _finite_numbers(config.native_settings())
