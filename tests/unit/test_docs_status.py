"""docs/status.md is a table that stays true, and no page contradicts it.

* Each row is ``| capability | state | documented in | code |``; the state is one of
  ``STATES``; the link lands on a heading of its page (``test_docs_links.anchors``), and a
  capability that is ``supported`` or ``partly`` is documented on a user's page
  (``USER_PAGES``), not only in the architecture. The code column names files that exist: at
  least one module of the package, and for a ``supported`` capability a test that runs it.
* The page tells no history: no issue numbers, no measured figures (benchmarks.md has them).
* A limit is a sentence of the docs that says "for now", "not yet", "not built", "not
  supported" or "unsupported". Each limit must name a capability the table does not call
  ``supported`` (a row's name: its capability cell up to a colon or a parenthesis, compared
  word by word without case or plural). A limit that names only supported capabilities
  contradicts the table, and one that names none is a capability the table lacks: either is
  reported with the page and the sentence. The modules' docstrings are held to the same
  (but for "not yet", which code says of a write not committed yet).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.unit.test_docs_links import anchors

ROOT = Path(__file__).resolve().parents[2]
STATUS = ROOT / "docs" / "status.md"
STATES = ("supported", "partly", "not yet")
#: Where a user reads about what the product does.
USER_PAGES = ("user-guide.md", "reference.md", "deploying.md")
#: The pages whose limits must agree with the table (benchmarks.md says "not met" of targets).
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CHECKED = [p for p in PAGES if p.name not in ("status.md", "benchmarks.md")]
MARKERS = re.compile(r"\b(?:for now|not yet|not built|not supported|unsupported)\b", re.I)
CODE_MARKERS = re.compile(r"\b(?:for now|not built|not supported|unsupported)\b", re.I)
PACKAGE = ROOT / "airflow_cdc"
HEADER = ["capability", "state", "documented in", "code"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PATH = re.compile(r"`([\w./-]+(?:/[\w.-]+)+)`")
#: Words a name is compared without.
STOP_WORDS = frozenset(
    ["a", "an", "the", "of", "on", "in", "and", "or", "to", "by", "with", "its", "their", "as"]
)


@dataclass(frozen=True)
class Row:
    capability: str
    state: str
    documented: str
    code: str

    @property
    def name(self) -> str:
        return re.split(r": | \(", self.capability, maxsplit=1)[0]


def rows(text: str) -> list[Row]:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    assert cells, "docs/status.md has no table"
    assert cells[0] == HEADER, f"docs/status.md: the table's header is not {HEADER}"
    return [Row(*row) for row in cells[2:]]


def words(text: str) -> list[str]:
    """The words of ``text`` as names are compared: lower case, without stop words, a
    plural's ``s`` and the endings ``ed``/``ing``/``e`` taken off."""
    found = []
    for word in re.findall(r"[a-z0-9_]+", text.lower().replace("'s", "")):
        if word in STOP_WORDS:
            continue
        for ending in ("ing", "ed", "es", "s", "e"):
            if word.endswith(ending) and len(word) - len(ending) >= 3:
                word = word[: -len(ending)]
                break
        found.append(word)
    return found


def names(sentence: str, table: list[Row]) -> list[Row]:
    """The rows whose name's every word is in the sentence."""
    present = set(words(sentence))
    return [row for row in table if set(words(row.name)) <= present]


def row_problems(row: Row, root: Path = ROOT) -> Iterator[str]:
    where = f"docs/status.md, row {row.capability!r}"
    if row.state not in STATES:
        yield f"{where}: state {row.state!r} is not one of {STATES}"
    links = LINK.findall(row.documented)
    if len(links) != 1:
        yield f"{where}: 'documented in' holds {len(links)} links, not one"
    for link in links:
        page, _, fragment = link.partition("#")
        target = root / "docs" / page
        if not target.is_file():
            yield f"{where}: {page} does not exist"
        elif not fragment or fragment not in anchors(target):
            yield f"{where}: {page} has no heading #{fragment}"
        elif row.state != "not yet" and page not in USER_PAGES:
            yield f"{where}: a {row.state} capability is documented for users ({USER_PAGES})"
    paths = PATH.findall(row.code)
    for path in paths:
        if not (root / path).exists():
            yield f"{where}: {path} does not exist"
    if not any(p.startswith("airflow_cdc/") for p in paths):
        yield f"{where}: the code column names no module of airflow_cdc/"
    if row.state == "supported" and not any(p.startswith("tests/") for p in paths):
        yield f"{where}: a supported capability names no test that runs it"


def history(text: str) -> list[str]:
    """Issue numbers and measured figures on the page."""
    found = re.findall(r"\bissues? \d+|#\d+\b", text, re.I)
    found += re.findall(r"\d[\d.,]*\s?(?:×|x\b|%|ms\b|s\b|rows/s|changes/s)", text)
    return found


