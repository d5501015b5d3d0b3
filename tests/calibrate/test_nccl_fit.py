"""The NCCL profile: fitted to nccl-tests logs (astra_core.calibrate.nccl_fit), read from
its file (astra_core.config.nccl_profile) and applied by the NCCL model."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import astra
from astra_core.calibrate.nccl_fit import _Problem, _profile, compare, fit
from astra_core.calibrate.nccl_tests import read_logs
from astra_core.cli import main
from astra_core.config.nccl_profile import read_profile
from astra_core.config.network import load_network
from astra_core.config.system import SystemConfig, load_system
from astra_core.errors import ConfigError
from astra_core.system.collectives.nccl.tuning import Proto
from astra_core.workload.generators.micro import write_micro

REPO = Path(__file__).resolve().parents[2]
PRESET = REPO / "examples" / "validation" / "hgx_h100_4nodes"
DATA = REPO / "tests" / "data" / "nccl_tests"
SIZES = [8 * 4**k for k in range(15)]  # 8 B .. 2 GiB


def _machine():
    return load_system(PRESET / "system.json"), load_network(PRESET / "network.yml")


def _write_log(
    path: Path, binary: str, hosts: list[str], rows: list[tuple[int, float]], gpus_per_thread: int = 1
) -> Path:
    """An nccl-tests log as all_reduce_perf prints it (rows of size, time in µs)."""
    lines = ["# nccl-tests version 2.17.9 nccl-headers=23007 nccl-library=23007"]
    lines.append(f"# Collective test starting: {binary}")
    lines.append(f"# nThread 1 nGpus {gpus_per_thread} minBytes 8 maxBytes 8 step: 4(factor) graph: 0")
    for rank, host in enumerate(hosts):
        lines.append(
            f"#  Rank {rank:2d} Group  0 Pid {100 + rank} on {host} device {rank % 8} [0x1b] NVIDIA H100 80GB HBM3"
        )
    for size, time_us in rows:
        lines.append(
            f"{size:12d} {size // 4:12d} float sum -1 {time_us:.6f} 0.00 0.00 0 {time_us:.6f} 0.00 0.00 0"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def _synthetic(tmp_path: Path, truth, problem_logs) -> list:
    """Logs whose times are the model's with the profile ``truth``."""
    system, network = _machine()
    problem = _Problem(problem_logs, system, network)
    times = iter(problem.predict(truth))
    written = []
    for k, log in enumerate(problem_logs):
        rows = [(p.size_bytes, next(times)[0]) for p in log.points]
        binary = {"all-reduce": "all_reduce_perf", "all-gather": "all_gather_perf"}[log.collective]
        hosts = [f"node{r // log.gpus_per_node}" for r in range(log.ranks)]
        written += read_logs(_write_log(tmp_path / f"truth{k}.txt", binary, hosts, rows, log.gpus_per_thread))
    return written


