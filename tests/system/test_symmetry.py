"""Rank symmetry (one simulated rank standing for all) gives the full simulation's results."""

import json
import warnings

import pytest

from astra_core.api import simulate
from astra_core.system.fallback import SymmetryFallbackWarning
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.writer import make_node
from tests.conftest import REFERENCE_DIR, run_reference_case
from tests.system.conftest import network, system

_CASES = []
if (REFERENCE_DIR / "expected.json").is_file():
    _CASES = [
        c
        for c in json.loads((REFERENCE_DIR / "expected.json").read_text())["cases"]
        if c["backend"] == "analytical"
    ]


@pytest.mark.parametrize("case", _CASES, ids=[c["name"] for c in _CASES])
def test_symmetric_run_equals_full_run(case, reference_dir):
    fast = run_reference_case(case, symmetry=True)
    full = run_reference_case(case, symmetry=False)
    assert not full.symmetric
    assert [(r.finish_ns, r.exposed_comm_ns, r.compute_ns, r.comm_ns) for r in fast.ranks] == [
        (r.finish_ns, r.exposed_comm_ns, r.compute_ns, r.comm_ns) for r in full.ranks
    ]
    assert (fast.messages, fast.message_bytes) == (full.messages, full.message_bytes)


def test_symmetry_is_used_where_it_applies(reference_dir):
    used = {c["name"]: run_reference_case(c, symmetry=True).symmetric for c in _CASES}
    # Double binary trees give ranks different roles: every rank runs.
    assert not any(v for k, v in used.items() if "doubleBinaryTree" in k)
    # A ring shift (rank r sends to r + 1) is the same for every rank.
    assert used["custom_unaware_ring8_P2P_RINGSHIFT_1MB"]
    assert sum(used.values()) == len(used) - sum("doubleBinaryTree" in k for k in used)


@pytest.mark.parametrize(
    "dims, algorithm, symmetric",
    [
        ([8], "ring", True),
        ([8], "direct", True),
        ([8], "halvingDoubling", True),  # XOR group on a power-of-two dimension
        ([8], "doubleBinaryTree", False),
        ([4, 4], "ring", True),
    ],
)
def test_symmetry_detection(workload, dims, algorithm, symmetric):
    node = make_node(1, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=1 << 20)
    npus = 1
    for d in dims:
        npus *= d
    prefix = workload({r: [node] for r in range(npus)})
    net = network(["Ring"] * len(dims), dims, [50.0] * len(dims), [500.0] * len(dims))
    fast = simulate(prefix, system(algorithm, dims=len(dims)), net)
    full = simulate(prefix, system(algorithm, dims=len(dims)), net, symmetry=False)
    assert fast.symmetric is symmetric
    assert [r.finish_ns for r in fast.ranks] == [r.finish_ns for r in full.ranks]


def test_no_symmetry_on_the_congestion_aware_backend(workload):
    node = make_node(1, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=1 << 20)
    prefix = workload({r: [node] for r in range(8)})
    result = simulate(
        prefix, system(), network(["Switch"], [8], [50.0], [500.0]), backend="analytical-congestion"
    )
    assert not result.symmetric and len(result.traces) == 8


def _both(prefix, sys_config, net, **kw):
    fast = simulate(prefix, sys_config, net, **kw)
    full = simulate(prefix, sys_config, net, symmetry=False, **kw)
    assert [(r.finish_ns, r.exposed_comm_ns, r.comm_ns) for r in fast.ranks] == [
        (r.finish_ns, r.exposed_comm_ns, r.comm_ns) for r in full.ranks
    ]
    assert (fast.messages, fast.message_bytes) == (full.messages, full.message_bytes)
    return fast


def _ar(size, pg=None, node_id=1, deps=()):
    return make_node(
        node_id,
        f"ar{node_id}",
        pb.COMM_COLL_NODE,
        comm_type=pb.ALL_REDUCE,
        comm_size=size,
        pg_name=pg,
        data_deps=list(deps),
    )


def test_group_of_every_npu_is_the_whole_network(workload):
    prefix = workload({r: [_ar(1 << 20, "1")] for r in range(4)})
    result = _both(prefix, system(), network(["Ring"], [4], [50.0], [500.0]), comm_groups={"1": [0, 1, 2, 3]})
    assert result.symmetric and len(result.traces) == 1


