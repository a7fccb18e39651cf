"""The step journal of one Task run's attempt: `step.do` and `step.sleep` (spec sdk-0.32 §6.5,
§8.3).

A run's steps are rows of `cf_agents_task_steps` (`kind` `do` or `sleep`; `state` `running`,
`waiting`, `completed`, `failed`). Every write is fenced by the attempt's generation: an attempt
another one superseded unwinds (`AttemptSuperseded`) without touching the journal. A step
journaled `completed` gives its result again on replay; a `failed` one raises its error again.

- `do(name, config, fn)` runs `fn` under the step's retry policy (`retries.limit`, 5 by
  default; `retries.delay` in ms, 1 s by default; `retries.backoff` `constant`, `linear` or
  `exponential`, the default, never more than a day). A failed call below the limit parks the
  step `waiting` until its retry time and suspends the attempt; the run's next attempt claims
  the step again (`task:step:retry`). At the limit the step is journaled `failed` and the error
  raised, except a platform failure, which is raised unjournaled so the job driver keeps the
  run's wake (a code-update or memory-limit reset is raised at once, whatever the attempt).
- `sleep(name, duration_ms)` journals its wake time the first time it is reached (the first
  write wins) and suspends the attempt until then; a sleep already due is journaled
  `completed` at once.

A suspension (`TaskSuspension`, a `BaseException` so that a callback's `except Exception`
cannot swallow it) ends the attempt: the capability parks the run `waiting` with the wake time
as its deadline. What is not modelled: the step timeout (no step here runs near its bound: a
chat turn's day, a continuation's 15 minutes, which returns at its model hand-off), `status()`,
`sleepUntil`, cancellation at a step boundary, durations written as text, the 10 000-step
ceiling.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents_core.errors import InvalidArgument
from agents_core.releases.v0_32.job_driver import is_platform_failure
from agents_core.schedule_dispatch import is_code_update_reset, is_memory_limit_reset
from agents_core.signals import AbortSignal

if TYPE_CHECKING:
    from agents_core.context import AgentContext

__all__ = [
    "AttemptSuperseded",
    "StepContext",
    "StepJournal",
    "TaskDefinition",
    "TaskStep",
    "TaskStepFailed",
    "TaskSuspension",
]

DEFAULT_STEP_RETRY_LIMIT = 5
DEFAULT_STEP_RETRY_DELAY_MS = 1_000
DEFAULT_STEP_BACKOFF = "exponential"
MAX_RETRY_DELAY_MS = 24 * 60 * 60 * 1_000
MAX_NAME_LENGTH = 256
BACKOFFS = ("constant", "linear", "exponential")


@dataclass(frozen=True)
class StepContext:
    """What a `step.do` callback receives."""

    attempt: int
    idempotency_key: str
    signal: AbortSignal


TaskDefinition = Callable[[Any, "TaskStep"], Awaitable[Any]]
StepCallback = Callable[[StepContext], Awaitable[Any]]


class AttemptSuperseded(Exception):  # noqa: N818 - the SDK's AttemptSupersededError
    """Another attempt claimed the run: this one unwinds without settling anything."""

    def __init__(self, run_id: str) -> None:
        super().__init__(
            f'Task attempt superseded: run "{run_id}" is no longer claimed by this execution '
            "attempt"
        )


class TaskStepFailed(Exception):  # noqa: N818 - a journaled step error, raised again
    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = name


class TaskSuspension(BaseException):
    """The attempt ends here and the run waits until `wake_at` (a sleep or a step's retry)."""

    def __init__(self, wake_at: int, reason: str) -> None:
        super().__init__(f"Task run suspended until {wake_at} ({reason})")
        self.wake_at = wake_at
        self.reason = reason


def serialize(value: Any) -> str | None:
    """JSON text of a value (None, JavaScript's `undefined`, is column NULL)."""
    if value is None:
        return None
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def deserialize(stored: Any) -> Any:
    return None if stored is None else json.loads(stored)


def error_summary(error: BaseException) -> tuple[str, str]:
    name = getattr(error, "error_name", None) or (
        "Error" if type(error) is Exception else type(error).__name__
    )
    return str(name), str(error)


def _duration_ms(value: Any, what: str) -> int:
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise InvalidArgument(
            f"Invalid {what}: expected a non-negative number of milliseconds, got {value!r}"
        )
    return int(value)


@dataclass(frozen=True)
class StepPolicy:
    """One `step.do`'s retry policy, its config over the capability's defaults."""

    limit: int
    delay_ms: int
    backoff: str

    @classmethod
    def of(cls, config: Mapping[str, Any] | None) -> StepPolicy:
        retries = (config or {}).get("retries") or {}
        limit = retries.get("limit", DEFAULT_STEP_RETRY_LIMIT)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidArgument(
                f"Invalid step retries.limit: expected an integer >= 1, got {limit}"
            )
        delay = retries.get("delay")
        backoff = retries.get("backoff", DEFAULT_STEP_BACKOFF)
        if backoff not in BACKOFFS:
            raise InvalidArgument(
                f"Invalid step retries.backoff: expected one of {', '.join(BACKOFFS)}, "
                f"got {backoff!r}"
            )
        return cls(
            limit,
            DEFAULT_STEP_RETRY_DELAY_MS if delay is None else _duration_ms(delay, "retries.delay"),
            backoff,
        )

    def retry_delay_ms(self, failed_attempt: int) -> int:
        """The wait before the attempt after `failed_attempt`."""
        if self.backoff == "constant":
            delay = self.delay_ms
        elif self.backoff == "linear":
            delay = self.delay_ms * failed_attempt
        else:
            delay = self.delay_ms * 2 ** (failed_attempt - 1)
        return min(delay, MAX_RETRY_DELAY_MS)


class StepJournal:
    """The step rows of one run, written for one attempt (fenced by its generation)."""

    __slots__ = ("_ctx", "run_id", "_generation")

    def __init__(self, ctx: AgentContext, run_id: str, generation: str) -> None:
        self._ctx = ctx
        self.run_id = run_id
        self._generation = generation

    def _now(self) -> int:
        return self._ctx.host.clock.now_ms()

    def _assert_current(self) -> None:
        rows = self._ctx.sql(
            "SELECT generation FROM cf_agents_task_runs WHERE run_id = ?", self.run_id
        )
        if not rows or rows[0]["generation"] != self._generation:
            raise AttemptSuperseded(self.run_id)

    def read(self, name: str) -> dict[str, Any] | None:
        rows = self._ctx.sql(
            "SELECT * FROM cf_agents_task_steps WHERE run_id = ? AND step_name = ?",
            self.run_id,
            name,
        )
        return rows[0] if rows else None

    def insert_do(self, name: str) -> None:
        self._assert_current()
        now = self._now()
        self._ctx.sql(
            "INSERT INTO cf_agents_task_steps (run_id, step_name, kind, state, attempt, next_at, "
            "created_at, started_at, updated_at) VALUES (?, ?, 'do', 'running', 1, NULL, ?, ?, ?)",
            self.run_id,
            name,
            now,
            now,
            now,
        )

    def insert_sleep(self, name: str, wake_at: int) -> None:
        self._assert_current()
        now = self._now()
        self._ctx.sql(
            "INSERT INTO cf_agents_task_steps (run_id, step_name, kind, state, attempt, next_at, "
            "created_at, started_at, updated_at) "
            "VALUES (?, ?, 'sleep', 'waiting', 0, ?, ?, NULL, ?)",
            self.run_id,
            name,
            wake_at,
            now,
            now,
        )

    def insert_completed_sleep(self, name: str) -> None:
        self._assert_current()
        now = self._now()
        self._ctx.sql(
            "INSERT INTO cf_agents_task_steps (run_id, step_name, kind, state, attempt, next_at, "
            "created_at, completed_at, updated_at) "
            "VALUES (?, ?, 'sleep', 'completed', 0, NULL, ?, ?, ?)",
            self.run_id,
            name,
            now,
            now,
            now,
        )

    def claim_attempt(self, name: str) -> int:
        self._assert_current()
        now = self._now()
        self._ctx.sql(
            "UPDATE cf_agents_task_steps SET state = 'running', attempt = attempt + 1, "
            "next_at = NULL, started_at = ?, updated_at = ? WHERE run_id = ? AND step_name = ?",
            now,
            now,
            self.run_id,
            name,
        )
        row = self.read(name)
        return int(row["attempt"]) if row else 1

    def complete(self, name: str, result: Any) -> None:
        self._assert_current()
        now = self._now()
        self._ctx.sql(
            "UPDATE cf_agents_task_steps SET state = 'completed', result = ?, next_at = NULL, "
            "completed_at = ?, updated_at = ? WHERE run_id = ? AND step_name = ?",
            serialize(result),
            now,
            now,
            self.run_id,
            name,
        )

    def fail(self, name: str, error: BaseException) -> None:
        self._assert_current()
        error_name, message = error_summary(error)
        self._ctx.sql(
            "UPDATE cf_agents_task_steps SET state = 'failed', error_name = ?, error_message = ?, "
            "next_at = NULL, updated_at = ? WHERE run_id = ? AND step_name = ?",
            error_name,
            message,
            self._now(),
            self.run_id,
            name,
        )

    def wait(self, name: str, wake_at: int) -> None:
        self._assert_current()
        self._ctx.sql(
            "UPDATE cf_agents_task_steps SET state = 'waiting', next_at = ?, updated_at = ? "
            "WHERE run_id = ? AND step_name = ?",
            wake_at,
            self._now(),
            self.run_id,
            name,
        )


class TaskStep:
    """The `step` one attempt of a run hands its handler (the SDK's `ReplayStep`: `do` and
    `sleep`)."""

    __slots__ = ("_journal", "_definition", "_signal", "_emit", "_now", "_used")

    def __init__(
        self,
        journal: StepJournal,
        definition: str,
        signal: AbortSignal,
        emit: Callable[..., None],
        now: Callable[[], int],
    ) -> None:
        self._journal = journal
        self._definition = definition
        self._signal = signal
        self._emit = emit
        self._now = now
        self._used: set[str] = set()

    def _enter(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidArgument("Step names must be non-empty strings")
        if len(name) > MAX_NAME_LENGTH:
            raise InvalidArgument(f'Step name exceeds 256 characters: "{name[:40]}…"')
        if name.startswith("__cf"):
            raise InvalidArgument('Step names must not use the reserved "__cf" prefix')
        if name in self._used:
            raise InvalidArgument(f'Duplicate step name "{name}" in one Task run')
        self._used.add(name)

    async def do(self, name: str, config: Mapping[str, Any] | None, fn: StepCallback) -> Any:
        """Run `fn` as the journaled step `name` under its retry policy; its result (JSON)
        on a replay."""
        policy = StepPolicy.of(config)
        self._enter(name)
        journal = self._journal
        row = journal.read(name)
        if row is None:
            journal.insert_do(name)
            return await self._execute(name, 1, policy, fn)
        if row["kind"] != "do":
            raise InvalidArgument(f'step "{name}" was journaled as a {row["kind"]} step')
        if row["state"] == "completed":
            return deserialize(row["result"])
        if row["state"] == "failed":
            raise TaskStepFailed(
                row["error_name"] or "Error", row["error_message"] or "Step failed"
            )
        if row["state"] == "waiting":
            wake_at = row["next_at"] if row["next_at"] is not None else self._now()
            if self._now() < wake_at:
                raise TaskSuspension(wake_at, "retry")
            attempt = journal.claim_attempt(name)
            self._emit(
                "task:step:retry",
                runId=journal.run_id,
                definition=self._definition,
                step=name,
                attempt=attempt,
            )
            return await self._execute(name, attempt, policy, fn)
        return await self._execute(name, journal.claim_attempt(name), policy, fn)

    async def sleep(self, name: str, duration_ms: int) -> None:
        """Wait `duration_ms` from the first time this step is reached, across attempts."""
        duration = _duration_ms(duration_ms, "sleep duration")
        self._enter(name)
        journal = self._journal
        row = journal.read(name)
        if row is None:
            wake_at = self._now() + duration
            if wake_at <= self._now():
                journal.insert_completed_sleep(name)
                return
            journal.insert_sleep(name, wake_at)
            raise TaskSuspension(wake_at, "sleep")
        if row["kind"] != "sleep":
            raise InvalidArgument(f'step "{name}" was journaled as a {row["kind"]} step')
        if row["state"] == "completed":
            return
        wake_at = row["next_at"] or 0
        if self._now() < wake_at:
            raise TaskSuspension(wake_at, "sleep")
        journal.complete(name, None)

    async def _execute(self, name: str, attempt: int, policy: StepPolicy, fn: StepCallback) -> Any:
        journal = self._journal
        self._emit(
            "task:step:started",
            runId=journal.run_id,
            definition=self._definition,
            step=name,
            attempt=attempt,
        )
        context = StepContext(attempt, f"{journal.run_id}:{name}", self._signal)
        try:
            result = await fn(context)
        except AttemptSuperseded:
            raise
        except Exception as error:
            if is_code_update_reset(error) or is_memory_limit_reset(error):
                raise
            if attempt >= policy.limit:
                if not is_platform_failure(error):
                    journal.fail(name, error)
                raise
            wake_at = self._now() + policy.retry_delay_ms(attempt)
            journal.wait(name, wake_at)
            raise TaskSuspension(wake_at, "retry") from error
        journal.complete(name, result)
        self._emit(
            "task:step:completed",
            runId=journal.run_id,
            definition=self._definition,
            step=name,
            attempt=attempt,
        )
        return result
