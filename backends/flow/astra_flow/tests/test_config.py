"""The flow backend's config: every numeric key is a number, never a boolean or a string."""

from __future__ import annotations

import pytest

from astra_core.errors import ConfigError
from astra_flow.config import FlowConfig, load_config

KEYS = list(FlowConfig.model_fields)


def test_every_key_is_numeric():
    assert KEYS == [
        "payload_bytes",
        "header_bytes",
        "ack_bytes",
        "ack_interval",
        "reallocation_delay_ns",
        "flow_rate_cap_gbps",
    ]


@pytest.mark.parametrize("text, shown", [("true", "true"), ("false", "false"), ('"64"', "'64'")])
@pytest.mark.parametrize("key", KEYS)
def test_a_boolean_or_a_string_is_refused_naming_the_file_and_key(tmp_path, key, text, shown):
    # payload_bytes = true must not become a 1-byte payload, nor "64" 64.
    path = tmp_path / "flow.toml"
    path.write_text(f"{key} = {text}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}: {key}: expected a number, got {shown}"


def test_numbers_are_still_read_with_their_ranges(tmp_path):
    path = tmp_path / "flow.toml"
    path.write_text("payload_bytes = 1000\nflow_rate_cap_gbps = 50\nreallocation_delay_ns = 0\n")
    config = load_config(path)
    assert (config.payload_bytes, config.flow_rate_cap_gbps, config.reallocation_delay_ns) == (
        1000,
        50.0,
        0.0,
    )
    path.write_text("payload_bytes = 0\n")
    with pytest.raises(ConfigError, match=r"payload_bytes: must be in \[1, 1073741824\] bytes, got 0$"):
        load_config(path)
