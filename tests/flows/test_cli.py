"""``astra flows gen`` and ``astra flows run`` through click, as a user runs them."""

from __future__ import annotations

import csv
import math
import re

import pytest
from click.testing import CliRunner

from astra_core.cli import main
from astra_core.flows.cdf import load_cdf
from astra_core.flows.flowfile import FlowSpec, format_flows, read_flows
from astra_core.flows.generate import poisson_flows
from astra_core.flows.run import ideal_fct_ns
from astra_core.topology.generators import fat_tree
from astra_core.topology.ns3_format import read_ns3_topology, write_ns3_topology
from tests.conftest import one_error_line
from tests.flows.conftest import bucket_of, percentile

pytestmark = pytest.mark.usefixtures("plugins")

LOAD, DURATION_MS, SEED = 0.4, 0.2, 3


@pytest.fixture
def fabric(tmp_path):
    """``astra topology fat-tree --k 4`` (100 Gbps, 1 us links) written as an ns-3 file."""
    path = tmp_path / "fat_tree.txt"
    write_ns3_topology(fat_tree(4, 100.0, 1000.0), path)
    return path


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def gen(fabric, out, *extra):
    return invoke(
        "flows",
        "gen",
        "--cdf",
        "hadoop",
        "--load",
        LOAD,
        "--duration-ms",
        DURATION_MS,
        "--topology",
        fabric,
        "--seed",
        SEED,
        "-o",
        out,
        *extra,
    )


def test_gen_writes_the_flows_it_reports(fabric, tmp_path):
    out = tmp_path / "sub" / "flows.txt"
    result = gen(fabric, out)
    assert result.exit_code == 0, result.output
    flows = read_flows(out, npus=16)
    expected = poisson_flows(load_cdf("hadoop"), 16, 100.0, LOAD, 200_000, SEED)
    assert flows == expected
    total = sum(f.size_bytes for f in flows)
    # The drawn flows' mean (34,012 B), not the CDF's mean (120,421 B), is the one "drawn".
    assert result.stdout == (
        f"{len(flows)} flows, {total / 1e6:.1f} MB, mean {total / len(flows):,.0f} B drawn "
        f"(the CDF's mean 120,421 B); 16 hosts at 100 Gbps x 0.4 load over 0.2 ms; wrote {out}\n"
    )
    assert f"mean {total / len(flows):,.0f} B drawn" == "mean 34,012 B drawn"
    assert out.read_text().splitlines()[0] == str(len(flows))
    # 16 hosts x 200 us / (120,420.75 x 8 / 40 ns) = 132.9 flows expected
    mean = 16 * 200_000 / (120_420.75 * 8 / (100 * LOAD))
    assert abs(len(flows) - mean) <= 4 * math.sqrt(mean)


def test_gen_reads_a_cdf_file(fabric, tmp_path):
    cdf = tmp_path / "fixed.cdf"
    cdf.write_text("999.5 0\n1000.5 100\n")  # every flow 999 or 1000 bytes
    result = invoke(
        "flows",
        "gen",
        "--cdf",
        cdf,
        "--load",
        1,
        "--duration-ms",
        0.01,
        "--topology",
        fabric,
        "-o",
        tmp_path / "f.txt",
    )
    assert result.exit_code == 0, result.output
    assert {f.size_bytes for f in read_flows(tmp_path / "f.txt")} <= {999, 1000}
    sizes = [f.size_bytes for f in read_flows(tmp_path / "f.txt")]
    assert f"mean {sum(sizes) / len(sizes):,.0f} B drawn (the CDF's mean 1,000 B)" in result.stdout


def unwrapped(stdout: str) -> str:
    """rich wraps long lines (paths) at the console width: join them back."""
    return stdout.replace("\n", "")


def table_rows(stdout: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip("│").split("│")]
        for line in stdout.splitlines()
        if line.startswith("│")
    ]


