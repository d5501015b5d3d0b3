"""The error hierarchy of astra.

Every error a user can cause (bad input, missing optional dependency, a run that
cannot finish) is an :class:`AstraError`. The CLI prints these as one line and
exits non-zero; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations


class AstraError(Exception):
    """Base class of every user-facing astra error (printed as one line)."""


class ConfigError(AstraError):
    """A configuration file is unreadable, has an unknown key or a bad value.

    The message names the file and the key path, e.g.
    ``system.json: active-chunks-per-dimension: must be >= 1, got 0``.
    """


class TraceError(AstraError):
    """A Chakra execution trace is unreadable or inconsistent.

    The message names the file and, where known, the ET node id.
    """


class BackendUnavailable(AstraError):
    """A network backend cannot run here; the message carries the install hint."""


class SimulationDeadlock(AstraError):
    """The event queue ran dry while some ranks still had unfinished ET nodes.

    ``waiting`` maps rank -> list of human-readable descriptions of what each
    unfinished node waits on.
    """

    def __init__(self, message: str, waiting: dict[int, list[str]] | None = None):
        super().__init__(message)
        self.waiting = waiting or {}
