"""Fixtures for the config loader tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def write(tmp_path):
    """write(name, text) -> path of a new file in a temporary directory."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return _write