def test_run_prints_the_bucket_table_and_writes_one_csv_row_per_flow(fabric, tmp_path):
    flows_path = tmp_path / "flows.txt"
    assert gen(fabric, flows_path).exit_code == 0
    fct = tmp_path / "out" / "fct.csv"
    result = invoke(
        "flows", "run", "--flows", flows_path, "--topology", fabric, "--backend", "flow", "--fct", fct
    )
    assert result.exit_code == 0, result.output
    specs = read_flows(flows_path)
    with open(fct, newline="") as handle:
        lines = handle.read().splitlines()
    assert lines[0] == "src,dst,size_bytes,start_ns,fct_ns,ideal_fct_ns,slowdown"
    rows = list(csv.DictReader(lines))
    assert len(rows) == len(specs)
    topology = read_ns3_topology(fabric)
    for i, (spec, row) in enumerate(zip(specs, rows)):
        assert (int(row["src"]), int(row["dst"]), int(row["size_bytes"]), int(row["start_ns"])) == (
            spec.src,
            spec.dst,
            spec.size_bytes,
            spec.start_ns,
        )
        # The flow backend's lone-message time: the RoCE pipeline, less 1 ps for its
        # ps-grid rounding, down to a whole ps (astra_core/flows/run.py).
        ideal = ideal_fct_ns(topology, topology.route(spec.src, spec.dst, i), spec.size_bytes)
        # Times are whole ns in the file; the slowdown keeps the exact ratio.
        assert abs(int(row["ideal_fct_ns"]) - ideal) <= 0.5 + 0.002
        assert float(row["slowdown"]) == pytest.approx(int(row["fct_ns"]) / ideal, abs=0.5 / ideal)
        assert float(row["slowdown"]) >= 1
    assert f"FCT slowdown, {len(specs)} flows on backend flow" in result.stdout
    assert f"wrote {fct}" in unwrapped(result.stdout)
    printed = table_rows(result.stdout)
    labels = ["< 10 KB", "10 KB - 100 KB", "100 KB - 1 MB", "1 MB - 10 MB", ">= 10 MB"]
    assert sum(int(r[1]) for r in printed) == len(specs)
    for label, count, median, _p95, p99, top in printed:
        members = [
            float(r["slowdown"]) for r in rows if bucket_of(int(r["size_bytes"])) == labels.index(label)
        ]
        assert int(count) == len(members)
        assert float(median) == pytest.approx(percentile(members, 50), abs=0.005)
        assert float(p99) == pytest.approx(percentile(members, 99), abs=0.005)
        assert float(top) == pytest.approx(max(members), abs=0.005)


@pytest.mark.parametrize("exists", [True, False])
def test_run_writes_the_slowdown_plot_creating_its_directory(fabric, tmp_path, exists):
    flows_path = tmp_path / "flows.txt"
    flows_path.write_text(
        format_flows([FlowSpec(k, (k + 5) % 16, 1000 * (k + 1) ** 3, 100 * k) for k in range(16)])
    )
    plots = tmp_path / "new" / "plots"
    if exists:
        plots.mkdir(parents=True)
    result = invoke(
        "flows",
        "run",
        "--flows",
        flows_path,
        "--topology",
        fabric,
        "--backend",
        "analytical-congestion",
        "--plots",
        plots,
    )
    assert result.exit_code == 0, result.output
    assert (plots / "fct_slowdown.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {plots / 'fct_slowdown.png'}" in unwrapped(result.stdout)


def test_gen_errors_are_one_line(fabric, tmp_path):
    out = tmp_path / "f.txt"
    assert (
        one_error_line(
            invoke(
                "flows",
                "gen",
                "--cdf",
                "nosuch",
                "--load",
                0.5,
                "--duration-ms",
                1,
                "--topology",
                fabric,
                "-o",
                out,
            )
        )
        == "error: --cdf: nosuch is neither a shipped distribution (websearch, hadoop) nor a file"
    )
    assert (
        one_error_line(
            invoke(
                "flows",
                "gen",
                "--cdf",
                "hadoop",
                "--load",
                1.5,
                "--duration-ms",
                1,
                "--topology",
                fabric,
                "-o",
                out,
            )
        )
        == "error: --load: must be in (0, 1], got 1.5"
    )
    assert (
        one_error_line(
            invoke(
                "flows",
                "gen",
                "--cdf",
                "hadoop",
                "--load",
                0.5,
                "--duration-ms",
                -1,
                "--topology",
                fabric,
                "-o",
                out,
            )
        )
        == "error: --duration-ms: must be a finite number > 0, got -1"
    )
    bad_cdf = tmp_path / "bad.cdf"
    bad_cdf.write_text("0 0\n100 50\n50 100\n")
    assert one_error_line(
        invoke(
            "flows",
            "gen",
            "--cdf",
            bad_cdf,
            "--load",
            0.5,
            "--duration-ms",
            1,
            "--topology",
            fabric,
            "-o",
            out,
        )
    ).startswith(f"error: {bad_cdf}: line 3: sizes and percents must both rise strictly")
    missing = tmp_path / "none.txt"
    assert str(missing) in one_error_line(
        invoke(
            "flows",
            "gen",
            "--cdf",
            "hadoop",
            "--load",
            0.5,
            "--duration-ms",
            1,
            "--topology",
            missing,
            "-o",
            out,
        )
    )
    assert not out.exists()


def test_run_errors_are_one_line(fabric, tmp_path):
    flows_path = tmp_path / "flows.txt"
    body = "".join(f"{k} {k + 1} 3 100 1000 0.000001\n" for k in range(4))
    flows_path.write_text("40\n" + body)  # the artifact's stale digit
    args = ["flows", "run", "--flows", flows_path, "--topology", fabric, "--backend", "flow"]
    assert one_error_line(invoke(*args)) == f"error: {flows_path}: line 1 says 40 flows, but 4 follow"
    flows_path.write_text("2\n0 1 3 100 10 0\n3 16 3 100 10 0\n")
    assert one_error_line(invoke(*args)) == f"error: {flows_path}: line 3: dst NPU 16 is not in 0 .. 15"
    flows_path.write_text("1\n0 1 3 100 10 0\n")
    assert one_error_line(invoke(*args[:-1], "nosuch")).startswith(
        "error: unknown backend 'nosuch'; available: "
    )
    directory = tmp_path / "a_dir"
    directory.mkdir()
    message = one_error_line(invoke(*args, "--fct", directory))
    assert message.startswith("error: --fct") and "is a directory" in message
    assert re.fullmatch(
        r"error: .*nope\.txt.*",
        one_error_line(
            invoke(
                "flows", "run", "--flows", tmp_path / "nope.txt", "--topology", fabric, "--backend", "flow"
            )
        ),
    )


# -- what flows run and gen refuse, and what gen prints ---------------------------------------


def run_args(flows_path, fabric, *extra):
    return ["flows", "run", "--flows", flows_path, "--topology", fabric, *extra]


def test_run_refuses_a_backend_that_does_not_model_link_sharing(fabric, tmp_path):
    # Not exit 0 and a slowdown table (p99 up to 5.87 on WebSearch) measuring only
    # analytical's whole-message store and forward against a packet pipeline.
    flows_path = tmp_path / "flows.txt"
    flows_path.write_text(format_flows([FlowSpec(0, 5, 574, 0), FlowSpec(1, 5, 10**6, 0)]))
    plots = tmp_path / "plots"
    assert one_error_line(
        invoke(*run_args(flows_path, fabric, "--backend", "analytical", "--plots", plots))
    ) == (
        "error: flows run: backend analytical does not model link sharing (concurrent messages never "
        "slow each other), so flows would change nothing and FCT slowdowns would measure nothing; use "
        "one that does, e.g. --backend flow, ns3, garnetlike or analytical-congestion"
    )


def test_run_needs_a_backend_named(fabric, tmp_path):
    # plugins.toml's default (analytical) must not run silently.
    flows_path = tmp_path / "flows.txt"
    flows_path.write_text(format_flows([FlowSpec(0, 5, 574, 0)]))
    result = invoke(*run_args(flows_path, fabric))
    assert result.exit_code == 2 and "Missing option '--backend'" in result.output


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--header-bytes", -100, "error: --header-bytes: must be >= 0 bytes, got -100"),
        ("--payload-bytes", 0, "error: --payload-bytes: must be >= 1 byte, got 0"),  # was ZeroDivisionError
    ],
)
def test_run_refuses_a_framing_with_no_payload_or_negative_headers(fabric, tmp_path, flag, value, message):
    flows_path = tmp_path / "flows.txt"
    flows_path.write_text(format_flows([FlowSpec(0, 5, 574, 0)]))
    fct = tmp_path / "fct.csv"
    args = run_args(flows_path, fabric, "--backend", "flow", "--fct", fct, flag, value)
    assert one_error_line(invoke(*args)) == message
    assert not fct.exists()


