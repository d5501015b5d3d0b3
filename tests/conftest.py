"""Shared fixtures: where the upstream reference inputs live."""

from pathlib import Path

import pytest

#: Upstream's inputs and results (a copy of the project's shared/reference,
#: README.md inside), kept in the repository so that a clone tests on its own.
REFERENCE_DIR = Path(__file__).resolve().parent / "data" / "reference"


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """``tests/data/reference``: upstream's inputs and results."""
    assert REFERENCE_DIR.is_dir(), f"reference inputs missing at {REFERENCE_DIR}"
    return REFERENCE_DIR


def run_reference_case(case: dict, **options):
    """Simulate one case of ``expected.json`` on its inputs in :data:`REFERENCE_DIR`
    (warnings silenced); ``options`` go to ``simulate`` (e.g. ``symmetry``)."""
    import warnings

    from astra_core.api import simulate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return simulate(
            REFERENCE_DIR / case["workload"],
            REFERENCE_DIR / case["system"],
            REFERENCE_DIR / case["network"],
            memory=REFERENCE_DIR / case["memory"],
            backend=case["backend"],
            **options,
        )


PLUGIN_ENV = ("ASTRA_PLUGINS", "ASTRA_DISABLE_PLUGINS", "ASTRA_DEFAULT_BACKEND", "ASTRA_PLUGINS_TOML")


def isolate_plugins(mp: pytest.MonkeyPatch, directory: Path) -> None:
    """Only installed entry points: no plugin settings from the environment or a plugins.toml."""
    for var in PLUGIN_ENV:
        mp.delenv(var, raising=False)
    empty = directory / "plugins.toml"
    empty.write_text("")
    mp.setenv("ASTRA_PLUGINS_TOML", str(empty))


def read_et_nodes(path: Path) -> list:
    """The Node messages of a Chakra ET file, decoded independently of astra's reader
    (varint-length-delimited messages, GlobalMetadata first)."""
    from astra_core.workload import et_def_pb2 as pb

    data = path.read_bytes()
    pos, messages = 0, []
    while pos < len(data):
        length = shift = 0
        while True:
            byte = data[pos]
            pos += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        messages.append(data[pos : pos + length])
        pos += length
    nodes = []
    for raw in messages[1:]:
        node = pb.Node()
        node.ParseFromString(raw)
        nodes.append(node)
    return nodes


def write_pair_trace(prefix, *, nbytes: int, tag: int, fwd_us: int, bwd_us: int, rank1_extra=()) -> str:
    """Two ranks: rank 0 computes ``fwd_us`` then sends ``nbytes`` (tag ``tag``) to
    rank 1, which receives them and then computes ``bwd_us``; ``rank1_extra``
    nodes are appended to rank 1's trace. Returns the prefix."""
    from astra_core.workload import et_def_pb2 as pb
    from astra_core.workload.writer import make_node, write_rank_trace

    write_rank_trace(
        f"{prefix}.0.et",
        [
            make_node(1, "fwd", pb.COMP_NODE, duration_micros=fwd_us),
            make_node(
                2, "send", pb.COMM_SEND_NODE, data_deps=[1], comm_dst=1, comm_size=nbytes, comm_tag=tag
            ),
        ],
    )
    write_rank_trace(
        f"{prefix}.1.et",
        [
            make_node(1, "recv", pb.COMM_RECV_NODE, comm_src=0, comm_size=nbytes, comm_tag=tag),
            make_node(2, "bwd", pb.COMP_NODE, data_deps=[1], duration_micros=bwd_us),
            *rank1_extra,
        ],
    )
    return str(prefix)


def write_nccl_system(system: Path, directory: Path, gpus_per_node: int, launch_us: float = 5.0) -> Path:
    """``directory/nccl-system.json``: ``system`` with every collective on the NCCL model of
    H100s, ``gpus_per_node`` per node, and the NCCL profile ``profile.json`` beside it
    (launch ``launch_us``). Returns the profile's path, for a test to edit."""
    import json

    data = json.loads(system.read_text())
    for key in [k for k in data if k.endswith("-implementation")]:
        data[key] = ["nccl"]
    data["nccl"] = {"gpu": "H100", "gpus-per-node": gpus_per_node, "profile": "profile.json"}
    (directory / "nccl-system.json").write_text(json.dumps(data))
    profile = directory / "profile.json"
    profile.write_text(json.dumps({"format": "astra-nccl-profile/1", "launch-us": launch_us}))
    return profile


def one_error_line(result) -> str:
    """The one ``error: ...`` line of a CLI run that failed on bad input (click
    CliRunner result): exit code 1, nothing on stdout, no traceback."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert result.stdout == ""
    return lines[0]


@pytest.fixture
def built_backends():
    """Every network backend the host builds during the test, in order (the last one
    built ran the step; :func:`astra_core.plugins.backends_built`)."""
    from astra_core.plugins import backends_built

    with backends_built() as built:
        yield built
