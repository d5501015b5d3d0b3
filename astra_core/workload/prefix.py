"""Guessing the trace prefix a user meant when a workload path names no trace files.

A workload is a prefix: rank r reads ``<prefix>.<r>.et``. Two slips are
common: giving one rank's file (``traces/llm.0.et``) or the folder of the
traces (``traces``). :func:`suggest_prefix` turns either into the prefix,
for the "found 0 trace files" errors of ``astra run``, ``astra sweep`` and
:func:`astra_core.api.simulate`.
"""

from __future__ import annotations

import os
import re

__all__ = ["rank_count", "suggest_prefix"]

_RANK_FILE = re.compile(r"(.+)\.(0|[1-9][0-9]*)\.et")
#: Prefixes listed at most in one suggestion.
_SHOWN = 3


def _prefixes_in(folder: str) -> list[str]:
    """The prefixes of the ``<name>.<rank>.et`` files directly in ``folder``, sorted."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = {m.group(1) for name in names if (m := _RANK_FILE.fullmatch(name))}
    return sorted(os.path.join(folder, name) for name in found)


def rank_count(prefix: str | os.PathLike) -> int:
    """How many ranks the trace set ``prefix`` has: one more than the highest ``r`` of
    its ``<prefix>.<r>.et`` files (0 when there is none; reading them checks that
    every rank's file is there)."""
    folder, base = os.path.split(os.fspath(prefix))
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return 0
    ranks = [int(m.group(2)) for name in names if (m := _RANK_FILE.fullmatch(name)) and m.group(1) == base]
    return max(ranks) + 1 if ranks else 0


def suggest_prefix(path: str | os.PathLike) -> str | None:
    """What to say after "found 0 trace files" for the workload ``path``, or None.

    ``traces/llm.0.et`` (an existing rank file) gives ``"it is one rank's trace:
    did you mean the prefix traces/llm?"``; a folder of traces ``"it is a
    folder: did you mean the prefix traces/llm?"`` (up to three prefixes when it
    holds several sets). The message follows the path it speaks of.
    """
    text = os.fspath(path)
    match = _RANK_FILE.fullmatch(os.path.basename(text))
    if match and os.path.isfile(text):
        prefix = os.path.join(os.path.dirname(text), match.group(1))
        return f"it is one rank's trace: did you mean the prefix {prefix}?"
    if os.path.isdir(text):
        found = _prefixes_in(text)
        if not found:
            return "it is a folder with no <prefix>.<rank>.et files"
        more = f" (or {len(found) - _SHOWN} more)" if len(found) > _SHOWN else ""
        return f"it is a folder: did you mean the prefix {' or '.join(found[:_SHOWN])}{more}?"
    return None
