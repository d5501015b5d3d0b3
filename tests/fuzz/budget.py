"""How hard the fuzz suite tries, and the property every fuzz test checks.

A few seconds in CI (a fixed, derandomized set of examples, so CI never flakes
on a new seed); ``ASTRA_FUZZ_EXAMPLES=N`` runs N random examples per test for
a longer hunt (``ASTRA_FUZZ_EXAMPLES=2000 make test``).
"""

from __future__ import annotations

import math
import os
import signal
import warnings
from contextlib import contextmanager

from hypothesis import HealthCheck, settings

from astra_core.config.issues import ConfigWarning
from astra_core.errors import AstraError, ConfigError
from astra_core.plugins import PluginWarning
from astra_core.workload.graph import TraceWarning

_HUNT = os.environ.get("ASTRA_FUZZ_EXAMPLES")


def fuzz_settings(ci_examples: int) -> settings:
    """Hypothesis settings: ``ci_examples`` derandomized examples, or
    ``ASTRA_FUZZ_EXAMPLES`` random ones."""
    hunting = bool(_HUNT)
    return settings(
        max_examples=int(_HUNT) if hunting else ci_examples,
        derandomize=not hunting,
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
        ],
    )


class Hang(Exception):
    """A call ran past its wall-clock bound (a hang is a bug, never an answer)."""


@contextmanager
def wall_limit(seconds: int):
    """Raise :class:`Hang` if the body runs longer than ``seconds`` (SIGALRM)."""

    def on_alarm(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


#: A config loader reports every problem, one line each; past this many a user
#: cannot read them (a loader should stop listing the same mistake).
MAX_PROBLEM_LINES = 20
#: Longest error line a terminal user can still read (characters).
MAX_LINE = 400


def check_error_text(exc: AstraError) -> list[str]:
    """The lines of an astra error, after checking they are few and short:
    one line, or for a config error one line per problem."""
    text = str(exc)
    assert text.strip(), f"{type(exc).__name__} with an empty message"
    lines = text.splitlines()
    limit = MAX_PROBLEM_LINES if isinstance(exc, ConfigError) else 1
    assert len(lines) <= limit, f"{type(exc).__name__} of {len(lines)} lines: {text[:300]!r}"
    for line in lines:
        assert len(line) <= MAX_LINE, f"error line of {len(line)} characters: {line[:200]!r}..."
    return lines


#: What astra warns with about input that is valid but suspicious (a dependency on
#: a node id missing from the trace, a key whose value changes nothing).
ASTRA_WARNINGS = (ConfigWarning, TraceWarning, PluginWarning)


def check_warnings(caught: list[warnings.WarningMessage]) -> None:
    """Every warning is one of astra's own (:data:`ASTRA_WARNINGS`), one short
    line each: random input is expected to be suspicious, but a warning from
    Python or a library (a numpy overflow, a deprecation) is a bug."""
    for warning in caught:
        text = str(warning.message)
        assert issubclass(warning.category, ASTRA_WARNINGS), f"{warning.category.__name__}: {text[:300]}"
        assert "\n" not in text.strip(), f"a warning of several lines: {text[:300]!r}"
        assert len(text) <= MAX_LINE, f"warning of {len(text)} characters: {text[:200]!r}..."


def answer_or_one_line_error(call, *args, limit_s: int = 20, **kwargs):
    """``call(*args, **kwargs)``: its value, or None when it raised an
    :class:`AstraError` with short lines (:func:`check_error_text`). Any other
    exception (a traceback for the user) or a hang fails the test. The call's
    warnings are caught and checked (:func:`check_warnings`), not printed: a
    fuzzed input warns by design, and hundreds of expected warnings would
    bury the one that matters in the test report."""
    with wall_limit(limit_s), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            answer = call(*args, **kwargs)
        except AstraError as exc:
            check_error_text(exc)
            answer = None
    check_warnings(caught)
    return answer


def assert_sane_times(result) -> None:
    """Every reported time of a finished run is finite and non-negative, and
    no rank finishes before its own compute is done (ns)."""
    assert math.isfinite(result.step_ns) and result.step_ns >= 0, result.step_ns
    for r in result.ranks:
        for name in ("finish_ns", "compute_ns", "comm_ns", "exposed_comm_ns"):
            value = getattr(r, name)
            assert math.isfinite(value) and value >= 0, (r.rank, name, value)
        assert r.finish_ns + 1e-6 >= r.compute_ns, (r.rank, r.finish_ns, r.compute_ns)
        assert result.step_ns + 1e-6 >= r.finish_ns
