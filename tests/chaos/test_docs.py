"""docs/reliability.md's fault menu is the campaign's: every fault with its weight and how long
it lasts, as tests/chaos/faults.py's MENU has them, and its invariants are the checker's."""

from __future__ import annotations

import re
from pathlib import Path

from tests.chaos import checker
from tests.chaos.faults import MENU

DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"


def _rows(heading: str) -> list[list[str]]:
    """The cells of the table under ``heading``'s first table, header row left out."""
    text = DOC.read_text(encoding="utf-8")
    table: list[list[str]] = []
    for line in text.split(heading, 1)[1].splitlines():
        if line.startswith("|"):
            table.append([cell.strip() for cell in line.strip("|").split("|")])
        elif table:
            break
    return table[2:]


def _lasts(duration: tuple[float, float]) -> str:
    low, high = duration
    if high == 0:
        return "at once"
    return f"{low:g}-{high:g} s"


def test_the_documented_fault_menu_is_the_campaigns() -> None:
    documented = {row[0].strip("`"): (int(row[1]), row[2]) for row in _rows("## The fault menu")}
    actual = {kind.name: (weight, _lasts(kind.duration)) for kind, weight in MENU}
    assert documented == actual


def test_every_invariant_the_checker_reports_is_documented() -> None:
    source = Path(checker.__file__).read_text(encoding="utf-8")
    reported = set(re.findall(r'Violation\(\s*"([a-z-]+)"', source))
    documented = {row[0].strip("`") for row in _rows("## The checker's invariants")}
    assert reported and reported == documented
