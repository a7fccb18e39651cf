"""`cron_next_occurrence`: a cron schedule is due at the next occurrence of its expression after
the instant its time is written (fibers §4.1, §4.4), computed by the checkers' own cron model
(`sim.checkers.models.cron`), never by the runtime's parser.

The other schedule invariants take a row's stored time as given: `schedules_fire` holds that a
row runs once that time has passed, `schedules_fire_once` that a cron row never runs before the
model's next occurrence. Neither sees a runtime that stores a time later than the next
occurrence (an occurrence skipped, a field's last value dropped, both day fields required): the
row is then simply due later, and it fires then. This checker closes that gap from the journal.

The agent's committed turns are replayed one by one into an empty database, each with the instant
it committed (`CheckContext.journal_ms`). Whenever a turn gives a cron schedule a time it did not
have before (its INSERT at creation, the UPDATE after a run, a 0.32.0 job's recurrence), that time
must be the model's first occurrence strictly after the turn's instant, in whole seconds as the
row stores it. A time the turn moves on purpose is left alone: the memory-limit breaker's backoff
(`alarm:memory_limit_reset` in the same instant on the agent) and a 0.32.0 retry's re-time
(`schedule:retry` of that schedule in the same instant). A time equal to one the schedule had
before is not a new computation (0.32.0's migration copies 0.21.0's row as it was).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.models.cron import InvalidCron, next_cron_due_ms
from sim.checkers.registry import invariant
from sim.checkers.schedule_store import (
    JOBS_TABLE,
    SCHEDULES_ON_JOBS,
    SCHEDULES_TABLE,
    schedule_of_job,
)
from sim.sqlite import KV_DDL, Write
from sim.trace import format_sim_time

__all__ = ["cron_next_occurrence"]

MOVED_ON_PURPOSE = ("alarm:memory_limit_reset", "schedule:retry")


def _table(db: sqlite3.Connection, table: str) -> list[dict[str, Any]]:
    """The rows of `table` now; none for a table not created yet."""
    try:
        return [dict(row) for row in db.execute(f"SELECT * FROM {table}")]
    except sqlite3.OperationalError:
        return []


def _cron_rows(db: sqlite3.Connection, on_jobs: bool) -> dict[str, tuple[Any, int, str]]:
    """id -> (callback, time in s, expression) of every cron schedule the database holds now,
    rows of `cf_agents_schedules` and, on 0.32.0, `scheduler` jobs in the same shape."""
    rows = _table(db, SCHEDULES_TABLE)
    if on_jobs:
        rows += [s for s in map(schedule_of_job, _table(db, JOBS_TABLE)) if s is not None]
    return {
        str(row["id"]): (row["callback"], int(row["time"]), row["cron"])
        for row in rows
        if row.get("type") == "cron"
        and row.get("time") is not None
        and isinstance(row.get("cron"), str)
    }


def _mentions_cron(journal: Sequence[Sequence[Write]]) -> bool:
    return any("cron" in str(params) for turn in journal for _, params in turn)


@invariant("cron_next_occurrence")
def cron_next_occurrence(context: CheckContext) -> list[Violation]:
    """Fibers §4.1, §4.4 — a cron row's time, whenever a turn writes a new one, is the first
    occurrence of its expression strictly after that turn's instant (see the module docstring)."""
    on_jobs = context.release in SCHEDULES_ON_JOBS
    out: list[Violation] = []
    for path, journal in sorted(context.journals.items()):
        instants = context.journal_ms.get(path, ())
        # A hand-built context may hold a journal without its instants: nothing to judge then.
        if len(instants) != len(journal) or not _mentions_cron(journal):
            continue
        moved = {
            (record.t_ms, str(record.get("id") or ""))
            for event in MOVED_ON_PURPOSE
            for record in context.events(event)
            if record.agent == path or record.agent.startswith(path + "/")
        }
        db = sqlite3.connect(":memory:", isolation_level=None)
        db.row_factory = sqlite3.Row
        db.execute(KV_DDL)
        seen: dict[str, set[int]] = {}
        flagged: set[str] = set()
        for turn, at_ms in zip(journal, instants, strict=True):
            try:
                for statement, params in turn:
                    db.execute(statement, tuple(params))
            except sqlite3.Error:
                break  # turns_atomic says why the journal does not replay
            for schedule_id, (callback, time_s, cron) in sorted(_cron_rows(db, on_jobs).items()):
                before = seen.setdefault(schedule_id, set())
                if time_s in before:
                    continue
                before.add(time_s)
                if schedule_id in flagged or (at_ms, schedule_id) in moved or (at_ms, "") in moved:
                    continue
                try:
                    due_s = next_cron_due_ms(cron, at_ms) // 1000
                except InvalidCron:
                    continue
                if time_s == due_s:
                    continue
                flagged.add(schedule_id)
                out.append(
                    Violation(
                        "cron_next_occurrence",
                        path,
                        schedule_id,
                        f"cron schedule {schedule_id} ({cron!r}, callback {callback}) of {path} "
                        f"was given the time {format_sim_time(time_s * 1000)} at "
                        f"{format_sim_time(at_ms)}, but the expression's next occurrence after "
                        f"that instant is {format_sim_time(due_s * 1000)}",
                    )
                )
        db.close()
    return out
