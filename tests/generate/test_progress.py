"""agentsim generate says where it is as fuzz and explore do: off a terminal a line on stderr per
period (runs done of the total, findings so far, time per run, the last run), stdout unchanged."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from scenarios.cli import main, progress
from scenarios.cli.progress import ProgressPeriod
from tests.scenarios.helpers import without_release_notes


def test_generate_writes_a_progress_line_per_period_and_the_same_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["generate", "--examples", "3", "--seed", "2", "--areas", "chat", "--out", str(tmp_path)]
    monkeypatch.setattr(progress, "DEFAULT_PERIOD", ProgressPeriod(every_s=None))
    assert main(argv) == 0
    quiet = capsys.readouterr()
    assert without_release_notes(quiet.err) == ""
    ticks = itertools.count()
    clock = ProgressPeriod(every_runs=1, every_s=None, clock=lambda: next(ticks) * 0.5)
    monkeypatch.setattr(progress, "DEFAULT_PERIOD", clock)
    assert main(argv) == 0
    shown = capsys.readouterr()
    assert shown.out == quiet.out
    assert without_release_notes(shown.err).splitlines() == [
        f"generate: {n}/3 runs, 0 findings so far, 0.50 s per run (example {n})"
        for n in range(1, 4)
    ]
