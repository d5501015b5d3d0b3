"""validation/plan_check.py: a published layout against the fastest layout astra plan finds."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from astra_core.plan.space import _shapes

from .conftest import validation_script


@pytest.fixture(scope="module")
def plan_check():
    with validation_script("plan_check") as module:
        yield module


def test_the_search_writes_each_held_published_plan_as_the_suite_runs_it(plan_check):
    """For every run the search space holds, the search's plan of the published layout is
    the suite's own plan (field for field; a pipeline layout as the edges-counted split it
    spells), within the search's limits; the runs it does not hold have uneven pipeline
    layouts."""
    runs = plan_check.suite_runs()
    held = plan_check.held_runs()
    assert len(runs) == 53 and len(held) == 51
    for run in held:
        layout = plan_check.published_layout(run.plan)
        space = plan_check.space(run)
        expected = replace(run.plan, seq_len=space.seq_len)
        if run.plan.pipeline_layout:
            edges = layout.edges_in_split
            expected = replace(
                expected, pipeline_layout=None, account_for_embedding=edges, account_for_loss=edges
            )
        assert space.config(layout) == expected, run.name
        assert layout.recompute in space.limits.recomputes and layout.zero in space.limits.zeros
        assert layout.pp <= space.limits.max_pp and layout.vp <= space.limits.max_vp
        assert layout.micro_batch in space.limits.micro_batches
        shape = replace(layout, recompute="none", zero=1)
        assert shape in _shapes(space, Counter()), run.name
    for run in runs:
        if run not in held:
            assert run.plan.pipeline_layout and "deepseek" in run.name, run.name


def test_the_search_is_never_slower_than_a_published_layout_that_fits(plan_check):
    """Llama 3 8B on one DGX B200 (the published layout fits): the fastest layout found is
    at least as fast as the published one simulated in full, and fits; the page's line
    for it says so."""
    run = next(r for r in plan_check.held_runs() if r.name.startswith("llama3-8b, 8 B200, FP8-CS"))
    result = plan_check.check(run, _in_process, None)
    assert result["published_gib"] <= result["hbm_gib"]
    assert result["best_s"] <= result["published_s"] * (1 + 1e-9)
    assert result["best_gib"] <= result["hbm_gib"]
    assert result["gap"] == pytest.approx(result["published_s"] / result["best_s"] - 1)
    page = plan_check.report([result])
    assert run.name in page and "1 of 1 published layouts within 5%" in page


def _in_process(tasks, on_row, admit=None) -> None:
    from astra_core.plan.point import run_layout

    for task in tasks:
        if admit is None or admit(task):
            on_row(run_layout(task))
