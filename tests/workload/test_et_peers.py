"""Sends and receives decoded once per shape (astra_core.workload.et_peers): whatever the
shortcut reads must be what the full decoder reads, node for node."""

from __future__ import annotations

import pytest

from astra_core.workload import chakra
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra import read_rank_trace, read_workload
from astra_core.workload.et_decode import ETNode, decode_node
from astra_core.workload.et_peers import (
    DST_FIRST,
    SRC_FIRST,
    SRC_ONLY,
    GroupTemplate,
    peer_key,
    split_groups,
    split_peers,
    with_peers,
)
from astra_core.workload.graph import build_graphs, timing_key
from astra_core.workload.writer import make_node, write_rank_trace


def _send(src, dst, case="int64_val", node_id=3, tag=7, extra=()):
    node = pb.Node(id=node_id, name="L0_send", type=pb.COMM_SEND_NODE, data_deps=[1, 2])
    attrs = [("comm_size", 4096), ("comm_tag", tag), ("comm_src", src), ("comm_dst", dst), *extra]
    for name, value in attrs:
        if value is not None:
            node.attr.append(
                pb.AttributeProto(
                    name=name, **{case if name in ("comm_src", "comm_dst") else "int64_val": value}
                )
            )
    return node


def test_the_key_leaves_out_exactly_the_peer_values():
    a = peer_key(_send(0, 1).SerializeToString())
    b = peer_key(_send(300, 70000).SerializeToString())  # 2- and 3-byte varints
    assert a is not None and b is not None
    assert a[1:] == (0, 1, SRC_FIRST) and b[1:] == (300, 70000, SRC_FIRST)
    assert a[0] != b[0]  # the attributes' lengths differ with the varints' lengths
    assert peer_key(_send(5, 6).SerializeToString())[0] == a[0]  # one-byte values: one key
    assert peer_key(_send(0, 1, tag=8).SerializeToString())[0] != a[0]  # any other byte counts


def test_key_orders_and_absent_peers():
    node = pb.Node(id=1, name="r", type=pb.COMM_RECV_NODE)
    node.attr.append(pb.AttributeProto(name="comm_dst", int32_val=4))
    node.attr.append(pb.AttributeProto(name="comm_src", uint64_val=9))
    assert peer_key(node.SerializeToString())[1:] == (9, 4, DST_FIRST)
    only = pb.Node(id=1, name="r", type=pb.COMM_RECV_NODE)
    only.attr.append(pb.AttributeProto(name="comm_src", uint32_val=2))
    assert peer_key(only.SerializeToString())[1:] == (2, None, SRC_ONLY)
    assert peer_key(pb.Node(id=1, name="comm_src", type=pb.COMP_NODE).SerializeToString()) is None


@pytest.mark.parametrize(
    "node",
    [
        _send(3, 4, case="sint64_val"),  # zigzag: not read here
        _send(3, 4, case="fixed32_val"),
        _send(-1, 4, case="int32_val"),  # a 10-byte varint
        _send(3, 4, extra=[("comm_src", 5)]),  # a name twice: the decoder takes the first
    ],
)
def test_forms_not_read_give_no_key(node):
    assert peer_key(node.SerializeToString()) is None


def test_with_peers_copies_every_other_field():
    # every field other than its default, so that a field the copy left out shows
    fields = (
        5,
        "n",
        pb.COMM_SEND_NODE,
        (1,),
        (2,),
        3,
        True,
        4,
        4096,
        0,
        1,
        7,
        2,
        (True, False),
        "g",
        9,
        10,
        "v",
        {"x": 1},
    )
    template = ETNode(*fields)
    assert len(fields) == len(ETNode.__slots__)
    copy = with_peers(template, 8, 9)
    assert copy == ETNode(*fields[:9], 8, 9, *fields[11:])  # comm_src, comm_dst: slots 9, 10
    assert template.copy() == template and template.copy() is not template
    assert (template.comm_src, template.comm_dst) == (0, 1)


