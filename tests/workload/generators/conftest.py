"""Helpers for the generator tests: small models and network/system files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from astra_core.workload.generators.models import ModelConfig


def write_network(
    folder: Path, dims: list[int], bandwidth: float = 50.0, latency: float = 500.0, topology: str = "Switch"
) -> Path:
    """network.yml with one ``topology`` dimension per entry of ``dims``."""
    n = len(dims)
    path = folder / "network.yml"
    path.write_text(
        f"topology: [ {', '.join([topology] * n)} ]\n"
        f"npus_count: [ {', '.join(map(str, dims))} ]\n"
        f"bandwidth: [ {', '.join([str(bandwidth)] * n)} ]\n"
        f"latency: [ {', '.join([str(latency)] * n)} ]\n"
    )
    return path


def write_system(folder: Path, dims: int, endpoint_delay: int = 10) -> Path:
    """Upstream-style system.json: ring everywhere, LIFO, localBWAware, 4 splits."""
    path = folder / "system.json"
    path.write_text(
        json.dumps(
            {
                "scheduling-policy": "LIFO",
                "endpoint-delay": endpoint_delay,
                "active-chunks-per-dimension": 1,
                "preferred-dataset-splits": 4,
                "collective-optimization": "localBWAware",
                "local-mem-bw": 1600,
                **{
                    f"{c}-implementation": ["ring"] * dims
                    for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
                },
            }
        )
    )
    return path


@pytest.fixture
def tiny_dense() -> ModelConfig:
    """A small GPT-like model: 8 layers, hidden 1024, no vocabulary (no embedding/head)."""
    return ModelConfig("tiny", layers=8, hidden=1024, heads=16, ffn_hidden=4096, vocab=0, seq_len=1024)


@pytest.fixture
def tiny_moe() -> ModelConfig:
    """A small Mixtral-like MoE: 4 layers, 8 experts, top-2."""
    return ModelConfig(
        "tiny-moe",
        layers=4,
        hidden=512,
        heads=8,
        kv_heads=4,
        ffn_hidden=1024,
        vocab=1000,
        seq_len=512,
        mlp="swiglu",
        experts=8,
        top_k=2,
        expert_ffn_hidden=1024,
    )
