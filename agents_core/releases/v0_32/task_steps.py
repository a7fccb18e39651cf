"""The `step` one attempt of a Task run hands its handler: `do`, `sleep`, `sleep_until`,
`status`, `idempotency_key` and `interrupted` (spec sdk-0.32 §6.5, §8.3).

A run's steps are rows of `cf_agents_task_steps` (`task_journal.py`). A step journaled
`completed` gives its result again on replay; a `failed` one raises its error again; a journal
row of the other kind raises `TaskReplayDivergedError`. Step names are non-empty, at most 256
characters, never `__cf`-prefixed, and unique within one replay (`DuplicateTaskStepError`); at
each step boundary the run's cancellation request, if any, ends the attempt
(`TaskCancellation`); a run journals at most 10 000 steps.

- `do(name, [config,] fn)` calls `fn(StepContext)` under the step's policy: `retries.limit`
  (attempts in all, 5 by default), `retries.delay` (1 s by default) and `retries.backoff`
  (`constant`, `linear` or `exponential`, the default, never more than a day), and `timeout`
  (one attempt's bound, 5 minutes by default). Durations are ms or text (`"1 day"`). The
  callback's own signal (`StepContext.signal`) aborts when the attempt times out or the run is
  cancelled, and the callback is raced against it (`task_race.py`): the step ends then with
  the abort's reason, a timed-out attempt as a failed one (`Error: Step "<name>" attempt <n>
  timed out after <ms>ms`), a cancelled one ending the attempt (the run settles `cancelled`),
  while a callback that ignores its signal runs on, abandoned; what it answers is dropped
  (docs/divergences.md T18).
  A failed call below the limit parks the step `waiting` until its retry time and suspends the
  attempt; the run's next attempt claims the step again (`task:step:retry`). At the limit, or
  for a `NonRetryableError` or a result that cannot be serialized, the step is journaled
  `failed` and the error raised, except a platform failure, which is raised unjournaled so the
  job driver keeps the run's wake (a code-update or memory-limit reset is raised at once).
- `sleep(name, duration)` / `sleep_until(name, when)` journal a wake time the first time they
  are reached (the first write wins) and suspend the attempt until then; one already due is
  journaled `completed` at once.
- `status(message)` writes the run's `status_message`; an attempt after the first stays silent
  until it reaches new ground (a journal miss, or a step still waiting or running), so replayed
  progress is not published again.

A suspension (`TaskSuspension`) ends the attempt: the capability parks the run `waiting` with
the wake time as its deadline.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agents_core.errors import InvalidArgument
from agents_core.releases.v0_32.job_driver import is_platform_failure
from agents_core.releases.v0_32.task_errors import (
    AttemptSuperseded,
    DuplicateTaskStepError,
    TaskCancellation,
    TaskReplayDivergedError,
    TaskSerializationError,
    TaskStepFailed,
    TaskSuspension,
    is_non_retryable,
)
from agents_core.releases.v0_32.task_journal import StepJournal
from agents_core.releases.v0_32.task_race import AttemptCarrier, StepRace, abort_error
from agents_core.releases.v0_32.task_values import deserialize, parse_task_duration
from agents_core.schedule_dispatch import is_code_update_reset, is_memory_limit_reset
from agents_core.signals import AbortController, AbortSignal

__all__ = [
    "AttemptSuperseded",
    "StepContext",
    "StepJournal",
    "StepPolicy",
    "TaskDefinition",
    "TaskStep",
    "TaskStepFailed",
    "TaskSuspension",
]

DEFAULT_STEP_RETRY_LIMIT = 5
DEFAULT_STEP_RETRY_DELAY_MS = 1_000
DEFAULT_STEP_BACKOFF = "exponential"
DEFAULT_STEP_TIMEOUT_MS = 300_000
MAX_RETRY_DELAY_MS = 24 * 60 * 60 * 1_000
MAX_NAME_LENGTH = 256
MAX_STEPS_PER_RUN = 10_000
BACKOFFS = ("constant", "linear", "exponential")
TIMEOUT_POLL_MS = 5_000
"""A step's timeout timer sleeps in slices of this, stopping once the step has ended: a timer
nothing can withdraw would otherwise outlive a short step by up to its timeout (a day for a
chat turn), and the platform counts a pending timer as work still to do."""


@dataclass(frozen=True)
class StepContext:
    """What a `step.do` callback receives: its attempt (from 1), the step's stable
    `idempotency_key` (`<runId>:<name>`), and the signal that aborts on its timeout or on the
    run's cancellation."""

    attempt: int
    idempotency_key: str
    signal: AbortSignal


