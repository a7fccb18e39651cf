"""`JobDriver`: what 0.32.0 does with the due jobs when the alarm fires (spec sdk-0.32 §2.3–§2.4).

Due jobs are driven in due-time order, strictly one at a time. Before the first dispatch the
driver arms the deadman, `now + 30 000`, so that an isolate dying mid-drive still wakes the agent.
A backlog of ten or more due jobs of one owner warns (`job:backlog_warning`). A single-flight
job still running is skipped until its hung timeout has passed, then forced. Each dispatch runs
the owner's `on_job` with up to `retry.max_attempts` attempts and the jittered backoff. A
watchdog warns once (`job:slow_dispatch`) when the dispatch outlives the hung timeout, without
interrupting it. A dispatch runs in the alarm scope of its job (`MemoryLimitBreaker.scope`: work it
hands off is charged to that job). A final platform failure keeps the job (its dispatch marker
cleared, its time unchanged) and leaves the alarm by raising. Any other final failure goes to
the owner's `on_job_error`, whose outcome (None: delete) is applied as a dispatch's would be. A
job whose owner is not installed is dropped.
"""

from __future__ import annotations

import contextlib
import inspect
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents_core.options import jitter_backoff_ms
from agents_core.probes import probe
from agents_core.releases.v0_32.job_queue import (
    SCHEDULER_CAPABILITY,
    Job,
    JobQueue,
    hung_timeout_ms,
    is_hung_row,
    job_from_row,
)
from agents_core.schedule_dispatch import (
    is_code_update_reset,
    is_memory_limit_reset,
    is_platform_transient,
)

if TYPE_CHECKING:
    from agents_core.context import AgentContext

__all__ = [
    "DEADMAN_ALARM_DELAY_MS",
    "DEFAULT_JOB_RETRY",
    "JOB_BACKLOG_WARNING_THRESHOLD",
    "AttributedPlatformFailure",
    "Dispatch",
    "JobDriver",
    "is_platform_failure",
]

DEADMAN_ALARM_DELAY_MS = 30_000
JOB_BACKLOG_WARNING_THRESHOLD = 10
DEFAULT_JOB_RETRY: Mapping[str, int] = {"maxAttempts": 3, "baseDelayMs": 100, "maxDelayMs": 3000}

OnJob = Callable[[Job, int], Awaitable[Any]]
OnJobError = Callable[[Job, int, BaseException], Awaitable[Any]]


@dataclass(frozen=True)
class Dispatch:
    """Where an owner's jobs go: its `on_job(job, attempt)` and, for a capability, its
    optional `on_job_error(job, attempt, error)` (host jobs have none)."""

    on_job: OnJob
    on_job_error: OnJobError | None = None


class AttributedPlatformFailure(Exception):  # noqa: N818 - the SDK's name
    """A platform failure leaving the alarm, with the job row it escaped from (the breaker
    charges a memory-limit reset to that job)."""

    def __init__(self, row: Mapping[str, Any], cause: BaseException) -> None:
        super().__init__(str(cause))
        self.row = row
        self.cause = cause


def is_platform_failure(error: BaseException) -> bool:
    """The SDK's `isPlatformFailure`: a platform transient or a memory-limit reset."""
    return is_platform_transient(error) or is_memory_limit_reset(error)


