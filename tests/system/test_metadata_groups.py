"""Process groups a trace defines in a METADATA node (PyTorch's pg config)."""

from __future__ import annotations

import json
import re

import pytest

from astra_core.api import simulate
from astra_core.errors import TraceError
from astra_core.workload.writer import make_node
from tests.system.conftest import network, pb, system


def _pg_trace(workload, ranks: list[int], npus: int = 4) -> str:
    """Every rank defines group 1 = ``ranks``; rank 0 all-reduces 1 MiB on it."""
    # upstream issue_metadata drops the first and last two characters of inputs.values
    pg = '["[{"pg_name": "1", "ranks": ' + json.dumps(ranks) + '}]"]'
    per_rank = {}
    for rank in range(npus):
        nodes = [make_node(0, "pg", pb.METADATA_NODE, inputs_values=pg)]
        if rank == 0:
            nodes.append(
                make_node(
                    1,
                    "ar",
                    pb.COMM_COLL_NODE,
                    comm_type=pb.ALL_REDUCE,
                    comm_size=1 << 20,
                    data_deps=[0],
                    pg_name="1",
                )
            )
        per_rank[rank] = nodes
    return workload(per_rank)


@pytest.mark.parametrize("backend", ["analytical", "analytical-congestion"])
def test_a_metadata_group_naming_a_rank_past_the_npus_is_one_line(workload, backend):
    prefix = _pg_trace(workload, [0, 99])
    net = network(["Ring"], [4], [50.0], [500.0])
    with pytest.raises(TraceError) as info:
        simulate(prefix, system(), net, backend=backend)
    assert str(info.value) == (
        f"{prefix}.0.et: rank 0: node 0 (pg): METADATA process group '1' names rank 99, "
        "not one of the 4 NPUs (0..3)"
    )


def test_a_metadata_group_naming_a_negative_rank_is_one_line(workload):
    prefix = _pg_trace(workload, [-1, 0])
    with pytest.raises(TraceError, match=re.escape("METADATA process group '1' names rank -1, not one")):
        simulate(prefix, system(), network(["Ring"], [4], [50.0], [500.0]), backend="analytical-congestion")
