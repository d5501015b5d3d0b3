"""What every ``astra`` command shares: the error boundary and parameter parsing.

* :class:`AstraGroup`: a click group whose commands' :class:`AstraError`
  becomes ``error: <line>`` on stderr (one per line of the message) and
  exit status 1, never a traceback; any other exception is a bug and keeps
  its traceback.
* :func:`parse_dims`: network-dimension sizes written ``8x16`` (or ``8,16``),
  each >= 1, with an optional count range.
* Sizes with units (``64MiB`` = 2^26 bytes, ``64MB`` = 64 x 10^6 bytes) are
  :func:`astra_core.workload.generators.micro.parse_size`.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from astra_core.errors import AstraError, ConfigError

#: An integer option that must be >= 1.
POSITIVE = click.IntRange(min=1)


def fail(exc: AstraError) -> NoReturn:
    """Print an astra error as ``error:`` lines on stderr and exit 1."""
    for line in str(exc).splitlines() or [type(exc).__name__]:
        click.echo(f"error: {line}", err=True)
    sys.exit(1)


class AstraGroup(click.Group):
    """A click group that is astra's one error boundary (see the module docstring)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AstraError as exc:
            fail(exc)


def parse_dims(
    text: str,
    option: str = "--dims",
    counts: tuple[int, int] | None = None,
    example: str = "8x16",
    count_rule: str | None = None,
) -> list[int]:
    """``"8x16"`` (or ``"8,16"``) -> ``[8, 16]``.

    Raises ConfigError naming ``option`` for a part that is not an integer, a
    size below 1, or (given ``counts = (least, most)``) a number of sizes
    outside that range (``count_rule`` says what is allowed instead)."""
    try:
        sizes = [int(x) for x in text.lower().replace(",", "x").split("x")]
    except ValueError:
        raise ConfigError(f"{option}: expected sizes joined by 'x' like {example}, got {text!r}") from None
    if any(size < 1 for size in sizes):
        raise ConfigError(f"{option}: sizes must be >= 1, got {text!r}")
    if counts is not None and not counts[0] <= len(sizes) <= counts[1]:
        least, most = counts
        allowed = f"{least}" if least == most else f"{least} to {most}"
        raise ConfigError(f"{option}: {count_rule or f'expected {allowed} sizes'}, got {text!r}")
    return sizes
