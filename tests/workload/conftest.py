"""Fixtures for the workload tests: where the shared reference inputs live."""

from __future__ import annotations

from pathlib import Path

import pytest

REFERENCE_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "reference"


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """``../shared/reference`` beside the repository; skips when it is absent."""
    if not REFERENCE_DIR.is_dir():
        pytest.skip(f"reference inputs not found at {REFERENCE_DIR}")
    return REFERENCE_DIR
