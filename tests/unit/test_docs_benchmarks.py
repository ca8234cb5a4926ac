"""docs/benchmarks.md's "At a glance" is one short line per figure, and a redraw keeps it.

The section is hand-kept (``bench/report.py`` carries it over as it is); its table is
``| figure | yardstick | target | result | value |``, every cell short, the value a number
(details go below the table). A line naming a figure of the report (its key in backticks)
has that figure's target and direction as ``bench/report.py`` holds them, and its result is
the report's verdict of its value against that target.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bench.report import HEADLINES, hand_kept, target_of, verdict, write_report

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "benchmarks.md"
RESULTS = ROOT / "bench" / "results.json"
HEADER = ["figure", "yardstick", "target", "result", "value"]
RESULTS_ALLOWED = ("pass", "fail", "no target")
DIRECTIONS = {"≥": ">=", "≤": "<="}
#: The longest a cell may be: a line, not a paragraph.
CELL_CHARS = 110
VALUE_CHARS = 40
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
KEYS = {key: direction for key, _, direction in HEADLINES}


def glance(page: str) -> str:
    """The "At a glance" section of a page, up to its next heading."""
    found = re.search(r"^## At a glance.*?(?=^#)", page, re.M | re.S)
    assert found, "docs/benchmarks.md has no '## At a glance' section"
    return found.group(0)


def glance_rows(section: str) -> list[list[str]]:
    lines = [line for line in section.splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    assert cells, "At a glance has no table"
    assert cells[0] == HEADER, f"At a glance: the table's header is not {HEADER}"
    return cells[2:]


def number(text: str) -> float | None:
    found = NUMBER.search(text)
    return float(found.group(0).replace(",", "")) if found else None


def row_problems(row: list[str], targets: dict[str, object]) -> list[str]:
    where = f"At a glance, line {row[0][:60]!r}"
    if len(row) != len(HEADER):
        return [f"{where}: {len(row)} cells, not {len(HEADER)}"]
    figure, _, target, result, value = row
    problems = [f"{where}: a cell over {CELL_CHARS} characters" for c in row if len(c) > CELL_CHARS]
    if len(value) > VALUE_CHARS or number(value) is None:
        problems.append(f"{where}: the value is not a figure of at most {VALUE_CHARS} characters")
    if result not in RESULTS_ALLOWED:
        problems.append(f"{where}: result {result!r} is not one of {RESULTS_ALLOWED}")
    if (target == "–") != (result == "no target"):
        problems.append(f"{where}: a target without a result, or a result without a target")
    keys = [k for k in re.findall(r"`(\w+)`", figure) if k in KEYS]
    for key in keys:
        wanted = target_of({"targets": targets}, key)
        direction = KEYS[key]
        said = "–" if wanted is None else None
        if wanted is not None:
            mark = target[:1]
            if DIRECTIONS.get(mark) != direction or number(target) != wanted:
                said = f"{'≥' if direction == '>=' else '≤'} {wanted:g}"
        if said is not None and target != said:
            problems.append(f"{where}: the report's target of {key} is {said}, not {target!r}")
        expected = verdict(number(value), wanted, direction).lower()
        if result != expected:
            problems.append(f"{where}: {value!r} against {target!r} is {expected}, not {result}")
    return problems


def test_at_a_glance_is_one_short_line_per_figure() -> None:
    page = PAGE.read_text()
    assert glance(page) in hand_kept(page), "At a glance must be in the hand-kept section"
    rows = glance_rows(glance(page))
    assert len(rows) >= 20
    named = [k for row in rows for k in re.findall(r"`(\w+)`", row[0]) if k in KEYS]
    assert len(named) == len(set(named)), "a figure of the report on two lines"
    problems = [p for row in rows for p in row_problems(row, {})]
    assert not problems, "docs/benchmarks.md:\n" + "\n".join(problems)


def test_a_redraw_keeps_at_a_glance(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    shutil.copy(PAGE, tmp_path / "benchmarks.md")
    md, _ = write_report(RESULTS, tmp_path)
    assert glance(md.read_text()) == glance(PAGE.read_text())


# The checks themselves


def test_a_line_against_the_reports_target_or_verdict_is_named() -> None:
    good = ["verify: `verify_vs_cli`", "one read", "≤ 2×", "pass", "1.83×"]
    assert row_problems(good, {}) == []
    assert row_problems(["planning: `plan_ms_per_chunk`", "–", "–", "no target", "10 ms"], {}) == []
    line = "At a glance, line 'verify: `verify_vs_cli`'"
    assert row_problems(["verify: `verify_vs_cli`", "one read", "≥ 2×", "fail", "2.5×"], {}) == [
        f"{line}: the report's target of verify_vs_cli is ≤ 2, not '≥ 2×'"
    ]
    assert row_problems(["verify: `verify_vs_cli`", "one read", "≤ 2×", "pass", "2.5×"], {}) == [
        f"{line}: '2.5×' against '≤ 2×' is fail, not pass"
    ]
    long = ["x", "y", "–", "no target", "a paragraph " * 5]
    assert "not a figure" in row_problems(long, {})[0]
    assert "one of" in row_problems(["x", "y", "≤ 1", "met", "1"], {})[0]
    assert "without a result" in row_problems(["x", "y", "–", "pass", "1"], {})[0]
