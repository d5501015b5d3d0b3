"""The ``astra`` command line, driven through click's runner and once as the installed script.

Numbers come from upstream ASTRA-sim (the bundled ResNet-50 example is the
reference case ``text_unaware_ring8_Resnet50_DataParallel``) or are derived
from the trace files themselves.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from astra_core.cli import main
from astra_core.plugins import PluginSettings, backend_registry
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.writer import make_node, write_rank_trace
from tests.conftest import isolate_plugins, read_et_nodes

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "resnet50_dp"
PREFIX = EXAMPLE / "workload" / "Resnet50_DataParallel"
RESNET_ARGS = [
    "--workload",
    PREFIX,
    "--system",
    EXAMPLE / "system.json",
    "--network",
    EXAMPLE / "network.yml",
    "--memory",
    EXAMPLE / "memory.json",
]
NPUS = 8

# Upstream ASTRA-sim 518bd51 on this input (examples/resnet50_dp/README.md and
# tests/data/reference/expected.json, case text_unaware_ring8_Resnet50_DataParallel).
UPSTREAM_FINISH_NS = 1_082_479_776
UPSTREAM_EXPOSED_NS = 29_776


@pytest.fixture(autouse=True)
def _plugins(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)


def installed() -> list[str]:
    """Backends of the installed entry points (today only analytical)."""
    return backend_registry(settings=PluginSettings()).names()


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def attr(node: pb.Node, name: str):
    for a in node.attr:
        if a.name == name:
            return getattr(a, a.WhichOneof("value"))
    raise KeyError(name)


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    """One CLI run of the bundled example: (click result, the --json document)."""
    out = tmp_path_factory.mktemp("resnet")
    with pytest.MonkeyPatch.context() as mp:
        isolate_plugins(mp, out)
        result = invoke("run", *RESNET_ARGS, "--json", out / "run.json")
    assert result.exit_code == 0, result.output
    return result, json.loads((out / "run.json").read_text())


def test_run_json_has_upstream_step_time_for_every_rank(resnet):
    _, doc = resnet
    assert doc["backend"] == "analytical"
    assert [r["rank"] for r in doc["ranks"]] == list(range(NPUS))
    for r in doc["ranks"]:
        assert set(r) >= {"rank", "finish_ns", "compute_ns", "comm_ns", "exposed_comm_ns"}
        assert r["finish_ns"] == UPSTREAM_FINISH_NS
        assert r["exposed_comm_ns"] == UPSTREAM_EXPOSED_NS
    assert doc["step_ns"] == UPSTREAM_FINISH_NS


def test_run_json_compute_and_messages_follow_from_the_traces(resnet):
    _, doc = resnet
    system = json.loads((EXAMPLE / "system.json").read_text())
    chunks = system["preferred-dataset-splits"]
    assert system["all-reduce-implementation"] == ["ring"]
    total_messages = total_bytes = 0
    for r in doc["ranks"]:
        nodes = read_et_nodes(PREFIX.with_name(f"{PREFIX.name}.{r['rank']}.et"))
        # GPU compute = the sum of the COMP nodes' durations (µs -> ns), no roofline here.
        compute_ns = 1000 * sum(n.duration_micros for n in nodes if n.type == pb.COMP_NODE)
        assert r["compute_ns"] == compute_ns
        # Upstream's exposed communication: finish - GPU compute (1,082,479,776 - 1,082,450,000).
        assert r["exposed_comm_ns"] == r["finish_ns"] - compute_ns
        # comm_ns: the all-reduces' messages in flight (4.8 ms, mostly under the backward
        # pass), more than the 29.776 µs exposed tail; comm_wait_ns: the collectives open
        # with nothing of this rank moving (chunks queued behind others, under compute).
        assert UPSTREAM_EXPOSED_NS <= r["comm_ns"] <= r["finish_ns"]
        assert 0 < r["comm_wait_ns"] < r["comm_ns"]
        colls = [n for n in nodes if n.type == pb.COMM_COLL_NODE]
        assert all(attr(n, "comm_type") == pb.ALL_REDUCE for n in colls)
        # A ring all-reduce of S bytes over p NPUs, in `chunks` chunks: each chunk is a
        # reduce-scatter then an all-gather, p-1 steps each, one message of S/(chunks*p)
        # bytes per rank per step.  So this rank sends chunks*2(p-1) messages and
        # 2(p-1)/p * S bytes per collective.
        total_messages += len(colls) * chunks * 2 * (NPUS - 1)
        total_bytes += sum(2 * (NPUS - 1) * attr(n, "comm_size") // NPUS for n in colls)
    assert doc["messages"] == total_messages == 24_192
    assert doc["message_bytes"] == total_bytes


def test_run_prints_the_table_with_the_step_time(resnet):
    result, _ = resnet
    text = result.stdout
    assert "step time: 1,082,479.776 µs (8 NPUs, 24,192 messages)" in text
    # One row per rank: finish 1,082,479.776 µs, compute 1,082,450.000 µs, exposed 29.776 µs.
    rows = [
        line
        for line in text.splitlines()
        if "1,082,479.776" in line and "1,082,450.000" in line and "29.776" in line
    ]
    assert len(rows) == NPUS
    assert result.stderr == ""


def test_example_matches_the_reference_case(reference_dir):
    # The bundled example is upstream's reference case, inputs and all.
    cases = json.loads((reference_dir / "expected.json").read_text())["cases"]
    case = next(c for c in cases if c["name"] == "text_unaware_ring8_Resnet50_DataParallel")
    assert case["finish_ns"] == [UPSTREAM_FINISH_NS] * NPUS
    assert case["exposed_comm_ns"] == [UPSTREAM_EXPOSED_NS] * NPUS
    for rank in range(NPUS):
        ours = PREFIX.with_name(f"{PREFIX.name}.{rank}.et").read_bytes()
        theirs = (reference_dir / f"{case['workload']}.{rank}.et").read_bytes()
        assert ours == theirs


def test_installed_console_script_runs_the_example(tmp_path):
    script = Path(sys.executable).with_name("astra")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "astra_core.cli"]
    out = tmp_path / "run.json"
    proc = subprocess.run(
        [*command, "run", *map(str, RESNET_ARGS), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert [r["finish_ns"] for r in doc["ranks"]] == [UPSTREAM_FINISH_NS] * NPUS
    assert "step time: 1,082,479.776 µs" in proc.stdout


def test_backends_lists_analytical_as_usable():
    result = invoke("backends")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert [line.split(" ")[0].rstrip(":") for line in lines] == installed()
    assert [line for line in lines if line.startswith("analytical ")] == [
        "analytical (default): usable — congestion-unaware analytical model (upstream "
        "ASTRA-sim): hops x latency + bytes / bandwidth per message"
    ]


# -- bad input: one line on stderr, exit code != 0, no traceback ------------------------------

RING2 = "topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"


def two_rank_trace(directory: Path) -> Path:
    """Rank 0 sends 1 MiB to rank 1 (a valid trace); returns its prefix."""
    prefix = directory / "p2p"
    write_rank_trace(
        f"{prefix}.0.et", [make_node(1, "send", pb.COMM_SEND_NODE, comm_dst=1, comm_size=1 << 20, comm_tag=1)]
    )
    write_rank_trace(
        f"{prefix}.1.et", [make_node(1, "recv", pb.COMM_RECV_NODE, comm_src=0, comm_size=1 << 20, comm_tag=1)]
    )
    return prefix


def case_system_unknown_key(d: Path, mp: pytest.MonkeyPatch):
    system = json.loads((EXAMPLE / "system.json").read_text())
    system["bogus-key"] = 1
    (d / "system.json").write_text(json.dumps(system))
    args = ["run", "--workload", PREFIX, "--system", d / "system.json", "--network", EXAMPLE / "network.yml"]
    return args, [str(d / "system.json"), "bogus-key"]


def case_network_unknown_key(d: Path, mp: pytest.MonkeyPatch):
    (d / "network.yml").write_text(RING2 + "links: [ 3 ]\n")
    args = [
        "run",
        "--workload",
        two_rank_trace(d),
        "--system",
        EXAMPLE / "system.json",
        "--network",
        d / "network.yml",
    ]
    return args, [str(d / "network.yml"), "links"]


def case_fewer_traces_than_npus(d: Path, mp: pytest.MonkeyPatch):
    # 2 trace files, 8 NPUs in the network.
    args = [
        "run",
        "--workload",
        two_rank_trace(d),
        "--system",
        EXAMPLE / "system.json",
        "--network",
        EXAMPLE / "network.yml",
    ]
    return args, [str(d / "p2p"), "8 NPUs", "found 2"]


def case_more_traces_than_npus(d: Path, mp: pytest.MonkeyPatch):
    # 8 trace files, 2 NPUs in the network.
    (d / "network.yml").write_text(RING2)
    args = ["run", "--workload", PREFIX, "--system", EXAMPLE / "system.json", "--network", d / "network.yml"]
    return args, [str(PREFIX), "2 NPUs", "found 8"]


def case_garbage_et(d: Path, mp: pytest.MonkeyPatch):
    (d / "network.yml").write_text(RING2)
    prefix = two_rank_trace(d)
    Path(f"{prefix}.1.et").write_bytes(b"\xff" * 64)  # a varint that never ends
    args = ["run", "--workload", prefix, "--system", EXAMPLE / "system.json", "--network", d / "network.yml"]
    return args, ["p2p.1.et"]


def case_truncated_et(d: Path, mp: pytest.MonkeyPatch):
    (d / "network.yml").write_text(RING2)
    prefix = d / "w"
    for rank in range(2):
        data = PREFIX.with_name(f"{PREFIX.name}.{rank}.et").read_bytes()
        Path(f"{prefix}.{rank}.et").write_bytes(data[: len(data) // 2] if rank else data)
    args = ["run", "--workload", prefix, "--system", EXAMPLE / "system.json", "--network", d / "network.yml"]
    return args, ["w.1.et", "node"]


def case_unknown_backend(d: Path, mp: pytest.MonkeyPatch):
    args = ["run", *RESNET_ARGS, "--backend", "x"]
    return args, [f"error: unknown backend 'x'; available: {', '.join(installed())}"]


def case_plugins_toml_unknown_key(d: Path, mp: pytest.MonkeyPatch):
    toml = d / "plugins.toml"
    toml.write_text('default_backend = "analytical"\nbackendz = []\n')
    mp.setenv("ASTRA_PLUGINS_TOML", str(toml))
    return ["backends"], [str(toml), "backendz"]


def case_run_never_finishes(d: Path, mp: pytest.MonkeyPatch):
    # Rank 1 waits for a message rank 0 never sends: a deadlock, reported not hung.
    (d / "network.yml").write_text(RING2)
    prefix = d / "dead"
    write_rank_trace(f"{prefix}.0.et", [make_node(1, "idle", pb.COMP_NODE, duration_micros=1)])
    write_rank_trace(
        f"{prefix}.1.et", [make_node(1, "recv", pb.COMM_RECV_NODE, comm_src=0, comm_size=64, comm_tag=4)]
    )
    args = ["run", "--workload", prefix, "--system", EXAMPLE / "system.json", "--network", d / "network.yml"]
    return args, ["rank 1", "recv"]


@pytest.mark.parametrize(
    "case",
    [
        case_system_unknown_key,
        case_network_unknown_key,
        case_fewer_traces_than_npus,
        case_more_traces_than_npus,
        case_garbage_et,
        case_truncated_et,
        case_unknown_backend,
        case_plugins_toml_unknown_key,
        case_run_never_finishes,
    ],
    ids=lambda f: f.__name__[5:],
)
def test_bad_input_is_one_error_line(case, tmp_path, monkeypatch):
    args, mentions = case(tmp_path, monkeypatch)
    result = invoke(*args)
    assert result.exit_code != 0
    assert isinstance(result.exception, SystemExit)  # an AstraError, not a crash
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for text in mentions:
        assert text in lines[0]
    assert result.stdout == ""  # no table for a failed run


def test_unknown_backend_message_is_exact():
    result = invoke("run", *RESNET_ARGS, "--backend", "x")
    assert result.exit_code == 1
    assert "analytical" in installed()  # today the only one: "available: analytical"
    assert result.stderr == f"error: unknown backend 'x'; available: {', '.join(installed())}\n"


def test_small_run_json_matches_closed_form(tmp_path):
    # Ring 2, 50 GB/s, 500 ns: 1 MiB takes 500 + 2^20 / (50 * 2^30 / 1e9) = 20031.25 ns,
    # truncated to 20031; the send completes on arrival, so both ranks finish then.
    (tmp_path / "network.yml").write_text(RING2)
    out = tmp_path / "run.json"
    result = invoke(
        "run",
        "--workload",
        two_rank_trace(tmp_path),
        "--system",
        EXAMPLE / "system.json",
        "--network",
        tmp_path / "network.yml",
        "--json",
        out,
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    for r in doc["ranks"]:
        assert r["finish_ns"] == math.floor(500 + (1 << 20) / (50 * 2**30 / 1e9)) == 20031
        assert r["compute_ns"] == 0
        assert r["comm_ns"] == r["exposed_comm_ns"] == 20031
    assert doc["messages"] == 1 and doc["message_bytes"] == 1 << 20


def test_every_problem_of_a_config_file_gets_its_own_error_line(tmp_path):
    # Two unknown keys and a negative delay: three problems, three "error:" lines,
    # each naming the file and the key.
    data = json.loads((EXAMPLE / "system.json").read_text())
    data.update({"foo-bar": 1, "baz-qux": 2, "endpoint-delay": -5})
    path = tmp_path / "sys.json"
    path.write_text(json.dumps(data))
    result = invoke(
        "run",
        "--workload",
        str(EXAMPLE / "workload" / "Resnet50_DataParallel"),
        "--system",
        path,
        "--network",
        EXAMPLE / "network.yml",
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 3
    assert all(line.startswith(f"error: {path}: ") for line in lines)
    assert {
        key for key in ("foo-bar", "baz-qux", "endpoint-delay") if any(key in line for line in lines)
    } == {"foo-bar", "baz-qux", "endpoint-delay"}
