"""``astra serve SPEC.yaml`` and ``astra.simulate_serving``: the spec's keys, vLLM's
defaults by GPU, one-line errors naming the key, and the outputs."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

import astra
from astra_core.cli import main
from astra_core.errors import ConfigError
from astra_core.serve.spec import load_serve_spec

NVLINK2 = {"topology": ["Switch"], "npus_count": [2], "bandwidth": [419.09], "latency": [300]}


def _spec(tmp_path, **keys):
    (tmp_path / "network.yml").write_text(yaml.safe_dump(NVLINK2))
    data = {
        "model": "llama3-8b",
        "gpu": "H100",
        "requests": {"count": 40, "rate": 5.0, "lengths": [300, 20]},
        **keys,
    }
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_engine_defaults_are_vllms_for_the_gpu(tmp_path):
    """vLLM 0.11's OpenAI server: 8,192 tokens and 1,024 sequences per step on an H100,
    2,048 and 256 on an A100."""
    d = load_serve_spec(_spec(tmp_path)).deployments()[0]
    assert (d.max_num_batched_tokens, d.max_num_seqs, d.block_size, d.gpu_memory_utilization) == (
        8192,
        1024,
        16,
        0.9,
    )
    d = load_serve_spec(_spec(tmp_path, gpu="A100")).deployments()[0]
    assert (d.max_num_batched_tokens, d.max_num_seqs) == (2048, 256)
    d = load_serve_spec(_spec(tmp_path, engine={"max_num_seqs": 64, "kv_cache_dtype": "fp8"})).deployments()[
        0
    ]
    assert (d.max_num_seqs, d.kv_bytes, d.no_evict) == (64, 1, False)
    d = load_serve_spec(_spec(tmp_path, engine={"capacity_policy": "guaranteed_no_evict"})).deployments()[0]
    assert d.no_evict


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"tp": 2}, "serve.yaml: network: tp 2 needs a network.yml whose first dimension holds 2 NPUs"),
        ({"router": "fastest"}, "serve.yaml: router: expected one of round-robin, least-loaded"),
        (
            {"engine": {"max_num_seqz": 4}},
            "serve.yaml: engine: unknown key 'max_num_seqz'; did you mean 'max_num_seqs'?",
        ),
        ({"requests": {"count": 4, "rate": 1.0}}, "serve.yaml: requests: lengths: missing"),
        ({"requests": {"file": "r.csv", "rate": 1.0}}, "serve.yaml: requests: rate: give either file"),
        (
            {"requests": {"count": 4, "rate": 1.0, "lengths": "sharegpt"}},
            "serve.yaml: requests: lengths: unknown distribution 'sharegpt'; known: azure-code-2023",
        ),
        ({"slo": {"ttft": -1}}, "serve.yaml: slo"),
        (
            {"engine": {"capacity_policy": "evict"}},
            "serve.yaml: engine.capacity_policy: expected one of preempt, guaranteed_no_evict",
        ),
    ],
)
def test_bad_specs_name_the_key(tmp_path, keys, message):
    with pytest.raises(ConfigError, match=message.replace("?", r"\?")):
        load_serve_spec(_spec(tmp_path, **keys))


def test_astra_serve_prints_and_writes_what_the_python_api_returns(tmp_path):
    path = _spec(tmp_path, tp=2, network="network.yml", slo={"ttft": 500, "tpot": 50})
    out = CliRunner().invoke(
        main, ["serve", str(path), "--json", str(tmp_path / "s.json"), "--csv", str(tmp_path / "r.csv")]
    )
    assert out.exit_code == 0, out.output
    assert "llama3-8b on 1 x TP 2 H100: 40 requests" in out.output and "TTFT" in out.output
    summary = json.loads((tmp_path / "s.json").read_text())
    rows = pd.read_csv(tmp_path / "r.csv")
    result = astra.simulate_serving(path)
    assert summary == json.loads(json.dumps(result.summary(slo_ms={"ttft": 500, "tpot": 50})))
    assert rows.ttft_ns.tolist() == result.requests.ttft_ns.tolist()
    assert summary["goodput"] <= summary["request_throughput"]


def test_a_request_file_no_replica_can_hold_is_one_line(tmp_path):
    (tmp_path / "r.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.1,5000000,10\n")
    path = _spec(tmp_path, requests={"file": "r.csv"})
    out = CliRunner().invoke(main, ["serve", str(path)])
    assert out.exit_code == 1
    assert out.output.strip().splitlines() == [
        "error: requests: request 1 needs 312,501 KV blocks of 16 tokens (5,000,000 prompt + 10 output tokens); "
        f"a replica holds {_blocks()}"
    ]


def _blocks() -> str:
    from astra_core.serve.deployment import Deployment, kv_blocks
    from astra_core.workload.generators.gpus import load_gpu
    from astra_core.workload.generators.models import load_model

    return f"{kv_blocks(Deployment(load_model('llama3-8b'), load_gpu('H100'), max_num_seqs=1024)):,}"


def test_one_token_outputs_have_no_tpot_and_json_says_null(tmp_path):
    path = _spec(tmp_path, requests={"count": 5, "rate": 1.0, "lengths": [100, 1]})
    out = CliRunner().invoke(main, ["serve", str(path), "--json", str(tmp_path / "s.json")])
    assert out.exit_code == 0, out.output
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["tpot"] == {"mean_ms": None, "median_ms": None, "p99_ms": None}
    assert "kv_transfer" not in summary
    out = CliRunner().invoke(main, ["serve", str(path)])
    (line,) = [row for row in out.output.splitlines() if "TPOT" in row]
    assert line.count("-") == 3 and not any(ch.isdigit() for ch in line)


def test_the_python_api_takes_a_network_as_a_dict():
    result = astra.simulate_serving(
        {"model": "llama3-8b", "gpu": "H100", "tp": 2, "network": NVLINK2,
         "requests": {"count": 3, "rate": 1.0, "lengths": [100, 4]}}
    )  # fmt: skip
    assert len(result.requests) == 3 and result.collectives_simulated > 0
