"""What every ``astra`` command shares: the error boundary and parameter parsing.

* :class:`AstraGroup`: a click group whose commands' :class:`AstraError`
  becomes ``error: <line>`` on stderr (one per line of the message) and
  exit status 1, never a traceback; any other exception is a bug and keeps
  its traceback. While a command runs, SIGTERM raises
  :class:`~astra_core.lifetime.Interrupted` (a KeyboardInterrupt), so that it
  stops as Ctrl-C does, running its ``finally`` blocks (worker processes killed,
  half-written files removed); either is
  ``error: astra CMD: interrupted by SIGINT`` and exit status 128 + the signal
  number (130, 143), as shells report a process killed by that signal.
* Sizes with units (``64MiB`` = 2^26 bytes, ``64MB`` = 64 x 10^6 bytes) are
  :func:`astra_core.workload.generators.micro.parse_size`.
"""

from __future__ import annotations

import signal
import sys
from typing import Any, NoReturn

import click

from astra_core.errors import AstraError
from astra_core.lifetime import sigterm_raises

#: An integer option that must be >= 1.
POSITIVE = click.IntRange(min=1)


def fail(exc: AstraError) -> NoReturn:
    """Print an astra error as ``error:`` lines on stderr and exit 1."""
    for line in str(exc).splitlines() or [type(exc).__name__]:
        click.echo(f"error: {line}", err=True)
    sys.exit(1)


def exit_interrupted(command: str | None, signum: int) -> NoReturn:
    """Say that ``astra COMMAND`` was interrupted by ``signum`` and exit 128 + ``signum``."""
    where = f"astra {command}" if command else "astra"
    click.echo(f"error: {where}: interrupted by {signal.Signals(signum).name}", err=True)
    sys.exit(128 + signum)


class AstraGroup(click.Group):
    """A click group that is astra's one error boundary (see the module docstring)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with sigterm_raises():
                return super().invoke(ctx)
        except AstraError as exc:
            fail(exc)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Interrupted)
            exit_interrupted(ctx.invoked_subcommand, getattr(exc, "signum", signal.SIGINT))


def ray_option(note: str = ""):
    """``--ray [ADDRESS]`` (into ``ray_address``): alone, a local Ray instance ("local"); or a
    cluster address. ``note`` ends the help."""
    return click.option(
        "--ray",
        "ray_address",
        is_flag=False,
        flag_value="local",
        default=None,
        metavar="[ADDRESS]",
        help="run on Ray: alone, a local Ray instance; or a cluster address (auto, ray://host:10001)." + note,
    )
