"""``astra.plugin`` is the one module plugins import, and it is the core's objects, loaded lazily.

The in-tree backends and the example plugins are held to it: none imports an
``astra_core`` module (a distribution's own tests, its ``tests`` subpackage, may:
they test against the installed core as a user's tests would). The face's type-checking imports and its lazy table name
the same objects, and importing it for the hook markers loads no pydantic, as
listing backends must not.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import astra.plugin as face

REPO = Path(__file__).resolve().parents[2]
#: The plugins held to the face: every in-tree backend distribution and the example plugins.
PLUGIN_PACKAGES = [
    *sorted(
        p for p in (REPO / "backends").glob("*/astra_*") if p.is_dir() and not p.name.endswith(".egg-info")
    ),
    REPO / "examples" / "plugin_backend" / "astra_ideal",
    REPO / "examples" / "observer_plugin",
]


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path``, at any depth (imports inside functions count)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return found


def test_plugins_import_the_core_only_through_astra_plugin():
    assert len(PLUGIN_PACKAGES) == 6  # four backends, two examples: the glob found them all
    offending = [
        f"{path.relative_to(REPO)}:{line} imports {module}"
        for package in PLUGIN_PACKAGES
        for path in sorted(package.rglob("*.py"))
        if "tests" not in path.relative_to(package).parts
        for line, module in _imported_modules(path)
        if module == "astra_core" or module.startswith("astra_core.")
    ]
    assert offending == []


def _type_checking_imports() -> dict[str, str]:
    tree = ast.parse(Path(face.__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If))
    return {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


def test_the_type_checkers_names_are_the_lazy_table():
    assert _type_checking_imports() == face._MODULE_OF
    assert face.__all__ == sorted(face._MODULE_OF)


@pytest.mark.parametrize("name", face.__all__)
def test_every_name_is_the_core_object_itself(name):
    assert getattr(face, name) is getattr(importlib.import_module(face._MODULE_OF[name]), name)


def test_an_unknown_name_is_an_attribute_error_that_lists_the_face():
    with pytest.raises(AttributeError, match=r"astra\.plugin has no 'Solver' \(the plugin face: .*hookimpl"):
        face.Solver  # noqa: B018


def test_hook_markers_load_no_config_library():
    code = (
        "import sys\n"
        "from astra.plugin import hookimpl, lazy_factory\n"
        "import astra\n"
        "print(sorted(m for m in ('pydantic', 'astra_core.api', 'astra_core.config.model') if m in sys.modules))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert run.stdout.strip() == "[]"
