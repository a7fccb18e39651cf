"""`agentsim report` of a trace cut in the middle of its last record (a run killed while
writing): the whole records are shown, stderr and the page say where the file is cut (line
and byte), exit 0; a bad line before the end is still bad input (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reports import TraceFormatError, read_trace_cut
from tests.scenarios.test_cli import run_cli
from tests.scenarios.test_unicode_names import CYRILLIC


@pytest.fixture
def trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    scenario = tmp_path / "u.yaml"
    scenario.write_text(CYRILLIC, "utf-8")
    code, _, _ = run_cli(capsys, "run", str(scenario), "--trace", str(tmp_path / "tr"))
    assert code == 0
    return tmp_path / "tr" / "счёт-1.jsonl"


def _cut(trace: Path, line: int, into: int) -> tuple[Path, int]:
    """A copy of `trace` that stops `into` bytes into line `line`; the line's start offset."""
    data = trace.read_bytes()
    start = sum(len(part) for part in data.splitlines(keepends=True)[: line - 1])
    cut = trace.with_name("cut.jsonl")
    cut.write_bytes(data[: start + into])
    return cut, start


@pytest.mark.parametrize("into", [1, 17, 40])  # 17 bytes in falls inside a Cyrillic letter
def test_a_cut_trace_is_reported_up_to_the_cut(
    trace: Path, capsys: pytest.CaptureFixture[str], into: int
) -> None:
    cut, start = _cut(trace, 8, into)
    code, out, err = run_cli(capsys, "report", str(cut))
    assert code == 0
    assert len(out.splitlines()) == 7
    assert "Tally/счётчик#1 incarnation:end" in out
    assert f"the file is cut at line 8 (byte {start} of {start + into})" in err
    assert "shown: the 7 record(s) before it" in err


def test_the_html_page_of_a_cut_trace_says_so(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut, start = _cut(trace, 5, 10)
    page = tmp_path / "cut.html"
    code, _, err = run_cli(capsys, "report", str(cut), "--html", str(page))
    assert code == 0 and "is cut at line 5" in err
    assert f'<p class="note">{cut}: the file is cut at line 5 (byte {start}' in page.read_text()


def test_a_whole_last_line_without_its_newline_is_no_cut(trace: Path) -> None:
    data = trace.read_bytes()
    trace.write_bytes(data.rstrip(b"\n"))
    records, cut = read_trace_cut(trace)
    assert cut is None and len(records) == data.count(b"\n")


def test_a_bad_line_before_the_end_is_still_bad_input(
    trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = trace.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"seq": 2, "t\n'
    trace.write_bytes(b"".join(lines))
    code, _, err = run_cli(capsys, "report", str(trace))
    assert code == 2 and f"{trace}:3: not a trace record" in err
    with pytest.raises(TraceFormatError, match=":3: not a trace record"):
        read_trace_cut(trace)
