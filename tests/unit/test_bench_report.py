"""``bench/report.py`` redraws docs/benchmarks.md from results.json and carries its
hand-kept section over unchanged, in place, however often it runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.report import HAND_KEPT, hand_kept, write_report

REPO = Path(__file__).resolve().parents[2]


def test_a_redraw_keeps_the_hand_written_section(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    docs = tmp_path / "docs"
    docs.mkdir()
    kept = (
        f"{HAND_KEPT[0]}\n## Figures by hand\n\n| a | b |\n|---|---|\n| 1 | 2 |\n{HAND_KEPT[1]}\n"
    )
    (docs / "benchmarks.md").write_text(f"# old page\n\n{kept}\nold generated text\n")
    md, _ = write_report(REPO / "bench" / "results.json", docs)
    first = md.read_text()
    assert hand_kept(first) == kept
    assert "old generated text" not in first
    assert first.index(HAND_KEPT[1]) < first.index("\n## Headline")
    write_report(REPO / "bench" / "results.json", docs)
    assert md.read_text() == first  # a second redraw changes nothing


def test_a_page_without_marks_keeps_nothing() -> None:
    assert hand_kept("# page\n\nno marks\n") == ""
    assert hand_kept(f"{HAND_KEPT[1]} before {HAND_KEPT[0]}") == ""
    assert hand_kept((REPO / "docs" / "benchmarks.md").read_text()), "the page has its section"
