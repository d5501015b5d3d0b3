"""The 8-NPU reference all-reduces (1 MiB, ring algorithm, 4 chunks) within 10 % of `analytical`.

Inputs: tests/data/reference/workload/all_reduce/8npus_1MB, system
upstream_Ring_4chunks.json, networks upstream_Ring_8npus.yml, fc8.yml and
sw8.yml (50 GB/s, 500 ns). The analytical backend reproduces upstream
ASTRA-sim's results exactly (tests/system/test_reference_upstream.py); with
the default garnetlike config (256-byte flits, 64 KiB packets, buffers that
cover a link's credit round trip) a message costs the same latency plus
bytes / bandwidth, plus a few cycles of routers and one flit time per extra
hop, so the step must land within 10 % (it is within 1 %).
"""

from __future__ import annotations

import pytest

from astra_core.api import simulate


@pytest.mark.parametrize("network", ["upstream_Ring_8npus.yml", "fc8.yml", "sw8.yml"])
def test_all_reduce_1mib_on_8_npus_matches_analytical(reference_dir, network, built_backends):
    args = (
        str(reference_dir / "workload/all_reduce/8npus_1MB/all_reduce"),
        str(reference_dir / "system/upstream_Ring_4chunks.json"),
        str(reference_dir / "network" / network),
    )
    analytical = simulate(*args, backend="analytical")
    garnet = simulate(*args, backend="garnetlike")
    assert analytical.step_ns > 0
    assert garnet.step_ns >= analytical.step_ns  # overheads only: never faster
    assert garnet.step_ns == pytest.approx(analytical.step_ns, rel=0.10)
    network = built_backends[-1]
    assert network.check_credits() == []
    assert network.messages_delivered == network.messages_sent > 0
