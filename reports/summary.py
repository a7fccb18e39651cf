"""The multi-seed summary for the terminal: a row per scenario, then how to replay each failure.

    scenario          seeds  passed  failed  failing seeds
    deploy-mid-work       5       3       2  3, 17
    idle-eviction         5       5       0  -

    replay the 2 failures:
      deploy-mid-work [seed 3]: agentsim run scenarios/library/deploy-mid-work.yaml --seed 3
      ...
    total: 10 runs, 8 passed, 2 failed

Scenarios keep the order in which their first run was given; seeds are listed in numeric order.
"""

from __future__ import annotations

from collections.abc import Sequence

from reports._format import one_line
from reports.records import RunReport

__all__ = ["MAX_SEEDS_LISTED", "render"]

MAX_SEEDS_LISTED = 12
"""Failing seeds shown in the table before `… (+N more)`; every failure still gets its replay
line below the table."""


def render(runs: Sequence[RunReport]) -> str:
    """The summary of `runs` (any mix of scenarios and seeds)."""
    groups: dict[tuple[str, str], list[RunReport]] = {}
    for run in runs:
        groups.setdefault((run.name, run.path), []).append(run)
    header = ("scenario", "seeds", "passed", "failed", "failing seeds")
    rows = []
    for (name, _path), group in groups.items():
        failing = sorted({run.seed for run in group if not run.passed})
        passed = sum(1 for run in group if run.passed)
        rows.append(
            (
                one_line(name),
                str(len({run.seed for run in group})),
                str(passed),
                str(len(group) - passed),
                _seeds(failing),
            )
        )
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
    lines = [_row(header, widths), *(_row(row, widths) for row in rows)]
    failures = sorted(
        (run for run in runs if not run.passed),
        key=lambda run: (list(groups).index((run.name, run.path)), run.seed),
    )
    if failures:
        count = len(failures)
        lines += ["", f"replay the {count} failure{'s' if count != 1 else ''}:"]
        for run in failures:
            first = f" ({one_line(run.failures[0])})" if run.failures else ""
            lines.append(f"  {one_line(run.name)} [seed {run.seed}]{first}")
            lines.append(f"    {one_line(run.replay_command)}")
    failed = len(failures)
    runs_word = "run" if len(runs) == 1 else "runs"
    lines += ["", f"total: {len(runs)} {runs_word}, {len(runs) - failed} passed, {failed} failed"]
    return "\n".join(lines)


def _seeds(seeds: list[int]) -> str:
    if not seeds:
        return "-"
    shown = ", ".join(str(seed) for seed in seeds[:MAX_SEEDS_LISTED])
    more = len(seeds) - MAX_SEEDS_LISTED
    return f"{shown} … (+{more} more)" if more > 0 else shown


def _row(cells: Sequence[str], widths: list[int]) -> str:
    name, *numbers, seeds = cells
    parts = [
        name.ljust(widths[0]),
        *(n.rjust(max(w, 6)) for n, w in zip(numbers, widths[1:], strict=True)),
    ]
    return "  ".join([*parts, seeds]).rstrip()