def _ring_files(tmp_path, ranks: int, odd: dict[int, pb.Node] | None = None):
    """``ranks`` files of a ring shift whose bytes differ only in their peers (a compute
    node, then a send to the next rank and a receive from the previous one), with
    ``odd[rank]`` in place of a rank's send."""
    for rank in range(ranks):
        send = (odd or {}).get(rank) or _send(rank, (rank + 1) % ranks)
        recv = make_node(
            4,
            "L0_recv",
            pb.COMM_RECV_NODE,
            comm_size=4096,
            comm_tag=7,
            comm_src=(rank - 1) % ranks,
            comm_dst=rank,
        )
        comp = make_node(1, "gemm", pb.COMP_NODE, num_ops=10**9, tensor_size=1 << 20)
        write_rank_trace(tmp_path / f"t.{rank}.et", [comp, send, recv])
    return tmp_path / "t"


def _same_as_full_decode(prefix, ranks):
    traces = read_workload(prefix, ranks)
    for rank, trace in enumerate(traces):
        assert trace.nodes == read_rank_trace(f"{prefix}.{rank}.et").nodes, rank
    return traces


def test_files_equal_but_for_peers_read_as_the_full_decoder_reads_them(tmp_path, monkeypatch):
    decoded = []

    def counted(*args):
        decoded.append(args[2])
        return decode_node(*args)

    monkeypatch.setattr(chakra, "decode_node", counted)
    # 300 ranks: peers past 127 take two bytes, so some files differ in more than values
    prefix = _ring_files(tmp_path, 300)
    traces = read_workload(prefix, 300)
    assert 3 <= len(decoded) <= 3 * 4  # each shape of node once, not 900 nodes
    monkeypatch.undo()
    for rank, trace in enumerate(traces):
        assert trace.nodes == read_rank_trace(f"{prefix}.{rank}.et").nodes, rank
    assert [(t.nodes[1].comm_src, t.nodes[1].comm_dst) for t in traces[126:129]] == [
        (126, 127),
        (127, 128),
        (128, 129),
    ]
    assert traces[5].nodes[0] is traces[6].nodes[0]  # the compute node is shared
    assert traces[5].nodes[1].name is traces[6].nodes[1].name


def test_odd_encodings_among_equal_files(tmp_path):
    odd = {
        3: _send(3, 4, case="sint64_val"),
        4: _send(4, 5, extra=[("comm_dst", 9)]),  # the second comm_dst is ignored
        5: _send(5, 6, case="uint32_val"),
        6: _send(6, 6),  # to itself
    }
    _same_as_full_decode(_ring_files(tmp_path, 9, odd), 9)


def test_peers_kept_by_role_only_where_each_file_follows_the_roles(tmp_path):
    """Rank 0's send and receive name one peer: one role. A file whose send and receive
    name two peers, or whose send is not from its own rank, keeps its peers node by node;
    every file reads as the full decoder reads it."""
    ends = {0: (0, 1, 1), 1: (1, 0, 0), 2: (2, 0, 1), 3: (5, 0, 0)}  # send from, send to, receive from
    for rank, (src, dst, recv_from) in ends.items():
        recv = make_node(
            4, "r", pb.COMM_RECV_NODE, comm_size=64, comm_tag=7, comm_src=recv_from, comm_dst=rank
        )
        write_rank_trace(tmp_path / f"t.{rank}.et", [_send(src, dst), recv])
    traces = _same_as_full_decode(tmp_path / "t", 4)
    kinds = [type(t.nodes).__name__ for t in traces]
    assert kinds == ["TemplatePeers", "TemplatePeers", "PeerNodes", "PeerNodes"]
    assert traces[1].nodes.template is traces[0].nodes.template


def test_split_peers_cuts_the_values_in_file_order(tmp_path):
    prefix = _ring_files(tmp_path, 4)
    rest, values = split_peers((tmp_path / "t.2.et").read_bytes())
    assert values == [b"\x02", b"\x03", b"\x01", b"\x02"]  # send 2 -> 3, receive 1 -> 2
    assert rest == split_peers((tmp_path / "t.1.et").read_bytes())[0]
    assert prefix.name == "t"


