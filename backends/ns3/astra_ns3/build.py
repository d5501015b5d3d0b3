"""Compile the C++ RoCE model once against the ``ns3`` wheel and cache the library.

The sources ship as package data (``astra_ns3/cpp``). The library is built
with the wheel's headers, libraries and compile definitions (its
``ns3Targets.cmake``: ``NS3_BUILD_PROFILE_RELEASE``, ``NS3_LOG_ENABLE``,
``NS3_ASSERT_ENABLE``, ``__LINUX__``, C++20) and cached in a user cache
directory (``$ASTRA_NS3_CACHE``, else ``$XDG_CACHE_HOME/astra-ns3``, else
``~/.cache/astra-ns3``) under a name keyed by a hash of the sources, the ns3
version, the compiler and the flags. A file lock makes concurrent first runs
build it once. Without a working compiler the worker falls back to cppyy's
JIT (:mod:`astra_ns3.native`).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

from astra.plugin import compiler

CPP_DIR = Path(__file__).resolve().parent / "cpp"
HEADERS = ("roce.h",)
SOURCES = ("header.cc", "port.cc", "flow.cc", "fabric.cc", "fastforward.cc", "api.cc")
#: ns-3 libraries the model links against (the rest of ns-3 is never loaded).
NS3_MODULES = ("core", "network", "point-to-point")
DEFINES = ("NS3_BUILD_PROFILE_RELEASE", "NS3_LOG_ENABLE", "NS3_ASSERT_ENABLE", "__LINUX__")
CXXFLAGS = ("-std=c++20", "-O2", "-fPIC", "-Wall", "-Wno-unused-parameter")


class BuildError(RuntimeError):
    """The compiler failed (its output is the message)."""


def ns3_version() -> str:
    """The installed ``ns3`` distribution's version, e.g. ``3.44.post0``."""
    return metadata.version("ns3")


def ns3_dirs() -> tuple[Path, Path]:
    """(include dir, lib dir) of the installed ``ns3`` wheel."""
    dist = metadata.distribution("ns3")
    root = Path(dist.locate_file("ns3"))
    include, lib = root / "include", root / "lib64"
    if not (include / "ns3" / "simulator.h").is_file() or not lib.is_dir():
        raise BuildError(f"the ns3 package at {root} has no include/ns3 or lib64")
    return include, lib


def ns3_library(lib_dir: Path, module: str) -> Path:
    """Path of ``libns3.<version>-<module>.so`` in ``lib_dir``."""
    found = sorted(lib_dir.glob(f"libns3*-{module}.so"))
    if not found:
        raise BuildError(f"no ns-3 '{module}' library in {lib_dir}")
    return found[0]


def cache_dir() -> Path:
    """Where compiled libraries are kept (never inside the repository)."""
    explicit = os.environ.get("ASTRA_NS3_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "astra-ns3"


def source_texts() -> dict[str, str]:
    """File name -> text of every C++ source and header."""
    return {name: (CPP_DIR / name).read_text(encoding="utf-8") for name in HEADERS + SOURCES}


def library_key(cxx: str) -> str:
    """Hash of the sources, the ns3 version, the compiler and the flags."""
    version = subprocess.run(
        [cxx, "--version"], capture_output=True, text=True, check=False
    ).stdout.splitlines()[:1]
    h = hashlib.sha256()
    for name, text in sorted(source_texts().items()):
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    for part in (ns3_version(), cxx, *version, *CXXFLAGS, *DEFINES):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:20]


def needs_compiling() -> bool:
    """Whether the next worker will compile the model (a compiler, no cached library)."""
    cxx = compiler()
    if cxx is None:
        return False
    try:
        return not (cache_dir() / f"libastra_ns3-{library_key(cxx)}.so").is_file()
    except (OSError, ImportError):  # no ns3 wheel: the worker reports it
        return False


def compiled_library() -> Path:
    """The cached library, compiling it first if needed. Raises BuildError."""
    cxx = compiler()
    if cxx is None:
        raise BuildError("no C++ compiler (set CXX or install g++)")
    include, lib = ns3_dirs()
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"libastra_ns3-{library_key(cxx)}.so"
    if target.is_file():
        return target
    from filelock import FileLock

    with FileLock(str(target) + ".lock"):
        if target.is_file():  # another process built it while we waited
            return target
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            _compile(cxx, include, lib, Path(tmp), target)
    return target


def _compile(cxx: str, include: Path, lib: Path, tmp: Path, target: Path) -> None:
    flags = [*CXXFLAGS, *(f"-D{d}" for d in DEFINES), f"-I{include}", f"-I{CPP_DIR}"]

    def one(name: str) -> Path:
        obj = tmp / (name + ".o")
        run = subprocess.run(
            [cxx, *flags, "-c", str(CPP_DIR / name), "-o", str(obj)],
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode != 0:
            raise BuildError(f"{cxx} failed on {name}:\n{run.stderr[-4000:]}")
        return obj

    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        objects = list(pool.map(one, SOURCES))
    libs = [str(ns3_library(lib, m)) for m in NS3_MODULES]
    partial = tmp / target.name
    link = subprocess.run(
        [cxx, "-shared", "-o", str(partial), *map(str, objects), *libs, f"-Wl,-rpath,{lib}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if link.returncode != 0:
        raise BuildError(f"{cxx} failed to link:\n{link.stderr[-4000:]}")
    os.replace(partial, target)
