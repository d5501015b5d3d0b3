"""A trace set is written all or nothing: a generation that fails half way leaves the folder as it was."""

from __future__ import annotations

import json
import signal

import pytest

from astra_core.workload.generators import llm_writer, micro
from astra_core.workload.generators.gpus import load_gpu
from astra_core.workload.generators.llm import LLMConfig, generate_llm, write_llm


def _fail_on_call(monkeypatch, module, n: int, exc: BaseException):
    """Make ``module.write_bytes`` write the first ``n - 1`` files, then raise ``exc``."""
    real, calls = module.write_bytes, []

    def write(path, data, *a):
        calls.append(path)
        if len(calls) == n:
            raise exc
        return real(path, data, *a)

    monkeypatch.setattr(module, "write_bytes", write)
    return calls


@pytest.fixture
def user_folder(tmp_path):
    """A folder with a user's file and an old rank-0 trace of the same prefix."""
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "t.0.et").write_bytes(b"old")
    return tmp_path


def _left(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("exc", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_gen_micro_failing_midway_leaves_the_folder_as_it_was(user_folder, monkeypatch, exc):
    calls = _fail_on_call(monkeypatch, micro, 3, exc)
    with pytest.raises(type(exc)):
        micro.write_micro("all-reduce", 1024, 8, user_folder / "t")
    assert len(calls) == 3  # two ranks were written before the failure
    assert _left(user_folder) == ["notes.txt", "t.0.et"]
    assert (user_folder / "t.0.et").read_bytes() == b"old"


def test_sigterm_under_the_cli_removes_the_partial_set(user_folder, monkeypatch):
    from astra_core.cli.workload import _interruptible
    from astra_core.lifetime import Interrupted

    real = micro.write_bytes

    def write(path, data, *a):
        if path.name == "t.2.et":
            signal.raise_signal(signal.SIGTERM)
        return real(path, data, *a)

    monkeypatch.setattr(micro, "write_bytes", write)
    with pytest.raises(Interrupted), _interruptible():
        micro.write_micro("all-reduce", 1024, 8, user_folder / "t")
    assert _left(user_folder) == ["notes.txt", "t.0.et"]


def test_gen_llm_failing_midway_removes_the_folders_it_made(tmp_path, tiny_dense, monkeypatch):
    wl = generate_llm(LLMConfig(tiny_dense, load_gpu("H100"), dp=2, tp=2, pp=2))
    _fail_on_call(monkeypatch, llm_writer, 6, RuntimeError("disk on fire"))
    with pytest.raises(RuntimeError):
        write_llm(wl, tmp_path / "a" / "b" / "t", tmp_path / "a" / "groups.json")
    assert _left(tmp_path) == []


def test_a_finished_set_is_all_in_place_and_nothing_else(user_folder, tiny_dense):
    wl = generate_llm(LLMConfig(tiny_dense, load_gpu("H100"), dp=2, tp=2, dims=[2, 2]))
    paths, groups = write_llm(wl, user_folder / "t")
    assert groups is None  # whole-dimension groups: no comm-group file
    assert _left(user_folder) == ["notes.txt", "t.0.et", "t.1.et", "t.2.et", "t.3.et"]
    assert paths == [user_folder / f"t.{r}.et" for r in range(4)]
    assert (user_folder / "t.0.et").read_bytes() != b"old"


def test_convert_text_failing_midway_leaves_the_folder_as_it_was(reference_dir, user_folder, monkeypatch):
    from astra_core.workload.converters import text

    _fail_on_call(monkeypatch, text, 4, RuntimeError("disk on fire"))
    with pytest.raises(RuntimeError):
        text.convert_text(reference_dir / "text" / "Transformer_HybridParallel.txt", 8, user_folder / "t")
    assert _left(user_folder) == ["notes.txt", "t.0.et"]


def test_the_size_estimate_does_not_renumber_comm_groups(tmp_path, tiny_dense):
    """The estimate renders each stage's first rank before rank 1 is written; the files
    still number comm groups in rank order, as when nothing was estimated."""
    config = LLMConfig(tiny_dense, load_gpu("H100"), dp=2, tp=2, pp=2)
    paths, groups = write_llm(generate_llm(config), tmp_path / "t")
    plain = generate_llm(config)
    cache: dict = {}
    rendered = [llm_writer._render(plain, rank, cache) for rank in range(plain.layout.npus)]
    assert [p.read_bytes().endswith(r) for p, r in zip(paths, rendered)] == [True] * 8
    assert json.loads(groups.read_text()) == plain.layout.groups


def test_rank_files_that_are_links_or_fifos_are_written_through(tmp_path):
    """A rank file that is a symbolic link keeps being a link (its target takes the
    trace), one that is a FIFO is written through to its reader, as every output is."""
    import os
    import threading

    target = tmp_path / "kept" / "rank0.et"
    target.parent.mkdir()
    target.write_bytes(b"old")
    (tmp_path / "t.0.et").symlink_to(target)
    os.mkfifo(tmp_path / "t.1.et")
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append((tmp_path / "t.1.et").read_bytes()), daemon=True)
    reader.start()
    micro.write_micro("all-reduce", 1024, 4, tmp_path / "t")
    reader.join(timeout=30)  # a guard: the write has happened by now
    assert (tmp_path / "t.0.et").is_symlink() and target.read_bytes() != b"old"
    assert target.read_bytes()[:40] == (tmp_path / "t.2.et").read_bytes()[:40]  # a trace's header
    assert (tmp_path / "t.1.et").is_fifo() and read and len(read[0]) == (tmp_path / "t.2.et").stat().st_size
