"""validation/plan_check.py: a published layout against the fastest layout astra plan finds."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

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
    assert len(runs) == 60 and len(held) == 57
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
    assert result["failed"] == 0 and result["first_failure"] == ""
    page = plan_check.report([result])
    assert run.name in page and "1 of 1 published layouts within 5%" in page
    assert "failed to simulate" not in page
    failing = {**result, "failed": 3, "first_failure": "TP8 CP1 PP1 V1 DP1 MBS1: why"}
    assert f"- {run.name}: 3 layouts failed to simulate" in plan_check.report([failing])


def _in_process(tasks, on_row, admit=None) -> None:
    from astra_core.plan.point import run_layout

    for task in tasks:
        if admit is None or admit(task):
            on_row(run_layout(task))


def test_a_search_is_known_by_the_same_key_wherever_the_checkout_lies(plan_check):
    """A GPU whose kernel rates come from a measured table names it by path, the
    checkout's: the key names it by content, so outcomes kept in one checkout are found
    in another (CI's, a worktree's)."""
    import astra_core

    root = str(Path(astra_core.__file__).resolve().parent.parent)
    h100 = next(r for r in plan_check.held_runs() if "H100" in r.name)
    assert root in repr(plan_check.space(h100))  # the table's path is in the space
    for run in plan_check.held_runs():
        assert root not in plan_check.identity(plan_check.space(run), plan_check.InputDigests())


def test_a_kept_outcome_is_found_by_its_search_and_names_its_commit(plan_check, tmp_path):
    """An outcome kept at other sources is still the run's (its key is the search's, not the
    sources'): the page shows it with the commit it was searched at, and only the rest as
    not searched yet; with --refresh it would be searched again, so --kept-only lists it."""
    run = plan_check.held_runs()[0]
    key = plan_check._key(run)
    assert key == plan_check._key(run)  # the same search, the same key, whatever the sources
    kept = {
        "key": key, "sources": "digest of other sources", "commit": "0123456789", "name": run.name,
        "published": "TP1 CP1 PP1 V1 DP32 MBS16 full ZeRO0", "published_s": 3.0, "published_gib": 50.0,
        "published_shares": {}, "hbm_gib": 80.0, "best": "TP1 CP1 PP1 V1 DP32 MBS16 full ZeRO0",
        "best_s": 3.0, "best_gib": 50.0, "best_shares": {}, "gap": 0.0, "considered": 1, "simulated": 1,
        "wall_s": 1.0,
    }  # fmt: skip
    results = tmp_path / "kept.jsonl"
    results.write_text(json.dumps(kept) + "\n" + '{"key": "cut sho')  # a last line cut short
    page = tmp_path / "page.md"
    plan_check.main(["--kept-only", "--results", str(results), "--markdown", str(page)])
    text = page.read_text()
    row = next(line for line in text.splitlines() if line.startswith(f"| {run.name} |"))
    assert row.endswith("| 0123456789 |")
    assert f"Not searched yet ({len(plan_check.held_runs()) - 1})" in text
    plan_check.main(["--kept-only", "--refresh", "--results", str(results), "--markdown", str(page)])
    assert f"Not searched yet ({len(plan_check.held_runs())})" in page.read_text()
