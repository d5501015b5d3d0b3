"""The one process pool (astra_core.workers): results come back whole, a task's exception
is raised in the caller, a dead worker loses only its task."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from astra_core.workers import WorkerPool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux")


def _serve_all(pool: WorkerPool, tasks) -> tuple[dict, dict]:
    results: dict = {}
    lost: dict = {}
    pool.serve(tasks, results.__setitem__, lost.__setitem__)
    return results, lost


def test_forked_workers_return_each_tasks_result_and_run_in_other_processes():
    parent = os.getpid()
    with WorkerPool(2, work=lambda i: (i * i, os.getpid() != parent)) as pool:
        results, lost = _serve_all(pool, range(10))
    assert results == {i: (i * i, True) for i in range(10)} and lost == {}


def test_a_tasks_exception_is_raised_in_the_caller():
    def work(i):
        if i == 3:
            raise ValueError(f"task {i} is bad")
        return i

    with pytest.raises(ValueError, match="task 3 is bad"), WorkerPool(1, work=work) as pool:
        _serve_all(pool, range(5))


def test_a_result_that_cannot_be_sent_back_is_an_error_not_a_dead_worker():
    with (
        pytest.raises(RuntimeError, match="could not be sent back"),
        WorkerPool(1, work=lambda i: threading.Lock()) as pool,
    ):
        _serve_all(pool, [0])


def test_a_dead_worker_loses_only_its_task_and_is_replaced():
    def work(i):
        if i == 2:
            os._exit(7)
        return -i

    with WorkerPool(1, work=work) as pool:
        results = {}
        lost = {}
        pool.serve(range(5), results.__setitem__, lost.__setitem__, replace=True)
    assert results == {0: 0, 1: -1, 3: -3, 4: -4} and lost == {2: "exit code 7"}
