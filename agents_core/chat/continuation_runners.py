"""What a chat recovery continuation runs as: a schedule of `_chatRecoveryContinue` (0.21.0, and
a sub-agent on 0.32.0) or a Task run (0.32.0 at the top level; spec sdk-0.32 §8.3).

Chat recovery asks its host to `schedule(when, "_chatRecoveryContinue", payload, idempotent=…)`
once it has claimed an interrupted turn (at once, `idempotent=True`) and again when a
continuation found the host busy (3 s later, `idempotent=False`). The host hands chat recovery
a `RecoveryHooks`: every hook is the host's own, except that `schedule` goes to the runner the
chat release picks (`chat_releases.py`).

- `ScheduledContinuations` (0.21.0): the host's own `schedule`, as before.
- `TaskContinuations` (0.32.0): a sub-agent schedules as 0.21.0 does (see below). A top-level
  agent enqueues a run of the Task definition `__cf_internal_chat_recovery`, not retained,
  with input `{callback, data, delaySeconds}` (`data` the continuation's payload, `delaySeconds`
  the schedule's delay) and metadata `{callback, incidentId}`; the first continuation of an
  incident (`idempotent=True`) carries the idempotency key
  `chat-recovery:<callback>:<incidentId>`, so a second claim of the same incident joins the run
  still waiting, while a retry after a busy host is a run of its own. The run is left to its wake
  job, so the continuation always runs under an alarm. Its handler checks the input, sleeps
  `backoff` for the delay when there is one (the run waits `waiting` with its deadline at the
  wake time, and an eviction in between leaves the durable deadline to wake it), then runs the
  step `continuation` (three attempts, 100 ms apart and doubling, within 15 minutes), whose
  callback is the host's `_chat_recovery_continue`. That callback returns once the recovered
  turn is about to start (`recovery_handoff.py`): the step completes there, and the run with
  it, while the turn goes on (as a Task run of its own, `turn_runners.py`). A failure before
  the hand-off fails the step's attempt and is retried; an eviction before it leaves the run
  claimed, and the next isolate's startup wakes it again. A platform failure of the turn after
  the hand-off enqueues the continuation again: a run keyed by a random run id (the three tries
  of that enqueue, 50–500 ms apart, share it), with `delaySeconds: 3` and no idempotency key
  (`schedule(..., run_id=...)`; a sub-agent schedules it, 3 s later).

The incident id is the payload's `incidentId` (`recovery_incidents.incident_id`: the request
first interrupted and the latest user message), else its origin request id. The port's recovery
has one callback, which decides itself whether to continue or retry the turn; a run naming
`_chatRecoveryRetry` (the SDK enqueues one for a turn with nothing streamed) reaches the same
callback. Where the port differs (docs/divergences.md): a sub-agent keeps 0.21.0's schedules,
whereas the SDK enqueues its Task run in the sub-agent's own Tasks with its wake mirrored into
the root's alarm (runs routed from a sub-agent are not modelled).

The SDK's counterparts: agents/chat's `createChatRecoveryTaskDefinition`,
`chatRecoveryTaskRunOptions`, `dispatchChatRecoveryToHandoff`, and ai-chat's
`_registerChatRecoveryTaskDefinition` and `_enqueueChatRecovery`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from agents_core.errors import InvalidArgument

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.releases.v0_32.task_steps import StepContext, TaskStep
    from agents_core.releases.v0_32.tasks import Tasks

__all__ = [
    "CHAT_RECOVERY_DEFINITION",
    "CONTINUATION_CALLBACKS",
    "ContinuationRunnerHooks",
    "RecoveryHooks",
    "ScheduledContinuations",
    "TaskContinuations",
    "continuation_input",
]

CHAT_RECOVERY_DEFINITION = "__cf_internal_chat_recovery"
"""The SDK's `CHAT_RECOVERY_TASK_NAME`."""
CONTINUATION_CALLBACKS = ("_chatRecoveryContinue", "_chatRecoveryRetry")
BACKOFF_STEP = "backoff"
CONTINUATION_STEP = "continuation"
CONTINUATION_STEP_CONFIG: Mapping[str, Any] = {
    "retries": {"limit": 3, "delay": 100, "backoff": "exponential"},
    "timeout": "15 minutes",
}
INITIAL_KEY_PREFIX = "chat-recovery:"
TASKS_CAPABILITY = "tasks"


class ContinuationRunnerHooks(Protocol):
    """What a runner uses of its chat host: its `schedule` and the continuation callback."""

    async def schedule(
        self, when: Any, callback: str, payload: Any = None, *, idempotent: bool | None = None
    ) -> Any: ...
    async def _chat_recovery_continue(self, payload: Any, _row: Any = None) -> None: ...


class ScheduledContinuations:
    """0.21.0: a continuation is a schedule of the host's callback."""

    __slots__ = ("_ctx", "_hooks")

    def __init__(self, ctx: AgentContext, hooks: ContinuationRunnerHooks, lifecycle: Any) -> None:
        self._ctx = ctx
        self._hooks = hooks

    async def schedule(
        self,
        when: Any,
        callback: str,
        payload: Any = None,
        *,
        idempotent: bool | None = None,
        run_id: str | None = None,
    ) -> Any:
        """`run_id` names a Task run (a schedule has none to name)."""
        return await self._hooks.schedule(when, callback, payload, idempotent=idempotent)

    def track_alarm_work(self, work: Any) -> bool:
        """Hand a continuation's turn to the alarm's memory-limit breaker (0.21.0's breaker
        takes none: nothing is tracked)."""
        return False


