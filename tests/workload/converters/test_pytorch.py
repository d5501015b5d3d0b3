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
    network.write_text(
        f"topology: [ Ring ]\nnpus_count: [ {npus} ]\nbandwidth: [ {bandwidth_gbps} ]\n"
        f"latency: [ {latency_ns} ]\n"
    )
    system = folder / "system.json"
    system.write_text(
        json.dumps(
            {
                "scheduling-policy": "LIFO",
                "endpoint-delay": 0,
                "active-chunks-per-dimension": 1,
                "preferred-dataset-splits": 1,
                "collective-optimization": "baseline",
                "local-mem-bw": 1600,
                **{
                    f"{c}-implementation": ["ring"]
                    for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
                },
            }
        )
    )
    return network, system


def test_reference_nccl_trace(reference_dir, tmp_path):
    # The bundled trace is one rank of a 2-GPU NCCL run: ten c10d::allgather_ of one float per
    # rank (2 x 4 = 8 gathered bytes), with host ops between them and no durations. An all-gather's
    # comm_size is each rank's input, as upstream's Ring.cc and Chakra's generators read it: 4 bytes.
    et = reference_dir / "pytorch" / "allreduce_2gpu_et.json"
    with pytest.warns(UserWarning, match="no Kineto trace .* every compute node takes 0 ns"):
        result = convert_pytorch_traces([et, et], None, tmp_path / "ref")
    assert result.comm_groups_path is None
    nodes = read_rank_trace(result.paths[0]).nodes
    colls = [n for n in nodes if n.type == pb.COMM_COLL_NODE]
    assert [(n.comm_type, n.comm_size) for n in colls] == [(pb.ALL_GATHER, 4)] * 10
    assert all(n.is_cpu_op for n in nodes if n.type == pb.COMP_NODE)  # host ops of a GPU run
    # Replayed on 2 NPUs it costs the ten all-gathers back to back (its host ops have no
    # measured time: 1 ns each), like the same ten from the microbenchmark generator.
    network, system = _ring(tmp_path, 2, 25.0, 1000.0)
    step = simulate(tmp_path / "ref", system, network).step_ns
    write_micro("all-gather", 4, 2, tmp_path / "micro", iterations=10)
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
    procs = [
        subprocess.Popen(
            [sys.executable, str(RECORDER), str(out), str(world), port, str(r)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(world)
    ]
    for p in procs:
        output, _ = p.communicate(timeout=300)
        assert p.returncode == 0, output[-2000:]
    return out, world


def test_recorded_ddp_step(recorded, tmp_path):
    out, world = recorded
    meta = [json.loads((out / f"meta.{r}.json").read_text()) for r in range(world)]
    result = convert_pytorch_traces(
        [out / f"et.{r}.json" for r in range(world)],
        [out / f"kineto.{r}.json" for r in range(world)],
        tmp_path / "ddp",
    )
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
    print(
        f"\nrecorded DDP step: measured {measured / 1e6:.3f} ms (unprofiled "
        f"{max(m['unprofiled_step_s'] for m in meta) * 1e3:.3f} ms), simulated {sim.step_ns / 1e6:.3f} ms, "
        f"ratio {ratio:.3f}; loopback latency {latency / 1e3:.1f} us, "
        f"bandwidth {bytes_per_ns:.2f} GB/s"
    )
    # every rank's compute runs in program order, so the step is at least the longest of them
    assert sim.step_ns >= max(computes)
    for r, rank in enumerate(sim.ranks):  # an operator measured at 0 us replays as 1 ns
        assert computes[r] <= rank.compute_ns <= computes[r] + counts[r]


def _host_trace(path: Path, ops: list[dict], groups: list[dict]) -> Path:
    """A minimal execution trace: process and thread roots, the process-group node, then ``ops``
    (each {"name", "inputs"[, "children"]}) in order, with rf_ids increasing."""
    nodes = [
        {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1},
        {"id": 2, "name": "[pytorch|profiler|execution_trace|thread]", "ctrl_deps": 1},
        {
            "id": 3,
            "name": "## process_group:init ##",
            "ctrl_deps": 2,
            "inputs": {"values": [json.dumps(groups)], "types": ["String"]},
        },
    ]
    next_id = 4

    def add(op, parent):
        nonlocal next_id
        node = {
            "id": next_id,
            "name": op["name"],
            "ctrl_deps": parent,
            "inputs": {"values": op.get("inputs", []), "types": []},
            "outputs": {"values": op.get("outputs", []), "types": []},
            "attrs": [
                {"name": "rf_id", "type": "uint64", "value": next_id},
                {"name": "tid", "type": "uint64", "value": 1},
            ],
        }
        nodes.append(node)
        next_id += 1
        for child in op.get("children", []):
            add(child, node["id"])

    for op in ops:
        add(op, 2)
    for n in nodes:
        n.setdefault("inputs", {"values": [], "types": []})
        n.setdefault("outputs", {"values": [], "types": []})
        n.setdefault("attrs", [{"name": "rf_id", "type": "uint64", "value": n["id"]}])
    path.write_text(json.dumps({"schema": "1.1.1-chakra.0.0.4", "nodes": nodes}))
    return path


def test_send_recv_and_sub_groups(tmp_path):
    # 4 ranks: rank 0 sends 4 KiB (1024 floats, tag 7) to rank 1; ranks 0 and 1 then all-reduce
    # 8 KiB in process group "1" = [0, 1] (named by NCCL's record_param_comms), ranks 2 and 3 in
    # group "2" = [2, 3]; the op reading the reduced tensor waits for it.
    groups = [
        {"pg_name": "0", "ranks": []},
        {"pg_name": "1", "ranks": [0, 1]},
        {"pg_name": "2", "ranks": [2, 3]},
    ]
    tensor = [10, 20, 0, 1024, 4, "cuda:0"]
    reduced = [11, 21, 0, 2048, 4, "cuda:0"]

    def ops(rank):
        out = []
        if rank in (0, 1):
            name = "c10d::send" if rank == 0 else "c10d::recv_"
            out.append({"name": name, "inputs": [[tensor], "<Object>", 1 - rank, 7]})
        pg = "1" if rank < 2 else "2"
        out.append(
            {
                "name": "c10d::allreduce_",
                "inputs": [[reduced], "<Object>", "<Object>", "<None>", True, -1],
                "children": [
                    {
                        "name": "record_param_comms",
                        "inputs": [[reduced], 5, [pg, "tp"], rank, "allreduce", [], [], 2],
                    }
                ],
            }
        )
        out.append({"name": "aten::relu", "inputs": [reduced]})
        return out

    ets = [_host_trace(tmp_path / f"et.{r}.json", ops(r), groups) for r in range(4)]
    with pytest.warns(UserWarning, match="no Kineto trace"):
        result = convert_pytorch_traces(ets, None, tmp_path / "p")
    assert json.loads(result.comm_groups_path.read_text()) == {"1": [0, 1], "2": [2, 3]}
    n0 = read_rank_trace(result.paths[0]).nodes
    send = [n for n in n0 if n.type == pb.COMM_SEND_NODE][0]
    assert (send.comm_src, send.comm_dst, send.comm_tag, send.comm_size) == (0, 1, 7, 4096)
    recv = [n for n in read_rank_trace(result.paths[1]).nodes if n.type == pb.COMM_RECV_NODE][0]
    assert (recv.comm_src, recv.comm_dst, recv.comm_tag, recv.comm_size) == (0, 1, 7, 4096)
    for r in range(4):
        nodes = read_rank_trace(result.paths[r]).nodes
        coll = [n for n in nodes if n.type == pb.COMM_COLL_NODE][0]
        assert (coll.comm_type, coll.comm_size, coll.pg_name) == (pb.ALL_REDUCE, 8192, "1" if r < 2 else "2")
        relu = [n for n in nodes if n.name == "aten::relu"][0]
        assert coll.id in relu.data_deps
    network, system = _ring(tmp_path, 4, 1.0, 1000.0)
    sim = simulate(tmp_path / "p", system, network, comm_groups=result.comm_groups_path)
    # ranks 2 and 3 only all-reduce in their group; ranks 0 and 1 first move the 4 KiB
    assert sim.ranks[0].finish_ns > sim.ranks[2].finish_ns > 0


def test_barrier_and_empty_collectives(reference_dir, tmp_path):
    # A barrier passes a dummy tensor and NCCL all-reduces one float for it; an all-reduce of an
    # empty tensor moves nothing. Before, both became GPU collectives of comm_size 0, which the
    # reader rejects (upstream reads comm_size as uint64; a 0-byte collective is no message).
    data = json.loads((reference_dir / "pytorch" / "allreduce_2gpu_et.json").read_text())
    gathers = [n for n in data["nodes"] if n["name"] == "c10d::allgather_"]
    empty = [[19, 20, 0, 0, 4, "cuda:0"]]  # (id, storage, offset, 0 elements, 4 B, device)
    for node, name in ((gathers[0], "c10d::barrier"), (gathers[1], "c10d::allreduce_")):
        node["name"] = name
        node["inputs"] = {
            "values": [empty, "<Object>", -1],
            "shapes": [[[0]], [], []],
            "types": ["GenericList[Tensor(float)]", "Object", "Int"],
        }
    et = tmp_path / "et.json"
    et.write_text(json.dumps(data))
    with pytest.warns(UserWarning, match="no Kineto trace"):
        result = convert_pytorch_traces([et, et], None, tmp_path / "c")
    by_name = {}
    for n in read_rank_trace(result.paths[0]).nodes:
        by_name.setdefault(n.name, n)
    barrier, allreduce = by_name["c10d::barrier"], by_name["c10d::allreduce_"]
    assert (barrier.comm_type, barrier.comm_size, barrier.is_cpu_op) == (pb.ALL_REDUCE, 4, False)
    assert (allreduce.type, allreduce.comm_size, allreduce.is_cpu_op) == (pb.COMM_COLL_NODE, 0, True)
    network, system = _ring(tmp_path, 2, 25.0, 1000.0)
    assert simulate(tmp_path / "c", system, network).step_ns > 0