def test_the_fit_recovers_the_profile_that_made_the_logs(tmp_path):
    """Logs made by the model with known corrections (a 5 µs launch, which an
    8-GPU thread pays 8 times per row; LL latencies x 1.6, Simple latencies x 1.3,
    bandwidth x 0.9 on one node and x 0.8 across nodes) are fitted back to those
    corrections, every row to 1e-4."""
    seed = []
    for binary, hosts, per_thread in (
        ("all_reduce_perf", ["a"] * 8, 8),
        ("all_gather_perf", ["a"] * 8, 1),
        ("all_reduce_perf", [f"n{r // 8}" for r in range(32)], 1),
    ):
        seed += read_logs(
            _write_log(
                tmp_path / f"seed_{binary}_{len(hosts)}.txt",
                binary,
                hosts,
                [(s, 1.0) for s in SIZES],
                per_thread,
            )
        )
    params = [("launch",), ("lat", Proto.LL), ("lat", Proto.SIMPLE), ("eff", 0), ("eff", 1)]
    x = np.array([0.1, math.log(1.6), math.log(1.3), math.log(0.9), math.log(0.8)])  # launch 4 + 1 µs
    truth = _profile(params, x, "H100", None)
    logs = _synthetic(tmp_path, truth, seed)
    system, network = _machine()
    result = fit(logs, system, network, prior=0.0)
    assert max(abs(r.after_us / r.measured_us - 1) for r in result.rows) < 1e-4
    profile = result.profile
    assert profile.launch_us == pytest.approx(5.0, rel=1e-3)
    floor = [r for r in result.rows if r.measured_us == pytest.approx(40.0)]
    assert len(floor) >= 3  # the small rows of the 8-GPU thread: 8 launches of 5 µs
    assert profile.base_latency_us[(1, 0)] == pytest.approx(6.6 * 1.6, rel=1e-3)  # Ring/LL
    assert profile.bw_efficiency[(0, 4, 2)] == pytest.approx(0.9, rel=1e-3)  # one node, NVLS/Simple
    assert profile.bw_efficiency[(1, 0, 0)] == pytest.approx(0.8, rel=1e-3)  # several nodes, Tree/LL
    assert profile.nccl_version == "2.30.7"  # the newest modelled: the profile cells are its tables x factors
    assert [entry["points"] for entry in profile.fitted_on] == [15, 15, 15]


def test_a_profile_fitted_on_one_log_predicts_another_through_what_they_share(tmp_path):
    """Fitted on one node's all-reduce only, the corrections shared with a one-node
    all-gather (LL and Simple latency factors, the one-node efficiency) predict it
    exactly; the several-node factors and the launch (one process per GPU: never
    the floor) stay NCCL's."""
    params = [("lat", Proto.LL), ("lat", Proto.SIMPLE), ("eff", 0)]
    truth = _profile(params, np.array([math.log(1.5), math.log(1.2), math.log(0.92)]), "H100", None)
    seed = [
        read_logs(_write_log(tmp_path / f"s_{b}.txt", b, ["a"] * 8, [(s, 1.0) for s in SIZES]))[0]
        for b in ("all_reduce_perf", "all_gather_perf")
    ]
    reduce_log, gather_log = _synthetic(tmp_path, truth, seed)
    system, network = _machine()
    fitted = fit([reduce_log, gather_log], system, network, prior=0.0).profile
    assert fitted.launch_us is None
    assert fitted.base_latency_us[(1, 0)] == pytest.approx(6.6 * 1.5, rel=1e-3)  # Ring/LL
    assert not any(scope == 1 for scope, _, _ in fitted.bw_efficiency)
    checked = compare([gather_log], system, network, fitted)
    assert checked.geomean_error() < 1e-4 < checked.geomean_error(after=False)


def _simulate_us(tmp_path: Path, system: dict, size: int) -> float:
    prefix = tmp_path / f"ar_{size}"
    write_micro("all-reduce", size, 8, prefix)
    net = {"topology": ["Switch"], "npus_count": [8], "bandwidth": [419.095], "latency": [300]}
    result = astra.simulate(str(prefix), SystemConfig.from_dict(system, str(tmp_path / "system.json")), net)
    return result.step_ns / 1000.0


def test_system_json_names_a_profile_and_a_collective_costs_what_it_says(tmp_path):
    """A profile with a 20 µs launch and half the one-node bandwidth of NVLS: an
    8 B all-reduce (Ring/LL, 15 µs in NCCL's model) takes the launch, 20 µs; a 1 GiB
    one (NVLS) takes its latency and twice the bandwidth time."""
    system = json.loads((REPO / "examples" / "validation" / "hgx_h100" / "system.json").read_text())
    plain_small, plain_big = (_simulate_us(tmp_path, system, s) for s in (8, 2**30))
    (tmp_path / "profile.json").write_text(
        json.dumps(
            {
                "format": "astra-nccl-profile/1",
                "launch-us": 20.0,
                "bw-efficiency": {"one-node": {"NVLS/Simple": 0.5}},
            }
        )
    )
    system["nccl"]["profile"] = "profile.json"  # found beside system.json
    small, big = (_simulate_us(tmp_path, system, s) for s in (8, 2**30))
    assert plain_small == pytest.approx(6.6 + 14 * 0.6, abs=0.1)  # Ring/LL: baseLat + 2(n-1) hwLat
    assert small == pytest.approx(20.0, abs=1e-3)
    nvls_latency = 25.0  # hwLat[NVLINK][NVLS][Simple], one node
    assert big - nvls_latency == pytest.approx(2 * (plain_big - nvls_latency), rel=1e-6)


