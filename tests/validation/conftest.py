"""Loading a script of validation/ as a module, for the tests beside it."""

from __future__ import annotations

import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path

VALIDATION = Path(__file__).resolve().parents[2] / "validation"


@contextmanager
def validation_script(name: str):
    """validation/<name>.py imported (its folder on sys.path for its own imports)."""
    sys.path.insert(0, str(VALIDATION))
    spec = importlib.util.spec_from_file_location(f"{name}_validation", VALIDATION / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]
        sys.path.remove(str(VALIDATION))
