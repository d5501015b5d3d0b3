"""PyTorch execution traces -> Chakra: the bundled 2-GPU NCCL trace and a freshly recorded gloo DDP run."""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from astra_core.api import simulate
from astra_core.errors import TraceError
from astra_core.workload import et_def_pb2 as pb
from astra_core.workload.chakra import read_rank_trace
from astra_core.workload.converters.pytorch import convert_pytorch_traces
from astra_core.workload.generators.micro import write_micro

RECORDER = Path(__file__).with_name("record_ddp.py")


def _ring(folder: Path, npus: int, bandwidth_gbps: float, latency_ns: float) -> tuple[Path, Path]:
    network = folder / "network.yml"
    network.write_text(f"topology: [ Ring ]\nnpus_count: [ {npus} ]\nbandwidth: [ {bandwidth_gbps} ]\n"
                       f"latency: [ {latency_ns} ]\n")
    system = folder / "system.json"
    system.write_text(json.dumps({
        "scheduling-policy": "LIFO", "endpoint-delay": 0, "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 1, "collective-optimization": "baseline", "local-mem-bw": 1600,
        **{f"{c}-implementation": ["ring"] for c in ("all-reduce", "all-gather", "reduce-scatter",
                                                      "all-to-all")}}))
    return network, system


def test_reference_nccl_trace(reference_dir, tmp_path):
    # The bundled trace is one rank of a 2-GPU NCCL run: ten c10d::allgather_ of one float per
    # rank, i.e. 2 x 4 = 8 gathered bytes each, with host ops between them and no durations.
    et = reference_dir / "pytorch" / "allreduce_2gpu_et.json"
    result = convert_pytorch_traces([et, et], None, tmp_path / "ref")
    assert result.comm_groups_path is None
    nodes = read_rank_trace(result.paths[0]).nodes
    colls = [n for n in nodes if n.type == pb.COMM_COLL_NODE]
    assert [(n.comm_type, n.comm_size) for n in colls] == [(pb.ALL_GATHER, 8)] * 10
    assert all(n.is_cpu_op for n in nodes if n.type == pb.COMP_NODE)  # host ops of a GPU run
    # Replayed on 2 NPUs it costs the ten all-gathers back to back (its host ops have no
    # measured time: 1 ns each), like the same ten from the microbenchmark generator.
    network, system = _ring(tmp_path, 2, 25.0, 1000.0)
    step = simulate(tmp_path / "ref", system, network).step_ns
    write_micro("all-gather", 8, 2, tmp_path / "micro", iterations=10)
    micro = simulate(tmp_path / "micro", system, network).step_ns
    host_ops = sum(1 for n in nodes if n.type == pb.COMP_NODE)
    assert micro <= step <= micro + host_ops


def test_bad_inputs_are_one_line_errors(tmp_path, reference_dir):
    et = reference_dir / "pytorch" / "allreduce_2gpu_et.json"
    with pytest.raises(TraceError, match="cannot read"):
        convert_pytorch_traces([tmp_path / "missing.json"], None, tmp_path / "x")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TraceError, match="bad.json: not a JSON"):
        convert_pytorch_traces([bad], None, tmp_path / "x")
    with pytest.raises(TraceError, match="2 execution traces but 1 Kineto"):
        convert_pytorch_traces([et, et], [bad], tmp_path / "x")
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema": "0.9", "nodes": []}))
    with pytest.raises(TraceError, match="unsupported execution-trace schema"):
        convert_pytorch_traces([old], None, tmp_path / "x")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Two gloo ranks train one DDP step of a small transformer, profiled (ET + Kineto)."""
    if importlib.util.find_spec("torch") is None:  # safety net: CI installs the pytorch extra
        pytest.skip("torch is not installed (pip install -e '.[pytorch]')")
    out = tmp_path_factory.mktemp("ddp")
    world, port = 2, str(_free_port())
    procs = [subprocess.Popen([sys.executable, str(RECORDER), str(out), str(world), port, str(r)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    for p in procs:
        output, _ = p.communicate(timeout=300)
        assert p.returncode == 0, output[-2000:]
    return out, world


def test_recorded_ddp_step(recorded, tmp_path):
    out, world = recorded
    meta = [json.loads((out / f"meta.{r}.json").read_text()) for r in range(world)]
    result = convert_pytorch_traces([out / f"et.{r}.json" for r in range(world)],
                                    [out / f"kineto.{r}.json" for r in range(world)], tmp_path / "ddp")
    computes, counts = [], []
    for r in range(world):
        nodes = read_rank_trace(result.paths[r]).nodes
        comps = [n for n in nodes if n.type == pb.COMP_NODE]
        colls = [n for n in nodes if n.type == pb.COMM_COLL_NODE]
        assert comps and all(not n.is_cpu_op for n in comps)  # CPU run: host ops are the compute
        # DDP all-reduces every parameter's gradient exactly once (bucketed), plus the
        # 1-byte barrier the recorder issues before the step
        reduced = sum(n.comm_size for n in colls if n.comm_type == pb.ALL_REDUCE and n.comm_size > 1)
        assert reduced == meta[r]["grad_bytes"]
        # the operators ran one after another on one host thread inside the measured step
        # (each duration rounded to 1 us)
        compute_us = sum(n.duration_micros for n in comps)
        assert 0 < compute_us <= meta[r]["step_s"] * 1e6 + len(comps)
        computes.append(compute_us * 1000)
        counts.append(len(comps))
    # A 1-dimensional ring that matches the loopback: the analytical all-reduce on 2 NPUs takes
    # 2 (latency + S / 2 / bandwidth), so the 4-byte all-reduce gives the latency and the
    # 4 MiB one the bandwidth.
    small = min(m["allreduce_small_s"] for m in meta) * 1e9
    large = min(m["allreduce_large_s"] for m in meta) * 1e9
    size = meta[0]["allreduce_large_bytes"]
    latency = small / 2
    bytes_per_ns = size / max(large - small, 1.0)
    network, system = _ring(tmp_path, world, bytes_per_ns * 1e9 / 2**30, latency)
    sim = simulate(tmp_path / "ddp", system, network)
    measured = max(m["step_s"] for m in meta) * 1e9
    ratio = sim.step_ns / measured
    print(f"\nrecorded DDP step: measured {measured / 1e6:.3f} ms (unprofiled "
          f"{max(m['unprofiled_step_s'] for m in meta) * 1e3:.3f} ms), simulated {sim.step_ns / 1e6:.3f} ms, "
          f"ratio {ratio:.3f}; loopback latency {latency / 1e3:.1f} us, "
          f"bandwidth {bytes_per_ns:.2f} GB/s")
    # every rank's compute runs in program order, so the step is at least the longest of them
    assert sim.step_ns >= max(computes)
    for r, rank in enumerate(sim.ranks):  # an operator measured at 0 us replays as 1 ns
        assert computes[r] <= rank.compute_ns <= computes[r] + counts[r]
