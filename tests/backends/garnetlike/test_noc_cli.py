"""``astra noc``, ``astra run --backend garnetlike --backend-config``, and the traffic patterns."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from click.testing import CliRunner

from astra_core.cli import main
from astra_core.errors import ConfigError
from astra_garnetlike.traffic import make_pattern


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_one_load_point_prints_latency_and_throughput(tmp_path):
    out = tmp_path / "point.json"
    result = invoke(
        "noc",
        "--topology",
        "mesh",
        "--dims",
        "4x4",
        "--pattern",
        "transpose",
        "--injection-rate",
        "0.05",
        "--cycles",
        "2000",
        "--json",
        out,
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("mesh 4x4, transpose, offered ")
    assert "average packet latency" in result.output and "accepted throughput" in result.output
    (point,) = json.loads(out.read_text())
    # transpose on 4x4: the 4 diagonal nodes send to themselves and stay silent, so the
    # network carries 12/16 of the offered 0.05; below saturation all of it gets through.
    assert point["offered"] == pytest.approx(0.05 * 12 / 16, rel=0.15)
    assert point["accepted"] == pytest.approx(point["offered"], rel=0.1)
    assert not point["saturated"]


def test_sweep_draws_the_latency_load_curve(tmp_path):
    png = tmp_path / "curve.png"
    result = invoke(
        "noc", "--dims", "4x4", "--sweep", "--rates", "0.05,0.2,0.9", "--cycles", "600", "--plot", png
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len([line for line in lines if line.startswith("mesh 4x4")]) == 3
    # 0.9 flits/node/cycle is below a 4x4 mesh's bound (4 / k = 1) but above what its
    # routers sustain: the network accepts less than 90 % of it.
    assert "saturated" in lines[2] and "saturated" not in lines[0] + lines[1]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {png}" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--dims", "4xq"], "error: --dims: expected sizes joined by 'x' like 8x8, got '4xq'"),
        (["--dims", "3x5", "--pattern", "transpose"], "error: transpose needs a square 2-D grid"),
        (["--vcs", "0"], "error: noc: vcs_per_vnet: must be in [1, 64], got 0"),
        (["--sweep", "--rates", "0.1,x"], "error: --rates: expected numbers"),
        (["--injection-rate", "0"], "error: --injection-rate must be in (0, 1] flits/node/cycle"),
        # 5 flits/node/cycle is more than a node's port can take
        (
            ["--injection-rate", "5"],
            "error: --injection-rate must be in (0, 1] flits/node/cycle (a node's injection port "
            "takes one flit per cycle), got 5",
        ),
        (["--injection-rate", "nan"], "error: --injection-rate must be in (0, 1] flits/node/cycle"),
        (
            ["--sweep", "--rates", "0.1,1.5"],
            "error: --rates: offered loads must be in (0, 1] flits/node/cycle",
        ),
    ],
)
def test_bad_input_is_one_error_line(args, message):
    result = invoke("noc", "--cycles", "100", *args)
    assert result.exit_code == 1
    assert result.output.strip().startswith(message), result.output


def test_run_with_a_backend_config_file(tmp_path, reference_dir):
    cfg = tmp_path / "garnet.toml"
    cfg.write_text("flit_bytes = 4096\npacket_bytes = 131072\n")
    out = tmp_path / "r.json"
    base = [
        "run",
        "--workload",
        reference_dir / "workload/all_reduce/8npus_1MB/all_reduce",
        "--system",
        reference_dir / "system/upstream_Ring_4chunks.json",
        "--network",
        reference_dir / "network/upstream_Ring_8npus.yml",
        "--backend",
        "garnetlike",
    ]
    result = invoke(*base, "--backend-config", cfg, "--json", out)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["backend"] == "garnetlike"
    cfg.write_text("flit_bytes = 0\n")
    result = invoke(*base, "--backend-config", cfg)
    assert result.exit_code == 1
    assert f"error: {cfg}: flit_bytes: must be in [1, 2^30], got 0" in result.output


def test_noc_is_the_garnetlike_plugins_command_and_a_broken_one_is_named():
    # `astra noc` comes from astra-garnetlike's astra_register_commands hook (the core
    # names no backend). sys.modules[name] = None makes that import fail: the other
    # commands still load, a warning names the plugin, and `noc` is an unknown command.
    code = (
        "import sys; sys.modules['astra_garnetlike.cli'] = None\n"
        "from astra_core.cli import main\nmain(['noc', '--dims', '4x4'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 2
    assert "astra_register_commands raised" in out.stderr and "garnetlike" in out.stderr
    assert "No such command 'noc'" in out.stderr


# -- traffic patterns (Dally & Towles table 3.2) on an 8x8 grid, node = x + 8y ----------------
def test_patterns_on_8x8():
    rng = random.Random(0)
    node = lambda x, y: x + 8 * y  # noqa: E731
    transpose = make_pattern("transpose", [8, 8])
    tornado = make_pattern("tornado", [8, 8])
    complement = make_pattern("bit_complement", [8, 8])
    neighbor = make_pattern("neighbor", [8, 8])
    uniform = make_pattern("uniform_random", [8, 8])
    for x in range(8):
        for y in range(8):
            s = node(x, y)
            assert transpose(s, rng) == node(y, x)
            assert tornado(s, rng) == node((x + 3) % 8, (y + 3) % 8)  # ceil(8/2) - 1 = 3 ahead
            assert complement(s, rng) == node(7 - x, 7 - y)
            assert neighbor(s, rng) == node((x + 1) % 8, (y + 1) % 8)
    draws = [uniform(5, rng) for _ in range(6300)]
    assert 5 not in draws and set(draws) == set(range(64)) - {5}
    # 6300 draws over 63 destinations: 100 each expected; a fair die stays within +-45
    assert max(draws.count(d) for d in set(draws)) < 145


def test_bit_patterns_on_non_square_power_of_two_grids():
    rng = random.Random(0)
    # 16 nodes as 2x8: b = 4 bits, transpose swaps the 2-bit halves: 0b0001 -> 0b0100
    assert make_pattern("transpose", [2, 8])(1, rng) == 4
    assert make_pattern("bit_complement", [2, 8])(1, rng) == 14
    with pytest.raises(ConfigError, match="bit_complement needs a power-of-two node count; got 12"):
        make_pattern("bit_complement", [3, 4])
    with pytest.raises(ConfigError, match="unknown traffic pattern 'hotspot'"):
        make_pattern("hotspot", [4, 4])
