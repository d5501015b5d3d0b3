"""No tracked text file cites this project's issue tracker: its history belongs in CHANGELOG.md.

Code, comments, docs and outputs speak of the software, never of its history. A
reference to one of this project's issues (the word, then a number, with or without
``#``) sends the reader to a ticket instead of saying what the code does or what a test
guards. Citations of other projects' trackers are sources and stay, written with the
project's name (its owner optional) right before the word, as in
``NVIDIA/nccl-tests issue #212`` or ``deepseek-ai/DeepEP issue #303``.

Every file ``git ls-files`` lists is read, but ``CHANGELOG.md`` and binary files (a NUL
byte, or not UTF-8).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Files that may name this project's issues: the record of its history.
SKIPPED = frozenset({"CHANGELOG.md"})
#: Projects whose issue trackers the code and docs cite as sources, spelled as their
#: repositories are (case counts: "NCCL" before the word does not cite NVIDIA/nccl).
EXTERNAL_PROJECTS = ("nccl-tests", "nccl", "DeepEP", "astra-sim", "Megatron-LM", "SimAI", "pytorch", "vllm")
#: The word, then a number (``#`` optional), on one line or with the number opening the next
#: line after a comment or string marker.
_REFERENCE = re.compile(
    r"\bissues?(?:[ \t]*\n[ \t]*(?:#|//|\*|\"|')?[ \t]*|[ \t]*)#?\d+\b",
    re.IGNORECASE,
)
#: An external project's name (``owner/`` optional) ending right before the word.
_EXTERNAL = re.compile(
    r"(?<![\w.-])(?:[\w.-]+/)?(?:"
    + "|".join(re.escape(name) for name in sorted(EXTERNAL_PROJECTS, key=len, reverse=True))
    + r")(?:'s)?[ \t]+$"
)
#: Written without the word itself, so that this file passes its own scan.
ISSUE = "issue"


def project_issue_references(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of every reference in ``text`` to this project's issues.

    A reference is allowed only where one of :data:`EXTERNAL_PROJECTS` ends right before
    it on its line (``NVIDIA/nccl issue #1455``); a name elsewhere on the line does not
    count (``NCCL's ring`` early on a line excuses no reference later on it).
    """
    hits = []
    for match in _REFERENCE.finditer(text):
        start = text.rfind("\n", 0, match.start()) + 1
        if _EXTERNAL.search(text[start : match.start()]):
            continue
        end = text.find("\n", start)
        hits.append((text.count("\n", 0, start) + 1, text[start : end if end >= 0 else len(text)]))
    return hits


def scan(root: Path, paths: Iterable[str]) -> list[str]:
    """``path:line: text`` of every reference in the text files ``paths`` under ``root``."""
    found = []
    for name in paths:
        path = root / name
        if name in SKIPPED or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        found += [f"{name}:{line}: {content.strip()}" for line, content in project_issue_references(text)]
    return found


def tracked_files(root: Path) -> list[str]:
    """The files git tracks under ``root``, relative to it."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"not a git checkout: {err}")
    return [name for name in out.stdout.decode("utf-8", "surrogateescape").split("\0") if name]


def test_no_tracked_file_cites_a_project_issue():
    files = tracked_files(REPO)
    assert len(files) > 100  # the scan saw the repository, not an empty list
    found = scan(REPO, files)
    assert found == [], (
        "say what the code does or what the test guards (history belongs in CHANGELOG.md):\n"
        + "\n".join(found)
    )


def test_a_reference_is_reported_with_its_file_and_line(tmp_path):
    (tmp_path / "a.py").write_text(
        "def f():\n"
        f"    # {ISSUE.capitalize()} 30: an 8,192-rank job read its traces for 265 s before this error.\n"
        "    return 1\n"
    )
    (tmp_path / "b.md").write_text(f"Where it stands against {ISSUE} 28's targets:\n")
    (tmp_path / "c.md").write_text(f"the 128-GPU Llama-3-8B step of\n{ISSUE} 28 (2.55 M messages)\n")
    (tmp_path / "d.py").write_text(f"x = 1  # the all-gather fix of {ISSUE}\n# 11\n")
    assert scan(tmp_path, ["a.py", "b.md", "c.md", "d.py"]) == [
        f"a.py:2: # {ISSUE.capitalize()} 30: an 8,192-rank job read its traces for 265 s before this error.",
        f"b.md:1: Where it stands against {ISSUE} 28's targets:",
        f"c.md:2: {ISSUE} 28 (2.55 M messages)",
        f"d.py:1: x = 1  # the all-gather fix of {ISSUE}",
    ]


@pytest.mark.parametrize(
    "line",
    [
        f"Source: NVIDIA/nccl-tests {ISSUE} #212, 2024-05-06",
        f"Checked against NVIDIA/nccl {ISSUE} #1455 (4 to 8 GPUs)",
        f"deepseek-ai/DeepEP {ISSUE} #303: all_reduce_perf on one 8x H20 node",
        f"# DeepEP {ISSUE} #303: 8 x H20",
        f"see Megatron-LM's {ISSUE} 1234 and astra-sim {ISSUE} #281",
        f"the word alone: a rank may {ISSUE} a send, and {ISSUE}s of ranks; {ISSUE}d twice",
    ],
)
def test_other_projects_trackers_and_the_verb_are_not_history(line):
    assert project_issue_references(line) == []


@pytest.mark.parametrize(
    "line",
    [
        f"NCCL's ring (model {ISSUE} 27)",  # a name elsewhere on the line does not count
        f"NCCL {ISSUE} 12",  # not the repository's spelling
        f"mynccl {ISSUE} 5",  # not the project's name
        f"{ISSUE}s #27 and 28",
    ],
)
def test_a_name_that_is_not_the_cited_project_right_before_the_word_does_not_excuse_it(line):
    assert project_issue_references(line) == [(1, line)]


def test_changelog_and_binary_files_are_skipped(tmp_path):
    (tmp_path / "CHANGELOG.md").write_text(f"- the fix of {ISSUE} 11\n")
    (tmp_path / "t.et").write_bytes(f"\0{ISSUE} 28".encode())
    (tmp_path / "l.bin").write_bytes(f"\xff {ISSUE} 28".encode("latin-1"))
    assert scan(tmp_path, ["CHANGELOG.md", "t.et", "l.bin", "gone.py"]) == []
