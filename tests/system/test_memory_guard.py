"""The memory guard: a run that outgrows the machine stops in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from astra_core.api import simulate


def test_a_run_the_memory_left_cannot_hold_stops_in_one_line(monkeypatch):
    # A run that outgrows the machine must stop in one line, not be killed by the OOM
    # killer without a word. With each progress report (65,536 events; this run has 87,240 and one last
    # report) the run checks the memory left and stops under the floor.
    from astra_core.system import memory_guard

    example = Path(__file__).resolve().parents[2] / "examples" / "resnet50_dp"
    monkeypatch.setattr(memory_guard, "available_bytes", lambda: 1 << 20)
    monkeypatch.setattr(memory_guard, "resident_bytes", lambda: 3 << 29)
    with pytest.raises(memory_guard.RunTooLarge) as err:
        simulate(
            str(example / "workload" / "Resnet50_DataParallel"),
            example / "system.json",
            example / "network.yml",
            backend="analytical-congestion",
        )
    message = str(err.value)
    assert message.startswith("stopped at t = ") and "\n" not in message
    done, total = (
        int(n.replace(",", "")) for n in message.split(" with ")[1].split(" ET nodes")[0].split(" of ")
    )
    assert 0 < done < total  # the first report, every 65,536 events: part of the way
    assert ": the machine has 1 MiB of memory left and this run holds 1.5 GiB; " in message
    assert message.endswith(f"it would need about {memory_guard.gib_text((3 << 29) * total // done)}")


def test_a_run_too_large_to_build_stops_in_one_line(tmp_path, monkeypatch):
    # The 8,192-rank full run outgrew the machine while its engines were built, before
    # any progress report: building and starting check too, every 64 engines.
    from astra_core.system import memory_guard
    from astra_core.workload.generators.micro import write_micro

    write_micro("all-reduce", 1 << 20, 64, str(tmp_path / "ar"))
    network = {"topology": ["Ring"], "npus_count": [64], "bandwidth": [50.0], "latency": [500.0]}
    system = Path(__file__).resolve().parents[2] / "examples" / "resnet50_dp" / "system.json"
    monkeypatch.setattr(memory_guard, "available_bytes", lambda: 1 << 20)
    monkeypatch.setattr(memory_guard, "resident_bytes", lambda: 1 << 30)
    with pytest.raises(memory_guard.RunTooLarge) as err:
        simulate(str(tmp_path / "ar"), system, network, symmetry=False)
    assert str(err.value) == (
        "stopped while building or starting 64 ranks: the machine has 1 MiB of memory left "
        "and this run holds 1.0 GiB"
    )
