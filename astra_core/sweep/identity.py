"""What identifies a design point when a sweep resumes: the content of its inputs.

A point's key is a hash of the bytes of every file it reads (each rank's
``<prefix>.<rank>.et``, system.json, network.yml, memory and comm-group JSON,
a topology or backend config file), of its other run values (backend, dims,
symmetry, inline configs), of its overridden values and of astra's version;
never of a file's path. Editing network.yml re-runs the points that read it,
moving a sweep with its results to another directory re-runs nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import metadata
from typing import Any

from astra_core.sweep.preflight import rank_files
from astra_core.sweep.spec import PATH_KEYS

_CHUNK = 1 << 20


def _astra_version() -> str:
    try:
        return metadata.version("astra-core")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "unknown"


class InputDigests:
    """SHA-256 digests of the files points read, each file read once per instance.

    A file that is missing or unreadable digests to a marker saying so (the
    point then fails when it runs, and runs again once the file is there).
    """

    def __init__(self) -> None:
        self._files: dict[str, str] = {}
        self._traces: dict[str, str] = {}
        self.version = _astra_version()

    def file(self, path: str) -> str:
        """The digest of one file's bytes."""
        if path not in self._files:
            digest = hashlib.sha256()
            try:
                with open(path, "rb") as f:
                    while chunk := f.read(_CHUNK):
                        digest.update(chunk)
                self._files[path] = digest.hexdigest()
            except OSError as exc:
                self._files[path] = f"unreadable: {type(exc).__name__}"
        return self._files[path]

    def trace(self, prefix: str) -> str:
        """The digest of a workload: each ``<prefix>.<rank>.et`` (rank and bytes), in rank order."""
        if prefix not in self._traces:
            ranks = rank_files(prefix)
            digest = hashlib.sha256()
            for rank, path in ranks:
                digest.update(f"{rank}:{self.file(path)}\n".encode())
            self._traces[prefix] = digest.hexdigest() if ranks else "no trace files"
        return self._traces[prefix]

    def key(self, run: dict[str, Any]) -> str:
        """The key of a resolved point (:func:`~astra_core.sweep.spec.resolve_point`)."""
        content: dict[str, Any] = {"astra": self.version}
        for name, value in run.items():
            if name in PATH_KEYS and isinstance(value, (str, os.PathLike)):
                path = os.fspath(value)
                content[name] = (
                    {"trace": self.trace(path)} if name == "workload" else {"file": self.file(path)}
                )
            else:
                content[name] = value
        text = json.dumps(content, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
