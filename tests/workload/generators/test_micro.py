"""Single-collective microbenchmarks (astra gen micro) against Chakra's generator and upstream's times."""

from __future__ import annotations

import json

import pytest

from astra_core.api import simulate
from astra_core.errors import ConfigError
from astra_core.workload.generators.micro import parse_size, write_micro


@pytest.mark.parametrize(
    "collective, size, folder",
    [
        ("all-reduce", "1MiB", "ALL_REDUCE_8npus_1MB"),
        ("all-gather", "64MiB", "ALL_GATHER_8npus_64MB"),
        ("reduce-scatter", "1GiB", "REDUCE_SCATTER_8npus_1GB"),
        ("all-to-all", "1MiB", "ALL_TO_ALL_8npus_1MB"),
    ],
)
def test_same_bytes_and_times_as_the_reference(reference_dir, tmp_path, collective, size, folder):
    # Chakra's microbenchmark generator wrote the reference traces: with its node numbering ours
    # are the same bytes, and every upstream case run on them is reproduced from ours (default
    # numbering: every rank from 0).
    kind = folder.split("_8npus")[0]
    chakra = write_micro(collective, parse_size(size), 8, tmp_path / "chakra" / kind, chakra_ids=True)
    write_micro(collective, parse_size(size), 8, tmp_path / kind)
    for rank, path in enumerate(chakra):
        assert (
            path.read_bytes()
            == (reference_dir / "workload" / "micro" / folder / f"{kind}.{rank}.et").read_bytes()
        )
    cases = [
        c
        for c in json.loads((reference_dir / "expected.json").read_text())["cases"]
        if c["workload"] == f"workload/micro/{folder}/{kind}"
    ]
    assert cases
    for case in cases:
        result = simulate(
            tmp_path / kind,
            reference_dir / case["system"],
            reference_dir / case["network"],
            memory=reference_dir / case["memory"] if case.get("memory") else None,
            backend=case["backend"],
        )
        assert [r.finish_ns for r in result.ranks] == pytest.approx(case["finish_ns"], rel=0.005), case[
            "name"
        ]


def test_iterations_run_back_to_back(reference_dir, tmp_path):
    # k dependent collectives take k times one (nothing else runs), to the nanosecond.
    network = reference_dir / "network" / "upstream_Ring_8npus.yml"
    system = reference_dir / "system" / "ring_1d.json"
    write_micro("all-reduce", 1 << 20, 8, tmp_path / "one")
    write_micro("all-reduce", 1 << 20, 8, tmp_path / "three", iterations=3)
    one = simulate(tmp_path / "one", system, network).step_ns
    assert simulate(tmp_path / "three", system, network).step_ns == pytest.approx(3 * one, abs=3)


@pytest.mark.parametrize(
    "text, value",
    [
        ("1048576", 1 << 20),
        ("64MiB", 64 << 20),
        ("1GiB", 1 << 30),
        ("1MB", 10**6),
        ("64M", 64 << 20),
        ("1.5KiB", 1536),
    ],
)
def test_sizes(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "MiB", "1.5B", "-4", "12 parsecs", "0"])
def test_bad_sizes(text):
    with pytest.raises(ConfigError, match="size"):
        parse_size(text)


def test_unknown_collective(tmp_path):
    with pytest.raises(ConfigError, match="unknown collective 'broadcast'"):
        write_micro("broadcast", 8, 2, tmp_path / "x")