def test_translated_groups_share_one_representative(workload):
    # Groups {0,1} and {2,3} are translates by 2: ranks 0 and 1 stand for all four.
    prefix = workload({r: [_ar(1 << 20, "1" if r < 2 else "2")] for r in range(4)})
    result = _both(
        prefix, system(), network(["Ring"], [4], [50.0], [500.0]), comm_groups={"1": [0, 1], "2": [2, 3]}
    )
    assert result.symmetric and [e.rank for e in result.traces] == [0, 1]
    assert result.representative == [0, 1, 0, 1]


def test_tensor_and_data_parallel_groups(workload):
    # 2-D [Switch 4 (TP), Ring 4 (DP)]: tensor-parallel groups along dimension 0,
    # data-parallel groups along dimension 1; each rank runs a TP all-reduce, then
    # a DP all-reduce, then a compute node. Every rank is a translate of rank 0.
    groups = {}
    for dp in range(4):
        groups[str(1 + dp)] = [dp * 4 + t for t in range(4)]
    for tp in range(4):
        groups[str(5 + tp)] = [dp * 4 + tp for dp in range(4)]
    nodes = {}
    for r in range(16):
        tp, dp = r % 4, r // 4
        nodes[r] = [
            _ar(1 << 20, str(1 + dp), 1),
            _ar(4 << 20, str(5 + tp), 2, deps=[1]),
            make_node(3, "k", pb.COMP_NODE, duration_micros=5, data_deps=[2]),
        ]
    prefix = workload(nodes)
    net = network(["Switch", "Ring"], [4, 4], [200.0, 50.0], [100.0, 1000.0])
    result = _both(prefix, system(dims=2), net, comm_groups=groups)
    assert len(result.traces) == 1


def test_no_symmetry_when_one_rank_differs(workload):
    prefix = workload(
        {
            r: [_ar(1 << 20, "1" if r < 2 else "2")]
            + ([make_node(2, "extra", pb.COMP_NODE, duration_micros=3)] if r == 3 else [])
            for r in range(4)
        }
    )
    result = _both(
        prefix, system(), network(["Ring"], [4], [50.0], [500.0]), comm_groups={"1": [0, 1], "2": [2, 3]}
    )
    assert not result.symmetric


def test_a_whole_network_group_runs_the_configured_algorithm(workload):
    # A group of every NPU uses system.json's algorithms: with a double binary
    # tree the ranks play different roles, so every rank must run.
    prefix = workload({r: [_ar(1 << 20, "1")] for r in range(8)})
    result = _both(
        prefix,
        system("doubleBinaryTree"),
        network(["Ring"], [8], [50.0], [500.0]),
        comm_groups={"1": list(range(8))},
    )
    assert not result.symmetric
    assert len({r.finish_ns for r in result.ranks}) > 1


def test_halving_doubling_with_point_to_point_simulates_every_rank(workload):
    # XOR translations keep only halving-doubling partner distances. Rank r also
    # exchanges 1 MiB with r ^ 3: the same XOR offset on every rank, but ring
    # distance 3 for 0 <-> 3 and 1 for 1 <-> 2, so ranks differ and must all run.
    nodes = {}
    for r in range(8):
        peer = r ^ 3
        nodes[r] = [
            _ar(1 << 20),
            make_node(2, "send", pb.COMM_SEND_NODE, comm_dst=peer, comm_size=1 << 20, comm_tag=3),
            make_node(3, "recv", pb.COMM_RECV_NODE, comm_src=peer, comm_size=1 << 20, comm_tag=3),
        ]
    prefix = workload(nodes)
    result = _both(prefix, system("halvingDoubling"), network(["Ring"], [8], [50.0], [500.0]))
    assert not result.symmetric
    assert len({r.finish_ns for r in result.ranks}) > 1


def _ring_exchange(workload, tags, size=1024):
    """Rank r sends ``size`` bytes to r + 1 with tag ``tags[r]`` and receives from r - 1."""
    n = len(tags)
    return workload(
        {
            r: [
                make_node(
                    1, "send", pb.COMM_SEND_NODE, comm_dst=(r + 1) % n, comm_size=size, comm_tag=tags[r]
                ),
                make_node(
                    2,
                    "recv",
                    pb.COMM_RECV_NODE,
                    comm_src=(r - 1) % n,
                    comm_size=size,
                    comm_tag=tags[(r - 1) % n],
                ),
            ]
            for r in range(n)
        }
    )


