"""Network-dimension sizes written ``8x16`` (or ``8,16``): one parser for every input.

:func:`parse_dims` reads them from an option or a key; :data:`Dims` is the config
key's type (``dims: 8x16`` or ``dims: [8, 16]``), checked when the file is read so
that its errors name the file and the key.
"""

from __future__ import annotations

from typing import Annotated, Any

from astra_core.config.model import checked
from astra_core.errors import ConfigError

__all__ = ["Dims", "dims_error", "parse_dims"]


def dims_error(
    value: Any, counts: tuple[int, int] | None = None, example: str = "8x16", count_rule: str | None = None
) -> tuple[list[int] | None, str | None]:
    """``(sizes, None)`` for ``"8x16"``, ``"8,16"`` or ``[8, 16]``, else ``(None, the
    problem)``: a part that is not an integer, a size below 1, or (given ``counts =
    (least, most)``) a number of sizes outside that range (``count_rule`` says what is
    allowed instead)."""
    if isinstance(value, list):
        parts: list[Any] = value
    elif isinstance(value, str):
        parts = value.lower().replace(",", "x").split("x")
    else:
        return None, f"expected sizes joined by 'x' like {example}, got {value!r}"
    try:
        sizes = [_size(part) for part in parts]
    except (TypeError, ValueError):
        return None, f"expected sizes joined by 'x' like {example}, got {value!r}"
    if any(size < 1 for size in sizes):
        return None, f"sizes must be >= 1, got {value!r}"
    if counts is not None and not counts[0] <= len(sizes) <= counts[1]:
        least, most = counts
        allowed = f"{least}" if least == most else f"{least} to {most}"
        return None, f"{count_rule or f'expected {allowed} sizes'}, got {value!r}"
    return sizes, None


def _size(part: Any) -> int:
    if isinstance(part, bool) or (isinstance(part, float) and not part.is_integer()):
        raise ValueError(part)
    return int(part)


def parse_dims(
    value: str | list[int],
    option: str = "--dims",
    counts: tuple[int, int] | None = None,
    example: str = "8x16",
    count_rule: str | None = None,
) -> list[int]:
    """``"8x16"`` (or ``"8,16"``, or a list) -> ``[8, 16]``. Raises ConfigError
    naming ``option`` (:func:`dims_error` for what is refused)."""
    sizes, error = dims_error(value, counts, example, count_rule)
    if error is not None or sizes is None:
        raise ConfigError(f"{option}: {error}")
    return sizes


#: A config key's dimension sizes: ``8x16`` or ``[8, 16]`` -> ``[8, 16]``.
Dims = Annotated[list[int], checked(dims_error)]
