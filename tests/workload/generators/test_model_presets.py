"""Model presets against the parameter counts their authors publish."""

from __future__ import annotations

import pytest

from astra_core.workload.generators.models import MODELS


@pytest.mark.parametrize(
    "name, published, rounding",
    [
        # Qwen Team, "Qwen3 Technical Report", 2025, Table 1 (dense) and Table 2 (MoE: total)
        ("qwen3-8b", 8.2e9, 0.1e9),
        ("qwen3-14b", 14.8e9, 0.1e9),
        ("qwen3-32b", 32.8e9, 0.1e9),
        ("qwen3-30b-a3b", 30.5e9, 0.1e9),
        ("qwen3-235b-a22b", 235e9, 1e9),
    ],
)
def test_qwen3_presets_hold_the_published_parameter_counts(name, published, rounding):
    # Within the report's rounding (0.1 B, or 1 B for 235B); the presets leave out the per-head
    # query/key norms (2 x 128 weights a layer), far below it.
    assert MODELS[name].params() == pytest.approx(published, abs=rounding / 2)
