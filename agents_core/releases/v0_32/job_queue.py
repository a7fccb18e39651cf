"""`JobQueue`: 0.32.0's durable job queue, the table `cf_agents_jobs` (spec sdk-0.32 §2.1–§2.2).

One timestamp-ordered table holds every pending job of the agent: an owning capability (`host`
for the agent's own jobs), a function name, a due time in epoch milliseconds, a JSON payload and
the driver's options (retry, single-flight, hung timeout, exclusive, recovery loop). The table is
created on the first statement the queue runs, never before. Ids are global across owners: a
push of an id another owner holds changes nothing and raises. The queue does not write the
alarm; the Lifecycle derives the alarm from `next_alarm_time` after every mutation.
"""

from __future__ import annotations

import builtins
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agents_core.errors import InvalidArgument

__all__ = [
    "DEFAULT_HUNG_TIMEOUT_SECONDS",
    "HOST_JOB_CAPABILITY",
    "JOBS_DDL",
    "Job",
    "JobQueue",
    "SCHEDULER_CAPABILITY",
    "hung_timeout_ms",
    "is_hung_row",
]

HOST_JOB_CAPABILITY = "host"
SCHEDULER_CAPABILITY = "scheduler"
"""The capability of the jobs `schedule()` and `schedule_every()` write (the Scheduler's)."""
DEFAULT_HUNG_TIMEOUT_SECONDS = 30

JOBS_DDL = """CREATE TABLE IF NOT EXISTS cf_agents_jobs (
        id TEXT PRIMARY KEY NOT NULL,
        capability TEXT NOT NULL,
        fn TEXT NOT NULL,
        time INTEGER NOT NULL,
        payload TEXT,
        retry_options TEXT,
        singleflight INTEGER NOT NULL DEFAULT 0,
        hung_timeout_seconds INTEGER,
        exclusive INTEGER NOT NULL DEFAULT 0,
        recovery_loop INTEGER NOT NULL DEFAULT 0,
        running INTEGER NOT NULL DEFAULT 0,
        execution_started_at INTEGER,
        created_at INTEGER NOT NULL DEFAULT (unixepoch())
      ) WITHOUT ROWID"""

_UPSERT = (
    "INSERT INTO cf_agents_jobs (id, capability, fn, time, payload, retry_options, "
    "singleflight, hung_timeout_seconds, exclusive, recovery_loop, running, "
    "execution_started_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, NULL, ?) "
    "ON CONFLICT(id) DO UPDATE SET fn = excluded.fn, time = excluded.time, "
    "payload = excluded.payload, retry_options = excluded.retry_options, "
    "singleflight = excluded.singleflight, "
    "hung_timeout_seconds = excluded.hung_timeout_seconds, exclusive = excluded.exclusive, "
    "recovery_loop = excluded.recovery_loop, running = 0, execution_started_at = NULL "
    "WHERE cf_agents_jobs.capability = excluded.capability"
)


@dataclass(frozen=True)
class Job:
    """One job as its owner sees it (the SDK's `jobFromRow`)."""

    id: str
    capability: str
    fn: str
    time: int
    payload: Any
    retry: Mapping[str, Any] | None
    singleflight: bool
    exclusive: bool
    recovery_loop: bool
    created_at: int


def job_from_row(row: Mapping[str, Any]) -> Job:
    payload = row["payload"]
    retry = row["retry_options"]
    return Job(
        id=row["id"],
        capability=row["capability"],
        fn=row["fn"],
        time=row["time"],
        payload=json.loads(payload) if isinstance(payload, str) else None,
        retry=json.loads(retry) if isinstance(retry, str) else None,
        singleflight=row["singleflight"] == 1,
        exclusive=row["exclusive"] == 1,
        recovery_loop=row["recovery_loop"] == 1,
        created_at=row["created_at"],
    )


def hung_timeout_ms(row: Mapping[str, Any]) -> int:
    """One row's hung (and slow-dispatch) threshold in milliseconds."""
    seconds = row["hung_timeout_seconds"]
    return int((DEFAULT_HUNG_TIMEOUT_SECONDS if seconds is None else seconds) * 1000)


def is_hung_row(row: Mapping[str, Any], now_ms: int) -> bool:
    """An in-flight single-flight row past its hung timeout."""
    return now_ms - (row["execution_started_at"] or 0) >= hung_timeout_ms(row)


