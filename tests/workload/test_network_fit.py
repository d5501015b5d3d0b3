"""Workload against network: generated-for dimensions, involved_dim, roofline inputs.

Each case ran before these checks, to a wrong result or a traceback: a collective whose
involved_dim names only a dimension the network lacks finished at once (no active dimension),
and a roofline node with tensor_size but no num_ops divided by zero.
"""

from __future__ import annotations

import json
import warnings

import pytest

from astra_core.api import simulate
from astra_core.config.system import upstream_system
from astra_core.errors import TraceError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra import read_workload
from astra_core.workload.graph import TraceWarning, build_graphs
from astra_core.workload.network_fit import GENERATED_DIMS_ATTR, check_network_fit
from astra_core.workload.writer import make_node, write_rank_trace


def _network(tmp_path, dims) -> str:
    n = len(dims)
    path = tmp_path / "network.yml"
    path.write_text(
        f"topology: [ {', '.join(['Ring'] * n)} ]\nnpus_count: [ {', '.join(map(str, dims))} ]\n"
        f"bandwidth: [ {', '.join(['50'] * n)} ]\nlatency: [ {', '.join(['500'] * n)} ]\n"
    )
    return str(path)


def _system(tmp_path, n, **extra) -> str:
    path = tmp_path / "system.json"
    path.write_text(json.dumps({**upstream_system("ring", n), **extra}))
    return str(path)


def _write(tmp_path, npus, nodes_of_rank, meta=None):
    for rank in range(npus):
        write_rank_trace(tmp_path / f"w.{rank}.et", nodes_of_rank(rank), meta)
    return tmp_path / "w"


def _graphs(prefix, npus):
    return build_graphs(read_workload(prefix, npus))


def _ag(id, involved):
    return make_node(
        id, "ag", pb.COMM_COLL_NODE, comm_type=pb.ALL_GATHER, comm_size=1 << 20, involved_dim=involved
    )


def test_involved_dim_naming_a_missing_dimension(tmp_path):
    prefix = _write(tmp_path, 4, lambda r: [_ag(0, [True, False]), _ag(1, [False, False, True])])
    with pytest.raises(TraceError) as info:
        simulate(prefix, _system(tmp_path, 2), _network(tmp_path, [2, 2]))
    assert str(info.value) == (
        f"{prefix}.0.et: node 1 (and 3 more ranks): involved_dim [0, 0, 1] "
        "names dimension 2, the network has 2 dimensions [2, 2]"
    )


def test_longer_involved_dim_without_extra_dimensions_is_fine(tmp_path):
    # Upstream ignores entries past the network's dimensions; False ones ask for nothing more.
    prefix = _write(tmp_path, 4, lambda r: [_ag(0, [True, False, False])])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_network_fit(_graphs(prefix, 4), [4, 1])
        check_network_fit(_graphs(prefix, 4), [4])


def test_shorter_involved_dim_warns(tmp_path):
    prefix = _write(tmp_path, 4, lambda r: [_ag(7, [True])])
    with pytest.warns(
        TraceWarning,
        match=r"w\.0\.et: node 7: involved_dim has 1 entry, the network has 2 "
        r"dimensions \[2, 2\]: the missing ones count as involved",
    ):
        check_network_fit(_graphs(prefix, 4), [2, 2])


def test_many_bad_nodes_stay_one_short_line(tmp_path):
    prefix = _write(tmp_path, 8, lambda r: [_ag(i, [False, True]) for i in range(100)])
    with pytest.raises(TraceError) as info:
        check_network_fit(_graphs(prefix, 8), [8])
    assert str(info.value) == (
        f"{prefix}.0.et: nodes 0, 1, 2 (and 97 more nodes; 7 more ranks): "
        "involved_dim [0, 1] names dimension 1, the network has 1 dimension [8]"
    )


