"""Folded NCCL collectives: the replay of one collective's messages, and the check that
a folded run is the full run's (closed forms; the end-to-end runs are in
test_nccl_symmetry.py)."""

from __future__ import annotations

import numpy as np
import pytest

from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.intervals import flat_uncovered, union
from astra_core.system.collectives.nccl.model import NcclModel
from astra_core.system.collectives.nccl.replay import replay
from astra_core.system.collectives.nccl.schedule import Schedule
from astra_core.system.comm_types import CommType
from astra_core.system.floor_fold import FloorFold
from astra_core.system.symmetry import Symmetry

GIB = 1 << 30


def chain(window: int = 8) -> dict[int, Schedule]:
    """0 -> 1 -> 2, 8 bytes; rank 1 forwards what it received."""
    s = {r: Schedule() for r in range(3)}
    s[0].send(s[0].lane(window), 1, 8)
    got = s[1].recv(0, 8, 0)
    s[1].send(s[1].lane(window), 2, 8, (got,))
    s[2].recv(1, 8, 0)
    return s


def frozen(schedules: dict[int, Schedule]) -> dict[int, tuple]:
    """The schedules as :func:`replay` takes them (and the kernel runs them)."""
    return {m: s.frozen() for m, s in schedules.items()}


def test_replay_forwards_and_waits_for_a_late_receiver():
    # a message takes 100 ns per rank apart plus 1 ns per byte; rank 2 starts at 500
    found = replay(
        frozen(chain()), {0: 0, 1: 0, 2: 500}, lambda a, b, size: 100 * abs(a - b) + size, keep_messages=True
    )
    assert found.sent == [(0, 1, 8, 0, 108), (1, 2, 8, 108, 216)]
    assert (found.messages, found.message_bytes) == (2, 16)
    # each member's messages in flight, either end: rank 1's two touch and merge
    assert found.flights == {0: [(0, 108)], 1: [(0, 216)], 2: [(108, 216)]}
    # 0: its send delivered; 1: its send delivered; 2: its receive, once it started
    assert found.ends_ns == {0: 108, 1: 216, 2: 500}


def test_replay_keeps_a_lane_within_its_window():
    s = {0: Schedule(), 1: Schedule()}
    lane = s[0].lane(window=2)
    for _ in range(3):
        s[0].send(lane, 1, 4)
        s[1].recv(0, 4, 0)
    found = replay(frozen(s), {0: 0, 1: 0}, lambda a, b, size: 10, keep_messages=True)
    # two sends at 0, the third when the first is delivered (10), in at 20
    assert [m[3] for m in found.sent] == [0, 0, 10]
    assert found.ends_ns == {0: 20, 1: 20}


def test_replay_refuses_a_send_no_one_receives():
    s = chain()
    s[2] = Schedule()
    with pytest.raises(ValueError, match="no receive expects"):
        replay(frozen(s), dict.fromkeys(range(3), 0), lambda a, b, size: 1)


def test_flat_uncovered_parts():
    log = [10.0, 20.0, 30.0, 40.0]
    assert flat_uncovered(log, [(0, 50)]) == [(0, 10), (20, 30), (40, 50)]
    assert flat_uncovered(log, [(12, 18), (35, 45)]) == [(40, 45)]
    assert flat_uncovered(log, [(20, 30)]) == [(20, 30)]


def tree_fold(steps: tuple[int, int]) -> tuple[FloorFold, tuple[int, ...]]:
    """A 256-byte tree all-reduce over 4 DGX A100 nodes, ranks folded by ``steps``."""
    network = NetworkConfig.from_dict(
        {
            "topology": ["Switch", "Switch"],
            "npus_count": [8, 4],
            "bandwidth": [300e9 / GIB, 25e9 / GIB],
            "latency": [300, 1350],
        }
    )
    system = SystemConfig.from_dict(
        {
            "scheduling-policy": "LIFO",
            "collective-optimization": "baseline",
            "preferred-dataset-splits": 1,
            "all-reduce-implementation": ["nccl"],
            "nccl": {"gpu": "A100", "NCCL_ALGO": "Tree"},
        }
    )
    nccl = NcclModel(system.nccl, network)
    members = tuple(range(32))

    def message_ns(src: int, dst: int, size: int) -> float:
        same_node = src // 8 == dst // 8
        return 2 * (300 if same_node else 1350) + size / (300 if same_node else 25)

    symmetry = Symmetry((8, 4), ("rotation", "rotation"), steps, folded=frozenset())
    return FloorFold(symmetry, nccl, message_ns), members