def test_run_refuses_a_file_with_no_flows_before_making_the_plots_directory(fabric, tmp_path):
    # Not KeyError: 'max_size_bytes' from the plot of no flows.
    flows_path = tmp_path / "none.txt"
    flows_path.write_text("0\n")
    plots = tmp_path / "plots"
    args = run_args(flows_path, fabric, "--backend", "flow", "--plots", plots)
    assert one_error_line(invoke(*args)) == f"error: {flows_path}: holds no flows; nothing to run"
    assert not plots.exists()


def test_gen_refuses_a_window_in_which_no_flow_starts(fabric, tmp_path):
    # Not "0 flows, 0.0 MB, ..." and a flow file of no flows, exit 0.
    out = tmp_path / "f.txt"
    args = ["flows", "gen", "--cdf", "websearch", "--load", 0.5, "--duration-ms", 0.0001]
    # 16 hosts x 100 ns / (1,711,250 B x 8 / 50 B/ns) = 0.00584 flows expected
    assert one_error_line(invoke(*args, "--topology", fabric, "-o", out)) == (
        "error: --duration-ms: no flow starts in 0.0001 ms (about 0.00584 expected at this load): "
        "lengthen --duration-ms or raise --load"
    )
    assert not out.exists()


@pytest.mark.parametrize("duration", ["nan", "inf", "-inf", "0"])
def test_gen_refuses_a_duration_that_is_not_a_finite_positive_number(fabric, tmp_path, duration):
    # nan and inf are not tracebacks (ValueError, OverflowError from round()).
    out = tmp_path / "f.txt"
    args = ["flows", "gen", "--cdf", "websearch", "--load", 0.5, "--duration-ms", duration]
    shown = {"0": "0"}.get(duration, duration)
    assert one_error_line(invoke(*args, "--topology", fabric, "-o", out)) == (
        f"error: --duration-ms: must be a finite number > 0, got {shown}"
    )
    assert not out.exists()