TaskDefinition = Callable[[Any, "TaskStep"], Awaitable[Any]]
StepCallback = Callable[[StepContext], Any]


@dataclass(frozen=True)
class StepPolicy:
    """One `step.do`'s retry and timeout policy, its config over the capability's defaults."""

    limit: int
    delay_ms: int
    backoff: str
    timeout_ms: int

    @classmethod
    def of(cls, config: Mapping[str, Any] | None) -> StepPolicy:
        config = config or {}
        retries = config.get("retries") or {}
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
        timeout = config.get("timeout")
        return cls(
            limit,
            DEFAULT_STEP_RETRY_DELAY_MS
            if delay is None
            else parse_task_duration(delay, "step retries.delay"),
            backoff,
            DEFAULT_STEP_TIMEOUT_MS
            if timeout is None
            else parse_task_duration(timeout, "step timeout"),
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


class TaskStep:
    """The `step` one attempt of a run hands its handler (the SDK's `ReplayStep`)."""

    __slots__ = (
        "_journal",
        "_definition",
        "_signal",
        "_emit",
        "_now",
        "_used",
        "_live",
        "_carrier",
        "interrupted",
    )

    def __init__(
        self,
        journal: StepJournal,
        definition: str,
        signal: AbortSignal,
        emit: Callable[..., None],
        now: Callable[[], int],
        *,
        starts_live: bool = True,
        interrupted: Mapping[str, Any] | None = None,
        carrier: AttemptCarrier | None = None,
    ) -> None:
        self._journal = journal
        self._definition = definition
        self._signal = signal
        self._emit = emit
        self._now = now
        self._used: set[str] = set()
        self._live = starts_live
        self._carrier = carrier
        self.interrupted = interrupted
        """`{name, attempt}` of the step a lost attempt left running, or None (a first
        attempt, or one after a clean suspension)."""

    def _enter(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidArgument("Step names must be non-empty strings")
        if len(name) > MAX_NAME_LENGTH:
            raise InvalidArgument(f'Step name exceeds 256 characters: "{name[:40]}…"')
        if name.startswith("__cf"):
            raise InvalidArgument('Step names must not use the reserved "__cf" prefix')
        if name in self._used:
            raise DuplicateTaskStepError(name)
        self._used.add(name)
        cancellation = self._journal.cancellation_requested()
        if cancellation is not None:
            raise TaskCancellation(cancellation[0])

    def idempotency_key(self, name: str) -> str:
        """The key `do(name, …)`'s callback gets: the same on every attempt and replay."""
        return f"{self._journal.run_id}:{name}"

    async def status(self, message: str) -> None:
        """The run's progress message (silent while replaying completed ground)."""
        if self._live:
            self._journal.write_status(str(message))

    async def do(
        self,
        name: str,
        config_or_fn: Mapping[str, Any] | StepCallback | None,
        fn: StepCallback | None = None,
    ) -> Any:
        """Run `fn` as the journaled step `name` under its policy (`do(name, fn)` or
        `do(name, config, fn)`); its result (JSON) on a replay."""
        config = None if callable(config_or_fn) else config_or_fn
        callback = config_or_fn if callable(config_or_fn) else fn
        if not callable(callback):
            raise InvalidArgument(f'step.do("{name}") requires a callback')
        policy = StepPolicy.of(config)
        self._enter(name)
        journal = self._journal
        row = journal.read(name)
        if row is None:
            self._live = True
            if journal.count() >= MAX_STEPS_PER_RUN:
                raise Exception(  # noqa: TRY002 - the SDK's plain Error, name "Error"
                    f"Run exceeded {MAX_STEPS_PER_RUN} steps; split the work across multiple "
                    "Task runs"
                )
            journal.insert_do(name)
            return await self._execute(name, 1, policy, callback)
        if row["kind"] != "do":
            raise TaskReplayDivergedError(
                name, f"journaled as a {row['kind']} step but replayed as a do step"
            )
        if row["state"] == "completed":
            return deserialize(row["result"])
        if row["state"] == "failed":
            raise TaskStepFailed(
                row["error_name"] or "Error", row["error_message"] or "Step failed"
            )
        self._live = True
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
            return await self._execute(name, attempt, policy, callback)
        return await self._execute(name, journal.claim_attempt(name), policy, callback)

    async def sleep(self, name: str, duration: int | float | str) -> None:
        """Wait `duration` (ms or text) from the first time this step is reached."""
        duration_ms = parse_task_duration(duration, "sleep duration")
        await self._sleep_at(name, lambda: self._now() + duration_ms)

    async def sleep_until(self, name: str, when: int | float | datetime) -> None:
        """Wait until `when` (epoch ms, or an aware datetime), recorded the first time."""
        wake_at = when.timestamp() * 1_000 if isinstance(when, datetime) else when
        if (
            not isinstance(wake_at, int | float)
            or isinstance(wake_at, bool)
            or wake_at != wake_at
            or wake_at in (float("inf"), float("-inf"))
        ):
            raise InvalidArgument(f'Invalid sleep_until time for step "{name}": {when!r}')
        await self._sleep_at(name, lambda: int(wake_at))

    async def _sleep_at(self, name: str, wake_time: Callable[[], int]) -> None:
        self._enter(name)
        journal = self._journal
        row = journal.read(name)
        if row is None:
            self._live = True
            wake_at = wake_time()
            if wake_at <= self._now():
                journal.insert_completed_sleep(name)
                return
            journal.insert_sleep(name, wake_at)
            raise TaskSuspension(wake_at, "sleep")
        if row["kind"] != "sleep":
            raise TaskReplayDivergedError(
                name, f"journaled as a {row['kind']} step but replayed as a sleep step"
            )
        if row["state"] == "completed":
            return
        self._live = True
        wake_at = row["next_at"] or 0
        if self._now() < wake_at:
            raise TaskSuspension(wake_at, "sleep")
        journal.complete(name, None)

    async def _execute(
        self, name: str, attempt: int, policy: StepPolicy, callback: StepCallback
    ) -> Any:
        journal = self._journal
        journal.refresh_claim()
        self._emit(
            "task:step:started",
            runId=journal.run_id,
            definition=self._definition,
            step=name,
            attempt=attempt,
        )
        try:
            result = await self._call(name, attempt, policy, callback)
            journal.complete(name, result)
            self._emit(
                "task:step:completed",
                runId=journal.run_id,
                definition=self._definition,
                step=name,
                attempt=attempt,
            )
            return result
        except AttemptSuperseded:
            raise
        except (Exception, TaskCancellation) as error:
            cancellation = journal.cancellation_requested()
            if cancellation is not None:
                raise TaskCancellation(cancellation[0]) from None
            if isinstance(error, TaskCancellation):
                raise
            if is_code_update_reset(error) or is_memory_limit_reset(error):
                raise
            if is_platform_failure(error) and attempt >= policy.limit:
                raise
            if (
                is_non_retryable(error)
                or isinstance(error, TaskSerializationError)
                or attempt >= policy.limit
            ):
                journal.fail(name, error)
                raise
            wake_at = self._now() + policy.retry_delay_ms(attempt)
            journal.wait(name, wake_at)
            raise TaskSuspension(wake_at, "retry") from error

    async def _call(
        self, name: str, attempt: int, policy: StepPolicy, callback: StepCallback
    ) -> Any:
        """The callback, under its own signal, which the attempt's timeout or the run's
        cancellation aborts: once aborted, whatever the callback ends with, the attempt ends
        with the abort's reason (the timeout's error, or the cancellation)."""
        host = self._journal.host
        controller = AbortController()
        settled = False
        self._signal.add_listener(lambda reason: None if settled else controller.abort(reason))

        async def expire() -> None:
            deadline = host.clock.now_ms() + policy.timeout_ms
            while not settled and host.clock.now_ms() < deadline:
                await host.clock.sleep(min(TIMEOUT_POLL_MS, deadline - host.clock.now_ms()))
            if not settled:
                controller.abort(
                    Exception(
                        f'Step "{name}" attempt {attempt} timed out after {policy.timeout_ms}ms'
                    )
                )

        host.tasks.wait_until(expire())
        signal = controller.signal
        try:
            outcome = callback(StepContext(attempt, self.idempotency_key(name), signal))
            if inspect.isawaitable(outcome):
                outcome = await StepRace(self._carrier, outcome, signal)
        except (Exception, TaskCancellation):
            if signal.aborted:
                raise abort_error(signal.reason) from None
            raise
        finally:
            settled = True
        if signal.aborted:
            raise abort_error(signal.reason)
        return outcome
