"""garnetlike: the estimate's flit-hops are the flits the model moves over links
(astra_garnetlike.work).

A message of B bytes is F flits (full packets of ceil(packet_bytes / flit_bytes)
flits, then the rest) and each crosses the H links of the backend's own route:
F x H flit-hops, what the max_flit_hops budget counts at send and what the
links count as flits cross them (``flit_hops()``). The estimate finds them from
the system layer on the analytical model, before (and without) any flit.
"""

from __future__ import annotations

import json

import pytest

from astra_core.api import estimate, simulate
from astra_core.topology.physical import PhysicalTopology


@pytest.mark.parametrize(
    "network, hops",
    [("ring8.yml", 1), ("sw8.yml", 2)],  # a ring step goes to the next NPU; a switch is 2 links
)
def test_flit_hops_of_the_estimate_are_the_ones_the_links_count(reference_dir, network, hops, built_backends):
    # 1 MiB ring all-reduce on 8 NPUs: 448 messages of 32 KiB, 128 flits of 256 B each.
    case = dict(
        workload=reference_dir / "workload/micro/ALL_REDUCE_8npus_1MB/ALL_REDUCE",
        system=reference_dir / "system/ring_1d.json",
        network=reference_dir / f"network/{network}",
        backend="garnetlike",
    )
    est = estimate(**case)
    assert (est.unit, est.messages, est.budgeted, est.work) == (
        "flit-hops",
        448,
        448 * 128 * hops,
        448 * 128 * hops,
    )
    run = simulate(**case)
    backend = built_backends[-1]
    assert est.work == backend.budget.total == run.counters["flit_hops"] == sum(backend.link_flits)


def switch_ring(switches: int, hosts: int) -> PhysicalTopology:
    """``switches`` switches in a ring, ``hosts`` NPUs on each (100 Gbps, 100 ns links)."""
    npus = switches * hosts
    links = []
    for s in range(switches):
        a, b = npus + s, npus + (s + 1) % switches
        links += [(a, b, 12.5, 100.0), (b, a, 12.5, 100.0)]
        for h in range(s * hosts, (s + 1) * hosts):
            links += [(h, a, 12.5, 100.0), (a, h, 12.5, 100.0)]
    return PhysicalTopology(npus + switches, range(npus, npus + switches), links, source="switch ring")


def test_flit_hops_follow_the_backends_own_routes_even_where_they_are_not_the_shortest(
    tmp_path, built_backends
):
    from astra_core.config.system import upstream_system
    from astra_core.topology.ns3_format import write_ns3_topology
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    # A direct all-to-all of 60 KiB per rank on a ring of 6 switches of 2 NPUs each: the
    # up*/down* routes of some pairs go the long way round (they may not turn down-up).
    topology = tmp_path / "ring.txt"
    write_ns3_topology(switch_ring(6, 2), topology)
    system = tmp_path / "system.json"
    system.write_text(json.dumps(upstream_system("direct", 1)))
    node = make_node(
        0, "a2a", pb.COMM_COLL_NODE, comm_type=pb.ALL_TO_ALL, comm_size=60 << 10, is_cpu_op=False
    )
    for rank in range(12):
        write_rank_trace(f"{tmp_path}/a2a.{rank}.et", [node])
    work = {}
    for routing in ("table", "up_down"):
        case = dict(
            workload=f"{tmp_path}/a2a",
            system=system,
            topology=topology,
            backend="garnetlike",
            backend_config={"routing": routing, "packet_bytes": 1000, "flit_bytes": 64},
        )
        est = estimate(**case)
        run = simulate(**case)
        assert est.work == built_backends[-1].budget.total == run.counters["flit_hops"]
        work[routing] = est.work
    assert work["up_down"] > work["table"]
