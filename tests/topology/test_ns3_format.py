"""Upstream's ns-3 topology file: units, round trips, one-line errors naming file and line."""

from __future__ import annotations

import pytest

from astra_core.errors import ConfigError
from astra_core.topology.generators import fat_tree, gpu_cluster, leaf_spine, torus
from astra_core.topology.ns3_format import (
    format_ns3_topology,
    parse_ns3_topology,
    read_ns3_topology,
    write_ns3_topology,
)
from astra_core.topology.physical import PhysicalTopology
from tests.topology.conftest import signature

STAR = """5 1 4
4
0 4 100Gbps 0.001ms 0
1 4 400Gbps 500ns 0
4 2 25Gbps 0.005ms 0
3 4 800Mbps 2us 0.01
"""


def test_hand_written_file_gives_exact_links(tmp_path):
    path = tmp_path / "star.txt"
    path.write_text(STAR)
    t = read_ns3_topology(path)
    assert (t.nodes_count, sorted(t.switches), t.hosts) == (5, [4], [0, 1, 2, 3])
    # 100 Gbps = 10^11 bit/s = 12.5 bytes/ns; 0.001 ms = 1000 ns; each line is a cable (two links).
    assert list(zip(t.link_src, t.link_dst, t.link_bandwidth, t.link_latency)) == [
        (0, 4, 12.5, 1000.0),
        (4, 0, 12.5, 1000.0),
        (1, 4, 50.0, 500.0),
        (4, 1, 50.0, 500.0),
        (4, 2, 3.125, 5000.0),
        (2, 4, 3.125, 5000.0),
        (3, 4, 0.1, 2000.0),
        (4, 3, 0.1, 2000.0),
    ]
    assert t.source == str(path)


@pytest.mark.parametrize(
    "rate, bytes_per_ns",
    [
        ("1Gbps", 0.125),
        ("1Gb/s", 0.125),
        ("8Gbps", 1.0),
        ("1GBps", 1.0),
        ("1GB/s", 1.0),
        ("1000Mbps", 0.125),
        ("1000Mb/s", 0.125),
        ("1000000Kbps", 0.125),
        ("1000000kbps", 0.125),
        ("1000000000bps", 0.125),
        ("125MBps", 0.125),
        ("125000KB/s", 0.125),
        ("1000000000b/s", 0.125),
        ("1GiB/s", 2**30 / 1e9),
        ("1Gib/s", 2**30 / 8e9),
        ("1024MiB/s", 2**30 / 1e9),
        ("12.5GBps", 12.5),
    ],
)
def test_rate_units(rate, bytes_per_ns):
    t = parse_ns3_topology(f"2 0 1\n\n0 1 {rate} 1ns 0\n", "r.txt")
    assert t.link_bandwidth[0] == pytest.approx(bytes_per_ns, rel=1e-15)


@pytest.mark.parametrize(
    "delay, ns",
    [
        ("1s", 1e9),
        ("0.001ms", 1000.0),
        ("0.0005ms", 500.0),
        ("0.00125ms", 1250.0),
        ("0.5us", 500.0),
        ("1000ns", 1000.0),
        ("936.25ns", 936.25),
        ("1500ps", 1.5),
        ("0ns", 0.0),
        ("1e3ns", 1000.0),
    ],
)
def test_delay_units_are_exact(delay, ns):
    t = parse_ns3_topology(f"2 0 1\n\n0 1 1Gbps {delay} 0\n", "d.txt")
    assert t.link_latency[0] == ns


def test_upstream_layouts_blank_switch_line_and_one_switch():
    # upstream's ring examples leave line 2 empty when there are no switches
    ring = "8 0 8\n\n" + "".join(f"{i} {(i + 1) % 8} 25Gbps 0.005ms 0\n" for i in range(8))
    t = parse_ns3_topology(ring, "ring.txt")
    assert (t.npus_count, t.links_count, t.link_bandwidth[0], t.link_latency[0]) == (8, 16, 3.125, 5000.0)
    star = "9 1 8\n8\n" + "".join(f"8 {i} 400Gbps 0.0005ms 0\n" for i in range(8))
    t = parse_ns3_topology(star, "star.txt")
    assert (t.npus_count, sorted(t.switches), t.link_bandwidth[0], t.link_latency[0]) == (8, [8], 50.0, 500.0)
    # a switch in the middle of the id range: NPU ranks skip it
    t = parse_ns3_topology("3 1 2\n1\n0 1 1Gbps 1ns 0\n2 1 1Gbps 1ns 0\n", "mid.txt")
    assert t.hosts == [0, 2]


@pytest.mark.parametrize(
    "topology",
    [
        fat_tree(4),
        leaf_spine(12, 3, 2, oversubscription=3.0, host_gbps=25),
        torus([3, 3, 2]),
        gpu_cluster(2, 4),
        torus([4, 4], bandwidth_gbps=12.3, latency_ns=0.1),
    ],
    ids=["fat-tree", "leaf-spine-oversubscribed", "torus3d", "gpu-cluster", "odd-values"],
)
def test_round_trip(tmp_path, topology):
    path = tmp_path / "t.txt"
    write_ns3_topology(topology, path)
    back = read_ns3_topology(path)
    assert signature(back) == signature(topology)
    assert list(zip(back.link_src, back.link_dst)) == list(zip(topology.link_src, topology.link_dst))
    assert format_ns3_topology(back) == path.read_text()