def test_generated_for_other_dims(tmp_path):
    prefix = _write(tmp_path, 8, lambda r: [_ag(0, [True, False])], {GENERATED_DIMS_ATTR: [4, 2]})
    with pytest.raises(TraceError) as info:
        simulate(prefix, _system(tmp_path, 2), _network(tmp_path, [2, 4]))
    assert str(info.value) == f"workload {prefix} was generated for dims 4x2, network has [2, 4]"
    check_network_fit(_graphs(prefix, 8), [4, 2])  # the dims it was made for


def _compute(num_ops, tensor_size, cpu=False):
    return lambda r: [
        make_node(
            3,
            "gemm",
            pb.COMP_NODE,
            num_ops=num_ops,
            tensor_size=tensor_size,
            is_cpu_op=cpu,
            duration_micros=2,
        )
    ]


def test_roofline_node_without_num_ops(tmp_path):
    prefix = _write(tmp_path, 2, _compute(0, 1 << 20))
    system = _system(tmp_path, 1, **{"roofline-enabled": 1, "peak-perf": 900})
    with pytest.raises(TraceError) as info:  # not a ZeroDivisionError traceback
        simulate(prefix, system, _network(tmp_path, [2]))
    assert str(info.value).startswith(
        f"{prefix}.0.et: node 3 (and 1 more rank): roofline compute node has tensor_size but no num_ops"
    )


@pytest.mark.parametrize(
    "num_ops, tensor_size, cpu, roofline, step",
    [
        (0, 1 << 20, False, 0, 2000),  # replayed: duration 2 us
        (0, 1 << 20, True, 1, 2000),  # a CPU op is replayed under the roofline too
        (0, 0, False, 1, 0),  # tensor_size 0: upstream skips the node
        (1 << 30, 1 << 20, False, 1, int((1 << 30) / min(1600e9 * 1024, 900e12) * 1e9)),  # roofline time
    ],
)
def test_roofline_inputs_that_run(tmp_path, num_ops, tensor_size, cpu, roofline, step):
    prefix = _write(tmp_path, 2, _compute(num_ops, tensor_size, cpu))
    system = _system(tmp_path, 1, **{"roofline-enabled": roofline, "peak-perf": 900})
    assert simulate(prefix, system, _network(tmp_path, [2])).step_ns == step


def test_involved_dim_of_no_dimension_warns(tmp_path):
    prefix = _write(tmp_path, 4, lambda r: [_ag(2, [False, False, False])])
    with pytest.warns(
        TraceWarning,
        match=r"w\.0\.et: node 2: involved_dim \[0, 0, 0\] involves no dimension: "
        r"the collective moves no data",
    ):
        check_network_fit(_graphs(prefix, 4), [2, 2])


def test_cpu_side_collectives_are_not_checked(tmp_path):
    # PyTorch host ops (is_cpu_op) are replayed by duration: their involved_dim means nothing here.
    node = make_node(
        0, "c10d::allgather_", pb.COMM_COLL_NODE, is_cpu_op=True, involved_dim=[False, True, True]
    )
    prefix = _write(tmp_path, 2, lambda r: [node])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_network_fit(_graphs(prefix, 2), [2])


def test_collectives_on_a_comm_group_ignore_involved_dim(tmp_path):
    # A named comm group decides the members; the engine then ignores involved_dim.
    node = make_node(
        0,
        "ag",
        pb.COMM_COLL_NODE,
        comm_type=pb.ALL_GATHER,
        comm_size=64,
        involved_dim=[False, True, True],
        pg_name="1",
    )
    prefix = _write(tmp_path, 2, lambda r: [node])
    check_network_fit(_graphs(prefix, 2), [2])
    pg0 = make_node(
        0,
        "ag",
        pb.COMM_COLL_NODE,
        comm_type=pb.ALL_GATHER,
        comm_size=64,
        involved_dim=[False, True],
        pg_name="0",
    )  # "0": the default group, no override
    prefix = _write(tmp_path, 2, lambda r: [pg0])
    with pytest.raises(TraceError, match="names dimension 1"):
        check_network_fit(_graphs(prefix, 2), [2])
