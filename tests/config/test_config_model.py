"""The pydantic adapter: every validation error is one line naming the file and key."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import pytest
from pydantic import Field, model_validator

from astra_core.config.model import (
    STRICT,
    ConfigModel,
    Flag,
    between,
    int_in,
    load_model,
    number_in,
    one_of,
    raise_problems,
    validate_mapping,
)
from astra_core.errors import ConfigError


class Policy(str, Enum):
    LIFO = "LIFO"
    FIFO = "FIFO"


class Section(ConfigModel):
    rate_gbps: Annotated[float, number_in(positive=True)] = 1.0
    enabled: Flag = True


class Example(ConfigModel):
    model_config = {**STRICT, "validate_by_name": True, "validate_by_alias": True}
    policy: Annotated[Policy, one_of(*(p.value for p in Policy))] = Field(alias="scheduling-policy")
    chunks: Annotated[int, int_in(1, 1024)] = Field(default=4, alias="preferred-dataset-splits")
    delay_ns: int = Field(default=10, alias="endpoint-delay")
    bandwidth: list[Annotated[float, number_in(positive=True)]] = [1.0]
    section: Section = Section()
    window: int = 0

    @model_validator(mode="after")
    def _window_fits(self) -> Example:
        problems = []
        if self.window > self.chunks:
            problems.append(
                ("window", f"must be <= preferred-dataset-splits ({self.chunks}), got {self.window}")
            )
            problems.append((None, "a window larger than the chunk count never fills"))
        raise_problems(problems)
        return self


def lines(data, source="ex.json") -> list[str]:
    with pytest.raises(ConfigError) as info:
        validate_mapping(Example, data, source)
    return str(info.value).splitlines()


def test_house_wording_names_file_and_key():
    assert lines({"scheduling-policy": "lifo", "preferred-dataset-splits": 0, "endpoint-delay": "x"}) == [
        "ex.json: scheduling-policy: expected one of LIFO, FIFO, got 'lifo' (names are case-sensitive: use 'LIFO')",
        "ex.json: preferred-dataset-splits: must be >= 1, got 0",
        "ex.json: endpoint-delay: expected an integer, got 'x'",
    ]


def test_nested_keys_and_list_items():
    assert lines({"scheduling-policy": "LIFO", "bandwidth": [1, -2], "section": {"enabled": 2}}) == [
        "ex.json: bandwidth[1]: must be > 0, got -2",
        "ex.json: section.enabled: expected 0 or 1, got 2",
    ]
    assert lines({"scheduling-policy": "LIFO", "section": 3}) == [
        "ex.json: section: expected a mapping, got 3"
    ]


def test_unknown_keys_suggest_and_a_misspelt_required_key_is_one_problem():
    # pydantic reports the fields' problems in field order, then the file's unknown keys.
    assert lines({"scheduling-polcy": "LIFO", "section": {"rate_gpbs": 2}, "zzz": 1}) == [
        "ex.json: section: unknown key 'rate_gpbs'; did you mean 'rate_gbps'?",
        "ex.json: unknown key 'scheduling-polcy'; did you mean 'scheduling-policy'?",
        "ex.json: unknown key 'zzz'",
    ]
    assert lines({"endpoint-delay": 10}) == ["ex.json: missing required key 'scheduling-policy'"]


def test_cross_key_checks_report_every_line():
    assert lines({"scheduling-policy": "FIFO", "preferred-dataset-splits": 2, "window": 3}) == [
        "ex.json: window: must be <= preferred-dataset-splits (2), got 3",
        "ex.json: a window larger than the chunk count never fills",
    ]


def test_values_load_by_key_or_by_name_and_keep_their_source():
    config = validate_mapping(
        Example, {"scheduling-policy": "FIFO", "preferred-dataset-splits": 8.0}, "ex.json"
    )
    assert config.policy is Policy.FIFO and config.chunks == 8 and isinstance(config.chunks, int)
    assert config.source == "ex.json"
    built = Example(policy="LIFO", chunks=2)
    assert built.policy is Policy.LIFO and built.source == "<python>"
    with pytest.raises(
        ConfigError, match=r"^<python>: preferred-dataset-splits: must be <= 1,024, got 2000$"
    ):
        validate_mapping(Example, {"scheduling-policy": "LIFO", "preferred-dataset-splits": 2000})


def test_between_states_the_range():
    class Limited(ConfigModel):
        payload_bytes: Annotated[int, between(1, 1 << 30, " bytes")] = 4096

    with pytest.raises(ConfigError) as info:
        validate_mapping(Limited, {"payload_bytes": 0}, "flow.toml")
    assert str(info.value) == "flow.toml: payload_bytes: must be in [1, 1073741824] bytes, got 0"


def test_load_model_reads_toml_and_yaml_and_refuses_other_types(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text("rate_gbps = 0\n")
    with pytest.raises(ConfigError, match=r"s\.toml: rate_gbps: must be > 0, got 0$"):
        load_model(Section, toml, "section config")
    yml = tmp_path / "s.yml"
    yml.write_text("rate_gbps: 2.5\nenabled: 0\n")
    section = load_model(Section, yml, "section config")
    assert section.rate_gbps == 2.5 and section.enabled is False and section.source == str(yml)
    with pytest.raises(
        ConfigError, match=r"^section config: expected a file path, a mapping or a Section, got int$"
    ):
        load_model(Section, 3, "section config")


def test_a_model_built_in_python_reports_like_a_file():
    with pytest.raises(ConfigError) as info:
        Section(rate_gbps=-1, enabled="yes")
    assert str(info.value).splitlines() == [
        "<python>: rate_gbps: must be > 0, got -1",
        "<python>: enabled: expected 0 or 1, got 'yes'",
    ]
