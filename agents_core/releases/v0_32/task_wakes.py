"""A Task run's wake job: the run's deadline mirrored into the Lifecycle's job queue (spec
sdk-0.32 §6.5).

A live run with a deadline (`next_at`) has one job `task:<runId>` (fn `wake`, one attempt, so
that a platform failure fails the wake and keeps the job for the platform's alarm retry); a run
without one has none. Every change of a run's deadline or state goes through `sync`. At
startup `reconcile` gives a claimed `running` run (its attempt died with its isolate) and a
live run without a deadline the deadline now, then pushes every live run's job again (or, when
all were already in place, re-arms the alarm).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.releases.v0_32.lifecycle import Jobs

__all__ = ["WAKE_JOB_FN", "WAKE_JOB_PREFIX", "WAKE_JOB_RETRY", "RunWakes"]

WAKE_JOB_PREFIX = "task:"
WAKE_JOB_FN = "wake"
WAKE_JOB_RETRY: Mapping[str, int] = {"maxAttempts": 1}


class RunWakes:
    """The wake jobs of one agent's Task runs."""

    __slots__ = ("_ctx", "_jobs", "_rearm")

    def __init__(self, ctx: AgentContext, jobs: Jobs, rearm: Callable[[], Awaitable[None]]) -> None:
        self._ctx = ctx
        self._jobs = jobs
        self._rearm = rearm

    def next_at(self, run_id: str) -> int | None:
        """The live run's deadline (None for a settled or unknown run)."""
        rows = self._ctx.sql(
            "SELECT next_at FROM cf_agents_task_runs "
            "WHERE run_id = ? AND state IN ('pending', 'waiting', 'running')",
            run_id,
        )
        if not rows or not isinstance(rows[0]["next_at"], int):
            return None
        return int(rows[0]["next_at"])

    def outcome(self, run_id: str) -> Any:
        """The wake job's outcome from the run row: re-timed to its deadline, or deleted."""
        nxt = self.next_at(run_id)
        return None if nxt is None else {"rescheduleAt": nxt}

    def refresh_claim(self, run_id: str, deadline: int) -> None:
        """A wake found the attempt still running here: its claim moves on to `deadline`."""
        self._ctx.sql(
            "UPDATE cf_agents_task_runs SET next_at = ?, updated_at = ? "
            "WHERE run_id = ? AND state = 'running'",
            deadline,
            self._ctx.host.clock.now_ms(),
            run_id,
        )

    async def sync(self, run_id: str) -> bool:
        """Mirror the run's deadline into its wake job (cancelled when it has none); whether
        anything was written."""
        job_id = WAKE_JOB_PREFIX + run_id
        nxt = self.next_at(run_id)
        if nxt is None:
            await self._jobs.cancel(job_id)
            return True
        existing = self._jobs.get(job_id)
        if (
            existing is not None
            and existing.fn == WAKE_JOB_FN
            and existing.time == nxt
            and (existing.retry or {}).get("maxAttempts") == WAKE_JOB_RETRY["maxAttempts"]
        ):
            return False
        await self._jobs.push(
            WAKE_JOB_FN, nxt, id=job_id, payload={"runId": run_id}, retry=WAKE_JOB_RETRY
        )
        return True

    async def reconcile(self, now: int) -> None:
        sql = self._ctx.sql
        sql(
            "UPDATE cf_agents_task_runs SET next_at = ?, updated_at = ? "
            "WHERE state = 'running' AND generation IS NOT NULL",
            now,
            now,
        )
        sql(
            "UPDATE cf_agents_task_runs SET next_at = ?, updated_at = ? "
            "WHERE state IN ('pending', 'waiting') AND next_at IS NULL",
            now,
            now,
        )
        rows = sql(
            "SELECT run_id FROM cf_agents_task_runs "
            "WHERE state IN ('pending', 'waiting', 'running') AND next_at IS NOT NULL"
        )
        pushed = False
        for row in rows:
            if await self.sync(row["run_id"]):
                pushed = True
        if rows and not pushed:
            await self._rearm()

    def interrupted_step(self, run_id: str) -> dict[str, Any] | None:
        """`{name, attempt}` of the step a lost attempt left `running` (the latest started)."""
        rows = self._ctx.sql(
            "SELECT step_name, attempt FROM cf_agents_task_steps "
            "WHERE run_id = ? AND state = 'running' ORDER BY started_at DESC LIMIT 1",
            run_id,
        )
        return {"name": rows[0]["step_name"], "attempt": rows[0]["attempt"]} if rows else None
