"""The kernel's type stub (astra_core/_astra_kernel.pyi) is what scripts/kernel_stub.py
makes from the compiled kernel, and mypy's stubtest finds it true to the module."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ALLOWLIST = Path(__file__).with_name("kernel_stub_allowlist.txt")


def _load_kernel_stub():
    spec = importlib.util.spec_from_file_location("kernel_stub", REPO / "scripts" / "kernel_stub.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def kernel_stub():
    module = _load_kernel_stub()
    try:
        module.kernel_library()
    except RuntimeError as exc:  # cppyy's JIT: no library to generate from
        pytest.skip(str(exc))
    return module


def test_regenerating_gives_the_committed_stub(kernel_stub):
    committed = kernel_stub.STUB.read_text()
    if f"# made with {kernel_stub.made_with()}\n" not in committed:  # other tools write other text
        pytest.skip(f"the stub was made with other tools than {kernel_stub.made_with()}")
    assert kernel_stub.generate() == kernel_stub.STUB.read_text(), (
        "astra_core/_astra_kernel.pyi is stale: run scripts/kernel_stub.py"
    )


def test_stubtest_finds_the_stub_true_to_the_module(kernel_stub, tmp_path):
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "_astra_kernel.pyi").write_text(kernel_stub.STUB.read_text())
    # the stub names astra's own classes: mypy reads them from the checkout (as the
    # project's mypy configuration does, without third-party stubs)
    config = f"[mypy]\nmypy_path = {stubs}:{REPO}\nignore_missing_imports = True\nfollow_imports = silent\n"
    (tmp_path / "mypy.ini").write_text(config)
    env = kernel_stub.importable(kernel_stub.kernel_library(), tmp_path)
    run = "import sys; from mypy.stubtest import main; sys.exit(main())"
    options = ["--mypy-config-file", str(tmp_path / "mypy.ini"), "--allowlist", str(ALLOWLIST)]
    result = subprocess.run(
        [sys.executable, "-c", run, kernel_stub.MODULE, "--ignore-disjoint-bases", *options],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
