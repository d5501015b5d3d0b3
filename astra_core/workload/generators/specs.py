"""Reading a preset by name or a user's JSON/YAML file of a dataclass's fields."""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

from astra_core.errors import ConfigError


def read_spec(
    spec: str | os.PathLike, presets: dict[str, Any], option: str, what: str, cls: type, preset_names: str
) -> tuple[Any, Path | None]:
    """``(preset, None)`` for a preset name (any case), else ``(mapping, path)`` of a
    JSON/YAML file whose keys are all fields of ``cls`` (``name`` defaults to the
    file's stem).

    Raises ConfigError naming ``option`` for an unknown name, or the file for an
    unreadable file, a non-mapping or unknown keys.
    """
    key = str(spec).lower()
    if key in presets:
        return presets[key], None
    path = Path(spec)
    if not path.is_file():
        raise ConfigError(f"{option}: '{spec}' is neither a preset ({preset_names}) nor a file")
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read the {what}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of {what} keys")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    data.setdefault("name", path.stem)
    return data, path
