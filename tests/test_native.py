"""C++ built on the user's machine (astra_core.native): compiled and cached, or
JIT-compiled by cppyy where no compiler works; the two builds agree bit for bit."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from astra_core import native

# A random sequence of flows joining and leaving the shared max-min solver; prints every
# rate reported, as the exact decimal repr of its double, and how its library was built.
_SOLVER_RUN = """
import json, random
from astra_flow.maxmin import Flow, MaxMinSolver
rng = random.Random(5)
links = 24
solver = MaxMinSolver([rng.choice([1.0, 2.0, 3.5, 10.0]) for _ in range(links)])
live, reported = [], []
for step in range(40):
    for _ in range(rng.randint(0, 25)):
        chosen = tuple(rng.sample(range(links), rng.randint(1, 5)))
        flow = Flow(chosen, tuple(rng.choice([1.0, 1.0, 0.05]) for _ in chosen), rng.choice([0, 0, 0.7]))
        solver.add(flow)
        live.append(flow)
    for flow in list(live):
        if rng.random() < 0.3:
            solver.remove(flow)
            live.remove(flow)
    solver.solve(lambda f, old: reported.append((repr(f.rate), repr(old))))
how = solver._lib.how
print(json.dumps([how, reported, [repr(u) for u in solver.used]]))
"""


def _solver_run(**env: str) -> tuple[str, list, list]:
    out = subprocess.run(
        [sys.executable, "-c", _SOLVER_RUN],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    how, reported, used = json.loads(out.stdout)
    return how, reported, used


def test_the_compiled_and_the_jit_build_give_the_same_rates():
    if native.compiler() is None:
        pytest.skip("no C++ compiler here")
    compiled = _solver_run()
    jit = _solver_run(CXX="/nonexistent")  # no compiler: cppyy's JIT
    assert compiled[0] == "compiled" and jit[0] == "jit"
    assert len(compiled[1]) > 500
    assert compiled[1:] == jit[1:]


# An all-to-all of uneven messages on the flow model (a compiled model of its own
# distribution, on the kernel's solver): every delivery time, as the exact repr.
_FLOW_RUN = """
import json, random
from astra_core.topology.generators import fat_tree
from astra_flow.config import FlowConfig
from astra_flow.network import FlowNetwork
net = FlowNetwork(fat_tree(4), FlowConfig(ack_bytes=86))
rng, times = random.Random(3), []
for src in range(16):
    for dst in range(16):
        if src != dst:
            net.send(src, dst, rng.choice([4096, 65536, 300_000]), lambda _: times.append(repr(net.now())), tag=src % 3)