def test_a_generated_step_runs_the_same_read_either_way(tmp_path, monkeypatch):
    """Megatron's tensor-parallel overlap (sends and receives in rings) on 2 x 2 x 2 ranks:
    the run read through templates (rank symmetry then compares ranks through them) gives
    every rank the times of the run read node by node in full."""
    from astra_core.api import simulate
    from astra_core.workload.generators.gpus import GPUS
    from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm
    from astra_core.workload.generators.models import ModelConfig
    from tests.workload.generators.conftest import write_network, write_system

    cfg = LLMConfig(
        ModelConfig("gpt-test", layers=8, hidden=1024, heads=16, ffn_hidden=4096, vocab=51200, seq_len=2048), GPUS["a100"], dp=2, tp=2, pp=2, microbatches=4, dims=[2, 2, 2],
        sequence_parallel=True, tp_comm_overlap=True,
    )  # fmt: skip
    _, groups = write_llm(generate_llm(cfg), tmp_path / "llm")
    network, system = write_network(tmp_path, [2, 2, 2]), write_system(tmp_path, 3)
    traces = read_workload(tmp_path / "llm", 8)
    assert sum(type(t.nodes).__name__ == "TemplatePeers" for t in traces) >= 4
    runs = [simulate(tmp_path / "llm", system, network, comm_groups=groups)]
    monkeypatch.setattr(chakra, "split_peers", lambda data: (data, []))
    monkeypatch.setattr(chakra, "peer_key", lambda payload: None)
    kinds = {type(t.nodes).__name__ for t in read_workload(tmp_path / "llm", 8)}
    assert not kinds & {"PeerNodes", "TemplatePeers"}
    runs.append(simulate(tmp_path / "llm", system, network, comm_groups=groups))
    assert runs[0].symmetric and runs[1].symmetric
    assert [(r.finish_ns, r.exposed_comm_ns) for r in runs[0].ranks] == [
        (r.finish_ns, r.exposed_comm_ns) for r in runs[1].ranks
    ]


def _group_files(tmp_path, names_by_rank):
    """One file per rank: a compute node, then an all-reduce in each group of the rank's
    list (``names_by_rank[rank]``), each after the one before, and a send to the next rank."""
    ranks = len(names_by_rank)
    for rank, names in enumerate(names_by_rank):
        nodes = [make_node(1, "gemm", pb.COMP_NODE, num_ops=10**9, tensor_size=1 << 20)]
        for i, name in enumerate(names):
            nodes.append(
                make_node(
                    2 + i, f"ar{i}", pb.COMM_COLL_NODE, data_deps=[1 + i], comm_type=pb.ALL_REDUCE, comm_size=1 << 20, pg_name=name
                )
            )  # fmt: skip
        nodes.append(_send(rank, (rank + 1) % ranks, node_id=2 + len(names)))
        write_rank_trace(tmp_path / f"t.{rank}.et", nodes)
    return tmp_path / "t"


def test_split_groups_cuts_the_names_in_file_order(tmp_path):
    _group_files(tmp_path, [["a", "bb"], ["c", "dd"]])
    bare, names = split_groups(split_peers((tmp_path / "t.0.et").read_bytes())[0])
    assert names == [b"a", b"bb"]
    assert bare == split_groups(split_peers((tmp_path / "t.1.et").read_bytes())[0])[0]


def test_files_equal_but_for_groups_and_peers_read_as_the_full_decoder_and_time_as_one(tmp_path):
    names = [
        ["a", "b", "a"],
        ["c", "d", "c"],  # one to one: the first's nodes renamed, timing as the first
        ["b", "a", "b"],  # the first's names swapped: one to one too
        ["e", "e", "e"],  # two of the first's groups in one: decoded in full
        ["f", "gg", "f"],  # a longer name: other bytes, decoded in full
    ]
    prefix = _group_files(tmp_path, names)
    traces = _same_as_full_decode(prefix, len(names))
    graphs = build_graphs(traces)
    timings = [timing_key(g.nodes) for g in graphs]
    assert timings[0] == timings[1] == timings[2]
    assert len({timings[0], timings[3], timings[4]}) == 3
    renamed = traces[1].nodes.template
    assert isinstance(renamed, GroupTemplate) and renamed.timing is traces[0].nodes.template
    assert renamed.names == {"a": "c", "b": "d"}
    assert traces[1].nodes[0] is traces[0].nodes[0]  # what names no group is shared
    assert [n.pg_name for n in traces[2].nodes[1:4]] == ["b", "a", "b"]


