"""Degraded and failed cables: bandwidths scaled both ways, routes round a cable that is
down, and a job the failures cut apart refused in one line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import astra
from astra_core.cli import main
from astra_core.errors import ConfigError
from astra_core.topology.faults import LinkFault, apply_faults
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


# -- faults during the run (at_us, until_us) -------------------------------------------

SPINE_21 = (16, 17, 18, 19)  # the leaves' cables to spine 21


@pytest.mark.parametrize("backend", ["flow", "analytical-congestion"])
@pytest.mark.parametrize("fault", [{"down": True}, {"bandwidth": 0.5}])
def test_a_fault_from_the_start_to_past_the_end_is_the_whole_run_fault(cluster, backend, fault):
    # the links change at 0 ns, before any message, instead of before the run: the same
    # routes (the links left keep their order at every switch), so the same times
    jobs = [{"name": "a", "placement": "spread"}, {"name": "b", "placement": "spread"}]
    whole = [{"link": [leaf, 21], **fault} for leaf in SPINE_21]
    timed = [{**f, "at_us": 0, "until_us": 10**6} for f in whole]
    expected = astra.simulate_cluster(cluster(jobs, backend=backend, faults=whole))
    got = astra.simulate_cluster(cluster(jobs, backend=backend, faults=timed))
    healthy = astra.simulate_cluster(cluster(jobs, backend=backend))
    for e, g, h in zip(expected.jobs, got.jobs, healthy.jobs):
        assert (g.iteration_ns, g.alone_iteration_ns) == (e.iteration_ns, e.alone_iteration_ns)
        if fault.get("bandwidth"):
            assert g.alone_end_ns > h.alone_end_ns


@pytest.mark.parametrize("backend", ["flow", "analytical-congestion"])
def test_a_fault_after_the_jobs_end_changes_nothing(cluster, backend):
    jobs = [{"name": "a", "placement": "spread"}, {"name": "b", "placement": "spread"}]
    healthy = astra.simulate_cluster(cluster(jobs, backend=backend))
    late = int(max(j.end_ns for j in healthy.jobs) / 1000) + 1
    faults = [{"link": [leaf, 21], "down": True, "at_us": late} for leaf in SPINE_21]
    broken = astra.simulate_cluster(cluster(jobs, backend=backend, faults=faults))
    assert [j.iteration_ns for j in broken.jobs] == [j.iteration_ns for j in healthy.jobs]


def test_a_cable_that_degrades_or_fails_mid_run_leaves_a_job_on_other_links_exact(cluster):
    # packed: job a on leaves 16-17, job b on leaves 18-19. Leaf 16's cable to spine 21
    # slows to a tenth, or fails, at 300 us: the flows it reaches, or moves to spine 20,
    # are job a's, so job b keeps its times to the ns.
    jobs = [{"name": "a"}, {"name": "b"}]
    healthy = astra.simulate_cluster(cluster(jobs))
    slow = {"link": [16, 21], "bandwidth": 0.1}
    slow_mid = astra.simulate_cluster(cluster(jobs, faults=[{**slow, "at_us": 300}]))
    slow_whole = astra.simulate_cluster(cluster(jobs, faults=[slow]))
    down_mid = astra.simulate_cluster(cluster(jobs, faults=[{"link": [16, 21], "down": True, "at_us": 300}]))
    for run in (slow_mid, down_mid):
        assert run.jobs[1].iteration_ns == healthy.jobs[1].iteration_ns and run.jobs[1].slowdown == 1.0
    # slowed from 300 us: slower than healthy, faster than slowed from the start
    assert healthy.jobs[0].jct_ns < slow_mid.jobs[0].jct_ns < slow_whole.jobs[0].jct_ns

    # flows that moved lose no byte and send none twice: the bytes leaving the hosts
    # are the healthy run's, and the failed cable carried only what crossed it before
    def host_out(run):
        links = run.report.links
        topo = links.topology
        return sum(b for i, b in enumerate(links.link_bytes) if topo.link_src[i] < 16)

    assert host_out(down_mid) == pytest.approx(host_out(healthy))
    topo = down_mid.report.links.topology
    cable = topo.link(21, 16)  # into leaf 16: job a's traffic from leaf 17
    assert 0 < down_mid.report.links.link_bytes[cable] < healthy.report.links.link_bytes[cable]


@pytest.mark.parametrize(
    "faults, message",
    [
        (
            [{"link": [16, 21], "down": True, "at_us": 50, "until_us": 50}],
            "faults[0]: until_us: 50 is not after at_us 50",
        ),
        (
            [
                {"link": [16, 21], "down": True, "at_us": 10, "until_us": 90},
                {"link": [21, 16], "bandwidth": 0.5, "at_us": 80},
            ],
            "faults[1]: cable 21-16 is also faulty in faults[0] at the same time (10-90 us)",
        ),
        (
            [{"link": [4, 17], "down": True, "at_us": 20, "until_us": 70}],
            "job a: the cables down (4-17 20-70 us) cut NPU 4 off from NPU 0",
        ),
    ],
)
def test_bad_timed_faults_are_one_line(cluster, faults, message):
    out = CliRunner().invoke(main, ["cluster", str(cluster([{"name": "a"}], faults=faults))])
    assert out.exit_code == 1, out.output
    lines = [line for line in out.output.splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), lines


@pytest.mark.parametrize("backend", ["analytical", "garnetlike"])
def test_a_backend_that_cannot_change_links_says_so(cluster, backend):
    spec = cluster([{"name": "a"}], backend=backend, faults=[{"link": [16, 21], "down": True, "at_us": 5}])
    out = CliRunner().invoke(main, ["cluster", str(spec)])
    assert out.exit_code == 1, out.output
    assert out.output.strip() == (
        f"error: faults: backend {backend} cannot change links during a run (faults with at_us or "
        "until_us); use flow or analytical-congestion, or faults for the whole run"
    )


def test_a_fault_that_starts_as_another_ends_holds_whatever_their_order():
    from astra_core.topology.faults import fault_changes

    first = LinkFault(link=[16, 20], down=True, at_us=10, until_us=20)
    second = LinkFault(link=[20, 16], bandwidth=0.5, at_us=20, until_us=30)
    full = FABRIC.link_bandwidth[FABRIC.link(16, 20)]
    for faults in ([first, second], [second, first]):
        at_20 = {c.at_ns: c.bytes_per_ns for c in fault_changes(FABRIC, faults)}[20_000.0]
        assert at_20 == {FABRIC.link(16, 20): full / 2, FABRIC.link(20, 16): full / 2}


@pytest.mark.parametrize("key", ["at_us", "until_us"])
def test_a_fault_later_than_float_ns_can_count_is_refused_when_read(cluster, key):
    """Times are float ns, whole up to 2^53 ns: a fault at 1e306 us would be an infinite
    delay in the event queue (a traceback, were it not refused)."""
    fault = {"link": [16, 21], "down": True, "at_us": 0, key: 1e306}
    spec = cluster([{"name": "a"}], faults=[fault])
    out = CliRunner().invoke(main, ["cluster", str(spec)])
    assert out.exit_code == 1, out.output
    assert out.output.strip() == f"error: {spec}: faults[0].{key}: must be <= 9.0072e+12, got 1e+306"


def test_the_cluster_links_chart_marks_faulty_cables_busiest_first(cluster):
    """The cluster's links.png lists the busiest links busiest first, hatches and labels
    in red the links of a degraded cable, and names a cable down all run in its title."""
    from astra_core.cluster.plots import job_links_figure
    from astra_core.report.plots import FAULT_MARKS

    jobs = [{"name": "a", "placement": "spread"}, {"name": "b", "placement": "spread"}]
    faults = [{"link": [16, 20], "bandwidth": 0.5}, {"link": [17, 21], "down": True}]
    result = astra.simulate_cluster(cluster(jobs, faults=faults))
    fig = job_links_figure(result)
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    topo = result.report.links.topology
    by_name = {
        f"{topo.link_src[i]}→{topo.link_dst[i]}": result.report.links.link_bytes[i]
        for i in range(topo.links_count)
    }
    carried = [by_name[t] for t in ticks]
    assert carried == sorted(carried, reverse=True) and carried[-1] > 0
    red = {t.get_text() for t in ax.get_yticklabels() if t.get_color() == "tab:red"}
    assert red == {t for t in ticks if t in ("16→20", "20→16")} and red
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert FAULT_MARKS["degraded"][1] in legend
    assert "down all run (carried nothing): 17↔21" in ax.get_title()
