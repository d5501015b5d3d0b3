"""The committed et_def_pb2.py is what scripts/gen_proto.py makes from et_def.proto."""

from __future__ import annotations

import importlib.util
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load_gen_proto():
    spec = importlib.util.spec_from_file_location("gen_proto", REPO / "scripts" / "gen_proto.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_regenerating_gives_the_committed_module(tmp_path):
    pytest.importorskip("grpc_tools")
    gen_proto = _load_gen_proto()
    found = metadata.version("grpcio-tools")
    if found != gen_proto.GRPCIO_TOOLS_VERSION:
        pytest.skip(
            f"grpcio-tools {found} installed, generation is pinned to {gen_proto.GRPCIO_TOOLS_VERSION}"
        )
    fresh = gen_proto.generate(tmp_path).read_bytes()
    committed = (REPO / gen_proto.GENERATED).read_bytes()
    assert fresh == committed, "et_def_pb2.py is stale: run scripts/gen_proto.py"
