"""A workload given as one rank's trace or as the traces' folder gets the prefix suggested
(``astra run``, ``astra.simulate``, a sweep's preflight)."""

from __future__ import annotations

import shutil

import pytest
import yaml
from click.testing import CliRunner

from astra_core.api import simulate
from astra_core.cli import main
from astra_core.errors import ConfigError, TraceError
from astra_core.sweep import run_sweep
from tests.cli.test_cli import EXAMPLE, RING2, two_rank_trace
from tests.conftest import one_error_line


@pytest.fixture
def traces(tmp_path):
    """A two-rank trace set traces/p2p.<r>.et and a two-NPU network."""
    (tmp_path / "traces").mkdir()
    (tmp_path / "network.yml").write_text(RING2)
    return two_rank_trace(tmp_path / "traces")


def _given(traces: str, form: str) -> str:
    return f"{traces}.0.et" if form == "rank file" else str(traces).rsplit("/", 1)[0]


HINTS = {
    "rank file": "it is one rank's trace: did you mean the prefix {prefix}?",
    "folder": "it is a folder: did you mean the prefix {prefix}?",
}


@pytest.mark.parametrize("form", HINTS)
def test_run_suggests_the_prefix(tmp_path, traces, form):
    given = _given(traces, form)
    args = [
        "run",
        "--workload",
        given,
        "--system",
        EXAMPLE / "system.json",
        "--network",
        tmp_path / "network.yml",
    ]
    line = one_error_line(CliRunner().invoke(main, [str(a) for a in args]))
    assert line == (
        f"error: {given}: 2 NPUs need 2 trace files {given}.<rank>.et, found 0: missing ranks 0, 1; "
        + HINTS[form].format(prefix=traces)
    )


@pytest.mark.parametrize("form", HINTS)
def test_simulate_suggests_the_prefix(tmp_path, traces, form):
    with pytest.raises(TraceError) as err:
        simulate(_given(traces, form), EXAMPLE / "system.json", tmp_path / "network.yml")
    assert str(err.value).endswith("; " + HINTS[form].format(prefix=traces))


def test_a_folder_of_several_sets_lists_them(tmp_path, traces):
    for rank in (0, 1):
        shutil.copy(f"{traces}.{rank}.et", tmp_path / "traces" / f"b.{rank}.et")
    with pytest.raises(TraceError) as err:
        simulate(tmp_path / "traces", EXAMPLE / "system.json", tmp_path / "network.yml")
    folder = tmp_path / "traces"
    assert str(err.value).endswith(
        f"; it is a folder: did you mean the prefix {folder / 'b'} or {folder / 'p2p'}?"
    )


@pytest.mark.parametrize("form", HINTS)
def test_a_sweep_suggests_the_prefix_before_running(tmp_path, traces, form):
    given = _given(traces, form)
    spec = tmp_path / "sweep.yaml"
    base = {
        "workload": given,
        "system": str(EXAMPLE / "system.json"),
        "network": str(tmp_path / "network.yml"),
    }
    spec.write_text(yaml.safe_dump({"base": base, "grid": {"network.latency[0]": [1, 2]}, "output": "out"}))
    with pytest.raises(ConfigError) as err:
        run_sweep(spec, workers=1)
    assert str(err.value) == (
        f"{spec}: base: workload: {given}: no trace files {given}.<rank>.et; "
        + HINTS[form].format(prefix=traces)
    )
    assert not (tmp_path / "out").exists()
