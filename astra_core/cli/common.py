"""What every ``astra`` command shares: the error boundary and parameter parsing.

* :class:`AstraGroup`: a click group whose commands' :class:`AstraError`
  becomes ``error: <line>`` on stderr (one per line of the message) and
  exit status 1, never a traceback; any other exception is a bug and keeps
  its traceback.
* Sizes with units (``64MiB`` = 2^26 bytes, ``64MB`` = 64 x 10^6 bytes) are
  :func:`astra_core.workload.generators.micro.parse_size`.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from astra_core.errors import AstraError

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
