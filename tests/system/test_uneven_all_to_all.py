"""An uneven all-to-all (``send_bytes`` / ``recv_bytes`` on the node) on the NCCL model.

Expected times are NCCL's own: one point-to-point step's latency (tuning.cc, Simple
over NVLink: 8.4 + 3.4 us) and then the larger of what a rank sends and receives over
NCCL's view of an H100's NVLinks (18 x 20.6 GB/s), as the even all-to-all of
test_nccl_model.py; the bytes carried are conserved."""

from __future__ import annotations

import pytest

import astra
from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.errors import TraceError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.writer import make_node, write_rank_trace
from tests.system.test_nccl_model import h100_configs

GPUS = 8
NVLINK_GBPS = 18 * 20.6
STEP_US = 8.4 + 3.4  # NCCL's launch is below one step's latency


def write_all_to_all(tmp_path, sends: list[list[int]], overrides: dict | None = None):
    """One all-to-all per rank: rank r sends ``sends[r][q]`` bytes to rank q; ``overrides``:
    per rank, attributes written instead."""
    prefix = tmp_path / "a2a"
    for r in range(GPUS):
        attrs = {
            "comm_type": pb.ALL_TO_ALL,
            "comm_size": sum(sends[r]),
            "send_bytes": sends[r],
            "recv_bytes": [sends[q][r] for q in range(GPUS)],
            "is_cpu_op": False,
        }
        attrs.update((overrides or {}).get(r, {}))
        write_rank_trace(f"{prefix}.{r}.et", [make_node(0, "dispatch", pb.COMM_COLL_NODE, **attrs)])
    return prefix


def simulate(prefix, **kw):
    network, system = h100_configs(GPUS, **kw)
    return astra.simulate(str(prefix), system, network)


def test_equal_bytes_to_every_member_are_the_even_all_to_all(tmp_path):
    size = 64 << 20
    even = write_all_to_all(tmp_path, [[size // GPUS] * GPUS] * GPUS)
    result = simulate(even)
    assert result.step_ns == pytest.approx((STEP_US + 7 / 8 * size / (NVLINK_GBPS * 1e3)) * 1e3, abs=2)


def test_the_rank_that_receives_most_sets_the_step(tmp_path):
    # every rank sends 1 MiB to each member but 9 MiB to rank 3 (a hot expert's rank)
    base, hot = 1 << 20, 9 << 20
    sends = [[hot if q == 3 else base for q in range(GPUS)] for _ in range(GPUS)]
    result = simulate(write_all_to_all(tmp_path, sends))
    finish = {r.rank: r.finish_ns for r in result.ranks}
    # rank 3 receives 7 x 9 MiB; the others send 6 MiB + 9 MiB, more than the 7 MiB they receive
    assert finish[3] == pytest.approx((STEP_US + 7 * hot / (NVLINK_GBPS * 1e3)) * 1e3, abs=2)
    for r in (0, 1, 2, 4, 5, 6, 7):
        assert finish[r] == pytest.approx((STEP_US + (6 * base + hot) / (NVLINK_GBPS * 1e3)) * 1e3, abs=2)
    assert result.step_ns == finish[3]
    # what leaves a GPU is everything but its own share: conserved over the messages
    assert result.message_bytes == sum(sum(row) - row[r] for r, row in enumerate(sends))


def test_a_rank_that_sends_nothing_to_a_member_sends_it_no_message(tmp_path):
    sends = [[0 if q == r + 1 - 2 * (r % 2) else 1 << 20 for q in range(GPUS)] for r in range(GPUS)]
    result = simulate(write_all_to_all(tmp_path, sends))
    assert result.message_bytes == 6 * GPUS << 20  # pairs (0, 1), (2, 3), ... exchange nothing


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"recv_bytes": None}, "send_bytes and recv_bytes go together (an uneven all-to-all)"),
        (
            {"send_bytes": [1, 2]},
            "send_bytes: expected 8 byte counts >= 0 (one per member of its communicator",
        ),
        ({"recv_bytes": [-1] * GPUS}, "recv_bytes: expected 8 byte counts >= 0"),
        ({"comm_size": 5}, "comm_size 5 is not the sum of send_bytes (8)"),
    ],
)
def test_a_node_that_does_not_describe_an_uneven_all_to_all_is_refused(tmp_path, override, message):
    prefix = write_all_to_all(tmp_path, [[1] * GPUS] * GPUS, {2: override})
    with pytest.raises(TraceError) as err:
        simulate(prefix)
    assert str(err.value).startswith(f"{prefix}.2.et: rank 2: node 0 (dispatch): {message}")


