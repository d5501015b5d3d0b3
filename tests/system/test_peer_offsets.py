"""How rank symmetry compares a communicator group as one rank sees it: its members'
offsets from the rank as a set, or as a ring read from the rank itself."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from astra_core.system.peer_offsets import _as_seen

# rows of distinct member offsets, each group with the rank itself (offset 0) in it
_groups = st.lists(st.integers(1, 1 << 20), min_size=1, max_size=12, unique=True).flatmap(
    lambda others: st.permutations([0, *others])
)


@given(st.lists(_groups, min_size=1, max_size=6), st.integers(0, 11))
def test_a_ring_reads_the_same_from_any_member_and_starts_at_the_rank(rows, turn):
    for row in rows:
        members = np.asarray([row], dtype=np.int64)
        seen = _as_seen(members, False)[0]
        zero = row.index(0)
        assert seen.tolist() == row[zero:] + row[:zero]  # the ring from the rank on
        turned = np.roll(members, turn % len(row), axis=1)
        assert _as_seen(turned, False)[0].tolist() == seen.tolist()
        assert (
            sorted(_as_seen(turned, True)[0].tolist()) == sorted(row) == _as_seen(members, True)[0].tolist()
        )


def test_rows_of_one_call_are_seen_each_on_its_own():
    rows = np.asarray([[3, 0, 5], [0, 5, 3], [5, 3, 7]], dtype=np.int64)  # the last: no zero
    assert _as_seen(rows, False).tolist() == [[0, 5, 3], [0, 5, 3], [5, 3, 7]]
    assert _as_seen(rows, True).tolist() == [[0, 3, 5], [0, 3, 5], [3, 5, 7]]