def test_profile_files_with_mistakes_are_one_line_each_naming_file_and_key(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "format": "astra-nccl-profile/1",
                "launch-us": -1,
                "base-latency-us": {"Ring/LL9": 1.0},
                "hw-latency-us": {"NVLINK": {"Tree/LL": "x"}, "IB": {}},
                "bw-efficiency": {"one-node": {"Ring/Simple": 0}},
                "fited-on": [],
            }
        )
    )
    with pytest.raises(ConfigError) as info:
        read_profile(bad)
    lines = str(info.value).splitlines()
    assert lines == [
        f"{bad}: unknown key 'fited-on'; did you mean 'fitted-on'?",
        f"{bad}: launch-us: must be >= 0, got -1",
        f"{bad}: base-latency-us.Ring/LL9: unknown cell 'Ring/LL9': Algorithm/Protocol with NCCL's names "
        "(Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT / LL, LL128, Simple)",
        f"{bad}: hw-latency-us.NVLINK.Tree/LL: expected a finite number, got 'x'",
        f"{bad}: hw-latency-us.IB: unknown key (one of NVLINK, PCI, NET)",
        f"{bad}: bw-efficiency.one-node.Ring/Simple: must be > 0, got 0",
    ]
    system = json.loads((REPO / "examples" / "validation" / "hgx_h100" / "system.json").read_text())
    system["nccl"]["profile"] = "nowhere.json"
    with pytest.raises(ConfigError, match=r"nccl.profile: no file nowhere.json"):
        _simulate_us(tmp_path, system, 8)


def test_astra_calibrate_nccl_writes_a_profile_that_system_json_can_name(tmp_path):
    log = tmp_path / "h100_1node_5colls.txt"
    shutil.copy(DATA / "h100_1node_5colls.txt", log)
    out = tmp_path / "profile.json"
    args = ["calibrate", "nccl", str(log), "--collective", "all-reduce", "-o", str(out)]
    args += ["--system", str(PRESET / "system.json"), "--network", str(PRESET / "network.yml")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "fitted" in result.output and "profile ->" in result.output
    profile = read_profile(out)
    assert profile.nccl_version == "2.29.2" and profile.gpu == "H100"
    (entry,) = profile.fitted_on
    assert entry["geomean-error-after"] < entry["geomean-error-before"]
    missing = CliRunner().invoke(main, [*args[:2], str(tmp_path / "nope.txt"), *args[3:]])
    assert missing.exit_code == 1
    assert missing.output.strip().splitlines() == [
        f"error: {tmp_path / 'nope.txt'}: cannot read: No such file or directory"
    ]


@pytest.mark.parametrize("target", ["log", "system", "network", "check"])
def test_the_profile_is_never_written_over_an_input(tmp_path, target):
    # -o onto the log, --system, --network or a --check log must not replace it, exit 0.
    files = {"log": tmp_path / "fit.txt", "check": tmp_path / "check.txt"}
    for path in files.values():
        shutil.copy(DATA / "h100_1node_5colls.txt", path)
    files["system"], files["network"] = tmp_path / "system.json", tmp_path / "network.yml"
    shutil.copy(PRESET / "system.json", files["system"])
    shutil.copy(PRESET / "network.yml", files["network"])
    before = files[target].read_bytes()
    args = ["calibrate", "nccl", files["log"], "--collective", "all-reduce", "-o", files[target]]
    args += ["--system", files["system"], "--network", files["network"], "--check", files["check"]]
    result = CliRunner().invoke(main, [str(a) for a in args])
    option = {"log": "LOG", "system": "--system", "network": "--network", "check": "--check"}[target]
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"error: --output {files[target]} is the {option} input; writing it would destroy that input: "
        "give --output another path"
    ]
    assert files[target].read_bytes() == before


