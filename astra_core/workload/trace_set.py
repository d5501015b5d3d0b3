"""Writing a trace set (``<prefix>.<rank>.et`` for every rank) all or nothing.

``astra gen`` and ``astra convert`` write thousands of files; a generation
that fails or is interrupted half way must not leave a set whose first ranks
look complete. :func:`staged_trace_set` writes every file into a fresh hidden
folder beside the destination (``.<name>.<random>.partial``, on the same file
system) and only once all are written moves them into place, each with one
:func:`os.replace`; on any exception (Ctrl-C and, under the CLI, SIGTERM
included) it removes that folder and nothing else, so files already in the
destination stay as they were.

:func:`check_not_a_trace` refuses another output or an input of the same
command that is one of the set's rank files (``--comm-groups O/t.0.et`` with
``--output O/t``), before anything is written.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from astra_core.errors import ConfigError
from astra_core.outputs import check_output_file, write_bytes

__all__ = ["StagedTraceSet", "check_not_a_trace", "staged_trace_set"]


class StagedTraceSet:
    """The files of one trace set being written (see the module docstring).

    :meth:`trace` gives the path to write rank ``r``'s trace to, :meth:`later`
    keeps a small file (the comm-group JSON) that is written with the traces.
    """

    def __init__(self, prefix: str | os.PathLike, folder: Path, what: str = "--output"):
        self.prefix = os.fspath(prefix)
        self.folder = folder  # the staging folder
        self.what = what  # the option that named the prefix, for messages
        self.moves: list[tuple[Path, Path]] = []  # (staged, final)
        self.extras: list[tuple[Path, bytes]] = []

    def trace(self, rank: int) -> Path:
        """Where to write rank ``rank``'s trace now; it becomes ``<prefix>.<rank>.et``."""
        final = Path(f"{self.prefix}.{rank}.et")
        staged = self.folder / final.name
        self.moves.append((staged, final))
        return staged

    def later(self, path: str | os.PathLike, data: bytes) -> Path:
        """Write ``data`` to ``path`` (atomically) once every trace is in place; returns the path."""
        self.extras.append((Path(path), data))
        return Path(path)

    def _commit(self) -> None:
        for staged, final in self.moves:
            if os.path.islink(final) or (os.path.lexists(final) and not final.is_file()):
                # a link keeps being a link, a FIFO or device is written through
                # (astra_core.outputs): the file, not the name, takes the trace
                write_bytes(final, staged.read_bytes(), self.what)
            else:
                os.replace(staged, final)
        for path, data in self.extras:
            write_bytes(path, data)


def _made_folders(folder: Path) -> list[Path]:
    """The missing folders among ``folder`` and its ancestors, innermost first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


@contextlib.contextmanager
def staged_trace_set(prefix: str | os.PathLike, what: str = "--output") -> Iterator[StagedTraceSet]:
    """Stage the trace set of ``prefix`` (see the module docstring).

    Raises ConfigError (naming ``what`` and the path) when ``<prefix>.0.et``
    cannot be written or the files cannot be moved into place. On any
    exception inside the block the staging folder, and the folders it created
    for it, are removed; the exception goes on.
    """
    first = check_output_file(f"{os.fspath(prefix)}.0.et", what)
    final_folder = first.parent
    created = _made_folders(final_folder)
    try:
        final_folder.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f".{first.name[:-5]}.", suffix=".partial", dir=final_folder))
    except OSError as exc:
        _remove_empty(created)
        raise ConfigError(f"{what} {prefix}: cannot write the traces: {exc.strerror or exc}") from None
    stage = StagedTraceSet(prefix, folder, what)
    done = False
    try:
        yield stage
        stage._commit()
        done = True
    except OSError as exc:
        raise ConfigError(f"{what} {prefix}: cannot write the traces: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if not done:
            _remove_empty(created)


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders this write created, innermost first, while they are empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


_RANK = re.compile(r"(0|[1-9][0-9]*)\.et")


def check_not_a_trace(
    path: str | os.PathLike | None, what: str, prefix: str | os.PathLike, npus: int
) -> None:
    """Raise ConfigError when ``path`` (from option ``what``) is the trace file of one of
    the ``npus`` ranks of ``prefix`` (links resolved): writing the set would replace it,
    or it would replace a rank's trace."""
    if path is None:
        return
    given = Path(os.fspath(path))
    head = Path(os.fspath(prefix)).name + "."
    for name in {given.name, given.resolve().name}:
        match = _RANK.fullmatch(name[len(head) :]) if name.startswith(head) else None
        rank = match.group(1) if match and int(match.group(1)) < npus else None
        if rank is not None and Path(f"{os.fspath(prefix)}.{rank}.et").resolve() == given.resolve():
            raise ConfigError(
                f"{what} {path}: is rank {rank}'s trace of --output {prefix}; give another file"
            )
