"""Where a run's schedules are stored, as each release stores them, read in one shape.

On 0.21.0 a schedule is a row of `cf_agents_schedules` (`time` in Unix seconds). On 0.32.0 it is
a job of `cf_agents_jobs` with capability `scheduler`: `time` in epoch milliseconds, the timing
(type, cron, interval, owner) in the job's JSON payload (spec sdk-0.32 §3.1). The checkers read
both through `stored_schedules` and `inserted_schedules`, which give 0.21.0's row shape (the
`time` and `execution_started_at` in seconds), so that an invariant is written once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sim.checkers.core import CheckContext
from sim.checkers.storage import inserted_rows, row_changes
from sim.sqlite import Write

__all__ = [
    "JOBS_TABLE",
    "SCHEDULES_ON_JOBS",
    "SCHEDULES_TABLE",
    "deletion_instants",
    "inserted_schedules",
    "insertion_instants",
    "schedule_of_job",
    "stored_schedules",
]

SCHEDULES_ON_JOBS = frozenset({"0.32.0"})
"""The releases whose schedules are jobs of the `scheduler` capability."""

SCHEDULES_TABLE = "cf_agents_schedules"
JOBS_TABLE = "cf_agents_jobs"


def _on_jobs(context: CheckContext) -> bool:
    return context.release in SCHEDULES_ON_JOBS


def _tables(context: CheckContext) -> tuple[str, ...]:
    """The tables the run's schedules were stored in: its release's, or, in a run that upgraded
    from 0.21.0 to 0.32.0, both (rows written before the upgrade are 0.21.0's, moved to jobs by
    the migration; a row's last shape wins)."""
    if context.upgraded and _on_jobs(context):
        return (SCHEDULES_TABLE, JOBS_TABLE)
    return (JOBS_TABLE,) if _on_jobs(context) else (SCHEDULES_TABLE,)


def _in_shape(table: str, rows: Iterator[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    """`rows` of `table` in 0.21.0's row shape (a job that is not a schedule left out)."""
    for row in rows:
        shaped = dict(row) if table == SCHEDULES_TABLE else schedule_of_job(row)
        if shaped is not None:
            yield shaped


def schedule_of_job(job: Mapping[str, Any]) -> dict[str, Any] | None:
    """A 0.32.0 job of the `scheduler` capability in 0.21.0's row shape (`time` and
    `execution_started_at` in seconds, the timing out of the payload); None for any other job."""
    if job.get("capability") != "scheduler":
        return None
    try:
        timing = json.loads(job.get("payload") or "null")
    except ValueError:
        return None
    if not isinstance(timing, dict) or not isinstance(timing.get("type"), str):
        return None
    started = job.get("execution_started_at")
    return {
        "id": job.get("id"),
        "callback": job.get("fn"),
        "type": timing["type"],
        "time": None if job.get("time") is None else int(job["time"]) // 1000,
        "cron": timing.get("cron"),
        "intervalSeconds": timing.get("intervalSeconds"),
        "delayInSeconds": timing.get("delayInSeconds"),
        "running": job.get("running", 0),
        "execution_started_at": None if started is None else int(started) // 1000,
        "owner_path": timing.get("owner_path"),
        "owner_path_key": timing.get("owner_path_key"),
        "retry_options": job.get("retry_options"),
    }


def stored_schedules(context: CheckContext, path: str) -> list[dict[str, Any]]:
    """The schedules stored by the agent `path` at the end of the run."""
    return [
        row
        for table in _tables(context)
        for row in _in_shape(table, iter(context.table(path, table)))
    ]


def inserted_schedules(
    context: CheckContext, journal: Sequence[Sequence[Write]]
) -> Iterator[dict[str, Any]]:
    """Every schedule a journal's committed writes insert, in commit order (in a run that
    upgraded, those of 0.21.0's table first)."""
    for table in _tables(context):
        yield from _in_shape(table, iter(inserted_rows(journal, table)))


def insertion_instants(context: CheckContext, path: str, schedule_id: str) -> list[int]:
    """When (sim ms) committed turns of `path` wrote the schedule `schedule_id`'s row anew."""
    return _instants(context, path, schedule_id, inserted=True)


def deletion_instants(context: CheckContext, path: str, schedule_id: str) -> list[int]:
    """When (sim ms) committed turns of `path` deleted the schedule `schedule_id`'s row."""
    return _instants(context, path, schedule_id, inserted=False)


def _instants(context: CheckContext, path: str, schedule_id: str, *, inserted: bool) -> list[int]:
    """When committed turns of `path` made (`inserted`) or removed the schedule's row."""
    instants = context.journal_ms.get(path, ())
    return [
        instants[change.turn - 1]
        for table in _tables(context)
        for change in row_changes(context.journals.get(path, ()), table, "id")
        if change.key == schedule_id
        and (change.before is None) == inserted
        and (change.after is None) != inserted
        and change.turn - 1 < len(instants)
    ]
