"""Configs as pydantic models, reported the house way (one line per problem).

Every config astra reads (system.json, network.yml, the memory and
communicator-group files, sweep specs, each backend's own file) is a pydantic
model derived from :class:`ConfigModel` (unknown keys, inf and NaN refused).
Field checks come in three kinds:

* the house checks of :mod:`astra_core.config.issues` as pydantic types —
  :data:`Flag`, :func:`int_in`, :func:`number_in`, :func:`one_of`, or any
  ``as_*``-shaped function through :func:`checked` — whose messages are the
  house's own ("expected an integer, got 'x'");
* range checks with :func:`between`;
* pydantic's own types (``str``, ``dict[...]``, nested models), whose errors
  :func:`validate_mapping` rewords ("expected a mapping, got 3").

Checks across keys live in a ``model_validator(mode="after")`` that ends with
:func:`raise_problems` (several keyed lines at once).  :func:`validate_mapping`
and :func:`load_model` turn every validation error into one line of one
:class:`~astra_core.errors.ConfigError` naming the file and key; an unknown key
gets a suggestion when a known one is close, and a misspelt required key is
one problem, not two::

    flow.toml: payload_bytes: must be in [1, 1073741824] bytes, got 0
    system.json: unknown key 'endpoint-dlay'; did you mean 'endpoint-delay'?
    ns3.toml: dcqcn: unknown key 'gg'; did you mean 'g'?

The file name reaches validators as ``info.context["source"]`` and is kept
on the model as :attr:`ConfigModel.source`.  A model whose keys are data
rather than names (the group ids of a comm-group file) says how a message names
a location with a ``config_key`` classmethod (:meth:`ConfigModel.config_key`).
"""

from __future__ import annotations

import collections.abc
import difflib
import functools
import math
import os
import types
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, PrivateAttr, ValidationError, ValidationInfo
from pydantic_core import PydanticCustomError

from astra_core.config.files import expect_mapping, read_toml, read_yaml, source_name
from astra_core.config.issues import (
    PYTHON_SOURCE,
    Problems,
    as_choice,
    as_flag,
    as_int,
    as_number,
    kind_of,
    show,
)
from astra_core.errors import ConfigError

#: The model config of every config: unknown keys, inf and NaN are errors.
STRICT = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

Model = TypeVar("Model", bound=BaseModel)

#: pydantic error type of a house message (kept as written, with its own "got ...").
_HOUSE = "astra"
#: pydantic error type of several ``key: message`` lines from a cross-key check.
_LINES = "astra_lines"


class ConfigModel(BaseModel):
    """Base of every config model: :data:`STRICT`, plus the name of the file it
    came from (:attr:`source`, ``"<python>"`` when built in Python), which
    messages raised after loading (e.g. a check against the network) start with.

    Built in Python (its constructor, or a subclass's own ``__init__`` with
    friendlier arguments), a config is checked as a file is and raises one
    ConfigError, one line per problem, naming ``<python>``. Two configs with
    equal values are equal whichever files they came from.
    """

    model_config = STRICT
    _source: str = PrivateAttr(default=PYTHON_SOURCE)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            problems = Problems(PYTHON_SOURCE)
            _problems_from(exc, problems, type(self))
            problems.raise_if_any()
            raise  # pragma: no cover (every error becomes a problem)

    # pydantic calls a model's own __init__ from model_validate too (a second
    # validation, without the context that names the file) unless it is marked
    # as its base __init__ (as pydantic's RootModel does): these constructors are
    # for Python callers only.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass may have its own ``__init__`` (positional arguments, other
        names) that ends in ``super().__init__(**keys)``; model_validate skips it."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None:
            init.__pydantic_base_init__ = True

    def __eq__(self, other: object) -> bool:
        """Configs are equal when their values are; the file each came from does not count."""
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in type(self).model_fields)

    @property
    def source(self) -> str:
        """The file this config was read from, as the user named it."""
        return self._source

    @classmethod
    def config_key(cls, loc: tuple[int | str, ...]) -> str | None:
        """The key at pydantic's error location ``loc`` as messages name it:
        ``bandwidth[1]``, ``dcqcn.g``; None for the whole file. A model whose
        keys are data (ids, parameter names) may name them its own way."""
        return _key(loc)


def source_of(info: ValidationInfo) -> str:
    """The file name a validator's messages should start with."""
    context = info.context
    return context.get("source", PYTHON_SOURCE) if isinstance(context, dict) else PYTHON_SOURCE


def checked(check: Callable[[Any], tuple[Any, str | None]]) -> BeforeValidator:
    """A pydantic check from a house check (``value -> (typed, None)`` or
    ``(None, error sentence)``, as :func:`astra_core.config.issues.as_int`)."""

    def validate(value: Any) -> Any:
        typed, error = check(value)
        if error:
            raise PydanticCustomError(_HOUSE, error)
        return typed

    return BeforeValidator(validate)


#: An on/off switch written 0/1 (upstream's form) or false/true.
Flag = typing.Annotated[bool, checked(as_flag)]


