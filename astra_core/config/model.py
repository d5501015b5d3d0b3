"""Backend configs as pydantic models, reported the house way (one line per problem).

A backend describes its config file as a pydantic model with :data:`STRICT`
(unknown keys, inf and NaN refused) and range checks made with
:func:`between`; :func:`load_model` reads it from None (defaults), a model
instance, a mapping, or a TOML/YAML path, and turns every validation error
into one line of one :class:`~astra_core.errors.ConfigError` naming the file
and key, as :mod:`astra_core.config.issues` does for the core's own files::

    flow.toml: payload_bytes: must be in [1, 1073741824] bytes, got 0
    flow.toml: unknown key 'mtu'
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from astra_core.config.files import expect_mapping, read_toml, read_yaml, source_name
from astra_core.config.issues import PYTHON_SOURCE, Problems
from astra_core.errors import ConfigError

#: The model config of every backend config: unknown keys, inf and NaN are errors.
STRICT = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

Model = TypeVar("Model", bound=BaseModel)


def _show_bound(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def between(
    low: float, high: float, unit: str = "", low_open: bool = False, zero_ok: bool = False
) -> BeforeValidator:
    """A pydantic check, before conversion (so that 1e23 for an int, or inf, is
    reported as out of range): ``low <= value <= high`` (``low < value`` if
    ``low_open``; 0 also allowed if ``zero_ok``). Its error states the range."""
    opening = "(" if low_open else "["
    allowed = f"{opening}{_show_bound(low)}, {_show_bound(high)}]{unit}" + (" or 0" if zero_ok else "")

    def check(value: Any) -> Any:
        number = value
        if isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                return value  # not a number: pydantic says so
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            return value
        if zero_ok and number == 0:
            return value
        if not math.isfinite(number) or number < low or (low_open and number == low) or number > high:
            raise ValueError(f"must be in {allowed}")
        return value

    return BeforeValidator(check)


def _problems_from(exc: ValidationError, problems: Problems) -> None:
    for err in exc.errors():
        key = ".".join(str(part) for part in err["loc"]) or None
        if err["type"] == "extra_forbidden":
            problems.add(None, f"unknown key {key!r}")
            continue
        message = err["msg"].removeprefix("Value error, ")
        given = err.get("input")
        if err["type"] not in ("missing",) and not isinstance(given, (dict, list)):
            message += f", got {given!r}"
        problems.add(key, message)


def validate_mapping(model: type[Model], data: Any, source: str = PYTHON_SOURCE) -> Model:
    """``model`` from a mapping shaped like the config file. Raises ConfigError
    (one line per problem, each naming ``source``)."""
    problems = Problems(source)
    mapping = expect_mapping(data, problems) if not isinstance(data, dict) else data
    problems.raise_if_any()
    try:
        return model.model_validate(mapping or {})
    except ValidationError as exc:
        _problems_from(exc, problems)
    problems.raise_if_any()
    raise AssertionError("unreachable")


def load_model(model: type[Model], config: Any, what: str) -> Model:
    """``model`` from None (defaults), an instance, a mapping, or a TOML/YAML path
    (``.toml`` is TOML, anything else YAML). ``what`` names the config in the
    error for any other type ("ns3 backend config"). Raises ConfigError."""
    if config is None:
        return model()
    if isinstance(config, model):
        return config
    if isinstance(config, dict):
        return validate_mapping(model, config)
    if isinstance(config, (str, os.PathLike)):
        path = Path(config)
        name = source_name(config)
        problems = Problems(name)
        if path.suffix.lower() == ".toml":
            data = read_toml(path)
        else:
            data = read_yaml(path, problems)
            problems.raise_if_any()
        return validate_mapping(model, data, name)
    raise ConfigError(
        f"{what}: expected a file path, a mapping or a {model.__name__}, got {type(config).__name__}"
    )
