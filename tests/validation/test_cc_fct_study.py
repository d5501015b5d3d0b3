"""validation/cc_fct.py at a smaller scale: WebSearch 50 % load, k = 4 fat-tree, 2 ms of arrivals.

The HPCC paper's claims on this study (Li et al., SIGCOMM'19, §5.2): HPCC's
flows under 100 KB have a lower 99th percentile slowdown than DCQCN's, and
its switch queues are shorter. Every algorithm must finish every flow, none
faster than alone on the idle fabric.
"""

from __future__ import annotations

import pytest

from astra_core.flows.cdf import load_cdf
from astra_core.flows.generate import host_link_gbps, poisson_flows
from astra_core.topology.generators import fat_tree
from astra_ns3.tests.fabrics import require_ns3
from tests.validation.conftest import validation_script


@pytest.fixture(scope="module")
def rows():
    require_ns3()
    fabric = fat_tree(4, 100.0, 1000.0)
    flows = poisson_flows(load_cdf("websearch"), 16, host_link_gbps(fabric), 0.5, 2_000_000, 1)
    with validation_script("cc_fct") as script:
        return {cc: script.study(cc, flows, fabric, 10.0)[0] for cc in script.CCS}, len(flows)


@pytest.mark.parametrize("cc", ["none", "dcqcn", "hpcc", "hpcc-pint", "timely", "dctcp"])
def test_every_flow_completes_no_faster_than_alone(rows, cc):
    table, flows = rows
    assert table[cc]["flows"] == flows > 100
    assert table[cc]["min_slowdown"] >= 1 - 1e-9


def test_hpcc_short_flows_have_a_lower_tail_and_its_queues_are_shorter(rows):
    table, _ = rows
    hpcc, dcqcn = table["hpcc"], table["dcqcn"]
    assert hpcc["small_p99"] < dcqcn["small_p99"]
    assert hpcc["queue_mean_kb"] < dcqcn["queue_mean_kb"]
    assert hpcc["queue_p99_kb"] < dcqcn["queue_p99_kb"]
    assert hpcc["queue_max_kb"] < dcqcn["queue_max_kb"]


def test_without_congestion_control_pfc_carries_the_load(rows):
    # Line-rate senders fill switch queues to PFC's threshold; every algorithm avoids it.
    table, _ = rows
    assert table["none"]["pfc_pauses"] > 0
    assert table["none"]["queue_max_kb"] > max(
        table[cc]["queue_max_kb"] for cc in ("dcqcn", "hpcc", "hpcc-pint", "dctcp")
    )
