"""scripts/import_graph.py on a package built to a known shape.

The package ``pkg`` below has, by construction: a runtime circle ``pkg.system.a ->
pkg.system.b -> pkg.system.a`` (the second arrow an import inside a function, which
runs); a runtime circle ``pkg.report.view -> pkg.report.helpers -> pkg.report.view``
(the first arrow a relative import); an arrow only a type checker follows
(``pkg.report.view -> pkg.system.a``), which with ``--type-checking`` joins the two
circles into one of four modules (``pkg.system.a`` imports ``pkg.report.view``);
arrows back up a layer (system and config sit below report); and one function of
81 lines.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("import_graph", REPO / "scripts" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


def _package(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg"
    for package in ("", "system/", "report/", "config/"):
        _write(pkg, f"{package}__init__.py", "")
    _write(pkg, "system/a.py", "from pkg.system import b\nfrom pkg.report import view\n")
    _write(
        pkg,
        "system/b.py",
        """\
        def late():
            from pkg.system.a import something
            return something
        """,
    )
    _write(
        pkg,
        "report/view.py",
        """\
        from typing import TYPE_CHECKING
        from . import helpers
        if TYPE_CHECKING:
            from pkg.system.a import Thing
        """,
    )
    _write(pkg, "report/helpers.py", "import pkg.report.view\n")
    long_body = "".join(f"    x{k} = {k}\n" for k in range(80))
    _write(pkg, "config/c.py", f"from pkg.report import view\n\n\ndef long():\n{long_body}")
    return pkg


def test_it_finds_the_circles_arrows_and_long_functions_the_package_was_built_with(tmp_path):
    graph_tool = _load()
    pkg = _package(tmp_path)
    graph, deferred = graph_tool.import_graph(pkg)
    # "from pkg.system import b" imports the submodule pkg.system.b
    assert graph["pkg.system.a"] == {"pkg.system.b", "pkg.report.view"}
    assert deferred == [("pkg.system.b", "pkg.system.a", 2)]
    assert graph_tool.circles(graph) == [
        ["pkg.report.helpers", "pkg.report.view"],
        ["pkg.system.a", "pkg.system.b"],
    ]
    assert "pkg.system.a" not in graph["pkg.report.view"]
    assert graph_tool.upward(graph) == [
        ("pkg.config.c", "pkg.report.view"),
        ("pkg.system.a", "pkg.report.view"),
    ]
    assert graph_tool.long_functions(pkg, 80) == [("pkg/config/c.py", 4, "long", 81)]
    assert graph_tool.long_functions(pkg, 81) == []

    with_types, _ = graph_tool.import_graph(pkg, type_checking=True)
    assert "pkg.system.a" in with_types["pkg.report.view"]
    assert graph_tool.circles(with_types) == [
        ["pkg.report.helpers", "pkg.report.view", "pkg.system.a", "pkg.system.b"]
    ]


def test_astra_core_has_no_import_circle_no_arrow_back_up_and_no_long_function():
    # No circle, no arrow back up, no function over 80 lines.
    graph_tool = _load()
    package = REPO / "astra_core"
    graph, _ = graph_tool.import_graph(package)
    assert [m for m in graph if "." in m and graph_tool.layer(m) is None] == []  # every module has a layer
    assert graph_tool.circles(graph) == []
    assert graph_tool.upward(graph) == []
    assert graph_tool.long_functions(package, 80) == []
    # Only the code that builds a run imports the Simulation.
    builders = {"astra_core.api", "astra_core.estimate"}
    assert {m for m, targets in graph.items() if "astra_core.system.simulation" in targets} <= builders
