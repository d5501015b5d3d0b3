"""Degraded and failed cables: bandwidths scaled both ways, routes round a cable that is
down, and a job the failures cut apart refused in one line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import astra
from astra_core.cli import main
from astra_core.cluster.faults import LinkFault, apply_faults
from astra_core.errors import ConfigError
from astra_core.topology.generators import leaf_spine

# 16 hosts (nodes 0-15) on leaves 16-19 (4 hosts each), spines 20 and 21
FABRIC = leaf_spine(16, 4, 2, oversubscription=2.0, host_gbps=100.0)


def test_a_degraded_cable_is_slower_both_ways_and_a_failed_one_is_gone():
    faulty = apply_faults(
        FABRIC, [LinkFault(link=[16, 20], bandwidth=0.25), LinkFault(link=[21, 17], down=True)]
    )
    for src, dst in ((16, 20), (20, 16)):
        assert (
            faulty.link_bandwidth[faulty.link(src, dst)] == FABRIC.link_bandwidth[FABRIC.link(src, dst)] / 4
        )
    for src, dst in ((17, 21), (21, 17)):
        with pytest.raises(KeyError):
            faulty.link(src, dst)
    assert faulty.links_count == FABRIC.links_count - 2
    # leaf 1 (hosts 4-7) now reaches the other leaves over spine 20 only
    for tag in range(64):
        nodes = {faulty.link_dst[link] for link in faulty.route(4, 8, tag)}
        assert 20 in nodes and 21 not in nodes


@pytest.mark.parametrize(
    "fault, message",
    [
        ({"link": [0, 1]}, "faults[0]: link: no cable between nodes 0 and 1"),
        ({"link": [0, 16]}, "faults[0]: give either down: true or a bandwidth fraction in (0, 1]"),
        ({"link": [0, 16], "down": True, "bandwidth": 0.5}, "faults[0]: give either down: true"),
        ({"link": [0, 16, 20], "down": True}, "faults[0]: link: expected two node ids [a, b]"),
    ],
)
def test_bad_faults_are_named(fault, message):
    with pytest.raises(ConfigError) as info:
        apply_faults(FABRIC, [LinkFault(**fault)])
    assert str(info.value).startswith(message)


def test_jobs_route_round_a_spine_that_is_down(cluster):
    jobs = [{"name": "a", "placement": "spread"}, {"name": "b", "placement": "spread"}]
    healthy = astra.simulate_cluster(cluster(jobs))
    down = [{"link": [leaf, 21], "down": True} for leaf in (16, 17, 18, 19)]
    broken = astra.simulate_cluster(cluster(jobs, faults=down))
    topo = broken.report.links.topology
    assert not any(21 in (topo.link_src[i], topo.link_dst[i]) for i in range(topo.links_count))
    for before, after in zip(healthy.jobs, broken.jobs):
        assert after.alone_end_ns > before.alone_end_ns  # half the spine capacity, alone too
        assert after.jct_ns > before.jct_ns
    total = broken.report.links.link_bytes
    a, b = (job.link_bytes for job in broken.jobs)
    assert list(total) == pytest.approx([x + y for x, y in zip(a, b)])


def test_a_job_cut_apart_is_one_line_naming_it_and_the_cut(cluster):
    spec = cluster([{"name": "a"}], faults=[{"link": [4, 17], "down": True}])
    out = CliRunner().invoke(main, ["cluster", str(spec)])
    assert out.exit_code == 1, out.output
    lines = [line for line in out.output.splitlines() if line]
    assert lines == [
        "error: job a: the cables down (4-17) cut NPU 4 off from NPU 0; place the job elsewhere or keep a path up"
    ]
