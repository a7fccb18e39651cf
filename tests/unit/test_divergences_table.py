"""docs/divergences.md keeps its release columns: every divergence row says what SDK 0.32.0 does
and on which release it applies, and every platform choice on which release it holds."""

from __future__ import annotations

from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "divergences.md"

DIVERGENCE_COLUMNS = [
    "#",
    "topic",
    "seed says",
    "SDK 0.21.0 does",
    "SDK 0.32.0 does",
    "applies on",
    "we do",
    "pinned by",
]
APPLIES_ON = {"both", "0.21.0", "0.32.0"}
SEED_DECISION = "seed decision on both releases"


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().removeprefix("|").removesuffix("|").split("|")]


def tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Each markdown table of `text`: its header's cells and its rows' cells."""
    found: list[tuple[list[str], list[list[str]]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            header = _cells(lines[i])
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            found.append((header, rows))
        else:
            i += 1
    return found


TABLES = tables(DOC.read_text(encoding="utf-8"))
DIVERGENCES = [(h, rows) for h, rows in TABLES if "SDK 0.21.0 does" in h]
ROWS = [row for _header, rows in DIVERGENCES for row in rows]
SEED_ROWS = [row for row in ROWS if row[0].startswith("S")]


def by_column(row: list[str]) -> dict[str, str]:
    return dict(zip(DIVERGENCE_COLUMNS, row, strict=False))


def test_the_file_has_the_divergence_table_and_the_platform_table() -> None:
    assert len(DIVERGENCES) == 1
    assert len(TABLES) == 2
    assert len(ROWS) > 60


def test_the_divergence_table_has_the_release_columns_in_order() -> None:
    (header, _rows) = DIVERGENCES[0]
    assert header == DIVERGENCE_COLUMNS


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r[0])
def test_every_row_says_what_0_32_0_does_and_where_it_applies(row: list[str]) -> None:
    """Every cell is there and filled in; `applies on` is one of the three values."""
    assert len(row) == len(DIVERGENCE_COLUMNS), "a missing cell, or a stray `|` in one"
    cells = by_column(row)
    assert all(cells.values())
    assert cells["SDK 0.32.0 does"]
    assert cells["applies on"] in APPLIES_ON


def test_row_ids_are_unique() -> None:
    ids = [row[0] for row in ROWS]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("row", SEED_ROWS, ids=lambda r: r[0])
def test_a_seed_decision_0_32_0_still_breaks_says_it_holds_on_both(row: list[str]) -> None:
    """A decision S1–S8 that applies on both releases stays a seed decision there, and says so."""
    cells = by_column(row)
    if cells["applies on"] == "both":
        assert SEED_DECISION in cells["SDK 0.32.0 does"]


def test_every_platform_choice_says_where_it_applies() -> None:
    (platform,) = [(h, rows) for h, rows in TABLES if "why" in h]
    header, rows = platform
    assert header == ["topic", "we do", "why", "applies on"]
    for row in rows:
        assert len(row) == len(header) and all(row)
        assert row[-1] in APPLIES_ON
