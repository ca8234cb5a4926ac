"""Every link between the README and the pages of docs/ lands: the file exists and, with a
``#fragment``, one of its headings has that anchor (GitHub's: lower case, punctuation
dropped, spaces as hyphens). Sections move between pages (issue 46 moved the tuning
mechanics to architecture.md); a link left behind fails here, naming the page and link."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    return {anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


#: The README's links into this repository are absolute (they must work on a package index).
REPOSITORY = "https://github.com/airflow-cdc/airflow-cdc/blob/main/"


def broken_links(pages: list[Path], root: Path = ROOT) -> list[str]:
    found = []
    for page in pages:
        for link in LINK.findall(page.read_text()):
            if link.startswith(REPOSITORY):
                link = str(root / link.removeprefix(REPOSITORY))
            elif re.match(r"[a-z]+:", link):  # https:, mailto:
                continue
            path, _, fragment = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(root)}: ({link})"
            if not target.exists():
                found.append(f"{where}: no such file")
            elif fragment and target.suffix == ".md" and fragment not in anchors(target):
                found.append(f"{where}: no heading #{fragment}")
    return found


def test_every_link_between_the_docs_lands() -> None:
    assert len(PAGES) > 3
    problems = broken_links(PAGES)
    assert not problems, "\n".join(problems)


def test_a_link_to_a_moved_section_is_named(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\n## Tuning: what you set\n\n```\n# not a heading\n```\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#tuning-what-you-set) [gone](a.md#inside-the-jobs) "
        "[code](a.md#not-a-heading) [none](c.md) [web](https://example.com/x#y)\n"
    )
    assert broken_links([page], tmp_path) == [
        "b.md: (a.md#inside-the-jobs): no heading #inside-the-jobs",
        "b.md: (a.md#not-a-heading): no heading #not-a-heading",
        "b.md: (c.md): no such file",
    ]


def test_the_readme_links_by_absolute_addresses_only() -> None:
    """On a package index a relative link of the README leads nowhere."""
    relative = [
        link
        for link in LINK.findall((ROOT / "README.md").read_text())
        if not re.match(r"[a-z]+:", link) and not link.startswith("#")
    ]
    assert relative == []
