"""A hunt says where it is on long work: off a terminal, a line now and then on stderr (the
story, runs done of the total, findings so far, time per run), while stdout stays as it was."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import pytest

import scenarios.cli  # noqa: F401  (before scenarios.hunt: an import circle of main's)
from scenarios.cli import main, progress
from scenarios.cli.progress import HuntProgress, ProgressLines, ProgressPeriod
from scenarios.hunt.fuzz import fuzz_scenario
from tests.fuzz.test_fuzz import FORGETFUL, KILLS, STEADY
from tests.scenarios.helpers import LIBRARY, without_release_notes


def _clock(step_s: float) -> ProgressPeriod:
    """A period of one line per run on a clock that moves `step_s` per reading."""
    ticks = itertools.count()
    return ProgressPeriod(every_runs=1, every_s=None, clock=lambda: next(ticks) * step_s)


def test_lines_come_every_n_runs_with_the_total_the_findings_and_the_time_per_run() -> None:
    err = io.StringIO()
    ticks = iter([0.0, 2.0, 6.0, 7.0, 14.0, 15.0])  # made at 0, then one reading per run
    lines = ProgressLines(
        err,
        "explore shop",
        5,
        ProgressPeriod(every_runs=2, every_s=None, clock=lambda: next(ticks)),
    )
    for done in range(1, 6):
        lines.ran(done, f"crash point {done}", done // 3)
    assert err.getvalue().splitlines() == [
        "explore shop: 2/5 runs, 0 findings so far, 3.00 s per run (crash point 2)",
        "explore shop: 4/5 runs, 1 finding so far, 3.50 s per run (crash point 4)",
    ]


def test_a_line_is_due_after_the_seconds_of_the_period_whatever_the_count() -> None:
    err = io.StringIO()
    now = [0.0]
    lines = ProgressLines(err, "fuzz x", None, ProgressPeriod(every_s=10.0, clock=lambda: now[0]))
    for done, at in enumerate((4.0, 9.0, 11.0, 15.0, 22.0), start=1):
        now[0] = at
        lines.ran(done, "", 0)
    # Past the total (fuzz's shrinking) or without one, the count stands alone.
    assert err.getvalue().splitlines() == [
        "fuzz x: 3 runs, 0 findings so far, 3.67 s per run",
        "fuzz x: 5 runs, 0 findings so far, 4.40 s per run",
    ]


def test_off_a_terminal_stdout_gets_the_lines_and_stderr_the_progress() -> None:
    out, err = io.StringIO(), io.StringIO()
    with HuntProgress(
        out, err, "generate x", 3, lambda: 1, terminal=False, period=_clock(0.5)
    ) as shown:
        shown.print("FOUND something")
        shown.advance("example 1")
    assert out.getvalue() == "FOUND something\n"
    assert err.getvalue() == "generate x: 1/3 runs, 1 finding so far, 0.50 s per run (example 1)\n"


def test_on_a_terminal_the_bar_says_the_findings_and_time_per_run_and_stderr_stays_quiet() -> None:
    class FakeTerminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out, err = FakeTerminal(), io.StringIO()
    with HuntProgress(out, err, "x", 4, lambda: 2, terminal=True, period=_clock(1.0)) as shown:
        shown.advance("crash point 1")
        assert "crash point 1: 2 findings so far, 1.00 s per run" in out.getvalue()
        assert "1/4" in out.getvalue()
    assert err.getvalue() == ""


def test_explore_writes_a_progress_line_per_period_to_stderr_and_the_same_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(LIBRARY / "idle-eviction.yaml")
    argv = ["explore", path, "--crash-points", "4", "--out", str(tmp_path)]
    monkeypatch.setattr(progress, "DEFAULT_PERIOD", ProgressPeriod(every_s=None))
    assert main(argv) == 0
    quiet = capsys.readouterr()
    assert without_release_notes(quiet.err) == ""
    monkeypatch.setattr(progress, "DEFAULT_PERIOD", _clock(0.25))
    assert main(argv) == 0
    shown = capsys.readouterr()
    assert shown.out == quiet.out
    lines = without_release_notes(shown.err).splitlines()
    assert lines[0].startswith(
        "explore idle-eviction: 1/4 runs, 0 findings so far, 0.25 s per run (idle-eviction crash "
        "point "
    )
    assert [line.split(", ", 1)[0] for line in lines] == [
        f"explore idle-eviction: {n}/4 runs" for n in range(1, 5)
    ]


def test_fuzz_says_each_run_and_then_that_it_shrinks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "forgetful.yaml"
    base.write_text(FORGETFUL)
    seen: list[tuple[str, bool]] = []
    outcome = fuzz_scenario(
        base, examples=25, kinds=KILLS, out_dir=tmp_path / "f", on_run=lambda *a: seen.append(a)
    )
    assert outcome.found and len(seen) == outcome.runs - 1  # the reproducer's check is no draw
    first = next(i for i, (_, failed) in enumerate(seen) if failed)
    assert [label for label, _ in seen[:first]] == [f"example {n}" for n in range(1, first + 1)]
    assert seen[first][0] == "shrinking, 1 failing runs"
    steady = tmp_path / "steady.yaml"
    steady.write_text(STEADY)
    monkeypatch.setattr(progress, "DEFAULT_PERIOD", ProgressPeriod(every_runs=5, every_s=None))
    code = main(["fuzz", str(steady), "--examples", "20", "--out", str(tmp_path / "g")])
    printed = capsys.readouterr()
    assert code == 0 and printed.out.startswith("no failure found in ")
    runs = int(printed.out.split(" (", 1)[1].split(" runs:", 1)[0])
    assert [line.split(", ", 1)[0] for line in without_release_notes(printed.err).splitlines()] == [
        f"fuzz steady: {n}/20 runs" for n in range(5, runs + 1, 5)
    ]
