"""Module attributes that load on first use (PEP 562): a package's names without its imports."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    module_of: Mapping[str, str], namespace: dict[str, Any], missing: Callable[[str], str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` for names defined elsewhere: ``module_of``
    maps each name to the module that defines it, imported when the name is first read
    and then kept in ``namespace`` (the module's globals). Reading another name raises
    AttributeError with the message ``missing(name)``."""

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(missing(name))
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(module_of)

    return __getattr__, __dir__
