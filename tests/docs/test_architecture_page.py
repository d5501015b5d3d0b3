"""docs/architecture.md is held to the code: its packages table names every top-level
module of ``astra_core`` and nothing that does not exist, and its list of layers is the
one ``scripts/import_graph.py`` enforces, in order, of modules that exist."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from tests.docs.test_import_graph import _load

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")


def _top_level_modules() -> set[str]:
    core = REPO / "astra_core"
    names = {p.stem for p in core.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in core.iterdir() if (p / "__init__.py").is_file()}
    return names


def test_the_packages_table_names_every_top_level_module_and_only_real_ones():
    table = [line for line in PAGE.splitlines() if line.startswith("| `astra")]
    named = set(re.findall(r"`astra_core\.(\w+)`", "\n".join(table)))
    assert sorted(_top_level_modules() - named) == []
    assert sorted(n for n in named if importlib.util.find_spec(f"astra_core.{n}") is None) == []


def test_the_layers_are_the_ones_the_import_check_enforces():
    sentence = PAGE[PAGE.index("The layers, low to high, are") : PAGE.index("(a module's layer")]
    layers = [tuple(group.split("`/`")) for group in re.findall(r"`([\w`/]+)`", sentence)]
    assert layers == list(_load().LAYERS)
    assert sorted({name for group in layers for name in group} - _top_level_modules()) == []