def int_in(minimum: int | None = None, maximum: int | None = None) -> BeforeValidator:
    """An integer (``10`` or ``10.0``; never a boolean or a string) in [minimum, maximum]:
    ``Annotated[int, int_in(1, 1024)]``."""
    return checked(functools.partial(as_int, minimum=minimum, maximum=maximum))


def number_in(
    minimum: float | None = None, maximum: float | None = None, positive: bool = False
) -> BeforeValidator:
    """A finite number (never a boolean or a string); ``positive``: > 0:
    ``Annotated[float, number_in(positive=True)]``."""
    return checked(functools.partial(as_number, minimum=minimum, maximum=maximum, positive=positive))


def one_of(*names: str) -> BeforeValidator:
    """One of ``names`` (case-sensitive, as upstream compares strings; a different
    case gets a hint): ``Annotated[Policy, one_of(*(p.value for p in Policy))]``
    (pydantic then makes the Enum member)."""
    return checked(functools.partial(as_choice, choices=names))


def raise_problems(pairs: Iterable[tuple[str | None, str]]) -> None:
    """End a cross-key check: raise every ``(key, message)`` (key None for the
    whole file) at once, if there are any. For a ``model_validator``."""
    lines = [f"{key}: {message}" if key else message for key, message in pairs]
    if lines:
        raise PydanticCustomError(_LINES, "\n".join(lines))  # no context: the text is kept as written


