#!/usr/bin/env python3
"""Regenerate ``astra_core/_astra_kernel.pyi``, the type stub of the simulation kernel.

The stub is made from the compiled kernel by mypy's own ``stubgen`` (mypy is pinned
in the test extras, so regenerating gives the committed file byte for byte): the
bound classes' signatures come from pybind11's docstrings, the two hand-written
types' from their text signatures. One line is mended: a capsule's type
(``PyCapsule``, the kernel's ``C_API``) has no importable name before Python 3.13,
so the stub names it ``typing_extensions.CapsuleType``.

``tests/system/test_kernel_stub.py`` checks that the committed stub is what this
script makes and that mypy's ``stubtest`` finds it true to the module::

    python scripts/kernel_stub.py          # rewrite the stub
    python scripts/kernel_stub.py --check  # exit 1 if stale
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STUB = REPO / "astra_core" / "_astra_kernel.pyi"
MODULE = "_astra_kernel"


def kernel_library() -> Path:
    """The compiled kernel's shared library (built on first use). Raises RuntimeError
    when the kernel is cppyy's JIT (no compiler here): a stub needs the library."""
    from astra_core.events import kernel

    path = Path(getattr(kernel(), "__file__", "") or "")
    if not path.is_file():
        raise RuntimeError("the kernel is not a compiled library here (no C++ compiler?)")
    return path


def importable(library: Path, folder: Path) -> dict[str, str]:
    """Link ``library`` into ``folder`` as an importable ``_astra_kernel``; the
    environment that imports it from there."""
    (folder / f"{MODULE}{sysconfig.get_config_var('EXT_SUFFIX')}").symlink_to(library)
    return {**os.environ, "PYTHONPATH": str(folder)}


def made_with() -> str:
    """The tools the stub's text depends on, as its header names them."""
    from importlib import metadata

    python = ".".join(map(str, sys.version_info[:2]))
    return f"Python {python}, mypy {metadata.version('mypy')}, pybind11 {metadata.version('pybind11')}"


def generate() -> str:
    """The stub's text, made by ``stubgen`` from the compiled kernel."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = importable(kernel_library(), folder)
        out = folder / "out"
        # mypy is compiled (mypyc): its tools run from their entry functions, not with -m
        run = "import sys; from mypy.stubgen import main; main(sys.argv[1:])"
        command = [sys.executable, "-c", run, "-m", MODULE, "-o", str(out), "--quiet"]
        subprocess.run(command, env=env, check=True)
        text = (out / f"{MODULE}.pyi").read_text()
    header = (
        '"""The simulation kernel\'s Python face; made by scripts/kernel_stub.py, do not edit."""\n\n'
        f"# made with {made_with()}\n"
    )
    text = text.replace("C_API: PyCapsule\n", "C_API: CapsuleType\n")
    return header + "from typing_extensions import CapsuleType\n" + text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed stub is stale")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        if STUB.read_text() != text:
            print(f"{STUB.relative_to(REPO)} is stale: run scripts/kernel_stub.py", file=sys.stderr)
            return 1
        return 0
    STUB.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
