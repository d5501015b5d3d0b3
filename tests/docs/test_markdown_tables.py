"""Every markdown table in the user guide and the README renders as a table.

A blank line inside a table ends it; the rows after it then render as a
paragraph of raw ``| a | b |`` text. Rendered here with the ``markdown``
library and the extensions mkdocs uses (mkdocs.yml), a paragraph whose text
starts with ``|`` is such a stray row.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import markdown
import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = (
    sorted((REPO / "docs").rglob("*.md"))
    + [REPO / "README.md"]
    + sorted((REPO / "examples").rglob("README.md"))
)
#: mkdocs.yml's markdown_extensions that change block parsing (mkdocs-click only
#: expands its own ``:::`` directives).
EXTENSIONS = ["admonition", "attr_list", "tables", "pymdownx.superfences"]


class _Paragraphs(HTMLParser):
    """The text of every <p> element."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        if tag == "p":
            self._depth += 1
            self.texts.append("")

    def handle_endtag(self, tag):
        if tag == "p":
            self._depth -= 1

    def handle_data(self, data):
        if self._depth:
            self.texts[-1] += data


def stray_table_rows(text: str) -> list[str]:
    """Paragraphs of ``text`` (markdown) that start with ``|``: table rows cut off their table."""
    parser = _Paragraphs()
    parser.feed(markdown.markdown(text, extensions=EXTENSIONS))
    return [p.splitlines()[0][:80] for p in parser.texts if p.lstrip().startswith("|")]


def test_the_check_finds_a_table_split_by_a_blank_line():
    table = "| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |\n"
    assert stray_table_rows(table) == ["| 3 | 4 |"]
    assert stray_table_rows(table.replace("\n\n", "\n")) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_table_is_contiguous(page):
    assert stray_table_rows(page.read_text(encoding="utf-8")) == []
