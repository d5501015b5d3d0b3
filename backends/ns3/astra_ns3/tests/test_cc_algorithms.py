"""TIMELY, DCTCP and HPCC-PINT on an 8-to-1 incast at 100 Gbps, and lone flows.

Every sender starts 4 MB at line rate into one switch port. The claims checked
are the algorithms' own: DCTCP holds the queue at its marking threshold K
with the link fully used (Alizadeh et al., SIGCOMM'10, §3.3); HPCC-PINT,
like HPCC, keeps the queue near empty at eta = 95 % utilization (Ben Basat
et al., SIGCOMM'20, §6); TIMELY cuts its rate on RTT above T_high and only
rises while the RTT stays below T_low (Mittal et al., SIGCOMM'15, Algorithm 1).
"""

from __future__ import annotations

import pytest

from astra_core.flows.run import ideal_fct_ns
from astra_ns3.tests.fabrics import GBPS_100, make_ns3, star
from astra_ns3.tests.fabrics import incast as run_incast

SENDERS, SIZE = 8, 4_000_000
MONITOR_NS = 10_000  # queue samples every 10 us


def incast(cc: str, **config):
    """The run's (per-sender finish ns, bottleneck queue samples, backend)."""
    backend = run_incast(cc, SENDERS, SIZE, monitor_us=MONITOR_NS / 1000, **config)
    queues = backend.results.queues()
    return backend.finish_ns, queues[queues.link == backend.bottleneck], backend


def middle_queue(finish: dict, queue) -> tuple[float, float]:
    """(mean, max) bottleneck queue bytes over the middle half of the run (samples
    of an empty queue are absent, so the mean divides by the sample slots)."""
    end = max(finish.values())
    middle = queue[(queue.time_ns > end / 4) & (queue.time_ns <= 3 * end / 4)]
    return middle.bytes.sum() / (end / 2 / MONITOR_NS), float(middle.bytes.max())


@pytest.fixture(scope="module")
def line_rate_finish():
    finish, _, _ = incast("none")
    return max(finish.values())


@pytest.mark.parametrize("k_kb", [300, 100])
def test_dctcp_holds_the_queue_at_k_with_the_link_fully_used(k_kb, line_rate_finish):
    finish, queue, backend = incast("dctcp", dctcp={"k_kb": {100: k_kb}})
    mean, _ = middle_queue(finish, queue)
    assert mean == pytest.approx(k_kb * 1000, rel=0.15)
    # Full utilization: done within 0.1 % of the run without congestion control.
    assert max(finish.values()) <= line_rate_finish * 1.001
    assert backend.stats["ecn_marks"] > 0 and backend.stats["pfc_pauses"] == 0


@pytest.mark.parametrize("probability", [1.0, 1 / 16])
def test_hpcc_pint_keeps_the_queue_near_empty_at_eta_utilization(probability, line_rate_finish):
    finish, queue, backend = incast("hpcc-pint", hpcc_pint={"probability": probability})
    mean, _ = middle_queue(finish, queue)
    # DCQCN's Kmin at 100 Gbps is 400 KB; HPCC-PINT's queue is two orders below.
    assert mean < 4_000
    # eta = 0.95: at least 1/0.95 of line rate's time, and not much more.
    assert line_rate_finish / 0.95 * 0.99 <= max(finish.values()) <= line_rate_finish * 1.10
    assert backend.stats["pfc_pauses"] == 0


def test_hpcc_pint_finishes_the_incast_like_hpcc():
    pint, _, _ = incast("hpcc-pint")
    hpcc, _, _ = incast("hpcc")
    assert max(pint.values()) == pytest.approx(max(hpcc.values()), rel=0.02)


def test_timely_below_t_low_only_rises_so_it_is_line_rate(line_rate_finish):
    # An RTT always under T_low: every update adds delta, capped at line rate,
    # so TIMELY sends exactly as no congestion control does.
    finish, _, _ = incast("timely", timely={"t_low_us": 1e6, "t_high_us": 2e6})
    none, _, _ = incast("none")
    assert finish == none


def test_timely_cuts_above_t_high_and_bounds_the_queue_by_it():
    finish, queue, backend = incast("timely")
    _, middle_max = middle_queue(finish, queue)
    # After the first RTTs, queueing delay stays under T_high = 500 us (6.25 MB).
    assert middle_max < 500e3 * GBPS_100
    rates = backend.results.messages().final_rate_gbps
    assert (rates < 100).all()  # every sender was cut below line rate


@pytest.mark.parametrize("cc, header", [("none", 82), ("dcqcn", 82), ("timely", 82), ("dctcp", 82)])
@pytest.mark.parametrize("size", [1, 4096, 4097, 1_000_000])
def test_a_lone_flow_takes_the_store_and_forward_pipeline_time(cc, header, size):
    physical = star(3)
    backend = make_ns3(physical, {"cc": cc})
    done = []
    backend.send(0, 2, size, lambda _: done.append(backend.now()), None, tag=7)
    backend.run()
    expected = ideal_fct_ns(physical, physical.route(0, 2, 7), size, 4096, header)
    assert done[0] == pytest.approx(expected, abs=1e-3)  # ns-3 time is whole ps


@pytest.mark.parametrize("cc, extra", [("hpcc", 42), ("hpcc-pint", 1)])
def test_int_and_pint_headers_lengthen_every_frame(cc, extra):
    # 20 packets, well within the first window: the flow runs at line rate with
    # HPCC's 42 INT bytes or PINT's 1-byte digest (base 1.05: 8 bits) per frame.
    physical = star(2)
    backend = make_ns3(physical, {"cc": cc})
    done = []
    size = 20 * 4096
    backend.send(0, 1, size, lambda _: done.append(backend.now()), None, tag=1)
    backend.run()
    expected = ideal_fct_ns(physical, physical.route(0, 1, 1), size, 4096, 82 + extra)
    assert done[0] == pytest.approx(expected, abs=1e-3)
