"""``astra cluster`` never writes an output over one of its inputs or over another output.

What must not happen: ``--json`` onto the spec, its system.json or a job's trace replacing
that input with exit 0, or ``--json out/jobs.png --plots out`` writing one file over the
other."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from astra_core.cli import main
from tests.conftest import one_error_line


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize(
    ("target", "what"),
    [
        ("cluster.yaml", "SPEC"),
        ("system.json", "system"),
        ("a2a.3.et", "jobs[0] (a) workload"),  # both jobs run it: named by the first
        ("profile.json", "jobs[0] (a) system: a file it names"),
    ],
)
def test_an_output_onto_an_input_is_refused_before_any_run(tmp_path, cluster, target, what):
    import json

    system = json.loads((tmp_path / "system.json").read_text())
    for key in [k for k in system if k.endswith("-implementation")]:
        system[key] = ["nccl"]
    system["nccl"] = {"gpu": "H100", "gpus-per-node": 4, "profile": "profile.json"}
    (tmp_path / "nccl-system.json").write_text(json.dumps(system))
    (tmp_path / "profile.json").write_text(json.dumps({"format": "astra-nccl-profile/1", "launch-us": 5.0}))
    spec = cluster([{"name": "a", "system": "nccl-system.json"}, {"name": "b"}])
    path = tmp_path / target
    before = path.read_bytes()
    line = one_error_line(_invoke("cluster", spec, "--json", path))
    assert line.startswith(f"error: --json {path} is the {what} input")
    assert path.read_bytes() == before


def test_json_onto_a_plot_is_refused(tmp_path, cluster):
    spec = cluster([{"name": "a"}, {"name": "b"}])
    out = tmp_path / "out"
    line = one_error_line(_invoke("cluster", spec, "--json", out / "jobs.png", "--plots", out))
    assert (
        line
        == f"error: --plots (jobs.png) and --json both write {out / 'jobs.png'}; give them different files"
    )


def test_backend_outputs_that_every_run_would_write_are_refused_before_any_run(tmp_path, cluster):
    # Before: the run of all jobs and each job's run alone wrote ns3's monitor tables
    # one over the other (with --processes, whichever ended last was left).
    pytest.importorskip("astra_ns3")
    out = tmp_path / "monitor"
    config = tmp_path / "ns3.toml"
    config.write_text(f'[monitor]\noutput_dir = "{out}"\n')
    spec = cluster([{"name": "a"}, {"name": "b"}], backend="ns3", backend_config=str(config))
    line = one_error_line(_invoke("cluster", spec, "--no-cache"))
    assert line == (
        f"error: backend_config: backend ns3 writes 4 files ({config}: monitor.output_dir (flow_samples.csv), ...) "
        "in each of the cluster's 3 runs (all jobs, then each alone), one over the other; take those "
        "outputs out of the backend's config"
    )
    assert not out.exists()
