"""docs/cc-studies.md's flow-workload commands and the sample config they name
(examples/cc/cc.toml) work as written: the config loads with every default, and the
commands run (``flows run`` on ns3 on a tiny case where the ns3 worker is built)."""

from __future__ import annotations

import re
import shlex
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from astra_core.cli import main
from astra_core.config.issues import ConfigWarning
from astra_ns3.config import CC_SECTIONS, Ns3Config, load_config

pytestmark = pytest.mark.usefixtures("plugins")

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "cc-studies.md"
CC_TOML = ROOT / "examples" / "cc" / "cc.toml"


def documented_commands() -> list[list[str]]:
    """The ``astra ...`` lines of the doc's "Flow workloads" block, continuations joined."""
    text = DOC.read_text().split("## Flow workloads", 1)[1]
    block = re.search(r"\n((?:    .*\n)+)", text).group(1)
    joined = block.replace("\\\n", " ")
    return [shlex.split(line)[1:] for line in joined.splitlines() if line.strip().startswith("astra ")]


def test_the_shipped_cc_toml_holds_every_default():
    assert load_config(CC_TOML) == Ns3Config()
    text = CC_TOML.read_text()
    for section in ("ecn", "pfc", "dcqcn", "hpcc", "hpcc_pint", "timely", "dctcp", "monitor"):
        assert f"\n[{section}]\n" in text


@pytest.mark.parametrize("cc", list(CC_SECTIONS))
def test_any_cc_selected_in_the_shipped_file_reads_without_a_warning(tmp_path, cc):
    copy = tmp_path / "cc.toml"
    copy.write_text(CC_TOML.read_text().replace('cc = "dcqcn"', f'cc = "{cc}"', 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigWarning)
        assert load_config(copy).cc == cc


def test_the_docs_name_the_shipped_config_and_what_gen_prints(tmp_path, monkeypatch):
    topology_cmd, gen_cmd, run_cmd = documented_commands()
    assert run_cmd[run_cmd.index("--backend-config") + 1] == "examples/cc/cc.toml"
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(main, topology_cmd).exit_code == 0
    result = runner.invoke(main, gen_cmd)
    assert result.exit_code == 0, result.output
    quoted = re.search(r"`gen` prints what it drew, here\n`([^`]*)`", DOC.read_text()).group(1)
    assert result.stdout == f"{quoted}; wrote flows.txt\n"  # 581 flows, 902.5 MB, ...


def test_the_documented_flows_run_works_on_a_tiny_case(tmp_path, monkeypatch):
    from astra_ns3.tests.fabrics import require_ns3

    require_ns3()
    topology_cmd, gen_cmd, run_cmd = documented_commands()
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(main, topology_cmd).exit_code == 0
    tiny = [
        ("0.05" if arg == "10" and gen_cmd[k - 1] == "--duration-ms" else arg)
        for k, arg in enumerate(gen_cmd)
    ]
    assert runner.invoke(main, tiny).exit_code == 0
    args = [str(CC_TOML) if arg == "examples/cc/cc.toml" else arg for arg in run_cmd]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "on backend ns3" in result.stdout
    assert (tmp_path / "fct.csv").exists() and (tmp_path / "out" / "fct_slowdown.png").exists()


def test_the_validation_studys_flow_count_and_volume_are_what_it_draws():
    # The doc's "581 flows" and MB are what the study draws (902.5 MB, not 994).
    from astra_core.flows.cdf import load_cdf
    from astra_core.flows.generate import host_link_gbps, poisson_flows
    from astra_core.topology.generators import fat_tree

    fabric = fat_tree(4, 100.0, 1000.0)
    flows = poisson_flows(load_cdf("websearch"), 16, host_link_gbps(fabric), 0.5, 10_000_000, 1)
    total = sum(f.size_bytes for f in flows)
    assert f"{len(flows)} flows, {total / 1e6:.0f} MB over 10 ms" in DOC.read_text()
    assert f"prints {total / 1e6:.1f} MB" in DOC.read_text()
