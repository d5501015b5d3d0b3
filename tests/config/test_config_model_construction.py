"""ConfigModel built in Python: checked as a file, one ConfigError; the file's name is no part of its value."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field, model_validator

from astra_core.config.issues import as_int
from astra_core.config.model import ConfigModel, checked, validate_mapping
from astra_core.errors import ConfigError

CALLS: list[str] = []


class Sample(ConfigModel):
    """Two keys, one with a hyphen, and a Python constructor of its own."""

    count: Annotated[int, checked(lambda v: as_int(v, minimum=1))] = Field(alias="the-count")
    name: str = "x"

    def __init__(self, count: int, name: str = "x") -> None:
        CALLS.append("__init__")
        super().__init__(**{"the-count": count, "name": name})

    @model_validator(mode="after")
    def _counted(self) -> Sample:
        CALLS.append("validated")
        return self


def test_construction_in_python_is_one_config_error_naming_python():
    with pytest.raises(ConfigError) as info:
        Sample(0, name=3)  # type: ignore[arg-type]
    assert str(info.value).splitlines() == [
        "<python>: the-count: must be >= 1, got 0",
        "<python>: name: expected a string, got 3",
    ]


def test_a_file_is_validated_once_without_the_python_constructor():
    CALLS.clear()
    config = validate_mapping(Sample, {"the-count": 2}, "sample.yml")
    assert CALLS == ["validated"] and config.source == "sample.yml"
    CALLS.clear()
    assert Sample(2) == config
    assert CALLS == ["__init__", "validated"]


def test_equal_values_from_different_files_are_equal():
    first = validate_mapping(Sample, {"the-count": 2}, "a.yml")
    second = validate_mapping(Sample, {"the-count": 2}, "b.yml")
    assert first == second and first.source != second.source
    assert first != validate_mapping(Sample, {"the-count": 3}, "a.yml")
    assert first != "a.yml"