def test_signatures_are_compared_not_hashed(workload):
    # hash(-1) == hash(-2) in CPython: ranks whose traces differ only in those
    # tags must not share a class (that folded all four into one and deadlocked).
    assert hash(-1) == hash(-2)
    prefix = _ring_exchange(workload, [-1, -2, -1, -2])
    net = network(["Ring"], [4], [50.0], [500.0])
    fast = _both(prefix, system(), net)
    full = simulate(prefix, system(), net, symmetry=False)
    assert [(r.finish_ns, r.compute_ns, r.comm_ns, r.exposed_comm_ns) for r in fast.ranks] == [
        (r.finish_ns, r.compute_ns, r.comm_ns, r.exposed_comm_ns) for r in full.ranks
    ]
    # 1 hop: 500 ns + 1024 B / (50 * 2^30 / 1e9 B/ns) = 519.07 -> 519 ns
    assert [r.finish_ns for r in fast.ranks] == [519] * 4
    assert fast.symmetric and [e.rank for e in fast.traces] == [0, 1]


def test_node_id_order_is_part_of_the_signature(workload):
    # Both ranks send a 1 MiB then a 1 KiB message to each other from the same
    # file positions, but rank 1 numbers the two sends the other way round: the
    # engine issues ready nodes lowest id first (one communication at a time), so
    # rank 1 sends the small message first and rank 0's kernel after the small
    # receive starts 1 MiB later. Same nodes, not translates.
    def trace(big_id, small_id):
        return [
            make_node(big_id, "big", pb.COMM_SEND_NODE, comm_dst=1 - r, comm_size=1 << 20, comm_tag=1),
            make_node(small_id, "small", pb.COMM_SEND_NODE, comm_dst=1 - r, comm_size=1024, comm_tag=2),
            make_node(3, "recv_big", pb.COMM_RECV_NODE, comm_src=1 - r, comm_size=1 << 20, comm_tag=1),
            make_node(4, "recv_small", pb.COMM_RECV_NODE, comm_src=1 - r, comm_size=1024, comm_tag=2),
            make_node(5, "kernel", pb.COMP_NODE, duration_micros=100, data_deps=[4]),
        ]

    nodes = {}
    for r in range(2):
        nodes[r] = trace(1, 2) if r == 0 else trace(2, 1)
    result = _both(workload(nodes), system(), network(["Ring"], [2], [50.0], [500.0]))
    assert not result.symmetric
    # rank 0 gets the small message first: 500 + 1024 / 53.687 = 519 ns, + 100 us;
    # rank 1 gets it after the 1 MiB one: 519 + 500 + 2^20 / 53.687 = 20550 ns, + 100 us.
    assert [r.finish_ns for r in result.ranks] == [100519, 120550]


def _racing_ranks() -> dict:
    """4 NPUs [Ring 2, Ring 2]. Rank r exchanges 64 B with r ^ 2 (nodes 1, 2), then
    sends 1 MiB to r ^ 1 (node 3, after both); node 4, 4 KiB to r ^ 1, is ready
    from the start but waits for the communication slot. At t = 102 ns rank r's
    send and receive complete in the same instant, in the order their senders
    were scheduled: rank 0's send completes first, rank 2's receive."""
    per_rank = {}
    for r in range(4):
        per_rank[r] = [
            make_node(1, "swap_send", pb.COMM_SEND_NODE, comm_dst=r ^ 2, comm_size=64, comm_tag=0),
            make_node(2, "swap_recv", pb.COMM_RECV_NODE, comm_src=r ^ 2, comm_size=64, comm_tag=0),
            make_node(
                3, "big", pb.COMM_SEND_NODE, comm_dst=r ^ 1, comm_size=1 << 20, comm_tag=5, data_deps=[1, 2]
            ),
            make_node(4, "small", pb.COMM_SEND_NODE, comm_dst=r ^ 1, comm_size=4096, comm_tag=6),
            make_node(5, "recv_big", pb.COMM_RECV_NODE, comm_src=r ^ 1, comm_size=1 << 20, comm_tag=5),
            make_node(6, "recv_small", pb.COMM_RECV_NODE, comm_src=r ^ 1, comm_size=4096, comm_tag=6),
            make_node(7, "kernel", pb.COMP_NODE, duration_micros=50, data_deps=[5]),
        ]
    return per_rank


_RACE_NETWORK = (["Ring", "Ring"], [2, 2], [25.0, 25.0], [100.0, 100.0])


