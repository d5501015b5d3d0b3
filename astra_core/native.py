"""C++ built from source on the user's machine, loaded once per process.

A backend or model that ships C++ sources (as package data) gets them as a
:class:`NativeLibrary` with :func:`load`: compiled by the C++ compiler
(``$CXX``, else ``g++``) into a shared library cached under a name keyed by
a hash of the sources, the compiler and the flags (``$ASTRA_NATIVE_CACHE``,
else ``$XDG_CACHE_HOME/astra/native``, else ``~/.cache/astra/native``) and
loaded with ctypes; where no compiler works, compiled just in time by cppyy
(the ``cppyy`` package) from the same sources. A file lock makes concurrent
first runs compile once.

The sources export ``extern "C"`` functions whose arguments and results are
integers and doubles only; a buffer travels as its address (an ``int64``,
e.g. ``array.buffer_info()[0]``), so both paths call them alike.

A source that is a CPython extension module (``#include <Python.h>`` and an
``extern "C" PyObject* PyInit_<name>()``) is built the same way by
:func:`load_extension`, against the running interpreter's headers: compiled
and imported, or JIT-compiled by cppyy, which then calls its ``PyInit_``.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pybind11

from astra_core.errors import AstraError

#: Flags of every compiled library (C++17, optimised, position-independent, no fused
#: multiply-add, so that results do not depend on the CPU; a JIT-compiled source turns
#: contraction off itself).
CXXFLAGS = ("-std=c++17", "-O2", "-fPIC", "-Wall", "-ffp-contract=off")
#: C types of the exported functions' arguments and results, by name.
C_TYPES = {
    "int": ctypes.c_int,
    "int64": ctypes.c_int64,
    "double": ctypes.c_double,
    "object": ctypes.py_object,
    "void": None,
}

_LOADED: dict[str, NativeLibrary] = {}
_EXTENSIONS: dict[str, ModuleType] = {}


class NativeUnavailable(AstraError):
    """Neither a C++ compiler nor cppyy could build the library (one line)."""


class NativeBuildWarning(UserWarning):
    """The compiler failed on a library; cppyy's JIT is tried instead."""


class NativeLibrary:
    """The functions of one loaded library as attributes; ``how`` is ``"compiled"``
    (ctypes, cached library at ``path``) or ``"jit"`` (cppyy)."""

    def __init__(self, how: str, functions: Mapping[str, Any], path: Path | None = None):
        self.how = how
        self.path = path
        self.__dict__.update(functions)


def compiler() -> str | None:
    """The C++ compiler (``$CXX`` or ``g++`` on the PATH), or None when there is none."""
    return shutil.which(os.environ.get("CXX", "g++"))


def cache_root(kind: str, override: str) -> Path:
    """astra's cache folder for ``kind``: ``$<override>`` if set, else
    ``$XDG_CACHE_HOME/astra/<kind>``, else ``~/.cache/astra/<kind>``."""
    explicit = os.environ.get(override)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "astra" / kind


def cache_dir() -> Path:
    """Where compiled libraries are kept (never inside the repository)."""
    return cache_root("native", "ASTRA_NATIVE_CACHE")


@functools.cache
def _compiler_version(cxx: str) -> str:
    """``cxx --version``'s output, asked once per process (every library's key has it)."""
    return subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False).stdout


def library_path(
    name: str, sources: Sequence[Path], cxx: str, flags: Sequence[str] = (), headers: Sequence[Path] = ()
) -> Path:
    """The cached library's path: ``lib<name>-<hash of sources, headers, compiler, flags>.so``."""
    version = _compiler_version(cxx)
    h = hashlib.sha256()
    for source in (*sources, *headers):
        h.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    for part in (cxx, version.partition("\n")[0], *CXXFLAGS, *flags):
        h.update(part.encode() + b"\0")
    return cache_dir() / f"lib{name}-{h.hexdigest()[:20]}.so"


