"""Flow files (the HPCC artifact's format): round trip, the artifact's lines, errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from astra_core.errors import ConfigError
from astra_core.flows.flowfile import FlowSpec, format_flows, parse_flows, read_flows


def test_format_writes_the_count_then_one_artifact_line_per_flow():
    flows = [FlowSpec(0, 1, 5000, 1_000), FlowSpec(7, 2, 1, 2_000_000_123)]
    assert format_flows(flows) == ("2\n0 1 3 100 5000 0.000001000\n7 2 3 100 1 2.000000123\n")


def test_lines_as_the_artifact_writes_them_parse_to_whole_ns():
    # traffic_gen.py writes "%d %d 3 100 %d %.9f" after the count, starting at 2 s
    text = "3\n2 8 3 100 2000 2.000001234\n5 0 3 100 81720 2.000000000\n1 3 3 100 7 2.5\n"
    assert parse_flows(text, "flow.txt") == [
        FlowSpec(5, 0, 81720, 2_000_000_000),
        FlowSpec(2, 8, 2000, 2_000_001_234),
        FlowSpec(1, 3, 7, 2_500_000_000),
    ]


flow_specs = st.builds(
    lambda src, step, size, start, group, dport: FlowSpec(src, (src + step) % 64, size, start, group, dport),
    st.integers(0, 63),
    st.integers(1, 63),
    st.integers(1, 10**10),
    st.integers(0, 10**12),
    st.integers(0, 7),
    st.integers(0, 65535),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(flow_specs, max_size=30))
def test_format_then_parse_gives_the_flows_back_in_stable_start_order(flows):
    parsed = parse_flows(format_flows(flows), "rt.txt", npus=64)
    # sorted() is stable: ties in start time keep their order in the file
    assert parsed == sorted(flows, key=lambda f: f.start_ns)
    assert [f.start_ns for f in parsed] == sorted(f.start_ns for f in flows)


def test_ties_keep_file_order_and_blank_lines_do_not_count():
    text = "\n3\n\n0 1 3 100 10 0.5\n1 2 3 100 20 0.1\n\n2 0 3 100 30 0.5\n\n"
    assert [f.size_bytes for f in parse_flows(text, "t.txt")] == [20, 10, 30]


def test_an_empty_count_gives_no_flows():
    assert parse_flows("0\n", "none.txt") == []


def error_of(text: str, npus: int | None = None, source: str = "flows.txt") -> str:
    with pytest.raises(ConfigError) as exc:
        parse_flows(text, source, npus)
    message = str(exc.value)
    assert "\n" not in message and message.startswith(f"{source}: "), message
    return message


def test_stale_digits_on_the_count_line_are_an_error_naming_both_numbers():
    # The artifact's generator can leave "99990" when it wrote 9999 flows after
    # estimating more: the first line then says ten times as many flows as follow.
    body = "".join(f"{i % 8} {(i + 1) % 8} 3 100 1000 {i * 1e-6:.9f}\n" for i in range(9999))
    assert error_of("99990\n" + body) == "flows.txt: line 1 says 99990 flows, but 9999 follow"
    assert len(parse_flows("9999\n" + body, "ok.txt")) == 9999


@pytest.mark.parametrize("head", ["2 1", "two", "-1", "1.0"])
def test_a_first_line_that_is_not_a_count_is_an_error(head):
    assert error_of(f"{head}\n0 1 3 100 10 0\n").startswith("flows.txt: line 1: expected the number of flows")


def test_a_bad_count_after_blank_lines_is_named_by_its_own_line():
    # BUG (flowfile.py, parse_flows): blank lines before the count are skipped, but the
    # count's errors always say "line 1"; here the count is on line 3.
    assert error_of("\n\nabc\n0 1 3 100 10 0\n").startswith("flows.txt: line 3: ")


def test_a_non_ascii_digit_count_is_a_config_error():
    # BUG (flowfile.py, parse_flows): "²".isdigit() is True but int("²") raises
    # ValueError, which escapes as a traceback instead of a ConfigError.
    assert "line 1" in error_of("²\n0 1 3 100 10 0\n0 2 3 100 10 0\n")


@pytest.mark.parametrize(
    "line, npus, expected",
    [
        ("4 4 3 100 10 0.1", None, "line 3: flow from NPU 4 to itself"),
        ("0 8 3 100 10 0.1", 8, "line 3: dst NPU 8 is not in 0 .. 7"),
        ("9 1 3 100 10 0.1", 8, "line 3: src NPU 9 is not in 0 .. 7"),
        ("-1 1 3 100 10 0.1", None, "line 3: src NPU -1 is not in >= 0"),
        ("0 1 3 100 0 0.1", None, "line 3: flow size 0 bytes must be >= 1"),
        ("0 1 3 100 -5 0.1", None, "line 3: flow size -5 bytes must be >= 1"),
        ("0 1 3 100 10 -0.5", None, "line 3: start time -0.5 s is not in [0, 1e9)"),
        ("0 1 3 100 10 nan", None, "line 3: start time nan s is not in [0, 1e9)"),
        ("0 1 3 100 10 1e9", None, "line 3: start time 1e9 s is not in [0, 1e9)"),
        ("0 1 3 100 10", None, "line 3: expected <src> <dst> <pg> <dport> <size bytes> <start s>"),
        ("0 1 3 100 10 0.1 7", None, "line 3: expected <src> <dst>"),
        ("0 1 3 100 1e3 0.1", None, "line 3: not numbers: '0 1 3 100 1e3 0.1'"),
        ("0 x 3 100 10 0.1", None, "line 3: not numbers"),
    ],
)
def test_bad_flow_lines_are_one_line_errors_naming_file_and_line(line, npus, expected):
    text = f"2\n0 1 3 100 10 0.2\n{line}\n"
    assert expected in error_of(text, npus)


def test_npus_bound_accepts_the_last_rank():
    assert parse_flows("1\n7 0 3 100 10 0\n", "f", npus=8) == [FlowSpec(7, 0, 10, 0)]


def test_an_empty_file_is_an_error():
    assert "empty flow file" in error_of("\n  \n")


def test_read_flows_names_the_file(tmp_path):
    path = tmp_path / "flows.txt"
    path.write_text(format_flows([FlowSpec(0, 1, 10, 5), FlowSpec(1, 0, 20, 3)]))
    assert read_flows(path) == [FlowSpec(1, 0, 20, 3), FlowSpec(0, 1, 10, 5)]
    with pytest.raises(ConfigError, match=r"line 2: dst NPU 1 is not in 0 \.\. 0"):
        read_flows(path, npus=1)
    missing = tmp_path / "nope.txt"
    with pytest.raises(ConfigError) as exc:
        read_flows(missing)
    assert str(exc.value).startswith(f"{missing}: cannot read the flow file")
