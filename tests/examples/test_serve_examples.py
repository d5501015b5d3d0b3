"""examples/serve_llama3_70b: every spec loads, fits its GPUs, and serves a few requests."""

from __future__ import annotations

from pathlib import Path

import pytest

from astra_core.serve.api import run_spec
from astra_core.serve.deployment import kv_blocks
from astra_core.serve.spec import load_serve_spec

FOLDER = Path(__file__).resolve().parents[2] / "examples" / "serve_llama3_70b"


@pytest.mark.parametrize("name", ["serve.yaml", "colocated.yaml", "disaggregated.yaml", "moe_qwen3.yaml"])
def test_the_example_spec_serves(name):
    spec = load_serve_spec(FOLDER / name)
    for deployment in spec.deployments():
        if deployment is not None:
            assert kv_blocks(deployment) > 0
    few = spec.model_copy(update={"requests": spec.requests.model_copy(update={"count": 12})})
    result = run_spec(few)
    assert len(result.requests) == 12 and (result.requests.e2e_ns > 0).all()
