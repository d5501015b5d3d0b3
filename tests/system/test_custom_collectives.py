"""Custom collectives from Chakra ETs and MSCCL XML (astra_core.system.collectives.custom),
timed against closed forms of their dependency chains on the analytical backend."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import astra
from astra_core.config.network import NetworkConfig
from astra_core.config.system import SystemConfig
from astra_core.errors import AstraError, ConfigError
from astra_core.workload.generators.micro import write_micro

DATA = Path(__file__).resolve().parents[1] / "data" / "custom"
GIB = 1 << 30
BW = 50.0  # network.yml GB/s (2^30 bytes)
LATENCY = 500  # ns per link; a Switch message crosses two
CHUNK = (1 << 20) // 8  # the example's 1 MiB over 8 chunks


def configs(entry: str, local_mem_bw: float = 50):
    network = NetworkConfig.from_dict(
        {"topology": ["Switch"], "npus_count": [8], "bandwidth": [BW], "latency": [LATENCY]}
    )
    system = SystemConfig.from_dict(
        {
            "scheduling-policy": "FIFO",
            "collective-optimization": "baseline",
            "preferred-dataset-splits": 4,
            "local-mem-bw": local_mem_bw,
            "all-reduce-implementation-custom": [entry],
        }
    )
    return network, system


def message_ns(size: int) -> int:
    return int(2 * LATENCY + size / (BW * GIB / 1e9))


def run(tmp_path: Path, entry: str, size: int = 1 << 20):
    network, system = configs(entry)
    write_micro("all-reduce", size, 8, tmp_path / "ar")
    return astra.simulate(str(tmp_path / "ar"), system, network)


def test_chakra_et_ring_all_reduce(tmp_path):
    result = run(tmp_path, str(DATA / "custom_allreduce"))
    # Each rank: 7 x (send, receive, 7 us reduction node), then 7 x (send, receive); a send is
    # done when delivered, and the neighbour's message arrives at the same time
    expected = 7 * (message_ns(CHUNK) + 7000) + 7 * message_ns(CHUNK)
    assert result.step_ns == expected
    assert result.messages == 8 * 14


def test_chakra_et_sizes_are_the_ets(tmp_path):
    # upstream ignores the workload's size for a custom collective: the ETs carry theirs
    assert (
        run(tmp_path, str(DATA / "custom_allreduce"), size=64 << 20).step_ns
        == run(tmp_path, str(DATA / "custom_allreduce"), size=1 << 20).step_ns
    )


def test_msccl_xml_ring_all_reduce(tmp_path):
    size = 8 << 20
    result = run(tmp_path, str(DATA / "custom_allreduce.xml"), size=size)
    chunk = size // 8  # i_chunks = 8
    wire = round(chunk * 128 / 120)  # proto LL128
    reduce_ns = 3 * int(chunk / 50)  # write + 2 reads at local-mem-bw 50 GB/s (1e9)
    # steps: 7 x (s, rrc), then 7 x (s, r), one thread block, each step after the last
    assert result.step_ns == 14 * message_ns(wire) + 7 * reduce_ns


def test_relative_paths_from_the_system_json_folder(tmp_path, monkeypatch):
    folder = tmp_path / "cfg"
    shutil.copytree(DATA, folder / "algo")
    (folder / "system.json").write_text(
        '{"scheduling-policy": "FIFO", "collective-optimization": "baseline", '
        '"preferred-dataset-splits": 1, "local-mem-bw": 50, '
        '"all-reduce-implementation-custom": ["algo/custom_allreduce.xml"]}'
    )
    network, _ = configs("x.xml")
    write_micro("all-reduce", 8 << 20, 8, tmp_path / "ar")
    monkeypatch.chdir(tmp_path)
    result = astra.simulate(str(tmp_path / "ar"), str(folder / "system.json"), network)
    assert result.step_ns == run(tmp_path, str(DATA / "custom_allreduce.xml"), size=8 << 20).step_ns


def test_missing_custom_files_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match="all-reduce-implementation-custom: no Chakra ET nowhere.0.et"):
        run(tmp_path, "nowhere")


def xml_variant(tmp_path: Path, old: str, new: str) -> str:
    text = (DATA / "custom_allreduce.xml").read_text().replace(old, new, 1)
    path = tmp_path / "variant.xml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "old, new, message",
    [
        ('ngpus="8"', 'ngpus="4"', "the algorithm is for 4 GPUs; the collective has 8"),
        ('type="rrc"', 'type="xyz"', "gpu 0 tb 0 step 1: unknown step type 'xyz'"),
        ('<tb id="0" send="1"', '<tb id="0" send="9"', "gpu 0 tb 0 step 0: send peer 9 is not a GPU"),
        (
            'depid="-1" deps="-1" hasdep="0"/>',
            'depid="3" deps="0" hasdep="0"/>',
            "gpu 0 tb 0 step 0: depends on tb 3 step 0, which gpu 0 does not have",
        ),
    ],
)
def test_bad_msccl_files_are_one_line(tmp_path, old, new, message):
    with pytest.raises(AstraError, match=message):
        run(tmp_path, xml_variant(tmp_path, old, new), size=8 << 20)


def test_cyclic_dependencies_are_refused(tmp_path):
    # step 0 waits for step 1 of its own thread block, which comes after it
    path = xml_variant(tmp_path, 'depid="-1" deps="-1" hasdep="0"/>', 'depid="0" deps="1" hasdep="0"/>')
    with pytest.raises(AstraError, match="depends on itself"):
        run(tmp_path, path, size=8 << 20)


@pytest.mark.parametrize(
    "old, new, message",
    [
        # counts beyond MSCCL's bounds (msccl_struct.h: MSCCL_MAX_COUNT 72, MAXCHANNELS 32)
        (
            'cnt="1"',
            'cnt="1000000000000000"',
            "gpu 0 tb 0 step 0: attribute 'cnt' must be in 1..8, got 1000000000000000",
        ),
        ('cnt="1"', 'cnt="0"', "gpu 0 tb 0 step 0: attribute 'cnt' must be in 1..8, got 0"),
        ('cnt="1"', 'cnt="-3"', "gpu 0 tb 0 step 0: attribute 'cnt' must be in 1..8, got -3"),
        ('i_chunks="8"', 'i_chunks="0"', "gpu 0: attribute 'i_chunks' must be >= 1, got 0"),
        (
            'i_chunks="8"',
            'i_chunks="1000000000000"',
            "gpu 0: attribute 'i_chunks' 1000000000000 splits the 8388608-byte input buffer "
            "into chunks smaller than 1 byte",
        ),
        ('chan="0"', 'chan="x"', "gpu 0 tb 0: needs an integer attribute 'chan', got 'x'"),
        ('chan="0"', 'chan="1"', "gpu 0 tb 0: attribute 'chan' must be in 0..0, got 1"),
        ('nchannels="1"', 'nchannels="33"', "algo: attribute 'nchannels' must be in 1..32, got 33"),
        ('<step s="0"', '<step s="-1"', "gpu 0 tb 0: attribute 's' must be >= 0, got -1"),
        ('send="1"', 'send="-2"', "gpu 0 tb 0: attribute 'send' must be >= -1, got -2"),
        ('deps="-1"', 'deps="-5"', "gpu 0 tb 0 step 0: attribute 'deps' must be >= -1, got -5"),
    ],
)
def test_msccl_counts_are_checked(tmp_path, old, new, message):
    """Every numeric attribute of an MSCCL XML is an integer in MSCCL's range, a step
    moves no more chunks than a buffer has, and a chunk is at least a byte; each
    problem is one line naming the file, the element and the attribute."""
    path = xml_variant(tmp_path, old, new)
    if not message:  # i_chunks absent: nchunksperloop (8) chunks, the same run
        assert (
            run(tmp_path, path, size=8 << 20).step_ns
            == run(tmp_path, str(DATA / "custom_allreduce.xml"), size=8 << 20).step_ns
        )
        return
    with pytest.raises(ConfigError) as caught:
        run(tmp_path, path, size=8 << 20)
    text = str(caught.value)
    assert "\n" not in text
    assert text == f"{path}: {message}"


def test_msccl_loop_chunks_are_checked(tmp_path):
    text = (DATA / "custom_allreduce.xml").read_text()
    text = text.replace('nchunksperloop="8"', 'nchunksperloop="0"')
    path = tmp_path / "loop.xml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"algo: attribute 'nchunksperloop' must be >= 1, got 0$"):
        run(tmp_path, str(path), size=8 << 20)
