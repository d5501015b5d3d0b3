"""examples/gpt3_175b/README.md quotes what its run.py prints: the quoted lines (all
but the elided stages and the wall times) are checked against a fresh run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gpt3_175b"


def _quoted_result() -> list[str]:
    """The indented block under the README's "## Result" heading, without its
    elision ("...") and wall-time lines (those depend on the machine)."""
    text = (EXAMPLE / "README.md").read_text()
    section = text.split("## Result", 1)[1].split("\n\n", 2)[1]
    lines = [line[4:] for line in section.splitlines()]
    return [line for line in lines if line.strip() != "..." and not line.startswith("wall time:")]


def test_the_readme_quotes_what_the_example_prints():
    quoted = _quoted_result()
    assert len(quoted) >= 8 and quoted[0].startswith("GPT-3 175B, 1024 x H100")
    printed = subprocess.run(
        [sys.executable, str(EXAMPLE / "run.py")], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    missing = [line for line in quoted if line not in printed]
    assert not missing, f"README lines the run does not print: {missing}"
