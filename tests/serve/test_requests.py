"""Request traces: files with one-line errors naming row and column, generated arrivals,
and the Azure 2023 traces' recorded lengths."""

from __future__ import annotations

import numpy as np
import pytest

from astra_core.errors import ConfigError
from astra_core.serve.requests import LENGTH_DISTRIBUTIONS, generate_requests, read_requests


def test_a_csv_and_a_jsonl_file_give_the_same_requests_sorted_by_arrival(tmp_path):
    (tmp_path / "r.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0.5,100,20\n0.25,7,3\n")
    (tmp_path / "r.jsonl").write_text(
        '{"arrival_ns": 500000000, "prompt_tokens": 100, "output_tokens": 20}\n'
        '{"arrival_s": 0.25, "prompt_tokens": 7, "output_tokens": 3}\n'
    )
    for name in ("r.csv", "r.jsonl"):
        requests = read_requests(tmp_path / name)
        assert [(r.id, r.arrival_ns, r.prompt_tokens, r.output_tokens) for r in requests] == [
            (0, 250_000_000, 7, 3),
            (1, 500_000_000, 100, 20),
        ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "arrival_s,prompt_tokens,output_tokens\n0,0,5\n",
            "r.csv: row 1: prompt_tokens: must be a whole number in [1,",
        ),
        (
            "arrival_s,prompt_tokens,output_tokens\n0,5,5\n1,5,2.5\n",
            "r.csv: row 2: output_tokens: must be a whole number",
        ),
        ("arrival_s,prompt_tokens,output_tokens\n-1,5,5\n", "r.csv: row 1: arrival_s: must be a time"),
        ("prompt_tokens,output_tokens\n5,5\n", "r.csv: row 1: no arrival_s or arrival_ns"),
        ("a,b\n1,2\n", "r.csv: expected a CSV header with prompt_tokens"),
        ("arrival_s,prompt_tokens,output_tokens\n", "r.csv: no requests"),
        (
            "arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,5,5,a,9\n",
            "prefix_tokens: 9 is more than",
        ),
    ],
)
def test_bad_request_files_are_one_line_errors_naming_row_and_column(tmp_path, text, message):
    path = tmp_path / "r.csv"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace(".", r"\.")) as err:
        read_requests(path)
    assert "\n" not in str(err.value)


def test_poisson_arrivals_have_the_rate_and_gamma_the_coefficient_of_variation():
    requests = generate_requests(20_000, 50.0, (10, 5), seed=3)
    gaps = np.diff([0] + [r.arrival_ns for r in requests]) / 1e9
    assert gaps.mean() == pytest.approx(1 / 50, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.03)
    bursty = generate_requests(20_000, 50.0, (10, 5), cv=3.0, seed=3)
    gaps = np.diff([0] + [r.arrival_ns for r in bursty]) / 1e9
    assert gaps.mean() == pytest.approx(1 / 50, rel=0.1)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.1)
    assert generate_requests(5, 1.0, (10, 5), seed=7) == generate_requests(5, 1.0, (10, 5), seed=7)


def test_the_azure_traces_are_the_published_ones():
    """The Splitwise paper's (ISCA 2024) medians of the 2023 traces: coding prompts about
    1,500 and outputs 13 tokens, conversation 1,020 and 129; 8,819 and 19,366 requests."""
    code, conv = (LENGTH_DISTRIBUTIONS[n].pairs() for n in ("azure-code-2023", "azure-conv-2023"))
    assert (len(code), len(conv)) == (8_819, 19_366)
    assert np.median(code, axis=0).tolist() == [1469, 13]
    assert np.median(conv, axis=0).tolist() == [1020, 129]
    drawn = generate_requests(1000, 10.0, "azure-conv-2023", seed=1)
    pairs = {tuple(p) for p in conv.tolist()}
    assert all((r.prompt_tokens, r.output_tokens) in pairs for r in drawn)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"count": 0}, "requests: count:"),
        ({"rate": 0.0}, "requests: rate:"),
        ({"cv": -1.0}, "requests: cv:"),
        (
            {"lengths": "sharegpt-9"},
            "requests: lengths: unknown distribution 'sharegpt-9'; known: azure-code-2023",
        ),
        ({"lengths": (0, 5)}, r"requests: lengths\[0\]: must be a whole number"),
    ],
)
def test_bad_generator_settings_name_their_key(kwargs, message):
    settings = {"count": 10, "rate": 1.0, "lengths": (10, 5), **kwargs}
    with pytest.raises(ConfigError, match=message):
        generate_requests(settings.pop("count"), settings.pop("rate"), settings.pop("lengths"), **settings)
