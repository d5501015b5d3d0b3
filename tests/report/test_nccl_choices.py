"""The NCCL model's choices in the outputs: the per-collective columns (--csv,
--parquet), the --json ``nccl`` list and the terminal's NCCL_DEBUG=INFO-like lines.

Expected choices come from NCCL's cost model run directly (tuning.tune on the
machine NCCL's search finds), never from the report under test."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

import astra
from astra_core.cli import main
from astra_core.config.gpus import GPUS
from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.report.collectives import NCCL_COLUMNS
from astra_core.report.nccl import nccl_choices, tuning_line, tuning_lines
from astra_core.system.collectives.nccl.topology import Machine, communicator
from astra_core.system.collectives.nccl.tuning import ALGO_NAMES, PROTO_NAMES, Func, tune
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.generators.micro import write_micro
from astra_core.workload.writer import make_node, write_rank_trace

GIB = 1 << 30
SIZE = 64 << 20
H100_NVLINK = 18 * 20.6  # NCCL's view of an H100's NVLinks (18 x SM90_NVLINK_BW)


def h100(all_gather: str = "nccl") -> tuple[NetworkConfig, SystemConfig]:
    network = NetworkConfig.from_dict(
        {"topology": ["Switch"], "npus_count": [8], "bandwidth": [450e9 / GIB], "latency": [300]}
    )
    system = SystemConfig.from_dict(
        {
            "scheduling-policy": "LIFO",
            "collective-optimization": "baseline",
            "preferred-dataset-splits": 1,
            "all-reduce-implementation": ["nccl"],
            "all-gather-implementation": [all_gather],
            "nccl": {"gpu": "H100"},
        }
    )
    return network, system


def expected_choice(func: Func, nbytes: int) -> tuple[str, str, int]:
    tuning = tune(communicator(Machine(8, 8, GPUS["h100"], H100_NVLINK)))
    algo, proto, _ = tuning.choose(func, nbytes)
    return ALGO_NAMES[algo], PROTO_NAMES[proto], tuning.channels(func, algo, proto, nbytes)


def mixed_trace(tmp_path: Path) -> str:
    """Each rank: a 64 MiB all-reduce, then a 1 MiB all-gather, then another all-reduce."""
    prefix = tmp_path / "mixed"
    nodes = [
        make_node(0, "ar0", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=SIZE),
        make_node(1, "ag", pb.COMM_COLL_NODE, comm_type=pb.ALL_GATHER, comm_size=1 << 20, data_deps=[0]),
        make_node(2, "ar1", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=SIZE, data_deps=[1]),
    ]
    for rank in range(8):
        write_rank_trace(f"{prefix}.{rank}.et", nodes)
    return str(prefix)


def test_columns_hold_nccls_choice(tmp_path):
    network, system = h100()
    result = astra.simulate(mixed_trace(tmp_path), system, network, symmetry=False)
    frame = result.collective_frame()
    assert list(frame.columns[-4:]) == list(NCCL_COLUMNS)
    ar = frame[frame["type"] == "ALL_REDUCE"]
    algo, proto, channels = expected_choice(Func.ALL_REDUCE, SIZE)
    assert (algo, proto, channels) == ("NVLS", "Simple", 16)  # NVLS_NCHANNELS on SM 90
    assert len(ar) == 16
    assert (ar["nccl_algorithm"] == algo).all() and (ar["nccl_protocol"] == proto).all()
    assert (ar["nccl_channels"] == channels).all()
    # NCCL's predicted time is the floor: on this fabric (as fast as NCCL's rating) the time
    assert (ar["nccl_predicted_ns"] == ar["duration_ns"]).all()
    ag = frame[frame["type"] == "ALL_GATHER"]
    # an all-gather of 1 MiB per rank is an 8 MiB operation for NCCL's cost model
    assert tuple(ag.iloc[0][["nccl_algorithm", "nccl_protocol", "nccl_channels"]]) == expected_choice(
        Func.ALL_GATHER, 8 << 20
    )


def test_collectives_not_run_by_nccl_are_empty(tmp_path):
    network, system = h100(all_gather="ring")
    result = astra.simulate(mixed_trace(tmp_path), system, network)
    frame = result.collective_frame()
    ag = frame[frame["type"] == "ALL_GATHER"]
    assert (ag["nccl_algorithm"] == "").all() and (ag["nccl_protocol"] == "").all()
    assert ag["nccl_channels"].isna().all() and ag["nccl_predicted_ns"].isna().all()
    assert (frame[frame["type"] == "ALL_REDUCE"]["nccl_algorithm"] == "NVLS").all()
    csv = tmp_path / "c.csv"
    result.write_csv(csv)
    back = pd.read_csv(csv, keep_default_na=False)
    assert set(back[back["type"] == "ALL_GATHER"]["nccl_channels"]) == {""}
    assert set(back[back["type"] == "ALL_REDUCE"]["nccl_channels"]) == {"16"}


def test_json_lists_each_communicator_and_size_once(tmp_path):
    network, system = h100()
    result = astra.simulate(mixed_trace(tmp_path), system, network)
    entries = result.to_dict()["nccl"]
    assert [(e["type"], e["bytes"], e["calls"], e["ranks"]) for e in entries] == [
        ("ALL_REDUCE", SIZE, 2, 8),
        ("ALL_GATHER", 1 << 20, 1, 8),
    ]
    assert entries == nccl_choices(result)
    # a run with no NCCL collective has no nccl key
    plain = SystemConfig.from_dict(
        {
            "scheduling-policy": "LIFO",
            "collective-optimization": "baseline",
            "preferred-dataset-splits": 1,
            "all-reduce-implementation": ["ring"],
            "all-gather-implementation": ["ring"],
        }
    )
    result = astra.simulate(mixed_trace(tmp_path), plain, network)
    assert "nccl" not in result.to_dict()
    # nor NCCL columns: they appear where the NCCL model ran a collective
    assert not set(NCCL_COLUMNS) & set(result.collective_frame().columns)


def test_the_terminal_line_reads_like_nccls_tuning_log():
    entry = {
        "type": "REDUCE_SCATTER",
        "group": "tp",
        "ranks": 8,
        "bytes": 8 << 20,
        "algorithm": "Ring",
        "protocol": "LL128",
        "channels": 24,
        "nccl_predicted_ns": 41_250,
        "calls": 3,
    }
    # NCCL logs count x type size: a reduce-scatter's receive count, one rank's part
    assert tuning_line([entry]) == (
        "NCCL ReduceScatter: 1048576 Bytes -> Algo Ring proto LL128 channel{Lo..Hi}={0..23} "
        "comm tp [nranks=8] x3 calls; NCCL predicts 41.2 µs"
    )
    # communicators of the same shape and sizes of one class share a line
    others = [
        {**entry, "group": str(g), "bytes": (8 << 20) + 64 * g, "nccl_predicted_ns": 41_250 + g, "calls": 1}
        for g in range(1, 6)
    ]
    assert tuning_line(others) == (
        "NCCL ReduceScatter: 1048584..1048616 Bytes -> Algo Ring proto LL128 channel{Lo..Hi}={0..23} "
        "comm 1, 2, ..., 5 (5 comms) [nranks=8] x5 calls; NCCL predicts 41.3 µs"
    )


def test_one_line_per_collective_communicator_size_and_size_class(tmp_path):
    network, system = h100()
    result = astra.simulate(mixed_trace(tmp_path), system, network)
    lines = tuning_lines(result)
    assert [line.split(" -> ")[0] for line in lines] == [
        f"NCCL AllReduce: {SIZE} Bytes",
        f"NCCL AllGather: {1 << 20} Bytes",
    ]
    assert " x2 calls;" in lines[0]


def test_astra_run_prints_one_line_per_communicator_and_size(tmp_path):
    network, _ = h100()
    _, system = h100()
    (tmp_path / "network.yml").write_text(yaml.safe_dump(network.to_dict()))
    (tmp_path / "system.json").write_text(json.dumps(system.to_dict()))
    write_micro("all-reduce", SIZE, 8, tmp_path / "ar")
    out = CliRunner().invoke(
        main,
        [
            "run",
            "--workload",
            str(tmp_path / "ar"),
            "--system",
            str(tmp_path / "system.json"),
            "--network",
            str(tmp_path / "network.yml"),
        ],
    )
    assert out.exit_code == 0, out.output
    lines = [line for line in out.output.splitlines() if line.startswith("NCCL ")]
    step_us = float(out.output.split("step time: ")[1].split(" µs")[0].replace(",", ""))
    assert lines == [
        "NCCL AllReduce: 67108864 Bytes -> Algo NVLS proto Simple channel{Lo..Hi}={0..15} "
        f"comm all [nranks=8] x1 call; NCCL predicts {step_us:,.1f} µs"
    ]
    assert math.isfinite(step_us)


@pytest.mark.parametrize("collective", ["all-to-all"])
def test_all_to_all_is_nccls_send_receive(tmp_path, collective):
    network, system = h100()
    system = SystemConfig.from_dict({**system.to_dict(), "all-to-all-implementation": ["nccl"]})
    write_micro(collective, SIZE, 8, tmp_path / "a2a")
    frame = astra.simulate(str(tmp_path / "a2a"), system, network).collective_frame()
    assert set(frame["nccl_algorithm"]) == {"SendRecv"} and set(frame["nccl_protocol"]) == {"Simple"}


def test_a_communicator_of_involved_dimensions_is_named_so(tmp_path):
    network = NetworkConfig.from_dict(
        {
            "topology": ["Switch", "Switch"],
            "npus_count": [8, 2],
            "bandwidth": [450e9 / GIB, 50e9 / GIB],
            "latency": [300, 1000],
        }
    )
    _, system = h100()
    node = make_node(
        0, "ar", pb.COMM_COLL_NODE, comm_type=pb.ALL_REDUCE, comm_size=SIZE, involved_dim=[True, False]
    )
    for rank in range(16):
        write_rank_trace(f"{tmp_path / 'dims'}.{rank}.et", [node])
    lines = tuning_lines(astra.simulate(str(tmp_path / "dims"), system, network))
    assert len(lines) == 1 and " comm of-involved-dims [nranks=8] x1 call;" in lines[0]
