"""Writing output files safely: checked before a run, written atomically after it.

Every file astra writes (``astra run --json/--csv/--parquet/--timeline/--plots``, traces and
comm groups from ``astra gen``/``astra convert``, sweep tables and plots,
``astra topology --output/--plot``, the :class:`~astra_core.report.results.RunResult`
writers) goes through :func:`atomic_output`: the content goes to a temporary
file in the destination's own directory, which then replaces the destination
with :func:`os.replace`. A reader never sees half a file, and a failed or
interrupted write leaves the old file (if any) untouched. Missing parent
directories are created on demand.

:func:`check_output_file` and :func:`check_output_dir` say before a long run
whether its outputs can be written at all (the path is a directory, a parent
is a file, a directory is not writable), so that a run never ends in a lost
result. Every problem is a one-line :class:`~astra_core.errors.ConfigError`
naming the path and the option it came from.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from astra_core.errors import ConfigError


def _path(path: str | os.PathLike, what: str | None) -> Path:
    """``path`` as a Path; ConfigError for an empty one or one that is not a text path."""
    text = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(text, str):
        raise ConfigError(f"{what or 'output'}: path must be a str or os.PathLike, got {type(text).__name__}")
    if not text:
        raise ConfigError(f"{what or 'output'}: cannot write: empty path")
    return Path(text)


def _label(path: Path, what: str | None) -> str:
    return f"{what} {path}" if what else str(path)


def _check_parents(path: Path, label: str) -> None:
    """The nearest existing ancestor of ``path`` must be a writable directory."""
    parent = path.parent
    while not parent.exists():
        if parent.is_symlink():  # a dangling link: mkdir would fail
            raise ConfigError(f"{label}: cannot write: {parent} is a broken symbolic link")
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{label}: cannot write: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{label}: cannot write: permission denied in directory {parent}")


def check_output_file(path: str | os.PathLike, what: str | None = None) -> Path:
    """Raise ConfigError (one line naming ``what`` and ``path``) unless ``path`` can be written.

    ``what`` names where the path came from (``--json``). The path must not be
    an existing directory, and its nearest existing ancestor must be a writable
    directory (the missing ones are created when writing). Returns the path.
    """
    path = _path(path, what)
    label = _label(path, what)
    if not path.name or path.name in (".", ".."):
        raise ConfigError(f"{label}: cannot write: not a file name")
    if path.is_dir():
        raise ConfigError(f"{label}: cannot write: is a directory, not a file")
    _check_parents(path, label)
    return path


def check_output_dir(path: str | os.PathLike, what: str | None = None) -> Path:
    """Raise ConfigError unless ``path`` is, or can be created as, a writable directory."""
    path = _path(path, what)
    label = _label(path, what)
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"{label}: cannot write: is a file, not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(f"{label}: cannot write: permission denied in directory {path}")
        return path
    _check_parents(path, label)
    return path


def check_distinct(paths: dict[str, str | os.PathLike | None]) -> None:
    """Raise ConfigError when two options (``{"--json": path, ...}``) name the same file:
    the later write would silently replace the earlier one."""
    seen: dict[Path, str] = {}
    for option, path in paths.items():
        if path is None:
            continue
        resolved = Path(os.fspath(path)).resolve()
        if resolved in seen:
            raise ConfigError(f"{option} and {seen[resolved]} both write {path}; give them different files")
        seen[resolved] = option


def _new_file_mode(path: Path) -> int:
    """The destination's current permissions, or what ``open(path, "w")`` would give."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, what: str | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` atomically.

    The temporary file keeps ``path``'s suffix (matplotlib picks the image
    format from it). Missing parent directories are created; a symbolic link
    is written through (its target is replaced). On an exception
    the temporary file is removed and ``path`` is left as it was; an OSError
    becomes a one-line ConfigError naming ``what`` and ``path``.
    """
    path = check_output_file(path, what)
    label = _label(path, what)
    if path.is_symlink():  # write through the link, as open(path, "w") would, not over it
        path = Path(os.path.realpath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{path.suffix}")
        os.close(fd)
    except OSError as exc:
        raise ConfigError(f"{label}: cannot write: {exc.strerror or exc}") from None
    temporary = Path(name)
    try:
        yield temporary
        os.chmod(temporary, _new_file_mode(path))
        os.replace(temporary, path)
    except OSError as exc:
        raise ConfigError(f"{label}: cannot write: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def write_text(path: str | os.PathLike, text: str, what: str | None = None) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; see :func:`atomic_output`."""
    with atomic_output(path, what) as temporary:
        temporary.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes(path: str | os.PathLike, data: bytes, what: str | None = None) -> Path:
    """Write ``data`` to ``path`` atomically; see :func:`atomic_output`."""
    with atomic_output(path, what) as temporary:
        temporary.write_bytes(data)
    return Path(path)
