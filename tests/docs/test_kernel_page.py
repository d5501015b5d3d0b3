"""docs/kernel.md is held to the code: its tables of parts and public headers name
every file of ``astra_core/cpp/kernel/`` and ``astra_core/cpp/include/`` and nothing
else, and the parts table lists them in the order kernel.cc includes them."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CPP = REPO / "astra_core" / "cpp"
PAGE = (REPO / "docs" / "kernel.md").read_text(encoding="utf-8")


def _table(heading: str) -> list[str]:
    """The file names in the first column of the table under ``heading``, in order."""
    section = PAGE[PAGE.index(heading) :].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [name for row in rows for name in re.findall(r"`([\w.]+\.h)`", row.split("|")[1])]


def test_the_parts_table_lists_every_part_in_the_order_kernel_cc_includes_them():
    included = re.findall(r'#include "(\w+\.h)"', (CPP / "kernel.cc").read_text(encoding="utf-8"))
    parts = [name for name in included if (CPP / "kernel" / name).is_file()]
    assert sorted(parts) == sorted(p.name for p in (CPP / "kernel").glob("*.h"))
    assert _table("## The parts, low to high") == parts


def test_the_headers_table_lists_every_public_header():
    assert sorted(_table("## The public headers")) == sorted(p.name for p in (CPP / "include").glob("*.h"))
