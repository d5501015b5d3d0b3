"""garnetlike: absurd work is refused up front, and every config number is range-checked.

What must not happen: a 2^62-byte message (2^54 flits of 256 B) accepted, the
model moving its 10^16 flits one event each and never finishing; a config of
``vcs_per_vnet = 1e9`` building a billion VCs per port; ``clock_ghz = 1e9``
silently a 1 ps clock. The work of a message of B bytes over H links
is ``ceil(B / flit_bytes)`` flits (per packet: full packets of
``ceil(packet_bytes / flit_bytes)`` flits, then the rest) times H flit-hops.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from astra_core.backend import Topology, WorkLimitExceeded
from astra_core.cli import main
from astra_core.config.network import NetworkConfig
from astra_core.errors import ConfigError
from astra_garnetlike.config import load_config
from astra_garnetlike.network import create
from tests.conftest import isolate_plugins, write_pair_trace

REPO = Path(__file__).resolve().parents[3]
RING8 = NetworkConfig.from_dict(
    {"topology": ["Ring"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]}
)


def test_a_2_to_the_62_byte_message_is_refused_at_once_with_its_estimate():
    net = create(Topology(RING8))
    started = time.perf_counter()
    with pytest.raises(WorkLimitExceeded) as err:
        net.send(0, 4, 2**62, lambda _: None)  # 4 links the short way round the ring
    assert time.perf_counter() - started < 10  # refused up front, not simulated
    # 2^62 / 256 = 2^54 flits x 4 links = 2^56 = 7.2e16 flit-hops; at 4e5 flit-hops/s
    # that is 1.8e11 s = 5,708 years.
    assert str(err.value) == (
        "garnetlike backend: message NPU 0 -> NPU 4 of 4611686018427387904 B: "
        "18014398509481984 flits x 4 links; the run would move 7.21e+16 flit-hops (about "
        "5,708 years at 4e+05 flit-hops/s), past the limit max_flit_hops = 1e+10 (raise it in "
        "--backend-config; 0 = no limit)"
    )
    assert isinstance(err.value, ConfigError)


def test_the_limit_counts_the_runs_flit_hops_exactly_and_can_be_raised_or_lifted(tmp_path):
    config = tmp_path / "g.toml"
    # 1000-byte packets of 256-byte flits: 4 flits each (256 + 256 + 256 + 232).
    config.write_text("packet_bytes = 1000\nmax_flit_hops = 30\n")
    net = create(Topology(RING8), str(config))
    net.send(0, 2, 2500, lambda _: None)  # 2 full packets (8 flits) + 500 B (2 flits) x 2 links = 20
    net.send(3, 4, 0, lambda _: None)  # an empty message is one head-tail flit x 1 link = 21
    net.send(5, 6, 2048, lambda _: None)  # 1000 + 1000 + 48 B: 4 + 4 + 1 flits x 1 = 30
    assert net.budget.total == 30  # at the limit is allowed
    with pytest.raises(
        WorkLimitExceeded,
        match=rf"^garnetlike backend: message NPU 1 -> NPU 2 "
        rf"of 257 B: 2 flits x 1 links; the run would "
        rf"move 32 flit-hops .* past the limit "
        rf"max_flit_hops = 30 \(raise it in {config}; ",
    ):
        net.send(1, 2, 257, lambda _: None)
    lifted = create(Topology(RING8), {"max_flit_hops": 0})
    arrived = []
    lifted.send(0, 1, 1 << 20, arrived.append, "ok")
    lifted.run()
    assert arrived == ["ok"] and lifted.budget.total == 4096 == lifted.flit_hops()


def test_the_command_line_says_so_in_one_line(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)
    prefix = write_pair_trace(tmp_path / "huge", nbytes=2**62, tag=1, fwd_us=1, bwd_us=1)
    network = tmp_path / "network.yml"
    network.write_text("topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    out = CliRunner().invoke(
        main,
        [
            "run",
            "--workload",
            prefix,
            "--system",
            str(REPO / "examples" / "resnet50_dp" / "system.json"),
            "--network",
            str(network),
            "--backend",
            "garnetlike",
        ],
    )
    assert out.exit_code == 1
    # Refused before the run starts, from its estimate (2^62 B / 256 = 2^54 flits x 1 link,
    # plus 30 us for the message), rather than at the send that crossed the limit.
    assert out.stderr == (
        "error: garnetlike backend: the run would move 1.8e+16 flit-hops (about 1,427 years "
        "of wall time), past the limit max_flit_hops = 1e+10 (raise it in --backend-config; "
        "0 = no limit)\n"
    )


@pytest.mark.parametrize(
    "text, line",
    [
        ("clock_ghz = 1e9", "clock_ghz: must be in [1e-06, 1000], got 1000000000.0"),
        ("clock_ghz = inf", "clock_ghz: must be in [1e-06, 1000], got inf"),
        ("clock_ghz = nan", "clock_ghz: must be in [1e-06, 1000], got nan"),
        ("flit_bytes = 0", "flit_bytes: must be in [1, 2^30], got 0"),
        ("packet_bytes = 1e15", "packet_bytes: must be in [1, 2^40], got 1000000000000000.0"),
        (
            "flit_bytes = 1\npacket_bytes = 100000",
            "packet_bytes: 100000 bytes is 100000 flits of 1 bytes; at most 65536 flits per packet",
        ),
        ("virtual_networks = 65", "virtual_networks: must be in [1, 64], got 65"),
        ("vcs_per_vnet = 1e9", "vcs_per_vnet: must be in [1, 64], got 1000000000.0"),
        ("buffer_depth_flits = 1e20", "buffer_depth_flits: must be in [1, 2^31 - 1], got 1e+20"),
        ("router_pipeline_cycles = 0", "router_pipeline_cycles: must be in [1, 10^6], got 0"),
        ("credit_delay_cycles = -1", "credit_delay_cycles: must be in [0, 10^6], got -1"),
        (
            "deadlock_threshold_cycles = 1e13",
            "deadlock_threshold_cycles: must be in [1, 10^12], got 10000000000000.0",
        ),
        ("up_down_root = -2", "up_down_root: must be in [0, 2^31 - 1], got -2"),
        ("max_flit_hops = -1", "max_flit_hops: must be in [0, 10^18], got -1"),
    ],
)
def test_every_number_is_range_checked(tmp_path, text, line):
    path = tmp_path / "g.toml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}: {line}"


def test_astra_noc_refuses_a_run_of_absurd_length_up_front():
    # 8x8 mesh, 0.1 flits/node/cycle, 10^13 cycles + 10 % warm-up: 64 x 0.1 x 1.1e13 x
    # 5.25 average hops (2 x (8^2 - 1) / 24) = 3.7e14 flit-hops, 29.3 years at 4e5/s.
    started = time.perf_counter()
    out = CliRunner().invoke(main, ["noc", "--cycles", str(10**13)])
    assert time.perf_counter() - started < 5
    assert out.exit_code == 1
    assert out.stderr == (
        "error: garnetlike backend: noc mesh 8x8 at 0.1 flits/node/cycle for 11000000000000 "
        "cycles (warm-up included); the run would move 3.7e+14 flit-hops (about 29.3 years at "
        "4e+05 flit-hops/s), past the limit max_flit_hops = 1e+10 (raise it in a --config file; "
        "0 = no limit)\n"
    )
