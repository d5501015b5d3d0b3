"""The two terminal tables name what they compute, and no word means two things in them.

The rank table's finish − compute (upstream ASTRA-sim's "exposed communication": waits
and idle time included) and the breakdown's time with messages in flight and no compute
beside them differ several-fold on a pipeline: one name for both would mislead.
"""

from __future__ import annotations

import pytest

import astra
from astra_core.report.table import breakdown_table, rank_table
from tests.report.test_breakdown_parts import RING2, SYSTEM, T, two_stage_pipeline


@pytest.fixture(scope="module")
def pipeline_result(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pp")
    two_stage_pipeline(folder / "pp")
    return astra.simulate(str(folder / "pp"), SYSTEM, RING2)


def _columns(table) -> dict[str, list[str]]:
    return {str(c.header): [str(cell) for cell in c.cells] for c in table.columns}


def test_rank_table_and_breakdown_name_their_columns_apart(pipeline_result):
    ranks = _columns(rank_table(pipeline_result))
    parts = _columns(breakdown_table(pipeline_result))
    # stage 0: finish 40 µs + 2T, compute 20 µs -> finish - compute = 20 µs + 2T, of which
    # 2T with a message in flight and no compute, 20 µs waiting on its gradient receive
    assert ranks["finish − compute (µs)"][0] == f"{(20_000 + 2 * T) / 1000:,.3f}"
    assert parts["comm in flight, no compute"][0] == f"{2 * T / 1000:,.3f}"
    assert parts["waiting on send/recv"][0] == "20.000"
    headers = [*ranks, *parts]
    assert not [h for h in headers if "exposed" in h]
