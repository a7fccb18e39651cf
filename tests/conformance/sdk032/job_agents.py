"""Agents for the job-queue and Lifecycle conformance tests of 0.32.0: an agent with two test
capabilities installed on its Lifecycle, whose jobs do what their payload says.

A job's payload scripts its dispatch: `errors` (the n-th attempt of the job raises
`errors[n-1]`; `forever` repeats the last), `outcome` (what `on_job` returns), `sleep_ms`,
`outcomes` (the n-th dispatch returns `outcomes[n-1]`), `repush_at` (the same id is pushed again,
at that time, during the dispatch). Every attempt is recorded in the
agent's `calls` table, and `on_job_error` in `errors_seen`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any

from agents_core import Agent
from agents_core.releases.v0_32.job_queue import Job


class Work:
    """A capability of the test agent: its jobs' dispatch follows their payload."""

    def __init__(self, agent: JobsAgent, id: str, *, error_hook: bool) -> None:
        self._agent = agent
        self._id = id
        self._error_hook = error_hook

    @property
    def id(self) -> str:
        return self._id

    async def on_start(self) -> None:
        self._agent.note("start:" + self._id)

    async def on_job(self, job: Job, attempt: int) -> Any:
        agent = self._agent
        agent.sql(
            "INSERT INTO calls VALUES (?, ?, ?, ?, ?, ?)",
            agent.host.clock.now_ms(),
            job.capability,
            job.id,
            job.fn,
            attempt,
            job.time,
        )
        agent.note(f"job:{job.id}")
        agent.host.trace.emit("test:on_job", id=job.id, attempt=attempt)
        script = job.payload if isinstance(job.payload, dict) else {}
        dispatches = agent.sql("SELECT COUNT(*) AS n FROM calls WHERE id = ?", job.id)[0]["n"]
        if script.get("sleep_ms"):
            await agent.host.clock.sleep(script["sleep_ms"])
        if "repush_at" in script:
            await agent._lifecycle.jobs_for(self._id).push(job.fn, script["repush_at"], id=job.id)
        errors = script.get("errors") or []
        if attempt <= len(errors) or (errors and script.get("forever")):
            message = errors[min(attempt, len(errors)) - 1]
            error = RuntimeError(message)
            if script.get("retryable"):
                error.retryable = True  # type: ignore[attr-defined]
            raise error
        agent.note(f"done:{job.id}")
        outcomes = script.get("outcomes")
        if outcomes is not None:
            return outcomes[min(dispatches, len(outcomes)) - 1]
        return script.get("outcome")

    @property
    def on_job_error(self) -> Callable[[Job, int, BaseException], Awaitable[Any]] | None:
        if not self._error_hook:
            return None

        async def hook(job: Job, attempt: int, error: BaseException) -> Any:
            self._agent.sql("INSERT INTO errors_seen VALUES (?, ?, ?)", job.id, attempt, str(error))
            script = job.payload if isinstance(job.payload, dict) else {}
            return script.get("error_outcome")

        return hook


class JobsAgent(Agent):
    """Two capabilities: `work` (with an error hook) and `bare` (without one)."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql("CREATE TABLE IF NOT EXISTS calls (t, capability, id, fn, attempt, time)")
        self.sql("CREATE TABLE IF NOT EXISTS errors_seen (id, attempt, error)")
        self.sql("CREATE TABLE IF NOT EXISTS notes (t, note)")
        self._lifecycle.use(Work(self, "work", error_hook=True))
        self._lifecycle.use(Work(self, "bare", error_hook=False))

    def note(self, text: str) -> None:
        self.sql("INSERT INTO notes VALUES (?, ?)", self.host.clock.now_ms(), text)

    async def on_start(self) -> None:
        self.note("on_start")

    async def on_alarm(self) -> None:
        self.note("on_alarm")

    async def push(self, owner: str, fn: str, time: Any, **options: Any) -> dict[str, Any]:
        job = await self._lifecycle.jobs_for(owner).push(fn, time, **options)
        return asdict(job)

    async def push_raw(self, owner: str, fn: str, time: Any, **options: Any) -> dict[str, Any]:
        """A push without the re-arm (the queue alone)."""
        return asdict(self._lifecycle.queue.push(owner, fn, time, **options))

    async def cancel_job(self, owner: str, id: str) -> bool:
        return await self._lifecycle.jobs_for(owner).cancel(id)

    async def rearm(self) -> None:
        await self._lifecycle.rearm()

    async def next_alarm_time(self) -> int | None:
        return self._lifecycle.queue.next_alarm_time(self.host.clock.now_ms())

    async def mark_running(self, id: str, started_at: int) -> None:
        self._lifecycle.queue.mark_running(id, started_at)

    async def set_alarm(self, at: int) -> None:
        self.host.alarm.set_alarm(at)

    async def put_kv(self, key: str, value: Any) -> None:
        self.host.kv.put(key, value)

    async def get_kv(self, key: str) -> Any:
        return self.host.kv.get(key)


def payload(**script: Any) -> dict[str, Any]:
    """A job payload (a plain dict, JSON as stored)."""
    return json.loads(json.dumps(script))
