"""Shared fixtures: where the upstream reference inputs live."""

from pathlib import Path

import pytest

REFERENCE_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "reference"


@pytest.fixture(scope="session")
def reference() -> Path:
    if not REFERENCE_DIR.is_dir():
        pytest.skip(f"reference inputs not found at {REFERENCE_DIR}")
    return REFERENCE_DIR
