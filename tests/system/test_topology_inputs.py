"""How a physical topology meets the logical dimensions: mismatches are one-line errors."""

import pytest

from astra_core.api import resolve_network, simulate
from astra_core.errors import ConfigError, TraceError
from astra_core.topology.physical import PhysicalTopology
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.writer import make_node
from tests.system.conftest import network, system


def _star(hosts: int) -> PhysicalTopology:
    """``hosts`` NPUs on one switch (node ``hosts``), 100 Gbps, 1000 ns."""
    links = []
    for h in range(hosts):
        links += [(h, hosts, 12.5, 1000.0), (hosts, h, 12.5, 1000.0)]
    return PhysicalTopology(hosts + 1, [hosts], links, source="star.txt")


def test_dims_must_multiply_to_the_npu_count():
    with pytest.raises(ConfigError) as exc:
        resolve_network(None, _star(16), [4, 8])
    assert str(exc.value) == "star.txt: 16 NPUs do not fit the logical dimensions 4x8 (32 NPUs)"


def test_network_yml_must_have_the_topologys_npu_count():
    with pytest.raises(ConfigError, match=r"star.txt: 16 NPUs, but network.yml .* has 8"):
        resolve_network(network(["Ring"], [8], [50.0], [500.0]), _star(16), None)


def test_logical_dimensions_of_a_physical_topology():
    net, physical = resolve_network(None, _star(16), [4, 4])
    assert [d.npus for d in net.dims] == [4, 4] and physical.npus_count == 16
    net, _ = resolve_network(None, _star(16), None)
    assert [d.npus for d in net.dims] == [16]


def test_trace_count_must_match_the_topology(workload):
    node = make_node(1, "k", pb.COMP_NODE, duration_micros=1)
    prefix = workload({r: [node] for r in range(8)})
    with pytest.raises(TraceError, match="16 NPUs need 16 trace files"):
        simulate(prefix, system(), topology=_star(16), backend="analytical-congestion")


def test_no_network_at_all_is_an_error(workload):
    with pytest.raises(ConfigError, match=r"no network: give network.yml \(--network\)"):
        resolve_network(None, None, None)


@pytest.mark.parametrize(
    "links, message",
    [
        ([(0, 7, 12.5, 1.0)], "link 0 -> 7: unknown node id 7 (nodes are 0..2)"),
        ([(0, 2, 0.0, 1.0)], "link 0 -> 2: bandwidth must be > 0, got 0.0"),
        ([(0, 2, 12.5, 1.0), (2, 0, 12.5, 1.0)], "disconnected: NPU rank(s) 1 cannot be reached from rank 0"),
    ],
)
def test_bad_links_are_one_line_errors(links, message):
    with pytest.raises(ConfigError) as exc:
        PhysicalTopology(3, [2], links, source="t.txt")
    assert str(exc.value) == f"t.txt: {message}"
