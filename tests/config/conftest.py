"""Fixtures for the config loader tests."""

from __future__ import annotations

from pathlib import Path

import pytest

REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference"


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """``../shared/reference``: real upstream inputs (network/, system/, memory/)."""
    if not REFERENCE.is_dir():
        pytest.skip(f"reference inputs not found at {REFERENCE}")
    return REFERENCE


@pytest.fixture
def write(tmp_path):
    """write(name, text) -> path of a new file in a temporary directory."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return _write