def continuation_input(callback: Any, data: Any, delay_seconds: Any) -> dict[str, Any]:
    """A continuation run's input, checked as its handler checks it (the SDK's
    `parseChatRecoveryTaskInput`): `InvalidArgument` names what is wrong."""
    if callback not in CONTINUATION_CALLBACKS:
        raise InvalidArgument(
            f"Chat recovery Task input has an unknown callback: {callback!r} (expected "
            f"{' or '.join(CONTINUATION_CALLBACKS)})"
        )
    if not isinstance(data, Mapping):
        raise InvalidArgument(f"Chat recovery Task input data must be an object, got {data!r}")
    if (
        not isinstance(delay_seconds, int | float)
        or isinstance(delay_seconds, bool)
        or not math.isfinite(delay_seconds)
        or delay_seconds < 0
    ):
        raise InvalidArgument(
            "Chat recovery Task delaySeconds must be a finite non-negative number, got "
            f"{delay_seconds!r}"
        )
    return {"callback": callback, "data": dict(data), "delaySeconds": delay_seconds}


class _TasksPort(Protocol):
    def register(self, name: str, definition: Any) -> None: ...
    async def enqueue(
        self,
        definition: str,
        input: Any,
        *,
        run_id: str | None,
        idempotency_key: str | None,
        retain: bool,
        metadata: Any,
    ) -> dict[str, Any]: ...


class TaskContinuations(ScheduledContinuations):
    """0.32.0: a top-level agent's continuations as Task runs; a sub-agent's as schedules."""

    __slots__ = ("_tasks", "_track")

    def __init__(self, ctx: AgentContext, hooks: ContinuationRunnerHooks, lifecycle: Any) -> None:
        super().__init__(ctx, hooks, lifecycle)
        tasks = cast("Tasks | None", lifecycle.capability(TASKS_CAPABILITY))
        if tasks is None:
            raise RuntimeError("a 0.32.0 chat host needs the agent's Tasks capability")
        self._tasks: _TasksPort = tasks
        self._track = cast("Callable[[Any], bool]", lifecycle.track_alarm_work)
        # Registered by every host's constructor, on every wake, so that a run a dead isolate
        # left finds its definition again (the SDK registers it on a sub-agent too).
        tasks.register(CHAT_RECOVERY_DEFINITION, self._definition)

    async def schedule(
        self,
        when: Any,
        callback: str,
        payload: Any = None,
        *,
        idempotent: bool | None = None,
        run_id: str | None = None,
    ) -> Any:
        if self._ctx.is_facet:
            return await super().schedule(when, callback, payload, idempotent=idempotent)
        input = continuation_input(callback, payload, when)
        data = input["data"]
        incident = data.get("incidentId", data.get("originRequestId"))
        metadata: dict[str, Any] = {"callback": callback}
        if isinstance(incident, str):
            metadata["incidentId"] = incident
        key = None
        if idempotent and isinstance(incident, str):
            key = f"{INITIAL_KEY_PREFIX}{callback}:{incident}"
        return await self._tasks.enqueue(
            CHAT_RECOVERY_DEFINITION,
            input,
            run_id=run_id,
            idempotency_key=key,
            retain=False,
            metadata=metadata,
        )

    def track_alarm_work(self, work: Any) -> bool:
        """The Lifecycle's `track_alarm_work`: a continuation's turn, handed off, stays in the
        memory-limit breaker's domain of the alarm that ran the continuation."""
        return self._track(work)

    async def _definition(self, input: Any, step: TaskStep) -> None:
        checked = continuation_input(
            input.get("callback") if isinstance(input, Mapping) else None,
            input.get("data") if isinstance(input, Mapping) else None,
            input.get("delaySeconds") if isinstance(input, Mapping) else None,
        )
        delay_seconds = checked["delaySeconds"]
        if delay_seconds > 0:
            await step.sleep(BACKOFF_STEP, int(delay_seconds * 1_000))
        data = checked["data"]

        async def continuation(_context: StepContext) -> None:
            await self._hooks._chat_recovery_continue(data)

        await step.do(CONTINUATION_STEP, CONTINUATION_STEP_CONFIG, continuation)


class RecoveryHooks:
    """The chat host as chat recovery reaches it: every hook is the host's (a subclass's
    override included), except `schedule` and `track_alarm_work`, which go to the release's
    continuation runner."""

    __slots__ = ("_host", "_continuations")

    def __init__(self, host: Any, continuations: ScheduledContinuations) -> None:
        self._host = host
        self._continuations = continuations

    def __getattr__(self, name: str) -> Any:
        return getattr(self._host, name)

    async def schedule(
        self,
        when: Any,
        callback: str,
        payload: Any = None,
        *,
        idempotent: bool | None = None,
        run_id: str | None = None,
    ) -> Any:
        return await self._continuations.schedule(
            when, callback, payload, idempotent=idempotent, run_id=run_id
        )

    def track_alarm_work(self, work: Any) -> bool:
        return self._continuations.track_alarm_work(work)