def test_members_that_start_together_end_at_nccls_time_with_every_message_counted():
    fold, members = tree_fold((1, 1))  # one class: every member starts when rank 0 does
    fold.starts.append((0, CommType.ALL_REDUCE, members, 256, 7, 1000.0))
    traffic = fold.settle()
    assert not isinstance(traffic, str)
    schedules = [fold.nccl.schedule(CommType.ALL_REDUCE, m, members, 256)[0] for m in members]
    sends = [send for s in schedules for lane in s.lanes for send in lane.sends]
    assert traffic.messages == len(sends)
    assert traffic.message_bytes == sum(size for _, size, _ in sends)
    # every message is in flight for its sender and its receiver, after the start
    assert sorted(traffic.in_flight) == list(members)
    assert min(s for spans in traffic.in_flight.values() for s, _ in spans) == 1000.0


def test_members_that_start_far_apart_undo_the_fold():
    fold, members = tree_fold((1, 2))  # nodes 0, 2 and nodes 1, 3: two classes
    fold.starts.append((0, CommType.ALL_REDUCE, members, 256, 7, 0.0))
    fold.starts.append((8, CommType.ALL_REDUCE, members, 256, 7, 1e6))
    why = fold.settle()
    assert isinstance(why, str) and "1,000,000 ns apart" in why


def test_a_member_that_never_starts_undoes_the_fold():
    fold, members = tree_fold((1, 2))
    fold.starts.append((0, CommType.ALL_REDUCE, members, 256, 7, 0.0))
    why = fold.settle()
    assert isinstance(why, str) and "never starts" in why


def test_the_report_says_what_was_folded_and_why_every_rank_ran(tmp_path):
    """The summary's symmetry line: how many collectives were folded (FP8's amax trees
    over a stage of 16 H100s); where symmetry is off for a reason, not by request, why."""
    import io

    from rich.console import Console

    import astra
    from astra_core.report.table import print_summary

    groups, system, network = fp8_on_h100(tmp_path, layers=2, dp=2, tp=8, global_batch=4)
    lines = []
    for backend in ("analytical", "analytical-congestion"):
        result = astra.simulate(
            str(tmp_path / "llm"),
            system,
            network,
            comm_groups=groups,
            backend=backend,
        )
        out = io.StringIO()
        print_summary(result, Console(file=out, width=400))
        lines.append(next(line for line in out.getvalue().splitlines() if "rank symmetry" in line))
    assert "1 of 16 ranks simulated" in lines[0] and "NCCL collectives whose members play" in lines[0]
    assert (
        lines[1]
        == "rank symmetry: off, every rank simulated (the backend's timing is not the same for every rank)"
    )


def test_an_fp8_step_folds_to_its_stages_and_matches_the_full_run(tmp_path):
    """FP8 (delayed scaling) on 64 H100s, TP 8, CP 2, PP 2, DP 2: the amax all-reduces over
    each stage's 32 ranks run NCCL's tree; folded, the run simulates a few ranks and
    gives every rank's finish, time in flight and waiting, and the message counts of the
    run of every rank."""
    import astra

    groups, system, network = fp8_on_h100(
        tmp_path, layers=4, dp=2, tp=8, pp=2, cp=2, global_batch=8, sequence_parallel=True
    )
    sym, full = (
        astra.simulate(str(tmp_path / "llm"), system, network, comm_groups=groups, symmetry=flag)
        for flag in (True, False)
    )
    assert sym.symmetric and sym.folded > 0 and len(sym.traces) < 64
    assert [r.finish_ns for r in sym.ranks] == [r.finish_ns for r in full.ranks]
    assert (sym.messages, sym.message_bytes) == (full.messages, full.message_bytes)
    for a, b in zip(sym.ranks, full.ranks):
        assert a.comm_ns == pytest.approx(b.comm_ns, abs=1e-3)
        assert a.comm_wait_ns == pytest.approx(b.comm_wait_ns, abs=1e-3)


