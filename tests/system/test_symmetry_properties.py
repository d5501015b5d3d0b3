"""Property: rank symmetry never changes a result.

Random small runs (2-16 NPUs over 1-3 dimensions) built from the shapes real
workloads have: point-to-point rings with random offsets, tags (negative ones
included) and sizes; collectives over random dimensions; tensor-, data- and
pipeline-parallel communicator groups; MoE all-to-alls in groups; compute that
differs between ranks; node ids numbered differently on some ranks. Each run
is simulated with and without rank symmetry: per rank the finish, GPU and CPU
compute, communication and exposed times, the message counts, the warnings,
and whether and where it deadlocks must be identical.

A few seconds by default (a fixed, derandomized set of examples);
``ASTRA_FUZZ_EXAMPLES=N`` runs N random examples per test.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from astra_core.api import simulate
from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.errors import AstraError, SimulationDeadlock
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.writer import make_node, write_rank_trace
from tests.fuzz.budget import fuzz_settings


class Grid:
    """Ranks as points of the dimensions (dimension 0 fastest), as astra numbers them."""

    def __init__(self, sizes: list[int]):
        self.sizes = sizes
        self.npus = 1
        for size in sizes:
            self.npus *= size

    def coords(self, rank: int) -> list[int]:
        out = []
        for size in self.sizes:
            out.append(rank % size)
            rank //= size
        return out

    def rank(self, coords) -> int:
        rank, stride = 0, 1
        for c, size in zip(coords, self.sizes):
            rank += (c % size) * stride
            stride *= size
        return rank

    def shift(self, rank: int, offsets, sign: int = 1) -> int:
        return self.rank([c + sign * o for c, o in zip(self.coords(rank), offsets)])


@dataclass
class Scenario:
    """One random run: network, system.json, comm groups and per-rank node specs."""

    grid: Grid
    kinds: list[str]
    bandwidth: list[float]
    latency: list[float]
    system: dict
    groups: dict[str, list[int]] = field(default_factory=dict)
    # per op: (depends on the previous op, {rank: [(name, type, attrs)]})
    ops: list[tuple[bool, dict[int, list[tuple]]]] = field(default_factory=list)
    reversed_ids: set[int] = field(default_factory=set)  # ranks numbering nodes backwards

    def write(self, prefix: str) -> None:
        for rank in range(self.grid.npus):
            specs, deps = [], []
            previous: list[int] = []
            for chained, per_rank in self.ops:
                mine = per_rank.get(rank, [])
                if not mine:
                    continue
                first = len(specs)
                for spec in mine:
                    specs.append(spec)
                    deps.append(list(previous) if chained else [])
                previous = list(range(first, len(specs)))
            count = len(specs)
            ids = (
                [count - p for p in range(count)]
                if rank in self.reversed_ids
                else [p + 1 for p in range(count)]
            )
            nodes = [
                make_node(ids[p], name, kind, data_deps=[ids[d] for d in deps[p]], **attrs)
                for p, (name, kind, attrs) in enumerate(specs)
            ]
            write_rank_trace(f"{prefix}.{rank}.et", nodes)

    def __repr__(self) -> str:  # what hypothesis prints for a failing example
        lines = [
            f"Scenario(sizes={self.grid.sizes}, kinds={self.kinds}, bw={self.bandwidth}, "
            f"lat={self.latency}, system={self.system}, groups={self.groups}, "
            f"reversed_ids={sorted(self.reversed_ids)})"
        ]
        for i, (chained, per_rank) in enumerate(self.ops):
            lines.append(f"  op {i} chained={chained}:")
            for rank in sorted(per_rank):
                lines.append(f"    rank {rank}: {per_rank[rank]}")
        return "\n".join(lines)


_POW2 = {2, 4, 8, 16}
_COLLECTIVES = [pb.ALL_REDUCE, pb.ALL_GATHER, pb.REDUCE_SCATTER, pb.ALL_TO_ALL]


@st.composite
def _pattern(draw, grid: Grid):
    """A function rank -> small key: which ranks behave alike (all, parity, a coordinate, each)."""
    choice = draw(st.sampled_from(["all", "parity", "mod4", "coord", "coord_parity", "rank"]))
    dim = draw(st.integers(0, len(grid.sizes) - 1))
    return {
        "all": lambda r: 0,
        "parity": lambda r: r % 2,
        "mod4": lambda r: r % 4,
        "coord": lambda r: grid.coords(r)[dim],
        "coord_parity": lambda r: grid.coords(r)[dim] % 2,
        "rank": lambda r: r,
    }[choice]


@st.composite
def _base(draw) -> Scenario:
    ndims = draw(st.integers(1, 3))
    sizes = draw(
        st.lists(st.sampled_from([2, 3, 4]), min_size=ndims, max_size=ndims).filter(
            lambda s: Grid(s).npus <= 16
        )
    )
    grid = Grid(sizes)
    kinds = [draw(st.sampled_from(["Ring", "FullyConnected", "Switch"])) for _ in sizes]
    bandwidth = [draw(st.sampled_from([25.0, 50.0, 200.0])) for _ in sizes]
    latency = [draw(st.sampled_from([100.0, 500.0, 700.0])) for _ in sizes]
    algorithms = []
    for size in sizes:
        options = ["ring", "direct", "direct1", "direct2"] + (
            ["halvingDoubling", "doubleBinaryTree"] if size in _POW2 else []
        )
        algorithms.append(draw(st.sampled_from(options)))
    if draw(st.integers(0, 5)) == 0:  # one ring / direct exchange over every NPU
        algorithms = [
            draw(
                st.sampled_from(
                    ["oneRing", "oneDirect"] + (["oneHalvingDoubling"] if grid.npus in _POW2 else [])
                )
            )
        ]
    system = {
        "scheduling-policy": draw(st.sampled_from(["LIFO", "FIFO"])),
        "endpoint-delay": draw(st.sampled_from([0, 10])),
        "active-chunks-per-dimension": draw(st.integers(1, 2)),
        "preferred-dataset-splits": draw(st.integers(1, 4)),
        "collective-optimization": draw(st.sampled_from(["localBWAware", "baseline"])),
        "local-mem-bw": 1600,
        "all-reduce-implementation": algorithms,
        "all-gather-implementation": algorithms,
        "reduce-scatter-implementation": algorithms,
        "all-to-all-implementation": [
            a if "alving" not in a and a != "doubleBinaryTree" else "ring" for a in algorithms
        ],
    }
    scenario = Scenario(grid, kinds, bandwidth, latency, system)
    if draw(st.integers(0, 3)) == 0:
        pattern = draw(_pattern(grid))
        scenario.reversed_ids = {r for r in range(grid.npus) if pattern(r) % 2}
    return scenario


def _p2p_ring(draw, sc: Scenario) -> dict[int, list[tuple]]:
    """Rank r sends to r + offset and receives from r - offset; tags and sizes
    depend on the sender through a pattern; sometimes a receive expects its own
    tag instead of the sender's (a mismatch may deadlock)."""
    grid = sc.grid
    offsets = [draw(st.integers(0, size - 1)) for size in grid.sizes]
    if not any(offsets):
        offsets[draw(st.integers(0, len(offsets) - 1))] = 1
    key = draw(_pattern(grid))
    tags = draw(st.lists(st.integers(-3, 3), min_size=4, max_size=4))
    sizes = draw(st.lists(st.sampled_from([64, 1024, 4096]), min_size=4, max_size=4))
    own_tag = draw(st.integers(0, 7)) == 0
    out = {}
    for r in range(grid.npus):
        dst, src = grid.shift(r, offsets), grid.shift(r, offsets, -1)
        mine, theirs = key(r) % 4, key(src) % 4
        out[r] = [
            ("send", pb.COMM_SEND_NODE, dict(comm_dst=dst, comm_size=sizes[mine], comm_tag=tags[mine])),
            (
                "recv",
                pb.COMM_RECV_NODE,
                dict(comm_src=src, comm_size=sizes[theirs], comm_tag=tags[mine if own_tag else theirs]),
            ),
        ]
    return out


