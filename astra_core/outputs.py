"""Writing output files safely: checked before a run, written after it without clobbering.

Every file astra writes (``astra run --json/--csv/--parquet/--timeline/--plots``, traces and
comm groups from ``astra gen``/``astra convert``, ``astra flows gen/run``, sweep tables and
plots, ``astra topology --output/--plot``, ``astra noc --json/--plot``, the
:class:`~astra_core.results.RunResult` writers) goes through :func:`atomic_output`,
which writes the content to a temporary file first and then puts it where it belongs,
according to what the destination is (links followed, as the shell's ``>`` does):

* a new path or a **regular file**: the temporary file, in the destination's own directory,
  replaces it with :func:`os.replace`. A reader never sees half a file, and a failed or
  interrupted write leaves the old file untouched. A symbolic link keeps being a link: the
  file it points to is replaced. Missing parent directories are created on demand;
* a **FIFO** or a **character device** (``/dev/null``, ``/dev/stdout`` on a terminal or a
  pipe), or a file reached through ``/dev/stdout``, ``/dev/fd/N`` or ``/proc/self/fd/N``:
  the content is written *through* it, as ``open(path, "w")`` would, and the node itself is
  left in place (replacing it would hand a reader waiting on the FIFO nothing and turn
  ``/dev/null`` into a regular file). Opening a FIFO waits for its reader;
* ``"-"`` (the string, as a command line gives it): **standard output**. A file named ``-``
  is ``./-``. A command that writes to standard output prints its own messages on
  standard error instead.

Block devices and sockets are refused: astra never writes onto a disk or a socket by name.

:func:`check_output_file` and :func:`check_output_dir` say before a long run whether its
outputs can be written at all (the path is a directory, a parent is a file, a directory is
not writable, a symbolic-link loop), :func:`check_distinct` that no two outputs name one
file, and :func:`check_not_input` that no output names one of the run's input files; so
that a run never ends in a lost result or a destroyed input. Every problem, and any
``OSError`` while writing (``ENOSPC`` on ``/dev/full``, ``EPIPE``), is a one-line
:class:`~astra_core.errors.ConfigError` naming the path and the option it came from.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from astra_core.errors import AstraError, ConfigError

#: The output path that means standard output.
STDOUT = "-"

PathArg = str | os.PathLike
_LOOP = "a symbolic link loop (a link that leads back to itself)"
#: Names of a process's open files (Linux): written through whatever they lead to.
_DESCRIPTOR_PATHS = ("/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/")


def is_stdout(path: object) -> bool:
    """True for the string ``"-"`` (standard output); a Path never is (write ``./-`` for a file)."""
    return isinstance(path, str) and path == STDOUT


def any_stdout(paths: Iterable[object]) -> bool:
    """True when one of ``paths`` is ``"-"``: the command's own messages then go to stderr."""
    return any(is_stdout(p) for p in paths)


def _path(path: PathArg, what: str | None) -> Path:
    """``path`` as a Path; ConfigError for an empty one or one that is not a text path."""
    text = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(text, str):
        raise ConfigError(f"{what or 'output'}: path must be a str or os.PathLike, got {type(text).__name__}")
    if not text:
        raise ConfigError(f"{what or 'output'}: cannot write: empty path")
    return Path(text)


def _label(path: PathArg, what: str | None) -> str:
    shown = "- (standard output)" if is_stdout(path) else os.fspath(path)
    return f"{what} {shown}" if what else str(shown)


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


