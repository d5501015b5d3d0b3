"""A real PyTorch DDP step (ddp_step.0.et, copied for 8 ranks) runs to completion
on upstream's HGX-H100-validated configs; upstream aborts on this trace.
"""

import os
import warnings

import pytest

from astra_core.api import simulate
from astra_core.workload.graph import TraceWarning


@pytest.fixture(scope="module")
def ddp_result(reference_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ddp")
    for rank in range(8):
        os.symlink(reference_dir / "pytorch" / "ddp_step.0.et", folder / f"ddp.{rank}.et")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = simulate(
            folder / "ddp",
            reference_dir / "system/upstream_HGX-H100-validated.json",
            reference_dir / "network/upstream_HGX-H100-validated.yml",
        )
    return result, [w for w in caught if issubclass(w.category, TraceWarning)]


def test_every_node_runs_on_every_rank(ddp_result):
    result, _ = ddp_result
    for trace in result.traces:
        assert len(trace.records) == len(trace.nodes) == 3664
        assert result.ranks[trace.rank].finish_ns == max(end for _, _, end in trace.records)


def test_compute_time_is_the_durations_of_the_kernels_that_ran(ddp_result):
    result, _ = ddp_result
    trace = result.traces[0]
    gpu = cpu = 0
    for pos, start, end in trace.records:
        node = trace.nodes[pos]
        runtime = node.duration_micros * 1000 if node.duration_micros else 1  # upstream: >= 1 ns
        if node.type == 4 and not node.is_cpu_op:
            gpu += runtime
            assert end - start == runtime
        elif node.is_cpu_op:
            cpu += runtime
    for rank in result.ranks:
        assert rank.compute_ns == gpu
        assert rank.cpu_ns == cpu
        # GPU kernels run one at a time, so the step is at least their sum.
        assert rank.finish_ns >= gpu
        assert rank.exposed_comm_ns == rank.finish_ns - gpu


def test_collectives_ran_on_the_network(ddp_result):
    result, _ = ddp_result
    # 5 NCCL all-reduce kernels per rank go through the system layer.
    per_rank = [c for c in result.collectives if c.rank == 0]
    assert sorted(c.node.comm_size for c in per_rank if c.node.comm_type == 0) == [
        8196000,
        9724160,
        26255360,
        26550272,
        31502336,
    ]
    assert result.messages > 0


def test_trace_problems_are_warned_once_each(ddp_result):
    _, caught = ddp_result
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2  # identical files: one graph, one warning of each kind
    assert any("1277 dependencies on 210 node ids not in the file" in m for m in messages)
    assert any("554 ctrl dependencies on later nodes that closed cycles" in m for m in messages)