net.run()
print(json.dumps([net._links._lib.how, times]))
"""


def test_the_compiled_and_the_jit_flow_model_give_the_same_times():
    if native.compiler() is None:
        pytest.skip("no C++ compiler here")
    pytest.importorskip("cppyy")
    runs = []
    for env in ({}, {"CXX": "/nonexistent"}):
        out = subprocess.run(
            [sys.executable, "-c", _FLOW_RUN],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(json.loads(out.stdout))
    assert [how for how, _ in runs] == ["compiled", "jit"]
    assert len(runs[0][1]) == 240 and runs[0][1] == runs[1][1]


def test_a_source_that_does_not_compile_fails_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("ASTRA_NATIVE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "broken.cc"
    source.write_text('extern "C" int f() { return undefined_name; }\n')
    cxx = native.compiler()
    if cxx is None:
        pytest.skip("no C++ compiler here")
    with pytest.raises(native.NativeUnavailable) as err:
        native.compile_library("broken", [source], cxx)
    message = str(err.value)
    assert "\n" not in message and "could not compile broken" in message and "undefined_name" in message
    assert not list((tmp_path / "cache").glob("*.so"))  # nothing half-built is kept


def test_no_compiler_and_no_cppyy_says_so_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent")
    monkeypatch.setitem(sys.modules, "cppyy", None)  # import cppyy raises ImportError
    source = tmp_path / "one.cc"
    source.write_text('extern "C" int one() { return 1; }\n')
    with pytest.raises(native.NativeUnavailable) as err:
        native.load("test_one_no_cppyy", [source], {"one": ("int", ())})
    message = str(err.value)
    assert "\n" not in message
    assert message == (
        "test_one_no_cppyy needs C++: no C++ compiler (set CXX or install g++), "
        "and cppyy, which could compile it instead, is not installed"
    )


def test_a_compiled_library_is_cached_by_the_hash_of_its_sources(tmp_path, monkeypatch):
    cxx = native.compiler()
    if cxx is None:
        pytest.skip("no C++ compiler here")
    monkeypatch.setenv("ASTRA_NATIVE_CACHE", str(tmp_path))
    source = tmp_path / "answer.cc"
    source.write_text('extern "C" int answer(int x) { return 40 + x; }\n')
    first = native.compile_library("answer", [source], cxx)
    assert native.compile_library("answer", [source], cxx) == first  # found, not rebuilt
    source.write_text('extern "C" int answer(int x) { return 41 + x; }\n')
    second = native.compile_library("answer", [source], cxx)
    assert second != first and second.is_file()
    library = native.load("test_answer", [source], {"answer": ("int", ("int",))})
    assert library.how == "compiled" and library.answer(1) == 42


def test_a_failed_compile_warns_and_tries_the_jit(tmp_path, monkeypatch):
    if native.compiler() is None:
        pytest.skip("no C++ compiler here")
    pytest.importorskip("cppyy")
    monkeypatch.setenv("ASTRA_NATIVE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "broken_twice.cc"
    source.write_text('extern "C" int g() { return also_undefined; }\n')
    with (
        pytest.warns(native.NativeBuildWarning, match="could not compile broken_twice"),
        pytest.raises(native.NativeUnavailable, match=r"^cppyy could not compile broken_twice\.cc"),
    ):
        native.load("broken_twice", [source], {"g": ("int", ())})


def test_an_unwritable_cache_is_one_line(tmp_path, monkeypatch):
    cxx = native.compiler()
    if cxx is None:
        pytest.skip("no C++ compiler here")
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")
    monkeypatch.setenv("ASTRA_NATIVE_CACHE", str(blocker / "cache"))  # under a regular file
    source = tmp_path / "two.cc"
    source.write_text('extern "C" int two() { return 2; }\n')
    with pytest.raises(native.NativeUnavailable) as err:
        native.compile_library("two", [source], cxx)
    assert str(err.value) == f"cannot build two in {blocker / 'cache'}: Not a directory"


_EXTENSION = """
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "answer_base.h"
static PyObject* answer(PyObject*, PyObject* arg) { return PyLong_FromLong(ANSWER_BASE + PyLong_AsLong(arg)); }
static PyMethodDef methods[] = {{"answer", answer, METH_O, nullptr}, {nullptr, nullptr, 0, nullptr}};
static PyModuleDef definition = {PyModuleDef_HEAD_INIT, "%s", nullptr, -1, methods};
extern "C" PyObject* PyInit_%s() { return PyModule_Create(&definition); }
"""


def _build_by(how: str, monkeypatch, tmp_path) -> None:
    """Make this test's native builds ``how`` ("compiled" or, with the compiler hidden,
    "jit") into a cache of its own; skip where that way is not available."""
    if how == "compiled" and native.compiler() is None:
        pytest.skip("no C++ compiler here")
    if how == "jit":
        pytest.importorskip("cppyy")
        monkeypatch.setenv("CXX", "/nonexistent")
    monkeypatch.setenv("ASTRA_NATIVE_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize("how", ["compiled", "jit"])
def test_an_extension_is_built_against_its_headers_and_keyed_by_them(tmp_path, monkeypatch, how):
    _build_by(how, monkeypatch, tmp_path)
    name = f"_answer_{how}"
    source = tmp_path / "answer.cc"
    source.write_text(_EXTENSION % (name, name))
    header = tmp_path / "include" / "answer_base.h"
    header.parent.mkdir()
    header.write_text("#define ANSWER_BASE 40\n")
    module = native.load_extension(name, [source], [header])
    assert module.answer(2) == 42
    if how == "compiled":  # a changed header is a new library
        cxx = native.compiler()
        before = native.library_path(name, [source], cxx, headers=[header])
        header.write_text("#define ANSWER_BASE 41\n")
        assert native.library_path(name, [source], cxx, headers=[header]) != before


# A library that uses no Python C API: it takes a Python object as an opaque handle
# and raises through the kernel's API (fail).
_MODEL = """
#include "astra_kernel_api.h"
namespace %(name)s {
static const AstraKernelApi* api;
}
extern "C" long long %(name)s_start(long long address, PyObject* handle) {
  %(name)s::api = reinterpret_cast<const AstraKernelApi*>(address);
  return handle != nullptr ? %(name)s::api->version : 0;
}
extern "C" long long %(name)s_hash_or_fail(long long src, long long dst, long long tag) {
  if (src < 0) return %(name)s::api->fail(ASTRA_INDEX_ERROR, "no NPU below 0");
  return static_cast<long long>(%(name)s::api->flow_hash(src, dst, tag));
}
"""


@pytest.mark.parametrize("how", ["compiled", "jit"])
def test_a_library_takes_python_objects_and_raises_the_exception_it_sets(tmp_path, monkeypatch, how):
    from astra_core.events import KERNEL_HEADERS, kernel, kernel_api_address

    _build_by(how, monkeypatch, tmp_path)
    name = f"api_user_{how}"
    source = tmp_path / f"{name}.cc"
    source.write_text(_MODEL % {"name": name})
    signatures = {
        f"{name}_start": ("int64", ("int64", "object")),
        f"{name}_hash_or_fail": ("int64", ("int64", "int64", "int64")),
    }
    library = native.load(name, [source], signatures, KERNEL_HEADERS)
    assert library.how == how
    assert getattr(library, f"{name}_start")(kernel_api_address(), object()) == 2  # the API's version
    assert getattr(library, f"{name}_hash_or_fail")(3, 5, 7) == kernel().flow_hash(3, 5, 7)
    with pytest.raises(IndexError, match="^no NPU below 0$"):
        getattr(library, f"{name}_hash_or_fail")(-1, 5, 7)
    # no exception is left pending: the next call returns its result
    assert getattr(library, f"{name}_hash_or_fail")(3, 5, 7) == kernel().flow_hash(3, 5, 7)