def fp8_on_h100(tmp_path, layers: int, **plan):
    """A small FP8 step written to ``tmp_path / "llm"`` for H100 servers of 8 GPUs (NVLink4
    and one 400 Gb/s NIC per GPU, in network.yml's GiB/s): its comm groups, an all-NCCL
    system and the network."""
    from astra_core.workload.generators.gpus import GPUS
    from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm
    from astra_core.workload.generators.models import ModelConfig

    model = ModelConfig("t", layers=layers, hidden=1024, heads=16, ffn_hidden=4096, vocab=1000, seq_len=1024)
    npus = plan["dp"] * plan["tp"] * plan.get("pp", 1) * plan.get("cp", 1)
    cfg = LLMConfig(model, GPUS["h100"], micro_batch=1, dims=[8, npus // 8], precision="fp8", **plan)
    _, groups = write_llm(generate_llm(cfg), tmp_path / "llm")
    network = NetworkConfig.from_dict(
        {
            "topology": ["Switch", "Switch"],
            "npus_count": [8, npus // 8],
            "bandwidth": [419.0, 46.6],
            "latency": [300, 1350],
        }
    )
    system = SystemConfig.from_dict(
        {
            "scheduling-policy": "LIFO",
            "collective-optimization": "baseline",
            "preferred-dataset-splits": 1,
            **{f"{c}-implementation": ["nccl"] for c in ("all-reduce", "all-gather", "reduce-scatter")},
            "nccl": {"gpu": "H100"},
        }
    )
    return str(groups) if groups else None, system, network


def test_a_member_keeps_its_messages_in_flight_merged_not_two_per_message():
    """A folded collective's in-flight time per member is the union of its messages'
    intervals, kept merged (a few per instance, not two tuples per message: the 64-GPU
    Qwen3-235B step folded 175 M all-to-all messages and grew past 24 GiB): the union
    of what a member keeps equals the union of every message it sent or received,
    shifted to the instance's start, for every instance."""
    fold, members = tree_fold((1, 1))
    starts = (1000.0, 5e5)
    for stream, start in enumerate(starts):  # two calls (streams) of one collective
        fold.starts.append((0, CommType.ALL_REDUCE, members, 256, 7 + stream, start))
    traffic = fold.settle()
    assert not isinstance(traffic, str)
    assert len(fold._replays) == 1  # both instances share one pattern of starts
    schedules = {m: fold.nccl.frozen_schedule(CommType.ALL_REDUCE, m, members, 256)[0] for m in members}
    sent = replay(schedules, dict.fromkeys(members, 0.0), fold.message_ns, keep_messages=True).sent
    assert traffic.messages == 2 * len(sent) > 2 * len(members)
    for m in members:
        mine = [(s + t, a + t) for t in starts for src, dst, _, s, a in sent if m in (src, dst)]
        kept = [(s, e) for s, e in traffic.in_flight[m].tolist()]
        assert union(kept) == union(mine)
        assert len(kept) == len(union(kept))  # already merged
    assert sum(len(spans) for spans in traffic.in_flight.values()) < 2 * traffic.messages


@pytest.mark.parametrize("kinds", [("rotation", "rotation", "rotation"), ("xor", "rotation", "xor")])
def test_whole_class_translations_agree_with_rank_by_rank_ones(kinds):
    # settle moves a collective's members and its chunk tags for every rank of a class at
    # once; each row must be what shift and shift_tag give rank by rank
    groups = {1: (0, 1, 2, 3), 2: (4, 5, 6, 7), 3: (0, 4, 8, 12), 4: (1, 5, 9, 13), 5: (2, 3, 18, 19)}
    sym = Symmetry((4, 4, 2), kinds, (1, 2, 1), groups=groups)
    ranks = sym.classes()[0]
    deltas = [sym.from_representative(m)[1] for m in ranks]
    members = (0, 3, 5, 17, 30)
    moved = sym.translated(members, np.array(deltas))
    assert moved.tolist() == [sorted(sym.shift(x, d) for x in members) for d in deltas]
    for group in (0, 1, 3, 5, 9):  # 0: no group; 9: not a group of the run
        tag = group * sym.tag_base + 17
        by_rank = [sym.shift_tag(tag, d) for d in deltas]
        assert [g * sym.tag_base + 17 for g in sym.moved_groups(group, np.array(deltas))] == by_rank
    assert len(set(map(tuple, moved.tolist()))) > 1  # the class's ranks see other members


def test_a_rank_of_many_folded_intervals_counts_them_as_the_list_arithmetic_does(monkeypatch):
    """Past NUMPY_FROM folded intervals a rank's in-flight time is summed on numpy sets
    (a long folded run gives a rank millions): the same in-flight and waiting time, and
    the same merged log, as the list arithmetic gives, here on 3,000 overlapping
    intervals against a log of 1,000 and 200 communication nodes."""
    from astra_core.results import RankResult
    from astra_core.system import floor_fold
    from astra_core.system.floor_fold import merged_log, with_traffic

    rng = np.random.default_rng(7)
    starts = rng.uniform(0.0, 1e6, 3000)
    extra = np.column_stack((starts, starts + rng.uniform(1.0, 500.0, 3000)))
    log = [t for i in range(1000) for t in (i * 1000.0, i * 1000.0 + 300.0)]
    comm = [(i * 5000.0, i * 5000.0 + 2000.0) for i in range(200)]
    result = RankResult(
        0, 9e5, compute_ns=4e5, cpu_ns=0.0, comm_ns=3e5, exposed_comm_ns=5e5, comm_wait_ns=2e5
    )
    assert len(extra) >= floor_fold.NUMPY_FROM
    on_sets, log_on_sets = with_traffic(result, log, comm, extra), merged_log(log, extra)
    monkeypatch.setattr(floor_fold, "NUMPY_FROM", len(extra) + 1)
    on_lists, log_on_lists = with_traffic(result, log, comm, extra), merged_log(log, extra)
    assert on_sets.comm_ns == pytest.approx(on_lists.comm_ns, rel=1e-12)
    assert on_sets.comm_wait_ns == pytest.approx(on_lists.comm_wait_ns, rel=1e-12)
    assert on_sets.comm_ns > result.comm_ns and on_sets.comm_wait_ns < result.comm_wait_ns  # both moved
    assert log_on_sets == log_on_lists


def test_two_classes_starting_apart_keep_every_members_messages_as_one_replay_gives_them():
    """Nodes 0, 2 and nodes 1, 3 are two classes; on each of two calls the second class
    starts a little later. Each call's messages, counts and every member's time in flight
    are those of the whole collective replayed from its members' own starts."""
    fold, members = tree_fold((1, 2))
    calls = [(7, 1000.0, 1003.0), (8, 9000.0, 9001.5)]  # (stream, class of rank 0, class of rank 8)
    for stream, early, late in calls:
        fold.starts.append((0, CommType.ALL_REDUCE, members, 256, stream, early))
        fold.starts.append((8, CommType.ALL_REDUCE, members, 256, stream, late))
    traffic = fold.settle()
    assert not isinstance(traffic, str), traffic
    assert traffic.collectives == len(calls)
    schedules = {m: fold.nccl.frozen_schedule(CommType.ALL_REDUCE, m, members, 256)[0] for m in members}
    expected: dict[int, list] = {m: [] for m in members}
    messages = 0
    for _, early, late in calls:
        # replayed from the first start (ns after it), as settle replays a pattern of starts
        offsets = {m: 0.0 if (m // 8) % 2 == 0 else late - early for m in members}
        found = replay(schedules, offsets, fold.message_ns)
        messages += found.messages
        for m, spans in found.flights.items():
            expected[m].extend((s + early, e + early) for s, e in spans)
    assert traffic.messages == messages
    for m in members:
        assert union([(s, e) for s, e in traffic.in_flight[m].tolist()]) == union(expected[m]), m