def _collective(draw, sc: Scenario) -> dict[int, list[tuple]]:
    """One collective on every rank over random dimensions; rarely some ranks skip it."""
    grid = sc.grid
    comm_type = draw(st.sampled_from(_COLLECTIVES))
    size = draw(st.sampled_from([4096, 65536, 1 << 20]))
    involved = None
    if len(grid.sizes) > 1 and draw(st.booleans()):
        involved = draw(
            st.lists(st.booleans(), min_size=len(grid.sizes), max_size=len(grid.sizes)).filter(any)
        )
    skip = draw(_pattern(grid)) if draw(st.integers(0, 9)) == 0 else None
    node = ("coll", pb.COMM_COLL_NODE, dict(comm_type=comm_type, comm_size=size, involved_dim=involved))
    return {r: [node] for r in range(grid.npus) if skip is None or skip(r) % 2 == 0}


def _group_family(draw, sc: Scenario) -> dict[int, str]:
    """Communicator groups of one kind (lines along a dimension, as tensor or data
    parallel groups, or blocks of consecutive ranks), listed in ascending,
    rotated or reversed order; returns rank -> its group's name."""
    grid = sc.grid
    options = [("line", d) for d in range(len(grid.sizes))]
    options += [("block", g) for g in range(2, grid.npus) if grid.npus % g == 0]
    kind, arg = draw(st.sampled_from(options))
    members_of: dict[int, tuple[int, ...]] = {}
    for r in range(grid.npus):
        if kind == "line":
            members = []
            for c in range(grid.sizes[arg]):
                coords = grid.coords(r)
                coords[arg] = c
                members.append(grid.rank(coords))
        else:
            start = r - r % arg
            members = list(range(start, start + arg))
        members_of[r] = tuple(members)
    listing = draw(st.sampled_from(["ascending", "rotated", "reversed", "mixed"]))
    known = {frozenset(m): name for name, m in sc.groups.items()}
    names: dict[int, str] = {}
    for members in sorted(set(members_of.values())):
        name = known.get(frozenset(members))
        if name is None:
            listed = list(members)
            how = listing if listing != "mixed" else draw(st.sampled_from(["ascending", "reversed"]))
            if how == "rotated":
                k = draw(st.integers(0, len(listed) - 1))
                listed = listed[k:] + listed[:k]
            elif how == "reversed":
                listed.reverse()
            name = str(len(sc.groups) + 1)
            sc.groups[name] = listed
        for r in members:
            names[r] = name
    return names


