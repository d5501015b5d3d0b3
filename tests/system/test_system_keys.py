"""system.json keys upstream reads: each one either changes the run as upstream's
does or is refused; none is accepted and silently ignored."""

from __future__ import annotations

import json
import warnings

import pytest

from astra_core.api import simulate
from astra_core.backend import Topology
from astra_core.config.issues import ConfigWarning
from astra_core.config.system import SystemConfig, load_system
from astra_core.errors import ConfigError
from astra_core.plugins import BackendRegistry, load_settings, make_plugin_manager
from astra_core.system.comm_types import CommType
from astra_core.system.simulation import Simulation
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra import ETNode, RankTrace
from astra_core.workload.graph import build_graphs
from astra_core.workload.writer import make_node
from tests.system.conftest import network, system

BASE = {
    "scheduling-policy": "LIFO",
    "collective-optimization": "baseline",
    "preferred-dataset-splits": 4,
    "endpoint-delay": 10,
    "local-mem-bw": 1600,
    **{f"{c}-implementation": ["ring"] for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")},
}


def write_system(tmp_path, **changes) -> str:
    data = {k: v for k, v in {**BASE, **changes}.items() if v is not None}
    path = tmp_path / "system.json"
    path.write_text(json.dumps(data))
    return str(path)


def all_reduce_trace(workload, npus=4, size=1 << 20):
    return workload(
        {
            r: [make_node(1, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=size)]
            for r in range(npus)
        }
    )


# -- upstream features astra does not model: refused when switched on -------------------


@pytest.mark.parametrize(
    "key, value, feature",
    [
        ("model-shared-bus", 1, "upstream's LogGP NPU-memory bus model"),
        ("trace-enabled", 1, "upstream's per-node debug log"),
        ("track-local-mem", 1, "upstream's local memory usage tracker"),
        ("per-node-custom-implementation", "per_node.yaml", "upstream's per-ET-node custom collectives"),
    ],
)
def test_unmodelled_upstream_features_are_refused(tmp_path, key, value, feature):
    # These loaded and then had no effect at all.
    path = write_system(tmp_path, **{key: value})
    with pytest.raises(ConfigError) as info:
        load_system(path)
    message = str(info.value)
    shown = json.dumps(value) if not isinstance(value, str) else repr(value)
    assert message.startswith(f"{path}: {key}: {shown} is not supported by astra ({feature}); ")
    assert "\n" not in message


def test_model_shared_bus_message_says_what_to_do(tmp_path):
    path = write_system(tmp_path, **{"model-shared-bus": 1})
    with pytest.raises(ConfigError) as info:
        load_system(path)
    assert str(info.value) == (
        f"{path}: model-shared-bus: 1 is not supported by astra "
        "(upstream's LogGP NPU-memory bus model); remove the key or set 0"
    )


def test_refused_from_python_too():
    with pytest.raises(ConfigError, match=r"^<python>: trace-enabled: 1 is not supported"):
        SystemConfig("LIFO", "baseline", 4, trace_enabled=True)


def test_switched_off_features_and_bus_parameters_load_and_change_nothing(tmp_path, workload):
    # Upstream's defaults (0) and the LogGP parameters, which upstream reads only
    # with model-shared-bus 1 (MemBus.cc), as does local-reduction-delay (LogGP.cc):
    # accepted with a warning that they change nothing, and indeed they do not.
    prefix = all_reduce_trace(workload)
    net = network(["Ring"], [4], [50.0], [500.0])
    plain = simulate(prefix, write_system(tmp_path), net)
    quiet = write_system(
        tmp_path,
        **{
            "model-shared-bus": 0,
            "trace-enabled": 0,
            "track-local-mem": 0,
            "replay-only": 0,
            "local-mem-trace-filename": "mem.json",
            "L": 100,
            "o": 20,
            "g": 30,
            "G": 0.5,
            "local-reduction-delay": 1000,
        },
    )
    with pytest.warns(ConfigWarning) as caught:
        same = simulate(prefix, quiet, net)
    assert [str(w.message) for w in caught] == [
        f"{quiet}: L, o, g, G, local-reduction-delay: no effect; upstream reads them only in "
        "its LogGP bus model (model-shared-bus 1), which astra does not model",
        f"{quiet}: local-mem-trace-filename: no effect without track-local-mem 1",
    ]
    assert (
        plain.step_ns == same.step_ns == 43_000
    )  # 4 chunks x (6 x (10 + 1720) + 3 x 120 + 10) ns (test_closed_forms)


def test_upstream_defaults_and_2_0_legacy_values_load_without_warnings(tmp_path):
    # The values upstream's own system.json files carry.
    path = write_system(
        tmp_path,
        **{
            "boost-mode": 0,
            "local-reduction-delay": 1,
            "model-shared-bus": 0,
            "L": 0,
            "o": 0,
            "g": 0,
            "G": 0,
            "trace-enabled": 0,
            "replay-only": 0,
            "track-local-mem": 0,
            "intra-dimension-scheduling": "FIFO",
            "inter-dimension-scheduling": "ascending",
        },
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_system(path)


def test_legacy_scheduling_choices_warn_that_they_change_nothing(tmp_path):
    path = write_system(
        tmp_path,
        **{"boost-mode": 1, "intra-dimension-scheduling": "SCF", "inter-dimension-scheduling": "themis"},
    )
    with pytest.warns(ConfigWarning) as caught:
        load_system(path)
    assert [str(w.message) for w in caught] == [
        f"{path}: boost-mode, intra-dimension-scheduling, inter-dimension-scheduling: no effect; "
        "ASTRA-sim 2.0 schedules FIFO within and in ascending order across dimensions, "
        "without boost mode"
    ]


# -- replay-only: every node replays its recorded duration (Workload::issue_replay) -------


def test_replay_only_replays_every_node_type(tmp_path, workload):
    # A chain of four nodes of different types; each replays duration_micros * 1000
    # ns (1 ns when 0) and counts as GPU compute, the CPU op as CPU time.  Without
    # replay-only the MEM_LOAD needs a memory config and the collective is simulated.
    nodes = [
        make_node(1, "fwd", pb.COMP_NODE, duration_micros=5, num_ops=10**12, tensor_size=8),
        make_node(
            2,
            "ar",
            pb.COMM_COLL_NODE,
            data_deps=[1],
            duration_micros=7,
            comm_type=pb.ALL_REDUCE,
            comm_size=1 << 20,
        ),
        make_node(3, "load", pb.MEM_LOAD_NODE, data_deps=[2], duration_micros=2, tensor_size=64),
        make_node(4, "host", pb.COMP_NODE, data_deps=[3], duration_micros=3, is_cpu_op=True),
        make_node(5, "meta", pb.METADATA_NODE, data_deps=[4]),
    ]
    prefix = workload({r: nodes for r in range(4)})
    net = network(["Ring"], [4], [50.0], [500.0])
    # roofline-enabled would time node 1 from num_ops; replay-only wins (issue_replay first).
    sysfile = write_system(tmp_path, **{"replay-only": 1, "roofline-enabled": 1, "peak-perf": 900})
    result = simulate(prefix, sysfile, net)
    assert [r.finish_ns for r in result.ranks] == [17_001] * 4
    assert [r.compute_ns for r in result.ranks] == [14_001] * 4
    assert [r.cpu_ns for r in result.ranks] == [3_000] * 4


# -- a collective without an implementation is an error, not 0 ns -------------------------


@pytest.mark.parametrize(
    "comm_type, key",
    [
        (pb.ALL_REDUCE, "all-reduce"),
        (pb.ALL_GATHER, "all-gather"),
        (pb.REDUCE_SCATTER, "reduce-scatter"),
        (pb.ALL_TO_ALL, "all-to-all"),
    ],
)
def test_collective_without_implementation_names_key_rank_and_node(tmp_path, workload, comm_type, key):
    # It finished in 0 ns; upstream throws "No collective implementation found".
    nodes = [
        make_node(1, "fwd", pb.COMP_NODE, duration_micros=1),
        make_node(2, "coll", pb.COMM_COLL_NODE, data_deps=[1], comm_type=comm_type, comm_size=1 << 20),
    ]
    prefix = workload({r: nodes for r in range(4)})
    path = write_system(tmp_path, **{f"{key}-implementation": None})
    with pytest.raises(ConfigError) as info:
        simulate(prefix, path, network(["Ring"], [4], [50.0], [500.0]))
    name = CommType(comm_type).name
    assert str(info.value) == (
        f"{path}: no {key}-implementation, but rank 0 node 2 (coll) issues "
        f'collective {name}; add "{key}-implementation" with one '
        "algorithm per network dimension"
    )


def test_group_collective_without_implementation_is_an_error(tmp_path, workload):
    nodes = {
        r: [
            make_node(
                1,
                "ar",
                pb.COMM_COLL_NODE,
                comm_type=pb.ALL_REDUCE,
                comm_size=64,
                pg_name="1" if r < 2 else "2",
            )
        ]
        for r in range(4)
    }
    path = write_system(tmp_path, **{"all-reduce-implementation": None})
    with pytest.raises(ConfigError, match=r"no all-reduce-implementation, but rank \d node 1 \(ar\)"):
        simulate(
            workload(nodes),
            path,
            network(["Ring"], [4], [50.0], [500.0]),
            comm_groups={"1": [0, 1], "2": [2, 3]},
        )


def test_unused_collectives_need_no_implementation(tmp_path, workload):
    path = write_system(tmp_path, **{"all-to-all-implementation": None, "all-gather-implementation": None})
    result = simulate(all_reduce_trace(workload), path, network(["Ring"], [4], [50.0], [500.0]))
    assert result.step_ns == 43_000


# -- EXPLICIT: chunks wait in comm_priority order (Sys::get_priority) ------------------------


def waiting_order(policy: str, priorities: tuple[int, int]) -> list[int]:
    """Issue two 4-chunk all-reduces straight into rank 0's system layer (one chunk
    runs per dimension) and list the waiting chunks' collective (0 or 1) in queue order."""
    sysc = system(**{"scheduling-policy": policy, "preferred-dataset-splits": 4})
    net = network(["Ring"], [4], [50.0], [500.0])
    settings = load_settings()
    backend = (
        BackendRegistry(make_plugin_manager(settings=settings), "analytical")
        .get("analytical")
        .factory(Topology(net, None), None)
    )
    traces = [RankTrace(f"r{r}", [], "", None, r) for r in range(4)]
    sim = Simulation(build_graphs(traces), net, sysc, backend, symmetry=False)
    rank = sim.engines[0].sys
    owner = {}
    for index, priority in enumerate(priorities):
        node = ETNode(10 + index, f"ar{index}", pb.COMM_COLL_NODE, comm_priority=priority)
        dataset = rank.generate_collective(CommType.ALL_REDUCE, 1 << 20, None, None, node=node)
        owner[id(dataset)] = index
    queue = rank.active_streams[0]
    return [owner[id(s.dataset)] for s in queue if not s.initialized]


def test_explicit_orders_waiting_chunks_by_comm_priority():
    # Before, EXPLICIT behaved as FIFO: the later collective waited behind the first.
    assert waiting_order("FIFO", (1, 5)) == [0, 0, 0, 1, 1, 1, 1]
    assert waiting_order("LIFO", (1, 5)) == [1, 1, 1, 1, 0, 0, 0]
    assert waiting_order("EXPLICIT", (1, 5)) == [1, 1, 1, 1, 0, 0, 0]
    assert waiting_order("EXPLICIT", (5, 1)) == [0, 0, 0, 1, 1, 1, 1]
    assert waiting_order("EXPLICIT", (3, 3)) == [0, 0, 0, 1, 1, 1, 1]  # ties: issue order


def test_explicit_gives_the_same_step_as_fifo_when_one_collective_runs_at_a_time(tmp_path, workload):
    # A rank runs one GPU communication node at a time (upstream HardwareResource),
    # so with a trace the priorities only order chunks of one collective: equal.
    nodes = [
        make_node(1, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=1 << 20, comm_priority=9),
        make_node(2, "ag", pb.COMM_COLL_NODE, comm_type=pb.ALL_GATHER, comm_size=1 << 18, comm_priority=1),
    ]
    prefix = workload({r: nodes for r in range(4)})
    net = network(["Ring"], [4], [50.0], [500.0])
    fifo = simulate(prefix, write_system(tmp_path, **{"scheduling-policy": "FIFO"}), net)
    explicit = simulate(prefix, write_system(tmp_path, **{"scheduling-policy": "EXPLICIT"}), net)
    assert explicit.step_ns == fifo.step_ns


# -- communicator groups smaller than the network run the configured algorithm -------------


def group_run(workload, comm_type, implementation, dims=((8, "FullyConnected"),), symmetry=True):
    """Two groups of 4 NPUs (0-3, 4-7), one 1 MiB collective each, 4 chunks."""
    npus = 8
    nodes = {
        r: [
            make_node(
                1,
                "coll",
                pb.COMM_COLL_NODE,
                comm_type=comm_type,
                comm_size=1 << 20,
                pg_name="1" if r < 4 else "2",
            )
        ]
        for r in range(npus)
    }
    sizes = [n for n, _ in dims]
    net = network([k for _, k in dims], sizes, [50.0] * len(dims), [500.0] * len(dims))
    return simulate(
        workload(nodes),
        system(implementation, dims=len(dims)),
        net,
        comm_groups={"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]},
        symmetry=symmetry,
    )


def test_group_all_to_all_runs_the_one_configured_direct_algorithm(workload):
    # Upstream CommunicatorGroup::get_collective_plan keeps a one-entry algorithm
    # list for a smaller group; astra ran a ring whatever system.json said
    # (41560 ns).  Direct on FullyConnected: each chunk sends its 3 messages of
    # 64 KiB at once on separate links, T = int(500 + 65536 / (50 * 2^30 / 1e9))
    # = 1720 ns, between one endpoint delay (10 ns) on each side; 4 chunks in a row.
    result = group_run(workload, pb.ALL_TO_ALL, "direct")
    assert result.step_ns == 4 * (10 + 1720 + 10) == 6960
    assert result.messages == 8 * 4 * 3


def test_group_all_reduce_runs_halving_doubling_without_rank_classes(workload):
    # 2 log2(4) = 4 messages per chunk per rank (a ring sends 2 (4 - 1) = 6).
    # Halving-doubling pairs group members by position, not by offset, so rank
    # classes are off and every rank runs.
    result = group_run(workload, pb.ALL_REDUCE, "halvingDoubling")
    assert result.messages == 8 * 4 * 4
    assert result.symmetric is False
    assert result.step_ns == group_run(workload, pb.ALL_REDUCE, "halvingDoubling", symmetry=False).step_ns


def test_group_runs_a_ring_when_system_json_lists_one_algorithm_per_dimension(workload):
    # Upstream replaces a multi-dimensional list by a ring for a smaller group.
    result = group_run(
        workload, pb.ALL_REDUCE, "halvingDoubling", dims=((4, "FullyConnected"), (2, "FullyConnected"))
    )
    assert result.messages == 8 * 4 * 6


def test_double_binary_tree_on_a_smaller_group_is_refused(workload):
    with pytest.raises(ConfigError) as info:
        group_run(workload, pb.ALL_REDUCE, "doubleBinaryTree")
    assert str(info.value) == (
        "<python>: all-reduce-implementation: doubleBinaryTree cannot run on a communicator "
        "group smaller than the network (4 NPUs: 0, 1, 2, 3), which runs on a ring of its "
        "members (upstream reads that ring as a tree); use ring, direct or halvingDoubling, or "
        "list one algorithm per dimension (the group then runs a ring)"
    )