def test_same_time_completions_are_issued_in_id_order_whatever_their_order(workload):
    # A rank chooses what to issue once per instant, after all of that
    # instant's events, so the order of same-time completions (which follows rank
    # numbers) cannot part the ranks of a class. Every rank sends node 3 (lower id
    # than node 4) at t = 102 ns; its 1 MiB arrives one hop later, then the 50 us kernel.
    with warnings.catch_warnings():
        warnings.simplefilter("error", SymmetryFallbackWarning)
        result = _both(workload(_racing_ranks()), system(dims=2), network(*_RACE_NETWORK))
    assert result.symmetric
    bytes_per_ns = 25 * 2**30 / 1e9
    swap = int(100 + 64 / bytes_per_ns)  # 102 ns
    big = int(100 + (1 << 20) / bytes_per_ns)  # 39,162 ns
    assert [r.finish_ns for r in result.ranks] == [swap + big + 50_000] * 4


def _late_ranks() -> dict:
    """4 NPUs [Ring 2, Ring 2] with no latency, so 1 B arrives in the instant it is
    sent. Rank r's 1 us kernel ends and its pass gives the communication slot to
    node 10, a 1 B ping to r ^ 1; the partner's ping then completes node 3 in the
    same instant, readying node 5 (lower id) for the slot already given: in
    another order of those events node 5 would have gone first."""
    per_rank = {}
    for r in range(4):
        per_rank[r] = [
            make_node(1, "kernel", pb.COMP_NODE, duration_micros=1),
            make_node(3, "recv_ping", pb.COMM_RECV_NODE, comm_src=r ^ 1, comm_size=1, comm_tag=0),
            make_node(
                5, "big", pb.COMM_SEND_NODE, comm_dst=r ^ 2, comm_size=1 << 20, comm_tag=1, data_deps=[3]
            ),
            make_node(6, "recv_big", pb.COMM_RECV_NODE, comm_src=r ^ 2, comm_size=1 << 20, comm_tag=1),
            make_node(10, "ping", pb.COMM_SEND_NODE, comm_dst=r ^ 1, comm_size=1, comm_tag=0, data_deps=[1]),
        ]
    return per_rank


_LATE_SYSTEM = {"endpoint-delay": 0}
_LATE_NETWORK = (["Ring", "Ring"], [2, 2], [25.0, 25.0], [0.0, 0.0])


def test_an_event_after_the_pass_in_the_same_instant_falls_back_to_every_rank(workload):
    # The symmetric attempt sees the late event (_late_ranks) and every rank runs.
    with pytest.warns(SymmetryFallbackWarning) as caught:
        result = _both(workload(_late_ranks()), system(dims=2, **_LATE_SYSTEM), network(*_LATE_NETWORK))
    assert not result.symmetric
    # 1 us kernel, the ping in no time, then 1 MiB at 25 GiB/s with no latency
    assert [r.finish_ns for r in result.ranks] == [1000 + int((1 << 20) / (25 * 2**30 / 1e9))] * 4
    # Announced once, in one line, with its reason and the full run's size: 4 ranks of
    # 5 nodes (too few done to project a time).
    (line,) = [str(w.message) for w in caught]
    assert line.startswith("rank symmetry given up (ranks of a class part ways: rank ")
    assert "): simulating all 4 ranks (20 ET nodes; about " in line and line.endswith(" MiB)")


def test_a_fall_back_that_cannot_fit_the_machine_is_refused_in_one_line(workload, monkeypatch):
    # The full run of an 8,192-GPU step must not be killed by the OOM killer without a
    # word. The estimate is FULL_RUN_BYTES_PER_NODE per ET node plus what the
    # process holds; past what the machine has available, the run stops at once.
    from astra_core.system import fallback

    monkeypatch.setattr(fallback, "available_bytes", lambda: 4 << 20)
    monkeypatch.setattr(fallback, "resident_bytes", lambda: 4 << 20)
    with pytest.raises(fallback.RunTooLarge) as err:
        simulate(workload(_late_ranks()), system(dims=2, **_LATE_SYSTEM), network(*_LATE_NETWORK))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("rank symmetry cannot hold (ranks of a class part ways: rank ")
    need = (4 << 20) + 20 * fallback.FULL_RUN_BYTES_PER_NODE  # 20 ET nodes on 4 ranks
    assert f"simulating all 4 ranks (20 ET nodes) needs about {need / 2**20:,.0f} MiB of memory, " in message
    assert "more than the 4 MiB available" in message


