"""Read a JSON, YAML or TOML config file into plain Python values.

Unreadable files and syntax errors become a one-line :class:`ConfigError`
naming the file (and line/column where the parser knows them).  So do values
the parsers themselves cannot build: an integer literal longer than Python's
digit limit (``sys.get_int_max_str_digits()``, 4300 digits by default; the
parsers raise ValueError) and nesting deeper than the interpreter's recursion
limit (RecursionError).  Duplicate keys,
which both parsers would silently collapse to the last value, are reported as
problems of the file.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from typing import Any

import yaml

from astra_core.config.issues import Problems
from astra_core.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def source_name(path: str | os.PathLike[str]) -> str:
    """The name messages use for a file: the path as the caller gave it."""
    return os.fspath(path)


#: Longest config file read (bytes). Real configs are a few KB; a device such
#: as /dev/zero or an endless pipe must not be read forever.
MAX_CONFIG_BYTES = 64 << 20


def read_bounded_text(
    path: str | os.PathLike[str], max_bytes: int = MAX_CONFIG_BYTES, what: str = "a config file"
) -> str:
    """The UTF-8 text of ``path``, read once and at most ``max_bytes`` bytes.

    Regular files and pipes are read; anything else (a directory, a device such
    as ``/dev/zero``) and anything longer than ``max_bytes`` is refused. Raises
    :class:`ConfigError` naming the file (and ``what`` it should have been).
    """
    name = source_name(path)
    try:
        with open(name, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
                raise ConfigError(f"{name}: not a regular file; expected {what}")
            data = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise ConfigError(f"{name}: file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{name}: is a directory, not a file") from None
    except OSError as exc:
        raise ConfigError(f"{name}: cannot read file: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise ConfigError(f"{name}: longer than {max_bytes:,} bytes; expected {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{name}: not UTF-8 text (byte {exc.start}); expected {what}") from None


def read_json(path: str | os.PathLike[str], problems: Problems) -> Any:
    """Parse a JSON file; duplicate keys are noted in ``problems``."""
    text = read_bounded_text(path)

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                problems.add(None, f"duplicate key {key!r}")
            seen[key] = value
        return seen

    try:
        return json.loads(text, object_pairs_hook=pairs_hook)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source_name(path)}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise _unbuildable(path, "JSON", exc) from None


def _unbuildable(path: str | os.PathLike[str], kind: str, exc: Exception) -> ConfigError:
    """A parser gave up on a value it cannot build (not a syntax error)."""
    if isinstance(exc, RecursionError):
        why = "lists or mappings nested too deeply"
    elif "integer string conversion" in str(exc):
        why = (
            f"an integer literal longer than {sys.get_int_max_str_digits()} digits "
            "(no config value needs one)"
        )
    else:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ConfigError(f"{source_name(path)}: invalid {kind}: {why}")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that records duplicate mapping keys instead of dropping them
    and, unless ``aliases``, refuses aliases as it meets them."""

    duplicates: list[str]
    aliases: bool = True

    def compose_node(self, parent: Any, index: Any) -> Any:
        if not self.aliases and self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None,
                None,
                f"alias *{event.anchor} (aliases are not allowed in this file; write the values out)",
                event.start_mark,
            )
        return super().compose_node(parent, index)


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False):
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, (str, int, float, bool)):
            continue  # unhashable keys are rejected later by the loaders
        if key in seen:
            loader.duplicates.append(str(key))
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
# PyYAML follows YAML 1.1, where ``1e9`` and ``1.0e9`` (no exponent sign) are
# strings; upstream reads network.yml with yaml-cpp, which converts them to
# numbers, and so does YAML 1.2.  Read them as floats here too.
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def read_yaml(path: str | os.PathLike[str], problems: Problems, *, aliases: bool = True) -> Any:
    """Parse a YAML file (safe subset); duplicate keys are noted in ``problems``.

    ``aliases=False`` refuses any alias (``*name``): a few lines of nested
    aliases stand for billions of values (an "alias bomb"), which whoever walks
    the result (``json.dumps``, a grid product) then expands. Raises ConfigError
    naming the file, line and column."""
    text = read_bounded_text(path)
    loader = None
    try:
        loader = _StrictLoader(text)  # its reader refuses control characters already here
        loader.duplicates = []
        loader.aliases = aliases
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{source_name(path)}: invalid YAML{where}: {problem}") from None
    except (ValueError, RecursionError) as exc:
        raise _unbuildable(path, "YAML", exc) from None
    finally:
        if loader is not None:
            loader.dispose()
    for key in loader.duplicates:
        problems.add(None, f"duplicate key {key!r}")
    return data


def read_toml(path: str | os.PathLike[str]) -> Any:
    """Parse a TOML file (TOML itself rejects duplicate keys)."""
    text = read_bounded_text(path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source_name(path)}: invalid TOML: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise _unbuildable(path, "TOML", exc) from None


def expect_mapping(data: Any, problems: Problems) -> dict[str, Any] | None:
    """The top level of every config file is a mapping; say so if it is not."""
    if data is None:
        problems.add(None, "file is empty (expected a mapping of keys to values)")
        return None
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else type(data).__name__
        problems.add(None, f"expected a mapping of keys to values, got {kind}")
        return None
    return data