def test_a_log_of_another_gpu_is_refused_naming_it(tmp_path):
    # Not an A100 log fitted into a profile labelled H100 without a word.
    log = tmp_path / "a100.txt"
    text = (DATA / "h100_1node_5colls.txt").read_text()
    log.write_text(text.replace("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"))
    args = ["calibrate", "nccl", str(log), "--collective", "all-reduce", "-o", str(tmp_path / "p.json")]
    args += ["--system", str(PRESET / "system.json"), "--network", str(PRESET / "network.yml")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"error: {log}: ran on NVIDIA A100-SXM4-80GB, but the system's nccl.gpu is H100: "
        "fit on logs of the machine the system describes"
    ]
    assert not (tmp_path / "p.json").exists()


def test_a_profile_efficiency_above_one_is_refused_naming_file_and_key(tmp_path):
    # bw-efficiency 5 read as given would make a 64 MiB ring all-reduce on 8 H100s beat NVLink.
    bad = tmp_path / "fast.json"
    bad.write_text(
        json.dumps({"format": "astra-nccl-profile/1", "bw-efficiency": {"one-node": {"Ring/Simple": 5}}})
    )
    with pytest.raises(ConfigError) as info:
        read_profile(bad)
    assert str(info.value).splitlines() == [
        f"{bad}: bw-efficiency.one-node.Ring/Simple: must be <= 1 (a share of the bus bandwidth NCCL's "
        "model gives), got 5"
    ]
    bad.write_text(
        json.dumps({"format": "astra-nccl-profile/1", "bw-efficiency": {"one-node": {"Ring/Simple": 1}}})
    )
    assert read_profile(bad).bw_efficiency == {(0, 1, 2): 1.0}


def test_logs_faster_than_nccls_bandwidth_fit_an_efficiency_of_one_and_say_so(tmp_path):
    """Logs made with 1.5x NCCL's one-node bus bandwidth: the fit stops at an efficiency
    of 1 (not 1.5, which bounds of 1/20 to 20 would allow) and warns naming it."""
    seed = [
        read_logs(_write_log(tmp_path / "s.txt", "all_reduce_perf", ["a"] * 8, [(s, 1.0) for s in SIZES]))[0]
    ]
    truth = _profile([("eff", 0)], np.array([math.log(1.5)]), "H100", None)
    logs = _synthetic(tmp_path, truth, seed)
    system, network = _machine()
    with pytest.warns(UserWarning) as caught:
        profile = fit(logs, system, network, prior=0.0).profile
    assert list(profile.bw_efficiency.values()) == pytest.approx([1.0] * len(profile.bw_efficiency))
    (warning,) = [str(w.message) for w in caught if "bound" in str(w.message)]
    assert "bw-efficiency one-node 1 (its upper bound)" in warning


def test_profile_latencies_past_one_delay_are_refused_naming_the_key(tmp_path):
    """A latency is one delay of the event queue, at most 1000 s (MAX_DELAY_NS): a
    launch of 1e300 us was a traceback when the run scheduled it."""
    bad = tmp_path / "huge.json"
    bad.write_text(
        json.dumps(
            {
                "format": "astra-nccl-profile/1",
                "launch-us": 1e300,
                "base-latency-us": {"Ring/LL": 2e9},
                "hw-latency-us": {"NVLINK": {"Ring/LL": 1e9}},
            }
        )
    )
    with pytest.raises(ConfigError) as info:
        read_profile(bad)
    assert str(info.value).splitlines() == [
        f"{bad}: launch-us: must be <= 1e+09 us (one delay of at most 1000 s), got 1e+300",
        f"{bad}: base-latency-us.Ring/LL: must be <= 1e+09 us (one delay of at most 1000 s), got 2000000000.0",
    ]
