"""Fuzz: Chakra traces, damaged byte by byte or built from random nodes with
nasty attributes, give a result with sane times or one error line, never a
traceback or a hang."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from astra_core.api import simulate
from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra import read_rank_trace
from astra_core.workload.writer import make_node, write_rank_trace
from tests.fuzz.budget import answer_or_one_line_error, assert_sane_times, fuzz_settings

COLLECTIVES = [
    pb.ALL_REDUCE,
    pb.ALL_GATHER,
    pb.REDUCE_SCATTER,
    pb.ALL_TO_ALL,
    pb.BROADCAST,
    pb.REDUCE,
    pb.BARRIER,
]

_sizes = st.one_of(st.sampled_from([1, 64, 4096, 1 << 20]), st.sampled_from([0, -1, -4096, 2**40]))
_num_ops = st.one_of(
    st.integers(min_value=0, max_value=10**9), st.sampled_from([-1, 0, float("nan"), float("inf"), 1.5e9])
)
_tags = st.one_of(st.integers(min_value=-3, max_value=3), st.sampled_from([2**31 - 1, -(2**31)]))


@st.composite
def node_spec(draw, npus: int):
    """One node for every rank: (type, attrs) with offsets for peers."""
    kind = draw(
        st.sampled_from(
            [
                "comp",
                "comp",
                "coll",
                "coll",
                "p2p",
                "mem",
                "invalid",
                "metadata",
                "coll_nasty",
                "comp_roofline",
            ]
        )
    )
    if kind == "comp":
        return ("comp", {"duration_micros": draw(st.integers(min_value=0, max_value=50))})
    if kind == "comp_roofline":
        return (
            "comp",
            {"num_ops": draw(_num_ops), "tensor_size": draw(st.one_of(st.none(), st.integers(0, 2**40)))},
        )
    if kind in ("coll", "coll_nasty"):
        dims = draw(st.one_of(st.none(), st.lists(st.booleans(), min_size=1, max_size=4)))
        size = draw(_sizes) if kind == "coll_nasty" else draw(st.sampled_from([64, 4096, 1 << 20]))
        return (
            "coll",
            {"comm_type": draw(st.sampled_from(COLLECTIVES)), "comm_size": size, "involved_dim": dims},
        )
    if kind == "p2p":
        return (
            "p2p",
            {
                "offset": draw(st.integers(min_value=0, max_value=npus)),
                "comm_size": draw(_sizes),
                "comm_tag": draw(_tags),
            },
        )
    if kind == "mem":
        return ("mem", {"tensor_size": draw(st.integers(min_value=0, max_value=1 << 20))})
    return (kind, {})


@st.composite
def workloads(draw):
    """(npus, per-rank node lists): an SPMD program, then per-rank damage."""
    npus = draw(st.sampled_from([2, 4, 8]))
    program = draw(st.lists(node_spec(npus), min_size=1, max_size=6))
    deps = [draw(st.lists(st.integers(min_value=0, max_value=len(program) + 1), max_size=2)) for _ in program]
    traces = {}
    for rank in range(npus):
        nodes, next_id = [], 1
        for index, (kind, attrs) in enumerate(program):
            dep_ids = [d for d in deps[index] if d != index + 1]
            if kind == "comp":
                duration = attrs.get("duration_micros", 0)
                extra = {k: v for k, v in attrs.items() if k != "duration_micros"}
                nodes.append(
                    make_node(
                        next_id,
                        f"c{index}",
                        pb.COMP_NODE,
                        data_deps=dep_ids,
                        duration_micros=duration,
                        **extra,
                    )
                )
            elif kind == "coll":
                nodes.append(
                    make_node(next_id, f"coll{index}", pb.COMM_COLL_NODE, data_deps=dep_ids, **attrs)
                )
            elif kind == "p2p":
                # send to rank+offset, then receive from rank-offset: a ring exchange
                peer_to, peer_from = (rank + attrs["offset"]) % npus, (rank - attrs["offset"]) % npus
                nodes.append(
                    make_node(
                        next_id,
                        f"send{index}",
                        pb.COMM_SEND_NODE,
                        data_deps=dep_ids,
                        comm_dst=peer_to,
                        comm_size=attrs["comm_size"],
                        comm_tag=attrs["comm_tag"],
                    )
                )
                next_id += 1
                nodes.append(
                    make_node(
                        next_id,
                        f"recv{index}",
                        pb.COMM_RECV_NODE,
                        comm_src=peer_from,
                        comm_size=attrs["comm_size"],
                        comm_tag=attrs["comm_tag"],
                    )
                )
            elif kind == "mem":
                nodes.append(make_node(next_id, f"load{index}", pb.MEM_LOAD_NODE, data_deps=dep_ids, **attrs))
            elif kind == "metadata":
                nodes.append(make_node(next_id, f"meta{index}", pb.METADATA_NODE, data_deps=dep_ids))
            else:
                nodes.append(pb.Node(id=next_id))
            next_id += 1
        traces[rank] = nodes
    # damage: one rank loses a node, or one node's attribute changes on one rank
    if draw(st.booleans()):
        victim = draw(st.integers(min_value=0, max_value=npus - 1))
        if traces[victim]:
            del traces[victim][draw(st.integers(min_value=0, max_value=len(traces[victim]) - 1))]
    return npus, traces


def _network(npus: int) -> NetworkConfig:
    """``npus`` NPUs as [Ring 2, Ring 2, ...] (several dimensions for involved_dim)."""
    dims = [2] * (npus.bit_length() - 1)
    return NetworkConfig.from_dict(
        {
            "topology": ["Ring"] * len(dims),
            "npus_count": dims,
            "bandwidth": [50.0] * len(dims),
            "latency": [500.0] * len(dims),
        }
    )


def _system(dims: int, roofline: bool) -> SystemConfig:
    return SystemConfig.from_dict(
        {
            "scheduling-policy": "LIFO",
            "collective-optimization": "baseline",
            "preferred-dataset-splits": 2,
            "all-reduce-implementation": ["ring"] * dims,
            "all-gather-implementation": ["ring"] * dims,
            "reduce-scatter-implementation": ["ring"] * dims,
            "all-to-all-implementation": ["direct"] * dims,
            "roofline-enabled": int(roofline),
            "peak-perf": 100 if roofline else 0,
            "local-mem-bw": 1000 if roofline else 0,
        }
    )


@fuzz_settings(80)
@given(workload=workloads(), roofline=st.booleans(), symmetry=st.booleans())
def test_random_traces_run(tmp_path_factory, workload, roofline, symmetry):
    npus, traces = workload
    folder = tmp_path_factory.mktemp("trace")
    for rank, nodes in traces.items():
        write_rank_trace(folder / f"w.{rank}.et", nodes)
    net = _network(npus)
    result = answer_or_one_line_error(
        simulate,
        str(folder / "w"),
        _system(net.dims_count, roofline),
        net,
        backend="analytical",
        symmetry=symmetry,
        limit_s=20,
    )
    if result is not None:
        assert_sane_times(result)


def _valid_trace_bytes(tmp_path) -> bytes:
    path = write_rank_trace(
        tmp_path / "ok.0.et",
        [
            make_node(1, "fwd", pb.COMP_NODE, duration_micros=10),
            make_node(2, "ar", pb.COMM_COLL_NODE, data_deps=[1], comm_type=pb.ALL_REDUCE, comm_size=1 << 20),
            make_node(3, "send", pb.COMM_SEND_NODE, data_deps=[2], comm_dst=1, comm_size=64, comm_tag=7),
        ],
    )
    return path.read_bytes()


@fuzz_settings(200)
@given(
    edits=st.lists(
        st.tuples(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=255)),
        min_size=1,
        max_size=6,
    ),
    cut=st.one_of(st.none(), st.integers(min_value=0, max_value=10**6)),
)
def test_damaged_trace_bytes(tmp_path_factory, edits, cut):
    """Flipped bytes and truncation: a trace or one TraceError line."""
    folder = tmp_path_factory.mktemp("bytes")
    data = bytearray(_valid_trace_bytes(folder))
    for position, value in edits:
        data[position % len(data)] = value
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    path = folder / "bad.0.et"
    path.write_bytes(bytes(data))
    answer_or_one_line_error(read_rank_trace, path, 0, limit_s=5)


@fuzz_settings(60)
@given(raw=st.binary(max_size=300))
def test_garbage_trace(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("junk") / "junk.0.et"
    path.write_bytes(raw)
    answer_or_one_line_error(read_rank_trace, path, 0, limit_s=5)
