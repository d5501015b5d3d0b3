#!/usr/bin/env python3
"""The shape of ``astra_core``'s code: its runtime import graph and its longest functions.

Reads every module of the package with :mod:`ast` (nothing is imported) and reports:

* the import circles: strongly connected components of the graph of runtime
  imports between the package's modules. An import inside ``if TYPE_CHECKING:``
  is left out; one inside a function body counts (it runs), and is listed;
* the arrows that run back up: a module of a lower layer importing a higher one.
  The layers, low to high, are :data:`LAYERS` (a module's layer is its first
  name below ``astra_core``; ``results`` is a run's frozen results, ``progress``
  the progress line, an observer plugin);
* the functions longer than ``--max-lines`` lines (80), with their file and line.

The package must have no circle, no arrow back up and no function over 80
lines; ``tests/docs/test_import_graph.py`` keeps it so.

    python scripts/import_graph.py [--package astra_core] [--max-lines 80] [--type-checking] [--json]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Low to high; a module may import its own layer and those before it.
LAYERS = (
    ("errors", "lifetime", "workers", "collector"),
    ("native",),
    ("intervals", "interval_sets"),
    ("outputs",),
    ("events",),
    ("config",),
    ("topology",),
    ("workload",),
    ("backend", "analytical"),
    ("results",),
    ("flows",),
    ("system",),
    ("estimate",),
    ("report",),
    ("plugins", "hookspecs"),
    ("progress",),
    ("api", "flows_api", "run_spec", "run_digest"),
    ("cluster",),
    ("calibrate",),
    ("sweep",),
    ("plan",),
    ("serve",),
    ("cli",),
)


def module_name(path: Path, package_dir: Path) -> str:
    """``astra_core/system/rank.py`` -> ``astra_core.system.rank`` (``__init__`` drops)."""
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_block(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(
    tree: ast.Module, module: str, is_package: bool, type_checking: bool = False
) -> Iterator[tuple[tuple[str, ...], int, bool]]:
    """(what is imported, line, inside a function) for each runtime import in ``tree``
    (with ``type_checking``, those under ``if TYPE_CHECKING:`` too); relative imports
    resolved against ``module``. What is imported is a module name, or for ``from a
    import b`` the candidates ``("a.b", "a")``: the submodule ``a.b`` where there is
    one, else a name of ``a``."""

    def visit(node: ast.AST, in_function: bool) -> Iterator[tuple[tuple[str, ...], int, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking_block(child) and not type_checking:
                for other in child.orelse:
                    yield from visit(other, in_function)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield (alias.name,), child.lineno, in_function
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = module.split(".")
                    parts = parts[: len(parts) - child.level + (1 if is_package else 0)]
                    base = ".".join([*parts, base] if base else parts)
                for alias in child.names:
                    yield (f"{base}.{alias.name}", base), child.lineno, in_function
            else:
                inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                yield from visit(child, inside)

    yield from visit(tree, False)


def import_graph(
    package_dir: Path, type_checking: bool = False
) -> tuple[dict[str, set[str]], list[tuple[str, str, int]]]:
    """The package's modules -> the package modules each imports at run time (with
    ``type_checking``, for type checkers too), and the (importer, imported, line) of the
    imports made inside functions."""
    files = {module_name(p, package_dir): p for p in sorted(package_dir.rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in files}
    deferred = []
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for candidates, line, in_function in runtime_imports(
            tree, name, path.name == "__init__.py", type_checking
        ):
            target = next((c for c in candidates if c in files), None)
            if target is not None and target != name:
                graph[name].add(target)
                if in_function:
                    deferred.append((name, target, line))
    return graph, sorted(set(deferred))


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def layer(module: str) -> int | None:
    """The index in :data:`LAYERS` of ``module``'s first name below the package (None:
    the package itself)."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    for k, names in enumerate(LAYERS):
        if parts[1] in names:
            return k
    return None


def upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) where the importer's layer is below the imported one's."""
    arrows: list[tuple[str, str]] = []
    for importer, targets in graph.items():
        low = layer(importer)
        for target in targets:
            high = layer(target)
            if low is not None and high is not None and high > low:
                arrows.append((importer, target))
    return sorted(arrows)


def long_functions(package_dir: Path, max_lines: int) -> list[tuple[str, int, str, int]]:
    """(file, line, qualified name, lines) of every function longer than ``max_lines``."""
    found: list[tuple[str, int, str, int]] = []
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))

        def visit(node: ast.AST, prefix: str, file: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = f"{prefix}{child.name}"
                    length = (child.end_lineno or child.lineno) - child.lineno + 1
                    if length > max_lines:
                        found.append((file, child.lineno, name, length))
                    visit(child, f"{name}.", file)
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.", file)

        visit(tree, "", str(path.relative_to(package_dir.parent)))
    return sorted(found, key=lambda f: -f[3])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default="astra_core")
    parser.add_argument("--max-lines", type=int, default=80)
    parser.add_argument(
        "--type-checking", action="store_true", help="count imports under `if TYPE_CHECKING:` too"
    )
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    args = parser.parse_args(argv)
    package_dir = ROOT / args.package
    graph, deferred = import_graph(package_dir, args.type_checking)
    found: dict[str, Any] = {
        "modules": len(graph),
        "circles": circles(graph),
        "upward": upward(graph),
        "imports_in_functions": deferred,
        "long_functions": long_functions(package_dir, args.max_lines),
    }
    if args.json:
        json.dump(found, sys.stdout, indent=1)
        print()
        return 0
    print(f"{args.package}: {found['modules']} modules")
    print(f"{len(found['circles'])} import circles:")
    for component in found["circles"]:
        print(f"  {len(component)} modules: {', '.join(component)}")
    print(f"{len(found['upward'])} imports that run back up a layer:")
    for importer, target in found["upward"]:
        print(f"  {importer} -> {target}")
    print(f"{len(deferred)} imports inside functions (counted in the graph)")
    print(f"{len(found['long_functions'])} functions over {args.max_lines} lines:")
    for file, line, name, length in found["long_functions"]:
        print(f"  {length:4d}  {file}:{line} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
