"""``astra serve --find-rate``: the highest rate within the SLOs, bracketed and bisected;
``--plots``."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from astra_core.cli import main
from astra_core.errors import ConfigError
from astra_core.serve.rate_search import find_rate
from astra_core.serve.spec import load_serve_spec


def _spec(tmp_path, **keys):
    data = {
        "model": "llama3-8b", "gpu": "H100", "engine": {"max_num_seqs": 64},
        "requests": {"count": 150, "rate": 2.0, "lengths": "azure-conv-2023"}, "slo": {"ttft": 300, "tpot": 30},
        **keys,
    }  # fmt: skip
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_rate_found_meets_the_slos_and_a_rate_just_above_it_does_not(tmp_path):
    spec = load_serve_spec(_spec(tmp_path))
    best, points = find_rate(spec, attainment=0.9, steps=4)
    assert best is not None
    met = {p["rate"]: p["attainment"] >= 0.9 for p in points}
    assert met[best]
    failing = [rate for rate, ok in met.items() if not ok and rate > best]
    bracket = max(met) / 2  # the last doubling's width
    assert failing and min(failing) - best <= bracket / 2**4 + 1e-9
    assert all(p["attainment"] == pytest.approx(p["slo_attainment"]) for p in points)


def test_the_search_needs_slos_and_generated_requests(tmp_path):
    with pytest.raises(ConfigError, match="slo: --find-rate needs the SLOs"):
        find_rate(load_serve_spec(_spec(tmp_path, slo={})))
    (tmp_path / "r.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,10,2\n")
    with pytest.raises(ConfigError, match="requests: --find-rate varies the rate of generated requests"):
        find_rate(load_serve_spec(_spec(tmp_path, requests={"file": "r.csv"})))


def test_the_command_writes_its_points_and_plots(tmp_path):
    path = _spec(tmp_path, requests={"count": 60, "rate": 4.0, "lengths": [500, 20]})
    out = CliRunner().invoke(
        main,
        [
            "serve",
            str(path),
            "--find-rate",
            "--json",
            str(tmp_path / "r.json"),
            "--plots",
            str(tmp_path / "p"),
        ],
    )
    assert out.exit_code == 0, out.output
    found = json.loads((tmp_path / "r.json").read_text())
    assert found["best_rate"] in [p["rate"] for p in found["points"]]
    assert (tmp_path / "p" / "rates.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = CliRunner().invoke(main, ["serve", str(path), "--plots", str(tmp_path / "q")])
    assert out.exit_code == 0, out.output
    for name in ("latency_cdf.png", "kv_use.png"):
        assert (tmp_path / "q" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
