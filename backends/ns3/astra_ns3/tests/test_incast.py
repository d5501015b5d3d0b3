"""Incast on one switch at 100 Gbps: DCQCN fairness, HPCC's short queue, PFC losslessness."""

from __future__ import annotations

import math

import pytest

from astra_ns3.tests.fabrics import GBPS_100, LINK_NS, incast

PAYLOAD, OVERHEAD = 4096, 82  # bytes per data packet and its Ethernet + RoCEv2 framing
LINE_GBPS = GBPS_100 * 8
WINDOW_NS = (10e6, 20e6)  # steady state: after DCQCN's first cuts settle


def steady_throughput_gbps(backend) -> list[float]:
    samples = backend.results.flow_samples()
    window = samples[(samples.time_ns > WINDOW_NS[0]) & (samples.time_ns <= WINDOW_NS[1])]
    return window.groupby("message").throughput_gbps.mean().tolist()


def bottleneck_queue(backend) -> tuple[float, float]:
    """(mean bytes in the steady window, peak bytes over the run) of the bottleneck queue."""
    q = backend.results.queues()
    q = q[q.link == backend.bottleneck]
    steady = q[(q.time_ns > WINDOW_NS[0]) & (q.time_ns <= WINDOW_NS[1])].bytes
    mean = float(steady.mean()) if len(steady) else 0.0
    return mean, float(backend.results.ports().max_queue_bytes[backend.bottleneck])


@pytest.fixture(scope="module")
def dcqcn_run():
    # 160 MB each: both still sending through the 10-20 ms window at ~49 Gbps.
    return incast("dcqcn", 2, 160_000_000)


@pytest.fixture(scope="module")
def hpcc_run():
    return incast("hpcc", 2, 160_000_000)


def test_dcqcn_two_to_one_converges_to_fair_share_at_line_rate(dcqcn_run):
    rates = steady_throughput_gbps(dcqcn_run)
    assert len(rates) == 2
    fair = sum(rates) / 2
    assert all(abs(r - fair) / fair <= 0.10 for r in rates), rates
    # Goodput ceiling: payload / frame = 4096 / 4178 = 98 % of the line.
    assert sum(rates) >= 0.90 * LINE_GBPS
    stats = dcqcn_run.stats
    assert stats["cnps"] > 0 and stats["ecn_marks"] > 0  # DCQCN did react
    assert stats["drops"] == 0


def test_hpcc_keeps_the_bottleneck_queue_far_below_dcqcn(dcqcn_run, hpcc_run, record_property):
    dcqcn_mean, dcqcn_peak = bottleneck_queue(dcqcn_run)
    hpcc_mean, hpcc_peak = bottleneck_queue(hpcc_run)
    report = (
        f"bottleneck queue, steady mean / peak: DCQCN {dcqcn_mean / 1e3:.1f} / "
        f"{dcqcn_peak / 1e3:.1f} KB, HPCC {hpcc_mean / 1e3:.1f} / {hpcc_peak / 1e3:.1f} KB"
    )
    print(report)
    record_property("queues", report)
    # DCQCN holds the queue between Kmin (400 KB at 100 Gbps) and Kmax; HPCC
    # aims at eta = 95 % utilization with no standing queue.
    assert dcqcn_mean > 100_000
    assert hpcc_mean < 0.05 * dcqcn_mean
    assert hpcc_peak < 0.25 * dcqcn_peak
    rates = steady_throughput_gbps(hpcc_run)
    fair = sum(rates) / 2
    assert all(abs(r - fair) / fair <= 0.10 for r in rates), rates
    assert sum(rates) >= 0.90 * LINE_GBPS
    assert hpcc_run.stats["cnps"] == 0


def wire_bytes(size: int) -> int:
    return size + max(1, math.ceil(size / PAYLOAD)) * OVERHEAD


def test_eight_to_one_with_pfc_is_lossless_and_within_5_percent_of_ideal():
    # 1 MB of shared buffer cannot hold 8 x 2 MB: without PFC it overflows.
    size = 2_000_000
    backend = incast("none", 8, size, buffer_bytes=1_000_000)
    # Ideal: the bottleneck link busy from the first packet's arrival until it
    # has carried every byte: 8 messages' wire bytes / line rate, plus two link
    # latencies and one frame stored and forwarded at the switch.
    ideal = 8 * wire_bytes(size) / GBPS_100 + 2 * LINK_NS + (PAYLOAD + OVERHEAD) / GBPS_100
    finish = max(backend.finish_ns.values())
    assert finish >= ideal - 1
    assert (finish - ideal) / ideal < 0.05
    stats = backend.stats
    assert stats["drops"] == 0 and stats["retransmits"] == 0
    assert stats["pfc_pauses"] > 0  # PFC had to act
    assert backend.results.node_max_buffer().max() <= 1_000_000


def test_eight_to_one_without_pfc_drops_and_reports_it():
    size = 2_000_000
    backend = incast("none", 8, size, buffer_bytes=1_000_000, pfc={"enabled": False})
    stats = backend.stats
    ports = backend.results.ports()
    assert stats["pfc_pauses"] == 0
    assert stats["drops"] > 1000
    # Drops are charged to the ports the packets came in on: the senders' uplinks.
    assert ports.drops.sum() == stats["drops"]
    assert set(ports[ports.drops > 0].node) == {9}
    # Go-back-N resends everything lost, so every message still arrives, later.
    assert stats["retransmits"] >= stats["drops"]
    messages = backend.results.messages()
    assert messages.finish_ns.notna().all()
    ideal = 8 * wire_bytes(size) / GBPS_100
    assert max(backend.finish_ns.values()) > 1.2 * ideal