async def _settle(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


class JobDriver:
    """One agent's alarm event loop over its job queue (one per incarnation)."""

    __slots__ = ("_ctx", "_queue", "_resolve", "_disabled", "_emit", "_scope")

    def __init__(
        self,
        ctx: AgentContext,
        queue: JobQueue,
        resolve: Callable[[str], Dispatch | None],
        disabled: Callable[[], bool],
        emit: Callable[..., None],
        scope: Callable[[Mapping[str, Any] | None], AbstractAsyncContextManager[None]],
    ) -> None:
        self._ctx = ctx
        self._queue = queue
        self._resolve = resolve
        """An owner's dispatch (None: no capability of that id, or a host without `on_job`)."""
        self._disabled = disabled
        """The alarms were disabled (destroy): no dispatch starts and no outcome is applied."""
        self._emit = emit
        """The Lifecycle's event emit."""
        self._scope = scope
        """The breaker's alarm scope, a dispatch's charged to its job."""

    def arm_startup_fallback(self) -> None:
        """While the queue holds a job, arm `max(next, now + 30 000)`: a startup that throws or
        dies then still has a wake, never a tight loop on an overdue job."""
        if self._disabled():
            return
        host = self._ctx.host
        now = host.clock.now_ms()
        nxt = self._queue.next_alarm_time(now)
        if nxt is None:
            return
        host.alarm.set_alarm(max(nxt, now + DEADMAN_ALARM_DELAY_MS))

    async def drive_due_jobs(self) -> None:
        host = self._ctx.host
        now = host.clock.now_ms()
        due = self._queue.due(now)
        if not due:
            return
        self._warn_backlog(due)
        if not self._disabled():
            host.alarm.set_alarm(now + DEADMAN_ALARM_DELAY_MS)
        for stale in due:
            if self._disabled():
                return
            row = self._queue.due_row(stale["id"], now)
            if row is None:
                continue
            if row["singleflight"] == 1 and row["running"] == 1:
                if not is_hung_row(row, now):
                    self._ctx.log(
                        "warn", f"Skipping job {row['id']}: previous execution still running"
                    )
                    continue
                probe(host, "job.hung_forced")
                started_s = round((now - (row["execution_started_at"] or 0)) / 1000)
                self._ctx.log(
                    "warn", f"Forcing reset of hung job {row['id']} (started {started_s}s ago)"
                )
            self._queue.mark_running(row["id"], now)
            await self._drive_job(row)

    def _warn_backlog(self, due: list[dict[str, Any]]) -> None:
        counts = Counter(row["capability"] for row in due)
        for owner, count in counts.items():
            if count < JOB_BACKLOG_WARNING_THRESHOLD:
                continue
            self._ctx.log(
                "warn",
                f'Processing {count} due jobs for "{owner}" in a single alarm cycle. This usually '
                "means one-shot jobs are pushed repeatedly without a stable id.",
            )
            self._emit("job:backlog_warning", capability=owner, count=count)

    async def _drive_job(self, row: dict[str, Any]) -> None:
        queue = self._queue
        host = self._ctx.host
        job = job_from_row(row)
        dispatch = self._resolve(row["capability"])
        if dispatch is None:
            self._ctx.log(
                "error",
                f"No installed capability or host handler for job {row['id']} "
                f'(owner "{row["capability"]}"); dropping it',
            )
            queue.delete(row["id"])
            return
        retry = job.retry or {}
        max_attempts = int(retry.get("maxAttempts", DEFAULT_JOB_RETRY["maxAttempts"]))
        base = int(retry.get("baseDelayMs", DEFAULT_JOB_RETRY["baseDelayMs"]))
        cap = int(retry.get("maxDelayMs", DEFAULT_JOB_RETRY["maxDelayMs"]))
        finished = host.tasks.deferred()
        host.tasks.wait_until(self._watch_slow_dispatch(row, finished))
        outcome: Any = None
        try:
            async with self._scope(row):
                outcome = await self._try_n(dispatch.on_job, job, max_attempts, base, cap)
        except Exception as error:  # noqa: BLE001 - classified below, as the SDK does
            if self._disabled():
                return
            if is_platform_failure(error):
                probe(host, "job.platform_failure_preserved")
                with contextlib.suppress(Exception):  # best effort, as the SDK's
                    queue.clear_running(row["id"])
                self._ctx.log(
                    "warn",
                    f"Deferring job {row['id']} to a fresh invocation after a platform failure; "
                    "the job is preserved.",
                )
                raise AttributedPlatformFailure(row, error) from error
            outcome = None
            if dispatch.on_job_error is not None:
                try:
                    outcome = await dispatch.on_job_error(job, max_attempts, error)
                except Exception as hook_error:  # noqa: BLE001 - logged and swallowed
                    self._ctx.log("error", f"Job failure hook threw for {row['id']}: {hook_error}")
        finally:
            finished.resolve(None)
        if self._disabled():
            return
        queue.apply_outcome(row["id"], outcome)

    async def _try_n(self, on_job: OnJob, job: Job, n: int, base: int, cap: int) -> Any:
        """The SDK's `tryN`: attempts 1..n, a jittered wait between them, no retry after a
        code-update or memory-limit reset."""
        host = self._ctx.host
        attempt = 1
        while True:
            try:
                return await _settle(on_job(job, attempt))
            except Exception as error:
                if attempt + 1 > n or is_code_update_reset(error) or is_memory_limit_reset(error):
                    raise
                await host.clock.sleep(jitter_backoff_ms(host.entropy, attempt, base, cap))
                attempt += 1
                if job.capability == SCHEDULER_CAPABILITY:
                    probe(host, "schedule.callback_retried")

    async def _watch_slow_dispatch(self, row: Mapping[str, Any], finished: Any) -> None:
        host = self._ctx.host
        threshold = hung_timeout_ms(row)
        await host.tasks.race(finished, host.clock.sleep(threshold))
        if finished.done():
            return
        probe(host, "job.slow_dispatch")
        self._ctx.log(
            "warn",
            f"Job {row['id']} ({row['capability']}/{row['fn']}) has been dispatching for over "
            f"{round(threshold / 1000)}s. Long dispatches starve every other job on this "
            "object; onJob must detach unbounded work and return.",
        )
        self._emit(
            "job:slow_dispatch",
            capability=row["capability"],
            fn=row["fn"],
            id=row["id"],
            thresholdMs=threshold,
        )
