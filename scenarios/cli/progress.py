"""Progress of a long run (many scenarios or seeds): a `rich` bar on a terminal, nothing in CI.

`RunProgress` is what the CLI writes result lines through. On a terminal it keeps a bar
(description, bar, `done/total`) below the lines it prints and erases the bar when it stops, so
the final `N passed, M failed` line stands alone. Anywhere else (a pipe, a file, CI) it writes
the lines and nothing more: no control characters, no bar. The bar redraws only when a run
ends (`auto_refresh=False`, no timer thread, no elapsed-time column), so what it writes depends
on the runs alone and tests can check it with a fake terminal.
"""

from __future__ import annotations

from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

__all__ = ["RunProgress", "is_terminal"]


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
