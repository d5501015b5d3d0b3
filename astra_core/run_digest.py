"""What identifies a run's result: the content of everything it reads and of the code that times it.

A digest covers the bytes of every file a run reads (each rank's
``<prefix>.<rank>.et``, the system file and the files it names: the NCCL profile and
custom collectives; the network, topology, memory, comm-group, backend-config,
background-flow and fault files), the run's other values (backend, dims, symmetry,
iterations, inline configs and whatever else the caller adds), and the Python and
C++ sources of astra and of the backend's package; never a file's path. Editing any
of them gives another digest; moving the files elsewhere gives the same one.

Sweeps resume by it (:mod:`astra_core.sweep`) and clusters keep their jobs' alone runs
by it (:mod:`astra_core.cluster.cache`). BLAKE2b, 256 bits, as hex.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from astra_core.run_spec import FILE_FIELDS
from astra_core.system.input_files import system_named_files
from astra_core.workload.chakra import rank_trace_files

_CHUNK = 1 << 20


def _new() -> Any:
    return hashlib.blake2b(digest_size=32)


@functools.cache
def source_digest(folder: str) -> str:
    """Digest of every Python and C++ source under ``folder`` (relative names and bytes)."""
    digest = _new()
    root = Path(folder)
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".h", ".cc") and p.is_file()):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def package_folder(package: str) -> str | None:
    """The folder of top-level package ``package`` (None: not found, or a single module)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    locations = spec.submodule_search_locations if spec is not None else None
    return str(locations[0]) if locations else None


class InputDigests:
    """Digests of runs, each file read once per instance.

    A file that is missing or unreadable digests to a marker saying so (a run of it
    fails, and runs again once the file is there).
    """

    def __init__(self) -> None:
        self._files: dict[str, str] = {}
        self._traces: dict[str, str] = {}

    def file(self, path: str | os.PathLike) -> str:
        """The digest of one file's bytes."""
        path = os.fspath(path)
        if path not in self._files:
            digest = _new()
            try:
                with open(path, "rb") as f:
                    while chunk := f.read(_CHUNK):
                        digest.update(chunk)
                self._files[path] = digest.hexdigest()
            except OSError as exc:
                self._files[path] = f"unreadable: {type(exc).__name__}"
        return self._files[path]

    def trace(self, prefix: str | os.PathLike) -> str:
        """The digest of a workload: each ``<prefix>.<rank>.et`` (rank and bytes), in rank order."""
        prefix = os.fspath(prefix)
        if prefix not in self._traces:
            ranks = sorted(rank_trace_files(prefix).items())
            digest = _new()
            for rank, path in ranks:
                digest.update(f"{rank}:{self.file(path)}\n".encode())
            self._traces[prefix] = digest.hexdigest() if ranks else "no trace files"
        return self._traces[prefix]

    def _value(self, name: str, value: Any) -> Any:
        if name not in FILE_FIELDS or not isinstance(value, (str, os.PathLike)):
            return value
        if name == "workload":
            return {"trace": self.trace(value)}
        if name == "system":
            named = [[key, self.file(path)] for key, path in system_named_files(value)]
            return {"file": self.file(value), "names": named}
        return {"file": self.file(value)}

    def run(self, values: Mapping[str, Any], packages: Iterable[str] = ()) -> str:
        """The digest of a run: ``values`` (RunSpec fields, files among them by path, and
        any JSON-able parts the caller adds) and the sources of astra and of the backend
        plugin's top-level ``packages`` (its :attr:`~astra_core.plugins.BackendInfo.packages`)."""
        content: dict[str, Any] = {name: self._value(name, value) for name, value in values.items()}
        content["astra source"] = source_digest(str(Path(__file__).parent))
        for package in sorted(packages):
            folder = package_folder(package)
            content[f"{package} source"] = source_digest(folder) if folder is not None else "not found"
        digest = _new()
        digest.update(json.dumps(content, sort_keys=True, default=repr).encode())
        return digest.hexdigest()
