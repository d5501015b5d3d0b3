"""The C++ unit tests of the kernel's public headers (``tests/cpp/units.cc``: the flat
hash map, the event heap, the max-min solver, the routing, a model's routes and the
pipeline, each against a reference of its own), built with the compiler and run.
``make sanitize`` runs them under AddressSanitizer and UndefinedBehaviorSanitizer."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from astra_core import native
from astra_core.events import KERNEL_HEADERS

UNITS = Path(__file__).resolve().parent / "units.cc"


def test_the_headers_pass_their_unit_tests(tmp_path):
    cxx = native.compiler()
    if cxx is None:
        pytest.skip("no C++ compiler here")
    binary = tmp_path / "units"
    include = KERNEL_HEADERS[0].parent
    flags = ["-std=c++17", "-O1", "-Wall", "-ffp-contract=off", f"-I{include}"]
    subprocess.run([cxx, *flags, str(UNITS), "-o", str(binary)], check=True)
    run = subprocess.run([str(binary)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout
    checks = int(run.stdout.split()[-4])
    assert run.stdout.endswith(", 0 failed\n") and checks > 300_000