def test_an_uneven_all_to_all_needs_the_nccl_model(tmp_path):
    prefix = write_all_to_all(tmp_path, [[1 << 10] * GPUS] * GPUS)
    network, _ = h100_configs(GPUS)
    direct = SystemConfig.from_dict(
        {
            "scheduling-policy": "LIFO",
            "collective-optimization": "baseline",
            "preferred-dataset-splits": 1,
            "all-to-all-implementation": ["direct"],
        }
    )
    with pytest.raises(TraceError) as err:
        astra.simulate(str(prefix), direct, network)
    assert str(err.value) == (
        f"{prefix}.0.et: rank 0: node 0 (dispatch): send_bytes / recv_bytes need an all-to-all "
        'on one NCCL communicator (all-to-all-implementation ["nccl"])'
    )


def test_rank_symmetry_keeps_apart_ranks_whose_bytes_differ(tmp_path):
    # ranks 0..7 alike but rank 3's receives: folding them would give rank 3 the others' time
    sends = [[(9 << 20) if q == 3 else 1 << 20 for q in range(GPUS)] for _ in range(GPUS)]
    prefix = write_all_to_all(tmp_path, sends)
    network, system = h100_configs(GPUS)
    folded = astra.simulate(str(prefix), system, network, symmetry=True)
    every = astra.simulate(str(prefix), system, network, symmetry=False)
    assert [r.finish_ns for r in folded.ranks] == [r.finish_ns for r in every.ranks]
    assert folded.message_bytes == every.message_bytes


def test_members_that_disagree_on_their_bytes_are_refused(tmp_path):
    # rank 1 expects half of what rank 0 sends it
    sends = [[1 << 20] * GPUS for _ in range(GPUS)]
    prefix = write_all_to_all(tmp_path, sends, {1: {"recv_bytes": [1 << 19] + [1 << 20] * 7}})
    with pytest.raises(TraceError) as err:
        simulate(prefix)
    assert str(err.value) == (
        f"{prefix}.1.et: rank 1: node 0 (dispatch): recv_bytes[0] expects 524288 bytes from rank 0, "
        "which sends 1048576 (send_bytes[1] of its node)"
    )


def two_nodes():
    """Two nodes of 4 GPUs (NVLink), one 400 Gb/s NIC per GPU between them."""
    network = NetworkConfig.from_dict(
        {
            "topology": ["Switch", "Switch"],
            "npus_count": [4, 2],
            "bandwidth": [419.0, 46.6],
            "latency": [300, 1350],
        }
    )
    return network, h100_configs(GPUS)[1]


@pytest.mark.parametrize("hot", [False, True])
def test_rank_symmetry_folds_a_pattern_every_rank_repeats_from_where_it_stands(tmp_path, hot):
    # a token-based MoE dispatch on two nodes of 4: 3 MiB to each rank of one's own node,
    # 1 MiB to the rank at one's own place on the other node, nothing to the rest; every
    # rank's bytes are one map from offset to bytes, so one rank stands for all. With
    # rank 3 receiving 5 MiB more from its node, the ranks differ and stay apart.
    def sends(r):
        node, place = divmod(r, 4)
        out = [(3 << 20) if q // 4 == node else (1 << 20) if q % 4 == place else 0 for q in range(GPUS)]
        if hot and r // 4 == 0 and r != 3:
            out[3] += 5 << 20
        return out

    on_group = {r: {"pg_name": "1"} for r in range(GPUS)}
    prefix = write_all_to_all(tmp_path, [sends(r) for r in range(GPUS)], on_group)
    network, system = two_nodes()
    groups = {"1": list(range(GPUS))}
    folded = astra.simulate(str(prefix), system, network, comm_groups=groups, symmetry=True)
    every = astra.simulate(str(prefix), system, network, comm_groups=groups, symmetry=False)
    assert folded.symmetric is not hot
    assert [r.finish_ns for r in folded.ranks] == [r.finish_ns for r in every.ranks]
    assert folded.message_bytes == every.message_bytes
    # NCCL's time: the larger of the 9 MiB each rank sends over NVLink (3 peers x 3 MiB)
    # and its 1 MiB over its 400 Gb/s NIC (21 us), after one Simple ring step across
    # nodes (tuning.cc: 8.4 + 14 us)
    if not hot:
        nvlink_us = 9 * 2**20 / (NVLINK_GBPS * 1e3)
        assert every.step_ns == pytest.approx((8.4 + 14 + nvlink_us) * 1e3, rel=1e-3)
