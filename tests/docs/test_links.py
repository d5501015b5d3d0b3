"""The README, the user guide and the examples' READMEs point only inside the repository.

A clone has nothing beside it: a link such as ``../shared/DESIGN.md`` would
send readers to a file of the machine the page was written on.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [
    REPO / "README.md",
    *sorted((REPO / "docs").rglob("*.md")),
    *sorted((REPO / "examples").rglob("README.md")),
]
#: A markdown link's target: ``[text](target)`` (not a URL, not an anchor alone).
_LINK = re.compile(r"\]\((?![a-z]+:|#)([^)\s#]+)")
#: Any path that climbs out of its folder, linked or in text (``../x/y.md``).
_UP = re.compile(r"(?:\.\./)+[\w.-][\w./-]*")


def escaping_paths(page: Path, repo: Path = REPO) -> list[str]:
    """Relative paths in ``page``, linked or in text, that resolve outside ``repo``."""
    text = page.read_text(encoding="utf-8")
    return [p for p in _UP.findall(text) if not (page.parent / p).resolve().is_relative_to(repo)]


def broken_links(page: Path, repo: Path = REPO) -> list[str]:
    """Relative markdown links in ``page`` to files ``repo`` does not have."""
    text = page.read_text(encoding="utf-8")
    return [
        t
        for t in _LINK.findall(text)
        if not ((page.parent / t).exists() and (page.parent / t).resolve().is_relative_to(repo))
    ]


def test_the_checks_find_a_path_out_of_the_repository(tmp_path):
    # as on the machine the README was written on: shared/ beside the repository
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "DESIGN.md").write_text("# design\n")
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "a.md").write_text("# a\n")
    page = repo / "README.md"
    page.write_text("See `../shared/DESIGN.md`, [the design](../shared/DESIGN.md) and [a](docs/a.md).\n")
    assert escaping_paths(page, repo) == ["../shared/DESIGN.md", "../shared/DESIGN.md"]
    assert broken_links(page, repo) == ["../shared/DESIGN.md"]
    page.write_text("See [a](docs/a.md), [b](docs/b.md) and https://example.org/x.\n")
    assert (escaping_paths(page, repo), broken_links(page, repo)) == ([], ["docs/b.md"])


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_page_points_outside_the_repository(page):
    assert escaping_paths(page) == []
    assert broken_links(page) == []