def _valid_time(time: Any) -> int:
    if (
        isinstance(time, bool)
        or not isinstance(time, int | float)
        or not math.isfinite(time)
        or time < 0
    ):
        shown = "NaN" if isinstance(time, float) and math.isnan(time) else str(time)
        if isinstance(time, float) and math.isinf(time):
            shown = "Infinity" if time > 0 else "-Infinity"
        raise InvalidArgument(f"Invalid job time: {shown}")
    return math.floor(time)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class JobQueue:
    """One agent's `cf_agents_jobs` (one per incarnation; the table is the agent's storage)."""

    __slots__ = ("_sql", "_nanoid", "_now_ms", "_table_ensured")

    def __init__(
        self,
        sql: Callable[..., list[dict[str, Any]]],
        nanoid: Callable[[int], str],
        now_ms: Callable[[], int],
    ) -> None:
        self._sql = sql
        self._nanoid = nanoid
        self._now_ms = now_ms
        """The host's clock: `created_at` is the platform's `unixepoch()`, so its seconds."""
        self._table_ensured = False

    def _run(self, query: str, *params: Any) -> list[dict[str, Any]]:
        if not self._table_ensured:
            self._sql(JOBS_DDL)
            self._table_ensured = True
        return self._sql(query, *params)

    # -- an owner's operations ------------------------------------------------------------------
    def push(
        self,
        capability: str,
        fn: str,
        time: Any,
        *,
        id: str | None = None,
        payload: Any = None,
        retry: Mapping[str, Any] | None = None,
        singleflight: bool = False,
        hung_timeout_seconds: int | None = None,
        exclusive: bool = False,
        recovery_loop: bool = False,
    ) -> Job:
        """Insert or update the job `id` (a new `nanoid(9)` when None). A re-push of an owned id
        replaces its fields and clears its dispatch marker; an id of another owner raises."""
        at = _valid_time(time)
        if not isinstance(fn, str) or not fn.strip():
            raise InvalidArgument("Jobs require a non-empty fn")
        job_id = self._nanoid(9) if id is None else id
        self._run(
            _UPSERT,
            job_id,
            capability,
            fn,
            at,
            None if payload is None else _json(payload),
            _json(dict(retry)) if retry else None,
            1 if singleflight else 0,
            hung_timeout_seconds,
            1 if exclusive else 0,
            1 if recovery_loop else 0,
            self._now_ms() // 1000,
        )
        job = self.get(capability, job_id)
        if job is None:
            owner = self._run("SELECT capability FROM cf_agents_jobs WHERE id = ?", job_id)
            if owner:
                raise InvalidArgument(
                    f"Job id {_json(job_id)} already belongs to {_json(owner[0]['capability'])}; "
                    "job ids are scoped to their owner"
                )
            raise InvalidArgument(f"Failed to persist job {job_id}")
        return job

    def cancel(self, capability: str, id: str) -> bool:
        if not self._owned(capability, id):
            return False
        self._run("DELETE FROM cf_agents_jobs WHERE id = ? AND capability = ?", id, capability)
        return True

    def reschedule(self, capability: str, id: str, time: Any) -> bool:
        at = _valid_time(time)
        if not self._owned(capability, id):
            return False
        self._run(
            "UPDATE cf_agents_jobs SET time = ?, running = 0, execution_started_at = NULL "
            "WHERE id = ? AND capability = ?",
            at,
            id,
            capability,
        )
        return True

    def get(self, capability: str, id: str) -> Job | None:
        rows = self._run(
            "SELECT * FROM cf_agents_jobs WHERE id = ? AND capability = ?", id, capability
        )
        return job_from_row(rows[0]) if rows else None

    def list(self, capability: str) -> builtins.list[Job]:
        rows = self._run(
            "SELECT * FROM cf_agents_jobs WHERE capability = ? ORDER BY time ASC", capability
        )
        return [job_from_row(row) for row in rows]

    def _owned(self, capability: str, id: str) -> bool:
        return bool(
            self._run(
                "SELECT id FROM cf_agents_jobs WHERE id = ? AND capability = ?", id, capability
            )
        )

    # -- the driver's operations ----------------------------------------------------------------
    def due(self, now_ms: int) -> builtins.list[dict[str, Any]]:
        """The raw rows due at `now_ms`, earliest first."""
        return self._run(
            "SELECT * FROM cf_agents_jobs WHERE time <= ? ORDER BY time ASC", math.floor(now_ms)
        )

    def due_row(self, id: str, now_ms: int) -> dict[str, Any] | None:
        """The job's row as it is now, when it still exists and is still due."""
        rows = self._run(
            "SELECT * FROM cf_agents_jobs WHERE id = ? AND time <= ?", id, math.floor(now_ms)
        )
        return rows[0] if rows else None

    def mark_running(self, id: str, now_ms: int) -> None:
        self._run(
            "UPDATE cf_agents_jobs SET running = 1, execution_started_at = ? WHERE id = ?",
            math.floor(now_ms),
            id,
        )

    def clear_running(self, id: str) -> None:
        self._run(
            "UPDATE cf_agents_jobs SET running = 0, execution_started_at = NULL WHERE id = ?", id
        )

    def delete(self, id: str) -> None:
        self._run("DELETE FROM cf_agents_jobs WHERE id = ?", id)

    def retime(self, id: str, time: int) -> None:
        """The breaker's unguarded re-time (the dispatch marker is already cleared)."""
        self._run(
            "UPDATE cf_agents_jobs SET time = ?, running = 0, execution_started_at = NULL "
            "WHERE id = ?",
            math.floor(time),
            id,
        )

    def delay_recovery_loop_jobs(self, time: int) -> None:
        """Push every recovery-loop job due at or before `time` to `time` (the breaker)."""
        at = math.floor(time)
        self._run(
            "UPDATE cf_agents_jobs SET time = ?, running = 0, execution_started_at = NULL "
            "WHERE recovery_loop = 1 AND time <= ?",
            at,
            at,
        )

    def recovery_loop_jobs(self) -> builtins.list[Job]:
        rows = self._run("SELECT * FROM cf_agents_jobs WHERE recovery_loop = 1 ORDER BY time ASC")
        return [job_from_row(row) for row in rows]

    def purge_recovery_loop_jobs(self) -> None:
        self._run("DELETE FROM cf_agents_jobs WHERE recovery_loop = 1")

    def apply_outcome(self, id: str, outcome: Any) -> None:
        """One dispatch's result, guarded on the dispatch marker: None deletes the job,
        `"yield"` leaves it as it is, `{"rescheduleAt": ms}` re-times it. A push or reschedule
        of the same id during the dispatch cleared the marker, and then nothing happens."""
        if outcome is None:
            self._run("DELETE FROM cf_agents_jobs WHERE id = ? AND running = 1", id)
            return
        if outcome == "yield":
            self.clear_running(id)
            return
        if isinstance(outcome, Mapping) and set(outcome) == {"rescheduleAt"}:
            at = outcome["rescheduleAt"]
            if (
                isinstance(at, int | float)
                and not isinstance(at, bool)
                and math.isfinite(at)
                and at >= 0
            ):
                self._run(
                    "UPDATE cf_agents_jobs SET time = ?, running = 0, execution_started_at = NULL "
                    "WHERE id = ? AND running = 1",
                    math.floor(at),
                    id,
                )
                return
        raise InvalidArgument(f"Invalid job outcome for {id}")

    def has_exclusive(self) -> bool:
        return bool(self._run("SELECT 1 AS x FROM cf_agents_jobs WHERE exclusive = 1 LIMIT 1"))

    def next_alarm_time(self, now_ms: int) -> int | None:
        """The alarm the queue asks for: an exclusive job's time as it is (even past); else the
        earliest ready job clamped to `now + 1`, or the earliest moment a running single-flight
        job turns hung, whichever is first; None when the queue needs no wake."""
        exclusive = self._run("SELECT MIN(time) AS t FROM cf_agents_jobs WHERE exclusive = 1")
        if exclusive and exclusive[0]["t"] is not None:
            return int(exclusive[0]["t"])
        now = math.floor(now_ms)
        candidate: int | None = None
        ready = self._run(
            "SELECT MIN(time) AS t FROM cf_agents_jobs WHERE singleflight = 0 OR running = 0 "
            "OR coalesce(execution_started_at, 0) + coalesce(hung_timeout_seconds, ?) * 1000 "
            "<= ?",
            DEFAULT_HUNG_TIMEOUT_SECONDS,
            now,
        )
        if ready and ready[0]["t"] is not None:
            candidate = max(int(ready[0]["t"]), now + 1)
        recheck = self._run(
            "SELECT MIN(coalesce(execution_started_at, 0) + coalesce(hung_timeout_seconds, ?) "
            "* 1000) AS r FROM cf_agents_jobs WHERE singleflight = 1 AND running = 1 "
            "AND coalesce(execution_started_at, 0) + coalesce(hung_timeout_seconds, ?) * 1000 > ?",
            DEFAULT_HUNG_TIMEOUT_SECONDS,
            DEFAULT_HUNG_TIMEOUT_SECONDS,
            now,
        )
        if recheck and recheck[0]["r"] is not None:
            at = int(recheck[0]["r"])
            candidate = at if candidate is None else min(candidate, at)
        return candidate