def _destination(path: Path, label: str) -> tuple[str, Path]:
    """What writing ``path`` means: ``("file", where)`` to replace (or create) the regular file
    ``where`` (links resolved), or ``("stream", path)`` to write through a FIFO or character
    device. Raises ConfigError for a directory, a block device, a socket or a link loop."""
    try:
        mode = os.stat(path).st_mode  # follows links, as open() does
    except FileNotFoundError:  # new; a dangling link creates the file it names
        return "file", Path(os.path.realpath(path)) if os.path.islink(path) else path
    except NotADirectoryError:  # a parent is a file: _check_parents says which
        return "file", path
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(f"{label}: cannot write: {_LOOP}") from None
        raise ConfigError(f"{label}: cannot write: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise ConfigError(f"{label}: cannot write: is a directory, not a file")
    if stat.S_ISREG(mode):
        if os.path.abspath(path).startswith(_DESCRIPTOR_PATHS):
            # /dev/stdout of a command run with "> out.txt" is the shell's open file: write
            # through it (as ">" would), never rename a new file over the name it had.
            return "stream", path
        return "file", Path(os.path.realpath(path))
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return "stream", path
    kind = "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file"
    raise ConfigError(f"{label}: cannot write: is {kind}; astra writes files, FIFOs and character devices")


def check_output_file(path: PathArg, what: str | None = None) -> Path:
    """Raise ConfigError (one line naming ``what`` and ``path``) unless ``path`` can be written.

    ``what`` names where the path came from (``--json``). ``"-"`` (standard output) always
    can. Otherwise the path must not be a directory, a block device, a socket or a symbolic
    link loop; an existing FIFO or character device must be writable; for anything else
    (a new path, a regular file, a link to one) the nearest existing ancestor of the file
    must be a writable directory (the missing ones are created when writing). Returns the
    path as given (a Path; ``Path("-")`` for standard output).
    """
    if is_stdout(path):
        return Path(STDOUT)
    path = _path(path, what)
    label = _label(path, what)
    if not path.name or path.name in (".", ".."):
        raise ConfigError(f"{label}: cannot write: not a file name")
    kind, target = _destination(path, label)
    if kind == "stream":
        if not os.access(path, os.W_OK):
            raise ConfigError(f"{label}: cannot write: permission denied")
    else:
        _check_parents(target, label)
    return path


def check_output_dir(path: PathArg, what: str | None = None) -> Path:
    """Raise ConfigError unless ``path`` is, or can be created as, a writable directory."""
    path = _path(path, what)
    label = _label(path, what)
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(f"{label}: cannot write: {_LOOP}") from None
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"{label}: cannot write: is a file, not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(f"{label}: cannot write: permission denied in directory {path}")
        return path
    _check_parents(path, label)
    return path


def _identity(path: PathArg) -> tuple | None:
    """What two paths share when they are one destination: standard output, one inode (links
    and hard links resolved), or, for a new path, one resolved name. None for a character
    device: writing ``/dev/null`` twice loses nothing."""
    if is_stdout(path):
        return ("stdout",)
    try:
        st = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    if stat.S_ISCHR(st.st_mode):
        return None
    return ("inode", st.st_dev, st.st_ino)


def check_distinct(paths: Mapping[str, PathArg | None]) -> None:
    """Raise ConfigError when two options (``{"--json": path, ...}``) name one destination:
    the later write would silently replace the earlier one, or two outputs would run
    together on standard output or in one FIFO. Character devices may repeat."""
    seen: dict[tuple, str] = {}
    for option, path in paths.items():
        if path is None:
            continue
        key = _identity(path)
        if key is None:
            continue
        if key in seen:
            where = "standard output (-)" if key == ("stdout",) else os.fspath(path)
            raise ConfigError(f"{option} and {seen[key]} both write {where}; give them different files")
        seen[key] = option


def check_not_input(
    outputs: Mapping[str, PathArg | None], inputs: Mapping[str, PathArg | Iterable[PathArg] | None]
) -> None:
    """Raise ConfigError when an output would overwrite one of the run's input files.

    ``outputs`` maps an option (``--json``) to the path it writes; ``inputs`` maps an
    option (``--system``) to the file it reads, or to an iterable of files (a workload's
    ``PREFIX.<rank>.et``; it is only iterated when some output already exists). Files
    are compared as :func:`os.path.samefile` does (one device and inode), so symbolic and
    hard links are seen through. Call it before the run: a result written over its own
    system file, or a CSV over a rank's trace, destroys what the run came from. Only
    existing regular files can collide; a missing input is the loader's error.
    """
    existing: dict[tuple[int, int], tuple[str, PathArg]] = {}
    for option, path in outputs.items():
        if path is None or is_stdout(path):
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            existing.setdefault((st.st_dev, st.st_ino), (option, path))
    if not existing:
        return
    for in_option, given in inputs.items():
        if given is None:
            continue
        paths: Iterable[PathArg] = [given] if isinstance(given, (str, os.PathLike)) else given
        for path in paths:
            try:
                st = os.stat(path)
            except (OSError, ValueError):
                continue
            hit = existing.get((st.st_dev, st.st_ino))
            if hit is not None:
                out_option, out_path = hit
                also = "" if os.fspath(out_path) == os.fspath(path) else f" ({os.fspath(path)})"
                raise ConfigError(
                    f"{out_option} {os.fspath(out_path)} is the {in_option} input{also}; "
                    f"writing it would destroy that input: give {out_option.split(' (')[0]} another path"
                )


def trace_outputs(prefix: PathArg, npus_count: int, option: str = "--output") -> dict[str, str]:
    """The files a trace prefix names for :func:`check_not_input`: ``{"--output (rank r)":
    "<prefix>.<r>.et"}`` for every rank (the naming of
    :func:`astra_core.workload.chakra.trace_path`)."""
    return {f"{option} (rank {r})": f"{os.fspath(prefix)}.{r}.et" for r in range(npus_count)}


def _new_file_mode(path: Path) -> int:
    """The destination's current permissions, or what ``open(path, "w")`` would give."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def atomic_output(path: PathArg, what: str | None = None) -> Iterator[Path]:
    """Yield a temporary path to write; on success its content goes to ``path``.

    The temporary file keeps ``path``'s suffix (matplotlib picks the image format from it).
    A regular file or a new path is replaced atomically (a symbolic link's target is, the
    link stays); a FIFO or character device is written through and ``"-"`` is standard
    output (the temporary file then lives in the system's temporary directory). See the
    module docstring. On an exception the temporary file is removed and ``path`` is left
    as it was; an OSError (``ENOSPC``, ``EPIPE``, ...) becomes a one-line ConfigError
    naming ``what`` and ``path``.
    """
    stdout = is_stdout(path)
    if stdout:
        label = _label(path, what)
        kind, target = "stream", Path(STDOUT)
    else:
        path = check_output_file(path, what)
        label = _label(path, what)
        kind, target = _destination(path, label)
    try:
        if kind == "file":
            target.parent.mkdir(parents=True, exist_ok=True)
            folder: Path | None = target.parent
        else:
            folder = None  # the system's temporary directory: /dev is no place for it
        fd, name = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=f".tmp{target.suffix}")
        os.close(fd)
    except OSError as exc:
        raise ConfigError(f"{label}: cannot write: {exc.strerror or exc}") from None
    temporary = Path(name)
    try:
        yield temporary
        if kind == "file":
            os.chmod(temporary, _new_file_mode(target))
            os.replace(temporary, target)
        elif stdout:
            _to_stdout(temporary)
        else:
            # Appending: a FIFO or device is not truncated anyway, and a file reached through
            # /dev/stdout keeps what the command printed there before (as with ">").
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
            with open(temporary, "rb") as source, open(target, "ab") as sink:
                shutil.copyfileobj(source, sink)
    except OSError as exc:
        raise ConfigError(f"{label}: cannot write: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def _to_stdout(temporary: Path) -> None:
    """Copy ``temporary`` to standard output (its binary stream), after any text before it."""
    sys.stdout.flush()
    sink = getattr(sys.stdout, "buffer", None)
    try:
        with open(temporary, "rb") as source:
            if sink is None:  # a text-only stream (some test harnesses)
                sys.stdout.write(source.read().decode("utf-8", "replace"))
                sys.stdout.flush()
            else:
                shutil.copyfileobj(source, sink)
                sink.flush()
    except BrokenPipeError:
        # The reader left (``| head``): later writes and the flush at exit must not raise
        # again, so standard output becomes /dev/null (Python's documented idiom).
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        raise


def write_text(path: PathArg, text: str, what: str | None = None) -> Path:
    """Write ``text`` (UTF-8) to ``path``; see :func:`atomic_output`. Returns ``Path(path)``."""
    with atomic_output(path, what) as temporary:
        temporary.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes(path: PathArg, data: bytes, what: str | None = None) -> Path:
    """Write ``data`` to ``path``; see :func:`atomic_output`. Returns ``Path(path)``."""
    with atomic_output(path, what) as temporary:
        temporary.write_bytes(data)
    return Path(path)


#: The longest time an int64 ns column (``--csv``, ``--parquet``, ``--fct``, sweep tables)
#: holds: 2^63 - 1 ns, about 292 years.
INT64_MAX_NS = 2**63 - 1


def whole_ns_column(values, column: str):
    """Times in ns (a pandas Series of floats, NaN where unknown) as pandas ``Int64`` whole ns.

    Raises :class:`~astra_core.errors.AstraError` naming ``column`` and the largest value
    when a time does not fit an int64 (beyond :data:`INT64_MAX_NS`, or infinite).

    Why refuse rather than write such a time some other way: every table astra writes
    promises whole ns in an int64 column, so that a reader (pandas, Arrow, a database)
    gets one schema whatever the run. A float column would lose the exact ns and a text
    or decimal column would change the schema for these runs only; and a time past
    292 years is the mark of a misplaced unit (0.000001 GB/s, a 2^60-byte message), not
    a result anyone plots. The callers check before writing *any* output, so a run never
    ends with some files written and the others missing; ``--json`` alone, whose
    integers have no limit, still writes such times exactly.
    """
    floats = values.astype("float64").round()
    outside = ~floats.isna() & ((floats >= 2.0**63) | (floats < -(2.0**63)))
    if outside.any():
        worst = floats[outside].abs().max()
        raise AstraError(
            f"{column}: {worst:.4g} ns is beyond what an int64 ns column holds "
            f"({INT64_MAX_NS} ns, about 292 years)"
        )
    return floats.astype("Int64")