def sentences(text: str) -> Iterator[tuple[str, str]]:
    """Each sentence of a page with the first of its paragraph, bullet or table cell (the
    topic it is said of): code blocks left out, a bullet's mark taken off."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    for block in re.split(r"\n(?=\s*(?:- |\||#|\d+\. )|\s*\n)", text):
        for cell in " ".join(block.split()).removeprefix("- ").split(" | "):
            said = re.split(r"(?<=[^.][.!?])\s+(?=[A-Z`*(\[])", cell.strip("| "))
            yield from ((said[0], sentence) for sentence in said)


def module_docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def limit_problems(
    pages: list[Path],
    table: list[Row],
    root: Path = ROOT,
    read: Callable[[Path], str] = Path.read_text,
    markers: re.Pattern[str] = MARKERS,
) -> list[str]:
    problems = []
    for page in pages:
        for topic, sentence in sentences(read(page)):
            if not markers.search(sentence):
                continue
            named = names(f"{topic} {sentence}", table)
            where = f"{page.relative_to(root)}: {sentence[:160]!r}"
            if not named:
                problems.append(
                    f"{where}: a limit that names no capability of docs/status.md "
                    "(name the row it belongs to, or add one)"
                )
            elif all(row.state == "supported" for row in named):
                problems.append(
                    f"{where}: a limit of what docs/status.md calls supported: "
                    + ", ".join(repr(row.capability) for row in named)
                )
    return problems


def test_every_row_links_to_its_section_and_names_code_that_exists() -> None:
    table = rows(STATUS.read_text())
    assert len(table) >= 20
    problems = [p for row in table for p in row_problems(row)]
    assert not problems, "\n".join(problems)


def test_the_status_page_tells_no_history() -> None:
    assert history(STATUS.read_text()) == []


def test_no_limit_contradicts_the_status_table() -> None:
    problems = limit_problems(CHECKED, rows(STATUS.read_text()))
    assert not problems, "\n".join(problems)


def test_no_module_docstring_contradicts_the_status_table() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    table = rows(STATUS.read_text())
    problems = limit_problems(modules, table, read=module_docstring, markers=CODE_MARKERS)
    assert not problems, "\n".join(problems)


# The checks themselves


def test_a_row_with_a_wrong_link_or_missing_code_is_named(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "user-guide.md").write_text("# Guide\n\n## Routes\n")
    (tmp_path / "docs" / "architecture.md").write_text("# Architecture\n\n## Design\n")
    (tmp_path / "airflow_cdc").mkdir()
    (tmp_path / "airflow_cdc" / "routed.py").write_text("")
    good = Row("Routes", "supported", "[r](user-guide.md#routes)", "`airflow_cdc/routed.py`")
    assert (
        list(row_problems(Row("X", "not yet", "[d](architecture.md#design)", good.code), tmp_path))
        == []
    )
    found = list(row_problems(good, tmp_path))
    assert found == [
        "docs/status.md, row 'Routes': a supported capability names no test that runs it"
    ]
    found = list(
        row_problems(Row("Y", "done", "[r](user-guide.md#gone)", "`tests/x.py`"), tmp_path)
    )
    assert len(found) == 4
    assert "state 'done'" in found[0]
    assert "no heading #gone" in found[1]
    assert "tests/x.py does not exist" in found[2]
    assert "no module of airflow_cdc/" in found[3]
    found = list(
        row_problems(Row("Z", "partly", "[d](architecture.md#design)", good.code), tmp_path)
    )
    assert found == [
        f"docs/status.md, row 'Z': a partly capability is documented for users ({USER_PAGES})"
    ]


def test_a_limit_of_a_supported_capability_is_named(tmp_path: Path) -> None:
    table = [
        Row("Tables without a key (a multiset)", "supported", "", ""),
        Row("Routes: shards into one table", "supported", "", ""),
        Row("Routes of tables without a key", "not yet", "", ""),
    ]
    page = tmp_path / "guide.md"
    page.write_text(
        "# Guide\n\n- A table without a key is refused for now.\n"
        "- Routes do not take tables without a key: not built yet.\n"
        "- Routes are fine.\n\n| a | b |\n|---|---|\n| x | y, unsupported |\n"
        "```\nnot built, in code\n```\n"
    )
    assert limit_problems([page], table, tmp_path) == [
        "guide.md: 'A table without a key is refused for now.': a limit of what "
        "docs/status.md calls supported: 'Tables without a key (a multiset)'",
        "guide.md: 'y, unsupported': a limit that names no capability of docs/status.md "
        "(name the row it belongs to, or add one)",
    ]


def test_history_on_the_page_is_found() -> None:
    assert history("Done (issue 47): 2.31× at 10M, p99 4.2 s, #12") == [
        "issue 47",
        "#12",
        "2.31×",
        "4.2 s",
    ]
    assert history("| Routes | supported | [r](user-guide.md#routes) | `x/y.py` |") == []