def test_a_node_done_as_it_is_issued_is_no_race(workload):
    # A METADATA node completes while it is issued, readying an all-reduce that
    # then waits for the slot another all-reduce took in the same pass: one event,
    # in node id order on every rank, so the symmetric run stands.
    nodes = [
        make_node(1, "meta", pb.METADATA_NODE),
        _ar(1 << 20, node_id=2, deps=[1]),
        _ar(1 << 16, node_id=3),
    ]
    result = _both(workload({r: nodes for r in range(4)}), system(), network(["Ring"], [4], [50.0], [500.0]))
    assert result.symmetric and len(result.traces) == 1


def test_a_race_on_event_order_is_gone(workload):
    # 8 NPUs [Ring 2, Ring 2, Ring 2] (found by the property test). Node 3 sends to
    # and node 4 receives from rank r + (1, 0, 1); node 5 follows both; node 6
    # (a stage send or receive along dimension 0) waits for the slot since t = 0.
    # Both complete at t = 1607 ns, the send first on some ranks and the receive
    # first on others. Node 6 took the slot on the ranks where the send came
    # first, until the pass waited for the whole instant: now node 5 (lower id)
    # wins on every rank, and the translates along dimensions 0 and 2 agree.
    def coords(r):
        return [r % 2, r // 2 % 2, r // 4]

    def rank(c):
        return c[0] % 2 + 2 * (c[1] % 2) + 4 * (c[2] % 2)

    def stage(r, dim, node_id):
        c = coords(r)
        peer = list(c)
        peer[dim] += 1 if c[dim] == 0 else -1
        if c[dim] == 0:
            return make_node(
                node_id, "send_act", pb.COMM_SEND_NODE, comm_dst=rank(peer), comm_size=1024, comm_tag=0
            )
        return make_node(
            node_id, "recv_act", pb.COMM_RECV_NODE, comm_src=rank(peer), comm_size=1024, comm_tag=0
        )

    per_rank = {}
    for r in range(8):
        c = coords(r)
        peer = rank([c[0] + 1, c[1], c[2] + 1])
        per_rank[r] = [
            make_node(1, "ag", pb.COMM_COLL_NODE, comm_type=pb.ALL_GATHER, comm_size=4096),
            stage(r, 1, 2),
            make_node(3, "send", pb.COMM_SEND_NODE, comm_dst=peer, comm_size=64, comm_tag=0),
            make_node(4, "recv", pb.COMM_RECV_NODE, comm_src=peer, comm_size=64, comm_tag=0),
            make_node(
                5,
                "ar",
                pb.COMM_COLL_NODE,
                comm_type=pb.ALL_REDUCE,
                comm_size=4096,
                involved_dim=[False, False, True],
                data_deps=[3, 4],
            ),
            stage(r, 0, 6),
        ]
    net = network(["Ring"] * 3, [2, 2, 2], [25.0] * 3, [100.0] * 3)
    result = _both(
        workload(per_rank), system(dims=3, **{"endpoint-delay": 0, "preferred-dataset-splits": 1}), net
    )
    assert result.symmetric
    finish = [r.finish_ns for r in result.ranks]
    assert all(finish[r] == finish[r ^ 1] == finish[r ^ 4] for r in range(8))


def test_a_dimension_is_read_in_mixed_radix_from_where_its_groups_lie():
    """64 GPUs of one NVLink domain in Megatron's order tp-dp-pp (TP 4, DP 4, PP 4 of a
    stage's 16 ranks): the tensor-parallel group marks digit (place 1, radix 4), the
    data-parallel group (ranks 4 apart) digit (4, 4), the pipeline group (16 apart)
    digit (16, 4); together the dimension reads as 4 x 4 x 4."""
    from astra_core.system.symmetry import _digit, _factors, _readings

    assert _digit([0, 1, 2, 3], 64) == (1, 4)
    assert _digit([0, 4, 8, 12], 64) == (4, 4)
    assert _digit([3, 19, 35, 51], 64) == (16, 4)
    assert _digit([4, 8, 12, 16], 64) is None  # the digit's value 0 is not among them
    assert _digit([0, 48], 64) is None  # 2 x 48 does not divide 64
    assert _digit([0, 1, 3], 64) is None  # not evenly spaced
    assert _factors(64, {1, 4, 16, 64}) == (4, 4, 4)
    assert _factors(64, {1, 4, 6, 64}) == (4, 16)  # 6 is no multiple of 4: not a digit bound
    groups = {"1": (0, 1, 2, 3), "2": (0, 4, 8, 12), "3": (0, 16, 32, 48)}
    readings = list(_readings((64, 2), (True, False), groups))
    assert readings == [((4, 16), (2,)), ((4, 4, 4), (2,)), ((16, 4), (2,))]
