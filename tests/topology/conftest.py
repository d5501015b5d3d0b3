"""Helpers for the physical-topology tests."""

from __future__ import annotations

from astra_core.topology.physical import PhysicalTopology


def signature(topology: PhysicalTopology) -> tuple:
    """What makes two topologies equal: node count, switches and every directed link."""
    links = sorted(zip(topology.link_src, topology.link_dst, topology.link_bandwidth, topology.link_latency))
    return topology.nodes_count, sorted(topology.switches), links


def route_nodes(topology: PhysicalTopology, src_rank: int, dst_rank: int, tag: int = 0) -> list[int]:
    """The node path of a route, checking that its links chain from src to dst."""
    links = topology.route(src_rank, dst_rank, tag)
    nodes = [topology.hosts[src_rank]]
    for link in links:
        assert topology.link_src[link] == nodes[-1]
        nodes.append(topology.link_dst[link])
    assert nodes[-1] == topology.hosts[dst_rank]
    return nodes
