"""One public Python API, advertised everywhere: the ``astra`` package.

``astra.simulate`` is ``astra_core.api.simulate`` and ``astra.Report`` is
``astra_core.report.Report`` (the façade re-exports the core); the README once showed both
``from astra_core.api import simulate`` and ``astra.simulate``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import astra
from astra_core.api import simulate as core_simulate
from astra_core.report import Report

REPO = Path(__file__).resolve().parents[2]
#: Where users read how to call astra from Python.
USER_PAGES = ["README.md", "docs/index.md", "docs/python.md", "docs/api.md", "docs/outputs.md"]
_CORE_ENTRY = re.compile(r"astra_core\.api|\bRunResult\b")


def test_the_public_api_is_the_core_re_exported():
    assert astra.simulate is core_simulate
    assert astra.Report is Report
    assert set(astra.__all__) >= {"simulate", "Report", "sweep"}


@pytest.mark.parametrize("page", USER_PAGES)
def test_user_pages_advertise_only_the_astra_package(page):
    text = (REPO / page).read_text(encoding="utf-8")
    assert _CORE_ENTRY.findall(text) == []


def test_the_api_reference_documents_the_astra_package():
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    for name in ("astra.simulate", "astra.Report", "astra.sweep"):
        assert f"::: {name}\n" in text


def test_examples_call_the_public_api():
    for script in sorted((REPO / "examples").rglob("*.py")):
        assert "astra_core.api" not in script.read_text(encoding="utf-8"), script
