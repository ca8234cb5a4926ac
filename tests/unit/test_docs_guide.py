"""The user guide (and the reference page it links) says what a user sets and does; the
evidence, which tests show it, is in docs/architecture.md.

* No file of the repository is named by its path in the guide or the reference page: no
  ``.py`` file, nothing under ``tests/``, ``bench/`` or ``scripts/``.
* Every fault of the guide's "Faults and what the product does" table has its row, the same
  number and words, in architecture.md's "The tests behind the faults", which names the
  tests; and no row there is a fault the guide lacks.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "user-guide.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
USER_PAGES = [GUIDE, *[p for p in [ROOT / "docs" / "reference.md"] if p.exists()]]
#: A path of the repository in backticks: a Python file, or a folder of evidence.
EVIDENCE = re.compile(r"`((?:[\w.-]+/)*[\w.-]+\.py\b[^`]*|(?:tests|bench|scripts)/[^`]*)`")
FAULTS = "Faults and what the product does"
TESTS_BEHIND = "The tests behind the faults"


def evidence_paths(text: str) -> list[str]:
    return EVIDENCE.findall(text)


def section(text: str, title: str) -> str:
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found, f"no section '## {title}'"
    return found.group(1)


def fault_rows(body: str) -> dict[str, str]:
    """Each fault's number and words, from the first table of a section."""
    table = re.search(r"^\| # \| fault \|.*?(?=\n\n|\Z)", body, re.M | re.S)
    assert table, "no table of faults"
    rows = [line.strip().strip("|").split(" | ") for line in table.group(0).splitlines()[2:]]
    return {row[0].strip(): row[1].strip() for row in rows}


def test_the_user_pages_name_no_file_of_the_repository() -> None:
    problems = [
        f"{page.relative_to(ROOT)}: `{path}` (say it in docs/architecture.md or the tests)"
        for page in USER_PAGES
        for path in evidence_paths(page.read_text())
    ]
    assert not problems, "\n".join(problems)


def test_every_fault_of_the_guide_has_its_tests_in_the_architecture() -> None:
    guide = fault_rows(section(GUIDE.read_text(), FAULTS))
    tests = fault_rows(section(ARCHITECTURE.read_text(), TESTS_BEHIND))
    assert len(guide) >= 10
    assert guide == tests, "the faults of user-guide.md and architecture.md differ"


def test_the_paths_a_user_page_must_not_name_are_found() -> None:
    text = (
        "Set `chunk_rows` (`planning/packing.py`); `tests/unit/test_x.py::test_y`, "
        "`bench/upkeep.py --rows 5`, `scripts/soak.py`, `bench/out/`, "
        "`airflow_cdc.spark.worker_daemon`, `spark.python.daemon.module`, `<sink_path>/db/t`"
    )
    assert evidence_paths(text) == [
        "planning/packing.py",
        "tests/unit/test_x.py::test_y",
        "bench/upkeep.py --rows 5",
        "scripts/soak.py",
        "bench/out/",
    ]