def test_written_file_uses_gbps_and_ns(tmp_path):
    path = tmp_path / "ls.txt"
    write_ns3_topology(leaf_spine(4, 2, 1), path)
    lines = path.read_text().splitlines()
    assert lines[:3] == ["7 3 6", "4 5 6", "0 4 100Gbps 1000ns 0"]
    assert lines[-1] == "5 6 200Gbps 1000ns 0"  # 2 hosts x 100 Gbps over 1 spine
    assert len(lines) == 2 + 6


def test_one_way_link_cannot_be_written(tmp_path):
    t = PhysicalTopology(2, [], [(0, 1, 1.0, 1.0), (1, 0, 2.0, 1.0)], source="asym")
    with pytest.raises(ConfigError, match="^asym: link 0 -> 1 has no reverse link of the same bandwidth"):
        write_ns3_topology(t, tmp_path / "x.txt")


GOOD_LINKS = "0 4 100Gbps 0.001ms 0\n1 4 100Gbps 0.001ms 0\n2 4 100Gbps 0.001ms 0\n3 4 100Gbps 0.001ms 0\n"


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("", 1, "empty file"),
        ("5 1\n4\n" + GOOD_LINKS, 1, "header must be '<nodes> <switches> <links>', got 2 fields"),
        ("5 one 4\n4\n" + GOOD_LINKS, 1, "switch count must be an integer, got 'one'"),
        ("5 5 4\n4\n" + GOOD_LINKS, 1, "switch count must be 0..4 (at least one NPU), got 5"),
        ("5 1 10\n4\n" + GOOD_LINKS, 1, "header says 10 links, the file has 4"),
        ("5 1 3\n4\n" + GOOD_LINKS, 6, "more link lines than the 3 the header (line 1) declares"),
        ("5 1 4\n7\n" + GOOD_LINKS, 2, "unknown node id 7 in switch id (nodes are 0..4)"),
        ("5 2 4\n4\n" + GOOD_LINKS, 2, "header says 2 switches, this line lists 1 ids"),
        ("5 2 4\n4 4\n" + GOOD_LINKS, 2, "switch id 4 listed twice"),
        ("5 1 4\nfour\n" + GOOD_LINKS, 2, "switch id must be an integer, got 'four'"),
        ("5 1 4\n4\n" + GOOD_LINKS.replace("2 4 ", "2 9 "), 5, "unknown node id 9 in link destination"),
        ("5 1 4\n4\n" + GOOD_LINKS.replace("1 4 ", "x 4 "), 4, "link source must be an integer, got 'x'"),
        ("5 1 4\n4\n" + GOOD_LINKS.replace("1 4 ", "1 1 "), 4, "link from node 1 to itself"),
        ("5 1 4\n4\n" + GOOD_LINKS.replace("3 4 ", "4 0 "), 6, "nodes 4 and 0 are already linked on line 3"),
        ("5 1 4\n\n4\n\n" + GOOD_LINKS.replace("3 4 100Gbps", "3 4 100Gbs"), 8, "unknown unit 'Gbs'"),
        (
            "5 1 4\n4\n" + GOOD_LINKS.replace("3 4 100Gbps", "3 4 100"),
            6,
            "rate '100' has no unit (e.g. 100Gbps)",
        ),
        (
            "5 1 4\n4\n" + GOOD_LINKS.replace("3 4 100Gbps", "3 4 fastGbps"),
            6,
            "rate 'fastGbps' is not a number",
        ),
        ("5 1 4\n4\n" + GOOD_LINKS.replace("3 4 100Gbps", "3 4 0Gbps"), 6, "rate must be > 0, got 0Gbps"),
        (
            "5 1 4\n4\n" + GOOD_LINKS.replace("3 4 100Gbps 0.001ms", "3 4 100Gbps 1min"),
            6,
            "unknown unit 'min'",
        ),
        (
            "5 1 4\n4\n" + GOOD_LINKS.replace("3 4 100Gbps 0.001ms", "3 4 100Gbps -1ns"),
            6,
            "delay must be >= 0",
        ),
        (
            "5 1 4\n4\n" + GOOD_LINKS.replace("0.001ms 0\n3", "0.001ms x\n3"),
            5,
            "error rate must be a number, got 'x'",
        ),
        (
            "5 1 4\n4\n" + GOOD_LINKS.replace("0.001ms 0\n3", "0.001ms 2\n3"),
            5,
            "error rate must be in [0, 1], got 2",
        ),
        ("5 1 4\n4\n" + GOOD_LINKS.replace("0.001ms 0\n3", "0.001ms\n3"), 5, "got 4 fields"),
    ],
)
def test_bad_input_is_one_line_naming_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        read_ns3_topology(path)
    text = str(exc.value)
    assert "\n" not in text
    assert text.startswith(f"{path}: line {line}: "), text
    assert message in text


def test_disconnected_graph_names_the_file(tmp_path):
    path = tmp_path / "split.txt"
    path.write_text("5 1 3\n4\n0 4 1Gbps 1ns 0\n1 4 1Gbps 1ns 0\n2 3 1Gbps 1ns 0\n")
    with pytest.raises(ConfigError) as exc:
        read_ns3_topology(path)
    assert str(exc.value) == f"{path}: disconnected: NPU rank(s) 2, 3 cannot be reached from rank 0"


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nope.txt: file not found"):
        read_ns3_topology(tmp_path / "nope.txt")
