"""Shared fixtures: where the upstream reference inputs live."""

import os
from pathlib import Path

import pytest

REFERENCE_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "reference"


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """``../shared/reference`` beside the checkout: upstream's inputs and results.

    Skipped when absent on a developer machine; a failure under CI."""
    if not REFERENCE_DIR.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"reference inputs not found at {REFERENCE_DIR} (CI must have shared/ beside the checkout)")
        pytest.skip(f"reference inputs not found at {REFERENCE_DIR}")
    return REFERENCE_DIR