def compile_library(
    name: str, sources: Sequence[Path], cxx: str, flags: Sequence[str] = (), headers: Sequence[Path] = ()
) -> Path:
    """The cached library, compiling it first if needed (``flags`` after
    :data:`CXXFLAGS`, then ``$ASTRA_NATIVE_CXXFLAGS``, e.g. sanitizers; ``headers``,
    which the sources include, are part of its key).
    Raises NativeUnavailable with the compiler's first error line."""
    flags = (*flags, *shlex.split(os.environ.get("ASTRA_NATIVE_CXXFLAGS", "")))
    target = library_path(name, sources, cxx, flags, headers)
    if target.is_file():
        return target
    try:
        return _compile_once(name, sources, cxx, target, flags)
    except OSError as err:  # an unwritable cache, a full disk
        raise NativeUnavailable(f"cannot build {name} in {target.parent}: {err.strerror or err}") from None


def _compile_once(name: str, sources: Sequence[Path], cxx: str, target: Path, flags: Sequence[str]) -> Path:
    """Compile ``sources`` into ``target`` under a file lock (concurrent first runs
    compile once)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(str(target) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():  # another process built it while we waited
            return target
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            partial = Path(tmp) / target.name
            run = subprocess.run(
                [cxx, *CXXFLAGS, *flags, "-shared", "-o", str(partial), *map(str, sources)],
                capture_output=True,
                text=True,
                check=False,
            )
            if run.returncode != 0:
                errors = [line for line in run.stderr.splitlines() if "error" in line] or ["(no output)"]
                raise NativeUnavailable(f"{cxx} could not compile {name}: {errors[0].strip()}")
            os.replace(partial, target)
    return target


def load(
    name: str,
    sources: Sequence[Path],
    signatures: Mapping[str, tuple[str, Sequence[str]]],
    headers: Sequence[Path] = (),
) -> NativeLibrary:
    """Library ``name`` built from ``sources``, with the functions of ``signatures``
    (function name -> (result type, argument types), types from :data:`C_TYPES`);
    ``headers`` are the files the sources include (their folders are searched, and
    they are part of the cache key), e.g. :data:`astra_core.events.KERNEL_HEADERS`.

    Compiled and loaded with ctypes when a compiler works; else JIT-compiled by
    cppyy. The functions run holding the GIL, so they may use Python objects (an
    ``object`` argument is a ``PyObject*``); one that returns with a Python
    exception set raises it. Loaded once per process. Raises NativeUnavailable when
    neither works.
    """
    loaded = _LOADED.get(name)
    if loaded is not None:
        return loaded
    includes = _header_dirs(headers)
    cxx = compiler()
    why = "no C++ compiler (set CXX or install g++)"
    if cxx is not None:
        try:
            flags = tuple(f"-I{i}" for i in includes)
            loaded = _load_compiled(compile_library(name, sources, cxx, flags, headers), signatures)
        except NativeUnavailable as err:
            why = str(err)
            warnings.warn(f"{why}; trying cppyy's JIT", NativeBuildWarning, stacklevel=2)
    if loaded is None:
        loaded = _load_jit(name, sources, signatures, why, includes)
    _LOADED[name] = loaded
    return loaded


def _load_compiled(path: Path, signatures: Mapping[str, tuple[str, Sequence[str]]]) -> NativeLibrary:
    try:
        library = ctypes.PyDLL(str(path))
    except OSError as err:  # a damaged cached library
        raise NativeUnavailable(f"cannot load {path}: {err}") from None
    functions = {}
    for function, (result, arguments) in signatures.items():
        f = getattr(library, function)
        f.restype = C_TYPES[result]
        f.argtypes = [C_TYPES[a] for a in arguments]
        functions[function] = f
    return NativeLibrary("compiled", functions, path)


def load_extension(name: str, sources: Sequence[Path], headers: Sequence[Path] = ()) -> ModuleType:
    """The CPython extension module ``name`` built from ``sources`` (which define
    ``PyInit_<name>``, by hand or with pybind11, whose headers are on the include
    path) against this interpreter's headers; ``headers`` are the files
    the sources include (their folders are searched, and they are part of the key).

    Compiled, cached (the key includes the interpreter's ABI) and imported when a
    compiler works; else JIT-compiled by cppyy, which calls ``PyInit_<name>``.
    Loaded once per process. Raises NativeUnavailable when neither works.
    """
    loaded = _EXTENSIONS.get(name)
    if loaded is not None:
        return loaded
    includes = [sysconfig.get_paths()["include"], pybind11.get_include(), *_header_dirs(headers)]
    flags = (
        *(f"-I{i}" for i in includes),
        f"-DASTRA_ABI={sys.implementation.cache_tag}",
        f"-DASTRA_PYBIND11={pybind11.__version__}",  # part of the key: the bindings' headers
    )
    cxx = compiler()
    why = "no C++ compiler (set CXX or install g++)"
    if cxx is not None:
        try:
            loaded = _import_compiled(name, compile_library(name, sources, cxx, flags, headers))
        except NativeUnavailable as err:
            why = str(err)
            warnings.warn(f"{why}; trying cppyy's JIT", NativeBuildWarning, stacklevel=2)
    if loaded is None:
        cppyy = _cppyy(name, why)
        _jit_sources(cppyy, name, sources, includes)
        loaded = getattr(cppyy.gbl, f"PyInit_{name}")()
    _EXTENSIONS[name] = loaded
    return loaded


def _import_compiled(name: str, path: Path) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
    if spec is None:  # pragma: no cover - a path with the loader always gives a spec
        raise NativeUnavailable(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        loader.exec_module(module)
    except ImportError as err:  # a damaged cached library
        raise NativeUnavailable(f"cannot load {path}: {err}") from None
    return module


def _cppyy(name: str, why: str) -> Any:
    """The cppyy module; NativeUnavailable saying why ``name`` cannot be built without it."""
    try:
        import cppyy
    except ImportError:
        raise NativeUnavailable(
            f"{name} needs C++: {why}, and cppyy, which could compile it instead, is not installed"
        ) from None
    return cppyy


def _header_dirs(headers: Sequence[Path]) -> list[str]:
    """The folders of ``headers``, each once, in order: the sources' include path."""
    return list(dict.fromkeys(str(h.parent) for h in headers))


def _jit_sources(cppyy: Any, name: str, sources: Sequence[Path], includes: Sequence[str]) -> None:
    """cppyy compiles ``sources`` with ``includes`` on its include path; NativeUnavailable
    with the first error line otherwise."""
    for folder in includes:
        cppyy.add_include_path(folder)
    for source in sources:
        try:
            cppyy.cppdef(source.read_text(encoding="utf-8"))
        except SyntaxError as err:  # cppyy's word for a compile error
            lines = str(err).splitlines() or ["(no output)"]
            first = next((line for line in lines if "error" in line), lines[0]).strip()
            raise NativeUnavailable(f"cppyy could not compile {source.name} ({name}): {first}") from None


def _load_jit(
    name: str,
    sources: Sequence[Path],
    signatures: Mapping[str, tuple[str, Sequence[str]]],
    why: str,
    includes: Sequence[str] = (),
) -> NativeLibrary:
    cppyy = _cppyy(name, why)
    _jit_sources(cppyy, name, sources, includes)
    return NativeLibrary("jit", {function: _raising(getattr(cppyy.gbl, function)) for function in signatures})


def _raising(function: Any) -> Any:
    """``function`` (cppyy's), raising the exception a call left set, as ctypes does:
    cppyy wraps it in a SystemError whose cause it is, or leaves it pending (a
    function of ctypes.pythonapi raises a pending exception on return)."""
    pending = ctypes.pythonapi.PyErr_Occurred
    pending.restype = ctypes.c_void_p
    pending.argtypes = ()

    def call(*args: Any) -> Any:
        try:
            result = function(*args)
        except SystemError as err:
            if err.__cause__ is None:
                raise
            raise err.__cause__ from None
        pending()
        return result

    return call