def _group_collective(draw, sc: Scenario) -> dict[int, list[tuple]]:
    """A collective in each rank's communicator group (TP/DP all-reduce, MoE all-to-all)."""
    names = _group_family(draw, sc)
    comm_type = draw(st.sampled_from(_COLLECTIVES))
    size = draw(st.sampled_from([4096, 65536, 1 << 20]))
    return {
        r: [("group_coll", pb.COMM_COLL_NODE, dict(comm_type=comm_type, comm_size=size, pg_name=names[r]))]
        for r in range(sc.grid.npus)
    }


def _pipeline(draw, sc: Scenario) -> dict[int, list[tuple]]:
    """Pipeline stages along a dimension: every stage but the last sends its
    activations to the next, every stage but the first receives them."""
    grid = sc.grid
    dim = draw(st.integers(0, len(grid.sizes) - 1))
    size = draw(st.sampled_from([1024, 65536]))
    tag = draw(st.integers(-2, 2))
    step = [0] * len(grid.sizes)
    step[dim] = 1
    out: dict[int, list[tuple]] = {}
    for r in range(grid.npus):
        stage = grid.coords(r)[dim]
        nodes = []
        if stage > 0:
            nodes.append(
                (
                    "recv_act",
                    pb.COMM_RECV_NODE,
                    dict(comm_src=grid.shift(r, step, -1), comm_size=size, comm_tag=tag),
                )
            )
        if stage < grid.sizes[dim] - 1:
            nodes.append(
                (
                    "send_act",
                    pb.COMM_SEND_NODE,
                    dict(comm_dst=grid.shift(r, step), comm_size=size, comm_tag=tag),
                )
            )
        out[r] = nodes
    return out


def _compute(draw, sc: Scenario) -> dict[int, list[tuple]]:
    """A kernel (or a CPU op) whose duration depends on the rank through a pattern."""
    key = draw(_pattern(sc.grid))
    durations = draw(st.lists(st.integers(1, 5), min_size=4, max_size=4))
    cpu = draw(st.integers(0, 4)) == 0
    return {
        r: [("kernel", pb.COMP_NODE, dict(duration_micros=durations[key(r) % 4], is_cpu_op=cpu or None))]
        for r in range(sc.grid.npus)
    }


_OPS = {
    "p2p": _p2p_ring,
    "collective": _collective,
    "group": _group_collective,
    "pipeline": _pipeline,
    "compute": _compute,
}


def _scenarios(kinds: list[str], max_ops: int = 4):
    """Scenarios of 1..``max_ops`` operations drawn from ``kinds``."""

    @st.composite
    def build(draw):
        sc = draw(_base())
        for _ in range(draw(st.integers(1, max_ops))):
            op = _OPS[draw(st.sampled_from(kinds))]
            chained = draw(st.integers(0, 3)) > 0
            sc.ops.append((chained, op(draw, sc)))
        return sc

    return build()


def _outcome(sc: Scenario, prefix: str, symmetry: bool):
    """What a run gives: per-rank times, message counts and warnings; or the
    deadlock's message and ranks; or another error's class and message."""
    network = NetworkConfig.from_dict(
        {"topology": sc.kinds, "npus_count": sc.grid.sizes, "bandwidth": sc.bandwidth, "latency": sc.latency}
    )
    system = SystemConfig.from_dict(sc.system)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = simulate(prefix, system, network, comm_groups=sc.groups, symmetry=symmetry)
        except SimulationDeadlock as exc:
            return "deadlock", str(exc), sorted(exc.waiting)
        except AstraError as exc:
            return "error", type(exc).__name__, str(exc)
    ranks = [
        (r.rank, r.finish_ns, r.compute_ns, r.cpu_ns, r.comm_ns, r.exposed_comm_ns) for r in result.ranks
    ]
    return ("finished", ranks, result.messages, result.message_bytes, [str(w.message) for w in caught])


def _check(sc: Scenario) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "wl")
        sc.write(prefix)
        fast = _outcome(sc, prefix, True)
        full = _outcome(sc, prefix, False)
    assert fast == full


@fuzz_settings(12)
@given(_scenarios(["p2p", "compute"]))
def test_point_to_point_rings(sc):
    _check(sc)


@fuzz_settings(12)
@given(_scenarios(["group", "pipeline", "compute"]))
def test_parallel_groups_and_pipelines(sc):
    _check(sc)


@fuzz_settings(12)
@given(_scenarios(["collective", "compute"]))
def test_collectives_over_dimensions(sc):
    _check(sc)


@fuzz_settings(12)
@given(_scenarios(list(_OPS), max_ops=5))
def test_mixed_workloads(sc):
    _check(sc)
