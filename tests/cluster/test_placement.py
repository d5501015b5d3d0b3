"""Placement policies on a cluster of nodes: where each rank lands, derived by hand."""

from __future__ import annotations

import pytest

from astra_core.cluster.placement import place_jobs
from astra_core.errors import ConfigError


def test_packed_fills_the_lowest_free_npus_in_order():
    assert place_jobs([("a", 3, "packed", 0), ("b", 4, "packed", 0)], 8, 4) == [[0, 1, 2], [3, 4, 5, 6]]


def test_spread_goes_round_the_nodes():
    # 3 nodes of 4: one rank per node per round
    assert place_jobs([("a", 5, "spread", 0)], 12, 4) == [[0, 4, 8, 1, 5]]
    # a listed job first: node 0 is full, so spread starts on node 1
    jobs = [("a", 3, "spread", 0), ("b", 4, [0, 1, 2, 3], 0)]
    assert place_jobs(jobs, 12, 4) == [[4, 8, 5], [0, 1, 2, 3]]


def test_rail_aligned_keeps_rank_r_on_gpu_r_mod_node_size():
    # a holds GPU 1 of node 0, so b (6 ranks) takes node 1 and GPUs 0-1 of node 2; c (2 ranks)
    # needs GPUs 0 and 1 of one node: node 0 lacks GPU 1, nodes 1 and 2 are taken, so node 3
    jobs = [("a", 1, [1], 0), ("b", 6, "rail-aligned", 0), ("c", 2, "rail-aligned", 0)]
    _, b, c = place_jobs(jobs, 16, 4)
    assert b == [4, 5, 6, 7, 8, 9] and c == [12, 13]
    for npus in (b, c):
        assert [npu % 4 for npu in npus] == [rank % 4 for rank in range(len(npus))]


def test_rail_aligned_without_room_is_an_error():
    # 6 NPUs are free, but no node has all of GPUs 0..3
    with pytest.raises(ConfigError, match="^job b: placement: rail-aligned: no free nodes hold GPUs 0..3"):
        place_jobs([("a", 2, [1, 5], 0), ("b", 4, "rail-aligned", 0)], 8, 4)


def test_random_is_reproducible_and_takes_only_free_npus():
    first = place_jobs([("a", 4, [0, 1, 2, 3], 0), ("b", 5, "random", 7)], 16, 4)
    again = place_jobs([("a", 4, [0, 1, 2, 3], 0), ("b", 5, "random", 7)], 16, 4)
    other = place_jobs([("a", 4, [0, 1, 2, 3], 0), ("b", 5, "random", 8)], 16, 4)
    assert first == again and first != other
    assert len(set(first[1])) == 5 and not set(first[1]) & {0, 1, 2, 3}
