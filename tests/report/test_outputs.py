"""``astra run --csv/--parquet/--plots``: the per-collective tables and the PNG plots.

Schemas are checked column by column (names, order and types, in the CSV
header and in the Parquet schema); contents against the trace files and the
run's own JSON. PNGs are checked to be real images of a sensible size.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from astra_core.api import simulate
from astra_core.cli import main
from astra_core.config.system import upstream_system
from astra_core.results import whole_ns
from astra_core.topology.generators import leaf_spine
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators.micro import write_micro
from tests.conftest import isolate_plugins, read_et_nodes

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "resnet50_dp"
PREFIX = EXAMPLE / "workload" / "Resnet50_DataParallel"
ARGS = [
    "--workload",
    str(PREFIX),
    "--system",
    str(EXAMPLE / "system.json"),
    "--network",
    str(EXAMPLE / "network.yml"),
]
NPUS = 8
COLLECTIVES_PER_RANK = 54

COLUMNS = [
    "rank",
    "node_id",
    "name",
    "type",
    "bytes",
    "group",
    "chunks",
    "start_ns",
    "end_ns",
    "duration_ns",
    "in_flight_ns",
    "wait_ns",
    "all_reduce_dim0_ns",
]
ARROW_TYPES = {
    "rank": pa.int64(),
    "node_id": pa.int64(),
    "bytes": pa.int64(),
    "chunks": pa.int64(),
    "start_ns": pa.int64(),
    "end_ns": pa.int64(),
    "duration_ns": pa.int64(),
    "in_flight_ns": pa.int64(),
    "wait_ns": pa.int64(),
    "all_reduce_dim0_ns": pa.int64(),
}
STRING_COLUMNS = ("name", "type", "group")


@pytest.fixture(autouse=True)
def _plugins(tmp_path, monkeypatch):
    isolate_plugins(monkeypatch, tmp_path)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; fails if the file is not a PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    out = tmp_path_factory.mktemp("outputs")
    with pytest.MonkeyPatch.context() as mp:
        isolate_plugins(mp, out)
        result = invoke(
            "run",
            *ARGS,
            "--json",
            out / "run.json",
            "--csv",
            out / "c.csv",
            "--parquet",
            out / "sub" / "c.parquet",
            "--plots",
            out / "plots",
        )
    assert result.exit_code == 0, result.output
    return out, result


def test_csv_schema_and_rows(outputs):
    out, _ = outputs
    header = (out / "c.csv").read_text().splitlines()[0]
    assert header.split(",") == COLUMNS
    frame = pd.read_csv(out / "c.csv", keep_default_na=False)
    assert len(frame) == NPUS * COLLECTIVES_PER_RANK
    assert frame["rank"].value_counts().to_dict() == {r: COLLECTIVES_PER_RANK for r in range(NPUS)}
    assert set(frame["type"]) == {"ALL_REDUCE"} and set(frame["group"]) == {""}
    sizes = {
        n.id: n for n in read_et_nodes(PREFIX.with_name(f"{PREFIX.name}.3.et")) if n.type == pb.COMM_COLL_NODE
    }
    rank3 = frame[frame["rank"] == 3]
    assert sorted(rank3["node_id"]) == sorted(sizes)
    assert set(rank3["name"]) == {n.name for n in sizes.values()}
    assert (frame["end_ns"] - frame["start_ns"] == frame["duration_ns"]).all()
    # a collective's time is its messages moving or it waiting, nothing else
    assert (frame["in_flight_ns"] + frame["wait_ns"] == frame["duration_ns"]).all()
    assert (frame["in_flight_ns"] > 0).all() and (frame["wait_ns"] >= 0).all()


def test_parquet_schema_and_same_rows_as_csv(outputs):
    out, _ = outputs
    table = pq.read_table(out / "sub" / "c.parquet")  # parent directory created
    assert table.schema.names == COLUMNS
    for name, kind in ARROW_TYPES.items():
        assert table.schema.field(name).type == kind, name
    for name in STRING_COLUMNS:
        assert pa.types.is_string(table.schema.field(name).type) or pa.types.is_large_string(
            table.schema.field(name).type
        ), name
    parquet = table.to_pandas()
    csv = pd.read_csv(out / "c.csv", keep_default_na=False)
    for column in COLUMNS:
        assert parquet[column].tolist() == csv[column].tolist(), column


def test_collectives_end_within_each_rank_finish(outputs):
    out, _ = outputs
    doc = json.loads((out / "run.json").read_text())
    finish = {r["rank"]: r["finish_ns"] for r in doc["ranks"]}
    frame = pd.read_parquet(out / "sub" / "c.parquet")
    assert (frame["end_ns"] <= frame["rank"].map(finish)).all()
    assert (frame["start_ns"] >= 0).all()


def test_plots_are_written_and_readable(outputs):
    out, result = outputs
    plots = sorted(p.name for p in (out / "plots").iterdir())
    # The congestion-unaware backend keeps no link statistics: no links.png.
    assert plots == ["breakdown.png", "timeline.png"]
    for name in plots:
        path = out / "plots" / name
        width, height = png_size(path)
        assert width >= 600 and height >= 250, (name, width, height)
        assert path.stat().st_size > 10_000  # drawn, not blank
        assert f"wrote {path}" in result.output.replace("\n", "")


def test_link_plot_for_a_backend_with_link_statistics(tmp_path):
    plots = tmp_path / "plots"
    result = invoke("run", *ARGS, "--backend", "analytical-congestion", "--plots", plots)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in plots.iterdir()) == ["breakdown.png", "links.png", "timeline.png"]
    width, height = png_size(plots / "links.png")
    assert width >= 600 and height >= 250


def test_unwritable_outputs_are_one_line_errors(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = invoke("run", *ARGS, "--csv", blocker / "c.csv")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines == [f"error: --csv {blocker / 'c.csv'}: cannot write: {blocker} is a file, not a directory"]
    result = invoke("run", *ARGS, "--plots", blocker / "plots")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: --plots {blocker / 'plots'}: cannot write: {blocker} is a file, not a directory"
    ]


def test_many_ranks_are_grouped_in_the_breakdown_plot(tmp_path):
    # 256 NPUs (4 x 64 ring): more ranks than bars, so consecutive ranks are grouped.
    import astra
    from astra_core.report.plots import MAX_BARS, bar_groups, write_plots
    from astra_core.workload.writer import make_node, write_rank_trace

    prefix = tmp_path / "ar"
    for rank in range(256):
        write_rank_trace(
            f"{prefix}.{rank}.et",
            [
                make_node(1, "fwd", pb.COMP_NODE, duration_micros=2),
                make_node(
                    2, "ar", pb.COMM_COLL_NODE, data_deps=[1], comm_type=pb.ALL_REDUCE, comm_size=1 << 16
                ),
            ],
        )
    network = {
        "topology": ["Ring", "Ring"],
        "npus_count": [4, 64],
        "bandwidth": [100.0, 25.0],
        "latency": [100.0, 1000.0],
    }
    system = json.loads((EXAMPLE / "system.json").read_text())
    for collective in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        system[f"{collective}-implementation"] = ["ring", "ring"]
    report = astra.simulate(str(prefix), system, network)
    groups, labels = bar_groups(report.breakdown())
    assert MAX_BARS == 64 and [len(g) for g in groups] == [4] * 64
    assert labels[:2] == ["0-3", "4-7"] and labels[-1] == "252-255"
    paths = write_plots(report, tmp_path / "plots")
    assert [p.name for p in paths] == ["breakdown.png", "timeline.png"]
    for path in paths:
        width, height = png_size(path)
        assert width >= 600 and height >= 250


def test_json_and_tables_give_times_as_whole_ns_on_a_fractional_backend(tmp_path):
    # The flow backend times messages in fractions of a ns; the outputs round each
    # time to the nearest ns, and a duration is its rounded end minus its rounded start.
    write_micro("all-reduce", 3_000_001, 8, str(tmp_path / "ar"))
    result = simulate(
        str(tmp_path / "ar"), upstream_system("ring", 1), topology=leaf_spine(8, 2, 2), backend="flow"
    )
    assert any(r.finish_ns != int(r.finish_ns) for r in result.ranks)  # the case is fractional
    out = json.loads(json.dumps(result.to_dict()))
    assert type(out["step_ns"]) is int and out["step_ns"] == round(result.step_ns)
    for row, rank in zip(out["ranks"], result.ranks):
        for key in ("finish_ns", "compute_ns", "cpu_ns", "comm_ns", "exposed_comm_ns"):
            assert type(row[key]) is int and abs(row[key] - getattr(rank, key)) <= 0.5, key
    frame = result.collective_frame()
    for column in ("start_ns", "end_ns", "duration_ns", "all_reduce_dim0_ns"):
        assert str(frame[column].dtype) == "Int64", column
    assert (frame["duration_ns"] == frame["end_ns"] - frame["start_ns"]).all()
    assert sorted(frame["end_ns"]) == sorted(whole_ns(r.finish_ns) for r in result.collectives)
