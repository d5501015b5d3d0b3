"""The fuzz harness itself: expected warnings are checked, not printed."""

from __future__ import annotations

import warnings

import pytest

from astra_core.config.issues import ConfigWarning
from astra_core.workload.graph import TraceWarning
from tests.fuzz.budget import answer_or_one_line_error


def _warns(category: type[Warning], text: str, value: int = 7) -> int:
    warnings.warn(text, category, stacklevel=2)
    return value


def test_astra_warnings_of_a_fuzzed_call_are_checked_not_printed():
    # tests/fuzz once printed 51 TraceWarnings (about 220 lines) into make test's report
    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        assert answer_or_one_line_error(_warns, TraceWarning, "w.0.et: 1 dependencies on 1 node ids") == 7
        assert answer_or_one_line_error(_warns, ConfigWarning, "system.json: key: no effect") == 7
    assert escaped == []


@pytest.mark.parametrize(
    "category, text, why",
    [
        (RuntimeWarning, "overflow encountered in multiply", "RuntimeWarning: overflow"),
        (TraceWarning, "first line\nsecond line", "a warning of several lines"),
        (ConfigWarning, "x" * 401, "warning of 401 characters"),
    ],
)
def test_a_foreign_or_unreadable_warning_fails_the_fuzz_test(category, text, why):
    with pytest.raises(AssertionError, match=why):
        answer_or_one_line_error(_warns, category, text)