def test_a_generated_step_runs_the_same_with_its_groups_read_as_renames(tmp_path, monkeypatch):
    """Data, tensor and pipeline parallelism on 2 x 2 x 2 ranks of one dimension: each
    rank names its own groups; the run read with the ranks of a stage as one template renamed gives every rank
    the times of the run read with each rank's file decoded on its own."""
    from astra_core.api import simulate
    from astra_core.workload.generators.gpus import GPUS
    from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm
    from astra_core.workload.generators.models import ModelConfig
    from tests.workload.generators.conftest import write_network, write_system

    cfg = LLMConfig(
        ModelConfig("gpt-test", layers=8, hidden=1024, heads=16, ffn_hidden=4096, vocab=51200, seq_len=2048), GPUS["a100"], dp=2, tp=2, pp=2, microbatches=4, dims=[8],
    )  # fmt: skip
    _, groups = write_llm(generate_llm(cfg), tmp_path / "llm")
    network, system = write_network(tmp_path, [8]), write_system(tmp_path, 1)
    traces = _same_as_full_decode(tmp_path / "llm", 8)
    assert sum(isinstance(getattr(t.nodes, "template", None), GroupTemplate) for t in traces) >= 4
    assert len({timing_key(g.nodes) for g in build_graphs(traces)}) == 2  # one per stage
    runs = [simulate(tmp_path / "llm", system, network, comm_groups=groups)]
    monkeypatch.setattr(chakra, "split_groups", lambda data: (data, []))
    assert not any(
        isinstance(getattr(t.nodes, "template", None), GroupTemplate)
        for t in read_workload(tmp_path / "llm", 8)
    )
    runs.append(simulate(tmp_path / "llm", system, network, comm_groups=groups))
    assert runs[0].symmetric and runs[1].symmetric
    assert [(r.finish_ns, r.exposed_comm_ns) for r in runs[0].ranks] == [
        (r.finish_ns, r.exposed_comm_ns) for r in runs[1].ranks
    ]


def test_a_peer_node_reads_as_its_template_with_its_own_peers():
    import sys

    from astra_core.workload.et_peers import PeerNode

    template = ETNode(
        7, "send", pb.COMM_SEND_NODE, data_deps=[3], comm_size=4096, comm_tag=9, comm_src=0, comm_dst=1
    )
    node = with_peers(template, 5, 6)
    assert isinstance(node, PeerNode)
    assert (node.id, node.name, node.type_name, node.data_deps, node.comm_size, node.comm_tag) == (
        7, "send", "COMM_SEND_NODE", (3,), 4096, 9,
    )  # fmt: skip
    assert (node.comm_src, node.comm_dst, template.comm_src) == (5, 6, 0)
    assert node == template.replaced(comm_src=5, comm_dst=6) and node != template
    # another rank's peers on a peer node still point at the shared template
    again = with_peers(node, 8, 9)
    assert again._template is template and (again.comm_src, again.comm_dst) == (8, 9)
    changed = node.replaced(comm_tag=10)
    assert isinstance(changed, ETNode) and (changed.comm_src, changed.comm_tag) == (5, 10)
    assert sys.getsizeof(node) < sys.getsizeof(template) / 2


def test_files_whose_hashes_collide_are_still_read_each_as_itself(tmp_path, monkeypatch):
    """Identical files are found by (size, hash) and confirmed byte for byte: with every
    hash equal, files of one size that differ are each read as themselves."""
    prefix = _ring_files(tmp_path, 6)
    (tmp_path / "t.5.et").write_bytes((tmp_path / "t.4.et").read_bytes())  # rank 5 a copy of 4
    monkeypatch.setattr(chakra, "hash", lambda data: 0, raising=False)
    _same_as_full_decode(prefix, 6)


def test_peer_values_decode_as_the_writer_encodes_them():
    """The varints split_peers cuts out are decoded on arrays (every byte count from one
    to five) to the values the writer encoded."""
    from astra_core.workload.et_peers import _numbers, _varint
    from astra_core.workload.writer import encode_varint

    values = [0, 1, 127, 128, 300, 16_383, 16_384, 70_000, 2_097_152, 268_435_455, 2**31 - 1]
    raw = [encode_varint(v) for v in values]
    assert sorted({len(r) for r in raw}) == [1, 2, 3, 4, 5]
    assert _numbers(raw).tolist() == values == [_varint(r) for r in raw]
    assert _numbers([]).tolist() == []
