"""Progress of a long run (many scenarios or seeds, a hunt's runs): a `rich` bar on a terminal,
plain lines on stderr elsewhere.

`RunProgress` is what the CLI writes result lines through. On a terminal it keeps a bar
(description, bar, `done/total`) below the lines it prints and erases the bar when it stops, so
the final `N passed, M failed` line stands alone. Anywhere else (a pipe, a file, CI) it writes
the lines and nothing more: no control characters, no bar. The bar redraws only when a run
ends (`auto_refresh=False`, no timer thread, no elapsed-time column), so what it writes depends
on the runs alone and tests can check it with a fake terminal.

`HuntProgress` is the same for a hunt (`explore`, `fuzz`, and any command that makes many runs
of one story): its bar says what ran last, the findings so far and the time per run. Where
there is no terminal, a line now and then goes to stderr instead (`ProgressLines`):

    explore idle-eviction: 40/350 runs, 1 finding so far, 0.84 s per run (crash point 40)

one every `every_s` seconds of wall time (`PROGRESS_EVERY_S`) or every `every_runs` runs. The
time per run and the seconds between lines are the machine's, which is why they go to stderr
and never to stdout, a result or a file; `clock` and `every_runs` make them exact in tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

__all__ = [
    "DEFAULT_PERIOD",
    "PROGRESS_EVERY_S",
    "HuntProgress",
    "ProgressLines",
    "ProgressPeriod",
    "RunProgress",
    "is_terminal",
]

PROGRESS_EVERY_S = 15.0
"""How often a hunt says where it is on stderr when there is no terminal (wall-clock seconds)."""


def is_terminal(stream: TextIO) -> bool:
    """Whether `stream` is an interactive terminal (its `isatty()`, False if it has none)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):
        return False


class RunProgress:
    """Lines printed through it, and a bar over `total` runs when `terminal` and `total > 1`."""

    def __init__(
        self, out: TextIO, total: int, *, terminal: bool, width: int | None = None
    ) -> None:
        self.out = out
        self.total = total
        self.done = 0
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if terminal and total > 1:
            console = Console(file=out, force_terminal=True, width=width, highlight=False)
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                console=console,
                auto_refresh=False,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )

    @property
    def shows_bar(self) -> bool:
        return self._progress is not None

    def __enter__(self) -> RunProgress:
        if self._progress is not None:
            self._progress.start()
            self._task = self._progress.add_task("running", total=self.total)
            self._progress.refresh()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
        self.out.flush()

    def print(self, text: str) -> None:
        """A line (or lines) of output, above the bar when there is one."""
        if self._progress is None:
            print(text, file=self.out, flush=True)
            return
        self._progress.console.print(text, markup=False, highlight=False, soft_wrap=True)
        self._progress.refresh()

    def advance(self, label: str) -> None:
        """One run is over; `label` (e.g. `idle-eviction seed=7`) names the last one."""
        self.done += 1
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=1, description=label)
            self._progress.refresh()


@dataclass(frozen=True)
class ProgressPeriod:
    """When `ProgressLines` writes a line: after `every_runs` runs since the last line (None:
    not by count), or after `every_s` seconds of `clock` (None: not by time). Tests give a count
    and no time, so that the lines do not depend on the machine."""

    every_runs: int | None = None
    every_s: float | None = PROGRESS_EVERY_S
    clock: Callable[[], float] = time.monotonic


DEFAULT_PERIOD = ProgressPeriod()
"""A line every `PROGRESS_EVERY_S` seconds of wall time."""


class ProgressLines:
    """Plain progress lines on `err` (see the module docstring): `what` names the work (`explore
    idle-eviction`), `total` the runs planned (None when it is not known), `period` when a line
    is due."""

    def __init__(
        self, err: TextIO, what: str, total: int | None, period: ProgressPeriod | None = None
    ) -> None:
        self.err = err
        self.what = what
        self.total = total
        self.period = period or DEFAULT_PERIOD  # read when made: a test may set it
        self.clock = self.period.clock
        self.started = self.clock()
        self._last_runs = 0
        self._last_s = self.started

    def summary(self, done: int, findings: int, now: float) -> str:
        """`1 finding so far, 0.84 s per run` after `done` runs, at `now` on the clock."""
        noun = "finding" if findings == 1 else "findings"
        per_run = (now - self.started) / done if done else 0.0
        return f"{findings} {noun} so far, {per_run:.2f} s per run"

    def line(self, done: int, label: str, findings: int, now: float) -> str:
        """`explore x: 40/350 runs, 1 finding so far, 0.84 s per run (crash point 40)`."""
        runs = f"{done}/{self.total} runs" if self.total and done <= self.total else f"{done} runs"
        shown = f" ({label})" if label else ""
        return f"{self.what}: {runs}, {self.summary(done, findings, now)}{shown}"

    def ran(self, done: int, label: str, findings: int) -> None:
        """Run number `done` is over (`label` names it); write a line if one is due."""
        now, every_runs, every_s = self.clock(), self.period.every_runs, self.period.every_s
        by_runs = every_runs is not None and done - self._last_runs >= every_runs
        by_time = every_s is not None and now - self._last_s >= every_s
        if by_runs or by_time:
            self._last_runs, self._last_s = done, now
            print(self.line(done, label, findings, now), file=self.err, flush=True)


class HuntProgress(RunProgress):
    """A `RunProgress` for a hunt's runs: on a terminal the bar names the last run, the findings
    so far (`findings()`) and the time per run; elsewhere `ProgressLines` on `err`. `advance`
    after each run, `print` for the lines of output (findings), as for `RunProgress`:

        with HuntProgress(out, err, "generate x", total, lambda: found, terminal=...) as shown:
            for ...:
                ...one run...
                shown.advance("example 12")
    """

    def __init__(
        self,
        out: TextIO,
        err: TextIO,
        what: str,
        total: int | None,
        findings: Callable[[], int],
        *,
        terminal: bool,
        period: ProgressPeriod | None = None,
        width: int | None = None,
    ) -> None:
        super().__init__(out, total or 0, terminal=terminal, width=width)
        self.findings = findings
        self.lines = ProgressLines(err, what, total, period)

    def advance(self, label: str) -> None:
        found = self.findings()
        if self.shows_bar:
            summary = self.lines.summary(self.done + 1, found, self.lines.clock())
            super().advance(f"{label}: {summary}")
        else:
            self.done += 1
            self.lines.ran(self.done, label, found)
