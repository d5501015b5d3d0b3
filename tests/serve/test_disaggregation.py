"""Prefill/decode disaggregation: a lone request's path in closed form, KV transfers that
share the network on a backend that models sharing, and the spec's rules."""

from __future__ import annotations

import pytest
import yaml

from astra_core.backend import Topology
from astra_core.config.network import NetworkConfig
from astra_core.errors import ConfigError
from astra_core.plugins import BackendRegistry, load_settings, make_plugin_manager
from astra_core.serve.deployment import Deployment, kv_bytes_per_token
from astra_core.serve.engine import serve_requests
from astra_core.serve.requests import Request
from astra_core.serve.spec import load_serve_spec
from astra_core.serve.step_time import StepClock, StepWork
from astra_core.workload.generators.gpus import load_gpu
from astra_core.workload.generators.models import load_model

H100 = load_gpu("H100")
LLAMA8B = load_model("llama3-8b")
#: two servers of 8 GPUs: NVLink inside, one 400 Gb/s port per GPU between them
CLUSTER = {
    "topology": ["Switch", "Switch"],
    "npus_count": [8, 2],
    "bandwidth": [419.09, 46.57],
    "latency": [300, 1350],
}


def _lone_message_ns(backend: str, src: int, dst: int, size: int) -> float:
    settings = load_settings()
    info = BackendRegistry(make_plugin_manager(settings=settings), settings.default_backend).get(backend)
    net = info.build(Topology(NetworkConfig.from_dict(CLUSTER, source="network")), None)
    done: list[float] = []
    net.send(src, dst, size, lambda _: done.append(net.now()))
    net.run()
    return done[0]


def test_a_lone_request_prefills_moves_its_kv_cache_then_decodes():
    prefill, decode = Deployment(LLAMA8B, H100), Deployment(LLAMA8B, H100)
    result = serve_requests(prefill, [Request(0, 0, 3000, 3)], decode=decode, network=CLUSTER)
    row = result.requests.iloc[0]
    clock = StepClock(prefill)
    prompt = round(clock.step_ns(StepWork(chunks=[(3000, 0)], samples=1)))
    # NPU 0 (prefill, server 0) to NPU 1 (decode, the next GPU of server 0): over NVLink
    transfer = _lone_message_ns("analytical", 0, 1, round(3000 * kv_bytes_per_token(prefill)))
    first = round(clock.step_ns(StepWork(chunks=[(1, 2999)], samples=1)))  # the last prompt token again
    decodes = [round(clock.step_ns(StepWork(decodes=1, decode_context=3000 + i, samples=1))) for i in (1, 2)]
    assert row.kv_transfer_ns == transfer
    assert row.ttft_ns == prompt + transfer + first
    assert row.e2e_ns == prompt + transfer + first + sum(decodes)
    assert (row.prefill_replica, row.replica) == (0, 0)


def test_kv_transfers_share_the_links_they_cross_on_flow():
    # 8 prefill GPUs on server 0 (TP 1 each) send to 8 decode GPUs on server 1 at once: on
    # flow each transfer crosses its own port; all eight funnel into decode replica 0's
    # single port when routed there, and take about eight times as long
    prefill = Deployment(LLAMA8B, H100, replicas=8)
    decode = Deployment(LLAMA8B, H100, replicas=8)
    requests = [Request(i, 0, 4000, 2) for i in range(8)]
    spread = serve_requests(prefill, requests, decode=decode, network=CLUSTER, backend="flow")
    lone = _lone_message_ns("flow", 0, 8, round(4000 * kv_bytes_per_token(prefill)))
    assert spread.requests.kv_transfer_ns.max() == pytest.approx(lone, rel=0.01)
    funnel = serve_requests(
        prefill, requests, decode=Deployment(LLAMA8B, H100, replicas=8), network=CLUSTER, backend="flow",
        router="least-loaded",
    )  # fmt: skip
    assert funnel.requests.kv_transfer_ns.max() == pytest.approx(
        spread.requests.kv_transfer_ns.max(), rel=0.01
    )
    one_decoder = serve_requests(
        prefill, requests, decode=Deployment(LLAMA8B, H100), network=CLUSTER, backend="flow"
    )
    assert one_decoder.requests.kv_transfer_ns.max() >= 7 * lone


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"prefill": {"tp": 2}}, "serve.yaml: decode: disaggregation needs both prefill and decode"),
        (
            {"prefill": {}, "decode": {}, "tp": 2, "network": "n.yml"},
            "serve.yaml: tp: goes in prefill and decode",
        ),
        ({"prefill": {}, "decode": {}}, "serve.yaml: network: disaggregation needs the network that carries"),
    ],
)
def test_a_disaggregated_spec_names_what_is_missing(tmp_path, keys, message):
    data = {
        "model": "llama3-8b",
        "gpu": "H100",
        "requests": {"count": 4, "rate": 1.0, "lengths": [10, 2]},
        **keys,
    }
    (tmp_path / "serve.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=message):
        load_serve_spec(tmp_path / "serve.yaml")


def test_a_network_too_small_for_both_pools_is_one_line():
    with pytest.raises(ConfigError, match="network: 16 NPUs, but the prefill and decode pools have 24 GPUs"):
        serve_requests(
            Deployment(LLAMA8B, H100, replicas=16), [Request(0, 0, 10, 2)], decode=Deployment(LLAMA8B, H100, replicas=8),
            network=CLUSTER,
        )  # fmt: skip
