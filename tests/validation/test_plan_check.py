"""validation/plan_check.py: a published layout against the fastest layout astra plan finds."""

from __future__ import annotations

import pytest

from .conftest import validation_script


@pytest.fixture(scope="module")
def plan_check():
    with validation_script("plan_check") as module:
        yield module


def test_the_search_is_never_slower_than_a_published_layout_that_fits(plan_check):
    """Llama 3 8B on one DGX B200 (the published layout fits): the fastest layout found is
    at least as fast as the published one simulated in full, and fits; the page's line
    for it says so."""
    row = next(
        r for r in plan_check.ROWS if r.model == "llama3-8b" and r.gpu == "B200" and r.precision == "fp8-cs"
    )
    result = plan_check.check(row, _in_process, None)
    assert result["published_gib"] <= result["hbm_gib"]
    assert result["best_s"] <= result["published_s"] * (1 + 1e-9)
    assert result["best"]["peak_memory_gib"] <= result["hbm_gib"]
    assert result["gap"] == pytest.approx(result["published_s"] / result["best_s"] - 1)
    page = plan_check.report([result])
    assert row.name in page and "1 of 1 published layouts within 5%" in page


def _in_process(tasks, on_row, admit=None) -> None:
    from astra_core.plan.point import run_layout

    for task in tasks:
        if admit is None or admit(task):
            on_row(run_layout(task))
