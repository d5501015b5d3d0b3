#!/usr/bin/env python3
"""Regenerate ``astra_core/workload/et_def_pb2.py`` from ``et_def.proto``.

The generated module is committed, so users need only the protobuf runtime.
It is made by the protoc bundled in one pinned ``grpcio-tools`` release so that
regenerating gives the committed file byte for byte (the test
``tests/workload/test_gen_proto.py`` checks this).

Why this pin: protoc stamps the generated module with its own protobuf version
and the runtime refuses gencode newer than itself (and protobuf 5.27 also
refuses another major version). grpcio-tools 1.68.1 bundles protoc 28.1,
whose gencode says 5.28.1, so the module loads on every protobuf runtime from
5.28.1 up to and including 7.x.

grpcio-tools 1.68.1 wants protobuf<6, so keep it out of the project's
environment and run this script from a separate one::

    python -m venv /tmp/gen && /tmp/gen/bin/pip install grpcio-tools==1.68.1
    /tmp/gen/bin/python scripts/gen_proto.py          # rewrite the module
    /tmp/gen/bin/python scripts/gen_proto.py --check  # exit 1 if stale
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from importlib import metadata
from pathlib import Path

GRPCIO_TOOLS_VERSION = "1.68.1"

REPO = Path(__file__).resolve().parents[1]
PROTO = Path("astra_core/workload/et_def.proto")  # relative to REPO, as protoc sees it
GENERATED = PROTO.with_name("et_def_pb2.py")


def check_grpc_tools() -> None:
    """Raise RuntimeError unless the pinned grpcio-tools is importable."""
    try:
        found = metadata.version("grpcio-tools")
    except metadata.PackageNotFoundError:
        found = None
    if found != GRPCIO_TOOLS_VERSION:
        raise RuntimeError(
            f"gen_proto: needs grpcio-tools=={GRPCIO_TOOLS_VERSION}, found "
            f"{found or 'none'}; see the docstring of scripts/gen_proto.py"
        )


def generate(out_dir: Path) -> Path:
    """Run protoc on the schema, writing under ``out_dir``; return the module path.

    Raises RuntimeError if grpcio-tools is missing, the wrong version, or
    protoc fails.
    """
    check_grpc_tools()
    from grpc_tools import protoc  # imported late: optional, heavy

    args = ["protoc", f"-I{REPO}", f"--python_out={out_dir}", str(PROTO)]
    if protoc.main(args) != 0:
        raise RuntimeError(f"gen_proto: protoc failed on {PROTO}")
    return Path(out_dir) / GENERATED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="do not write; exit 1 if the committed module is stale"
    )
    args = parser.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = generate(Path(tmp)).read_bytes()
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 2
    target = REPO / GENERATED
    current = target.read_bytes() if target.exists() else None
    if args.check:
        if current != fresh:
            print(f"{GENERATED} is stale; run scripts/gen_proto.py", file=sys.stderr)
            return 1
        return 0
    if current != fresh:
        target.write_bytes(fresh)
        print(f"wrote {GENERATED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