def _show_bound(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def between(
    low: float,
    high: float,
    unit: str = "",
    low_open: bool = False,
    zero_ok: bool = False,
    text_ok: bool = False,
) -> BeforeValidator:
    """A pydantic check, before conversion (so that 1e23 for an int, or inf, is
    reported as out of range): ``low <= value <= high`` (``low < value`` if
    ``low_open``; 0 also allowed if ``zero_ok``). Its error states the range.
    A boolean is never a number (``payload_bytes = true`` is not 1), nor is a
    string (``"64"``) unless ``text_ok`` (a TOML table's keys, which are always
    strings)."""
    opening = "(" if low_open else "["
    allowed = f"{opening}{_show_bound(low)}, {_show_bound(high)}]{unit}" + (" or 0" if zero_ok else "")

    def check(value: Any) -> Any:
        if isinstance(value, bool) or (isinstance(value, str) and not text_ok):
            raise PydanticCustomError(_HOUSE, f"expected a number, got {show(value)}")
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
        if (
            (isinstance(number, float) and not math.isfinite(number))
            or number < low
            or (low_open and number == low)
            or number > high
        ):
            raise PydanticCustomError(_HOUSE, f"must be in {allowed}, got {show(value)}")
        return value

    return BeforeValidator(check)


#: pydantic error types reworded the house way: type -> the sentence before ", got ...".
_REWORDED = {
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "finite_number": "expected a finite number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "string_type": "expected a string",
    "dict_type": "expected a mapping",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
    "list_type": "expected a list",
    "tuple_type": "expected a list",
}


def _key(loc: tuple[int | str, ...]) -> str | None:
    """``('bandwidth', 1)`` -> ``bandwidth[1]``; ``('dcqcn', 'g')`` -> ``dcqcn.g``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or None


def _section_model(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model of the section at ``loc`` (nested models only), for suggestions."""
    for part in loc:
        fields = {(f.alias or name): f for name, f in model.model_fields.items()}
        field = fields.get(part) if isinstance(part, str) else None
        if field is None:
            return None
        candidates = [field.annotation, *typing.get_args(field.annotation)]
        nested = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
        if not nested:
            return None
        model = nested[0]
    return model


def _known_keys(model: type[BaseModel] | None) -> list[str]:
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _problems_from(exc: ValidationError, problems: Problems, model: type[BaseModel]) -> None:
    """One problem per validation error, in the house wording; keys named by
    ``model.config_key`` where the model has one (a root model may)."""
    key_of: Callable[[tuple[int | str, ...]], str | None] = getattr(model, "config_key", _key)
    errors = _merge_union_branches(exc.errors(include_url=False), model)
    unknown: dict[int, str] = {}
    suggested: set[tuple[tuple[int | str, ...], str]] = set()
    for index, err in enumerate(errors):  # first: which missing keys are misspellings
        if err["type"] == "extra_forbidden":
            loc, name = err["loc"][:-1], str(err["loc"][-1])
            known = _known_keys(_section_model(model, loc))
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
            suggested.update((loc, c) for c in close)
            unknown[index] = f"unknown key {name!r}" + (f"; did you mean {close[0]!r}?" if close else "")
    for index, err in enumerate(errors):
        kind, loc = err["type"], err["loc"]
        if index in unknown:
            problems.add(key_of(loc[:-1]), unknown[index])
            continue
        if kind == "missing":
            if (loc[:-1], str(loc[-1])) not in suggested:
                problems.add(key_of(loc[:-1]), f"missing required key {str(loc[-1])!r}")
            continue
        if kind == _LINES:
            prefix = key_of(loc)
            for line in err["msg"].splitlines():
                problems.add(prefix, line)
            continue
        problems.add(key_of(loc), _message(err))


def _message(err: Any) -> str:
    """The house wording of one pydantic error: ``expected ..., got VALUE``."""
    kind, given = err["type"], err.get("input")
    if kind in (_HOUSE, "union_tag_invalid", "union_tag_not_found"):
        return str(err["msg"])
    if kind in _REWORDED:
        return f"{_REWORDED[kind]}, got {show(given)}"
    if kind in ("literal_error", "enum"):
        return (
            f"expected {err.get('ctx', {}).get('expected', 'one of the allowed values')}, got {show(given)}"
        )
    if kind in ("too_short", "too_long"):
        ctx = err.get("ctx", {})
        bound = (
            f"at least {ctx.get('min_length')}" if kind == "too_short" else f"at most {ctx.get('max_length')}"
        )
        return f"must have {bound} entries, got {show(given)}"
    message = str(err["msg"]).removeprefix("Value error, ")
    return message + (
        f", got {kind_of(given)}" if isinstance(given, (dict, list)) else f", got {show(given)}"
    )


#: Containers whose items an error location steps into (a mapping's values, a list's items).
_CONTAINERS = (dict, list, tuple, collections.abc.Mapping, collections.abc.Sequence)


def _branch_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> int | None:
    """Where in ``loc`` pydantic names one branch of a union (``float``,
    ``list[float]``, ``function-before[validate(), float]``), found by walking the
    model's annotations along ``loc``; None where ``loc`` crosses no union."""
    annotation: Any = model
    for index, part in enumerate(loc):
        annotation = _unwrapped(annotation)
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            return index
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            fields = {(f.alias or name): f for name, f in annotation.model_fields.items()}
            if part not in fields:
                return None
            annotation = fields[part].annotation
        elif typing.get_origin(annotation) in _CONTAINERS:
            annotation = typing.get_args(annotation)[-1 if typing.get_origin(annotation) is dict else 0]
        else:
            return None
    return None


def _unwrapped(annotation: Any) -> Any:
    """``Annotated[X, ...]`` -> X; ``X | None`` -> X (pydantic names no branch for None)."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation):
            rest = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(rest) != 1:
                return typing.Union[tuple(rest)]  # noqa: UP007 (a union built at run time)
            annotation = rest[0]
        else:
            return annotation


def _merge_union_branches(errors: list[Any], model: type[BaseModel]) -> list[Any]:
    """A value that matches no branch of a union gets one error per branch, each
    located under the branch's label; they become one error at the union's key, in
    the place of the first. The branch that got furthest into the value (a list
    whose item is wrong) speaks for it; else the branch whose type matched says what
    is wrong with the value (``must be <= 20``); else the branches' expectations are
    joined: ``expected a number or a list, got 'abc'``."""
    merged: list[Any] = []
    groups: dict[tuple[int | str, ...], list[tuple[tuple[int | str, ...], Any]]] = {}
    for err in errors:
        loc = tuple(err["loc"])
        cut = _branch_at(model, loc)
        if cut is None:
            merged.append(err)
            continue
        rest = loc[cut + 1 :]
        if loc[:cut] not in groups:
            merged.append(loc[:cut])  # placeholder: the group's place in the order
        groups.setdefault(loc[:cut], []).append((rest, err))
    for index, item in enumerate(merged):
        if isinstance(item, tuple):
            merged[index] = _one_branch_error(item, groups[item])
    return merged


def _one_branch_error(
    prefix: tuple[int | str, ...], branches: list[tuple[tuple[int | str, ...], Any]]
) -> Any:
    deepest = max(len(rest) for rest, _ in branches)
    if deepest:
        rest, err = next((rest, err) for rest, err in branches if len(rest) == deepest)
        return {**err, "loc": prefix + rest}
    matched = [err for _, err in branches if not _message(err).startswith("expected ")]
    if matched:
        return {**matched[0], "loc": prefix}
    expected: list[str] = []
    given = branches[0][1].get("input")
    for _, err in branches:
        text = _message(err).split(", got ")[0].removeprefix("expected ")
        if text not in expected:
            expected.append(text)
    return {
        "type": _HOUSE,
        "loc": prefix,
        "msg": f"expected {' or '.join(expected)}, got {show(given)}",
        "input": given,
    }


def validate_mapping(model: type[Model], data: Any, source: str = PYTHON_SOURCE) -> Model:
    """``model`` from a mapping shaped like the config file. Raises ConfigError
    (one line per problem, each naming ``source``)."""
    problems = Problems(source)
    mapping = expect_mapping(data, problems) if not isinstance(data, dict) else data
    problems.raise_if_any()
    try:
        config = model.model_validate(mapping or {}, context={"source": source})
    except ValidationError as exc:
        _problems_from(exc, problems, model)
        problems.raise_if_any()
        raise  # pragma: no cover (every error becomes a problem)
    if isinstance(config, ConfigModel):
        config._source = source
    return config


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
