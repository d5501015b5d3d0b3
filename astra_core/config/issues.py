"""Collect configuration problems and raise them as one :class:`ConfigError`.

The house rule: a loader checks the whole file, notes every problem with the
key it concerns, and raises once.  Each problem is one line that starts with
the file name, e.g.::

    system.json: active-chunks-per-dimension: must be >= 1, got 0
    system.json: unknown key 'foo-bar'

The small ``as_*`` helpers turn a raw JSON/YAML value into a typed one or
return an error sentence; they never raise.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable
from typing import Any

from astra_core.errors import ConfigError


class ConfigWarning(UserWarning):
    """A config value is valid but changes nothing (e.g. a parameter of an
    upstream model astra does not have); the CLI prints it as one line."""


#: Source name used for configs built in Python rather than read from a file.
PYTHON_SOURCE = "<python>"


class Problems:
    """An ordered list of ``(key, message)`` pairs for one source file."""

    def __init__(self, source: str):
        self.source = source
        self.items: list[tuple[str | None, str]] = []
        self._suggested: set[str] = set()

    def add(self, key: str | None, message: str) -> None:
        """Note a problem; ``key`` is the key path (``bandwidth[1]``) or None."""
        self.items.append((key, message))

    def unknown(self, key: str, known: Iterable[str]) -> None:
        """Note an unknown key, suggesting a close known one if there is one."""
        known = list(known)
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
        if close:
            self._suggested.add(close[0])
            self.add(None, f"unknown key {key!r}; did you mean {close[0]!r}?")
        else:
            self.add(None, f"unknown key {key!r}")

    def missing(self, key: str, why: str = "") -> None:
        """Note a missing required key, unless an unknown key already
        suggested it (a misspelling is one mistake, not two)."""
        if key not in self._suggested:
            self.add(None, f"missing required key {key!r}{f' ({why})' if why else ''}")

    def extend(self, pairs: Iterable[tuple[str | None, str]]) -> None:
        for key, message in pairs:
            self.add(key, message)

    def has_key(self, key: str) -> bool:
        """True if a problem was already noted for ``key`` or one of its items."""
        return any(k == key or (k or "").startswith(key + "[") for k, _ in self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def lines(self) -> list[str]:
        return [
            f"{self.source}: {key}: {message}" if key else f"{self.source}: {message}"
            for key, message in self.items
        ]

    def raise_if_any(self) -> None:
        """Raise one ConfigError with one line per problem, if there are any."""
        if self.items:
            raise ConfigError("\n".join(self.lines()))


#: Longest rendering of a value in a message; error lines stay short.
_SHOW_MAX = 60


def show(value: Any) -> str:
    """Render a raw config value the way the user wrote it (JSON-like), cut
    to about 60 characters so that an error line stays one short line."""
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= _SHOW_MAX else text[: _SHOW_MAX - 4] + "...'"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int) and value.bit_length() > 64:
        # repr() of a huge int is as long as the int (and fails past 4300 digits).
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"{'a negative' if value < 0 else 'an'} integer of about {digits} digits"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        text = _render_list(value, _SHOW_MAX + 1)
        return text if len(text) <= _SHOW_MAX else text[: _SHOW_MAX - 3] + "..."
    text = repr(value)
    return text if len(text) <= _SHOW_MAX else text[: _SHOW_MAX - 3] + "..."


def _render_list(items: Any, budget: int) -> str:
    """JSON-like text of a list, stopping once ``budget`` characters are out:
    YAML aliases can nest a short file into billions of items."""
    parts: list[str] = []
    used = 1
    for item in items:
        if used > budget:
            break
        if isinstance(item, (list, tuple)):
            text = _render_list(item, budget - used)
        elif isinstance(item, str):
            text = json.dumps(item[:budget])
        elif isinstance(item, dict):
            text = "{...}"
        elif isinstance(item, (bool, int, float)) or item is None:
            text = show(item) if isinstance(item, int) and not isinstance(item, bool) else json.dumps(item)
        else:
            text = str(item)[:budget]
        parts.append(text)
        used += len(text) + 2
    return "[" + ", ".join(parts) + ("]" if used <= budget else "")


def kind_of(value: Any) -> str:
    """A short type name for messages ('a string', 'a list', ...)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if value is None:
        return "null"
    return type(value).__name__


def as_int(
    value: Any, *, minimum: int | None = None, maximum: int | None = None
) -> tuple[int | None, str | None]:
    """An integer (``10`` or ``10.0``; never a boolean) in [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, f"expected an integer, got {show(value)}"
    if isinstance(value, float):
        if not (math.isfinite(value) and value.is_integer()):
            return None, f"expected an integer, got {show(value)}"
        value = int(value)
    if minimum is not None and value < minimum:
        return None, f"must be >= {minimum}, got {show(value)}"
    if maximum is not None and value > maximum:
        return None, f"must be <= {maximum:,}, got {show(value)}"
    return value, None


def as_number(
    value: Any,
    *,
    minimum: float | None = None,
    positive: bool = False,
    maximum: float | None = None,
) -> tuple[float | None, str | None]:
    """A finite number (int or float; never a boolean).

    ``positive`` demands > 0; ``minimum`` demands >= minimum; ``maximum``
    demands <= maximum.  An integer too large for a float is out of range.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, f"expected a number, got {show(value)}"
    try:
        number = float(value)
    except OverflowError:
        number = math.inf if value > 0 else -math.inf
    if not math.isfinite(number):
        if isinstance(value, int) and maximum is not None:
            return None, f"must be <= {maximum:g}, got {show(value)}"
        return None, f"expected a finite number, got {show(value)}"
    if positive and number <= 0:
        return None, f"must be > 0, got {show(value)}"
    if minimum is not None and number < minimum:
        return None, f"must be >= {minimum:g}, got {show(value)}"
    if maximum is not None and number > maximum:
        return None, f"must be <= {maximum:g}, got {show(value)}"
    return number, None


def as_flag(value: Any) -> tuple[bool | None, str | None]:
    """An on/off switch written as 0/1 (upstream's form) or false/true."""
    if isinstance(value, bool):
        return value, None
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value), None
    return None, f"expected 0 or 1, got {show(value)}"


def as_str(value: Any) -> tuple[str | None, str | None]:
    """A non-empty string."""
    if not isinstance(value, str):
        return None, f"expected a string, got {show(value)}"
    if not value:
        return None, "must not be empty"
    return value, None


def as_choice(value: Any, choices: Iterable[str]) -> tuple[str | None, str | None]:
    """One of ``choices`` (case-sensitive, as upstream compares strings)."""
    options = list(choices)
    if isinstance(value, str) and value in options:
        return value, None
    hint = ""
    if isinstance(value, str):
        same_but_case = [c for c in options if c.lower() == value.lower()]
        if same_but_case:
            hint = f" (names are case-sensitive: use {same_but_case[0]!r})"
    return None, f"expected one of {', '.join(options)}, got {show(value)}{hint}"
