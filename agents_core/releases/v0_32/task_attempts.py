"""One attempt of a Task run (spec sdk-0.32 §6.5): claiming the run, replaying its handler
over its step journal, and how the attempt ends.

An attempt takes a due live run (a run whose cancellation was asked for settles `cancelled`
instead; one whose definition is no longer declared fails with `MissingTaskDefinitionError`,
told to the agent's `on_error`). It claims the run: `running`, a new generation, the attempt
number up by one, deadline `now + 330 000` (the default step timeout and the claim slack: the
durable wake should the isolate die). A run still claimed when an attempt takes it was
interrupted (`task:attempt:interrupted`); its step left `running` is the new attempt's
`step.interrupted`. The handler replays with a `TaskStep` (`task_steps.py`), silent until new
ground on an attempt after the first; a result it returns completes the run (fenced by the
generation), a suspension parks it, a cancellation or an error settles it (`task_settle.py`),
except a platform failure, which is raised so the wake keeps the alarm. One attempt per run runs
in an isolate at a time (`active`); `abort` aborts its signal. The attempt's body is carried
(`task_race.py`), so that a step cut loose from a callback that ignores its signal settles
the attempt at once in another task; `execute`'s `finished` tells a wake when.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agents_core.releases.v0_32.job_driver import is_platform_failure
from agents_core.releases.v0_32.task_errors import (
    AttemptSuperseded,
    MissingTaskDefinitionError,
    TaskCancellation,
    TaskSuspension,
)
from agents_core.releases.v0_32.task_journal import StepJournal
from agents_core.releases.v0_32.task_race import AttemptCarrier
from agents_core.releases.v0_32.task_steps import DEFAULT_STEP_TIMEOUT_MS, TaskDefinition, TaskStep
from agents_core.releases.v0_32.task_store import LIVE_STATES
from agents_core.releases.v0_32.task_values import deserialize, error_summary, serialize
from agents_core.signals import AbortController

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.host import Deferred
    from agents_core.releases.v0_32.task_settle import Settlement
    from agents_core.releases.v0_32.task_store import TaskStore
    from agents_core.releases.v0_32.task_wakes import RunWakes

__all__ = ["CLAIM_SLACK_MS", "CLAIM_TIMEOUT_MS", "Attempts"]

CLAIM_SLACK_MS = 30_000
CLAIM_TIMEOUT_MS = DEFAULT_STEP_TIMEOUT_MS + CLAIM_SLACK_MS
"""A claimed attempt's deadline: the durable wake when its isolate disappears."""


class _Active:
    __slots__ = ("generation", "controller", "settled")

    def __init__(self, generation: str, controller: AbortController, settled: Any) -> None:
        self.generation = generation
        self.controller = controller
        self.settled = settled
        """Settles as the attempt ends: rejected with what it raised (a platform failure),
        else resolved."""


class Attempts:
    """The attempts of one agent's Task runs."""

    __slots__ = (
        "_ctx",
        "_store",
        "_wakes",
        "_settlement",
        "_emit",
        "_resolve",
        "_on_error",
        "_active",
    )

    def __init__(
        self,
        ctx: AgentContext,
        store: TaskStore,
        wakes: RunWakes,
        settlement: Settlement,
        emit: Callable[..., None],
        resolve: Callable[[str], TaskDefinition | None],
        on_error: Callable[[BaseException], Any],
    ) -> None:
        self._ctx = ctx
        self._store = store
        self._wakes = wakes
        self._settlement = settlement
        self._emit = emit
        self._resolve = resolve
        self._on_error = on_error
        self._active: dict[str, _Active] = {}
        """The attempts running in this isolate, by run id."""

    def active(self, run_id: str) -> bool:
        return run_id in self._active

    def settled(self, run_id: str) -> Any | None:
        """The deferred the run's attempt running here settles as it ends (None: no attempt
        runs here); what a wake hands off to the memory-limit breaker."""
        active = self._active.get(run_id)
        return None if active is None else active.settled

    def abort(self, run_id: str, reason: BaseException) -> bool:
        """Abort the signal of the run's attempt running here; whether there was one."""
        active = self._active.get(run_id)
        if active is None:
            return False
        active.controller.abort(reason)
        return True

    async def execute(self, run_id: str, finished: Deferred[Any] | None = None) -> None:
        """Drive the run's due attempt to its next durable boundary. `finished` settles as the
        attempt ends (with its error, a platform failure): at once when a step is cut loose
        from a callback that outlives its signal, which this call's task may still be waiting
        on (`task_race.py`)."""
        try:
            await self._execute(run_id, finished)
        except Exception as error:
            if finished is not None:
                finished.reject(error)
            raise
        if finished is not None:
            finished.resolve(None)

    async def _execute(self, run_id: str, finished: Deferred[Any] | None) -> None:
        if run_id in self._active:
            return
        store = self._store
        row = store.run(run_id)
        if row is None or row["state"] not in LIVE_STATES:
            return
        if row["cancel_requested"] == 1:
            await self._settlement.cancelled(run_id, None, row["cancel_reason"])
            return
        now = self._now()
        if row["next_at"] is not None and row["next_at"] > now:
            return
        definition = row["definition"]
        handler = self._resolve(definition)
        if handler is None:
            missing = MissingTaskDefinitionError(definition)
            self._ctx.log("error", str(missing))
            await self._settlement.failed(run_id, None, error_summary(missing))
            await self.observe_error(missing)
            return
        interrupted = None
        if row["state"] == "running":
            interrupted = self._wakes.interrupted_step(run_id)
            self._emit(
                "task:attempt:interrupted",
                runId=run_id,
                definition=definition,
                attempt=row["attempt"],
                step=None if interrupted is None else interrupted["name"],
            )
        generation = self._ctx.host.entropy.nanoid()
        attempt = row["attempt"] + 1
        self._ctx.sql(
            "UPDATE cf_agents_task_runs SET state = 'running', attempt = ?, generation = ?, "
            "started_at = coalesce(started_at, ?), next_at = ?, wait_reason = NULL, "
            "updated_at = ? WHERE run_id = ? AND state IN ('pending', 'waiting', 'running')",
            attempt,
            generation,
            now,
            now + CLAIM_TIMEOUT_MS,
            now,
            run_id,
        )
        await self._wakes.sync(run_id)
        controller = AbortController()
        self._emit("task:attempt:started", runId=run_id, definition=definition, attempt=attempt)
        active = _Active(generation, controller, self._ctx.host.tasks.deferred())
        self._active[run_id] = active
        journal = StepJournal(
            self._ctx, run_id, generation, claimed_at_ms=now, claim_timeout_ms=CLAIM_TIMEOUT_MS
        )
        carrier = AttemptCarrier(self._ctx.host.tasks, finished)
        step = TaskStep(
            journal,
            definition,
            controller.signal,
            self._emit,
            self._now,
            starts_live=attempt == 1,
            interrupted=interrupted,
            carrier=carrier,
        )
        # Carried rather than awaited: a step may cut the body loose from its callback and
        # settle it in another task while this one waits on the callback (T18).
        await carrier.carry(self._attempt_body(row, handler, generation, step, active))

    async def _attempt_body(
        self,
        row: Mapping[str, Any],
        handler: TaskDefinition,
        generation: str,
        step: TaskStep,
        active: _Active,
    ) -> None:
        run_id = row["run_id"]
        try:
            await self._run_attempt(row, handler, generation, step)
        except Exception as error:
            active.settled.reject(error)
            raise
        finally:
            if self._active.get(run_id) is active:
                del self._active[run_id]
            active.settled.resolve(None)

    async def _run_attempt(
        self, row: Mapping[str, Any], handler: TaskDefinition, generation: str, step: TaskStep
    ) -> None:
        run_id = row["run_id"]
        definition = row["definition"]
        try:
            result = await handler(deserialize(row["input"]), step)
            result_text = serialize(result, f'result of Task definition "{definition}"')
        except AttemptSuperseded:
            return
        except TaskCancellation as cancellation:
            await self._settlement.cancelled(run_id, generation, cancellation.reason)
            return
        except TaskSuspension as suspension:
            await self._settlement.park(run_id, definition, generation, suspension)
            return
        except Exception as error:
            if is_platform_failure(error):
                raise
            summary = error_summary(error)
            if await self._settlement.failed(run_id, generation, summary):
                self._ctx.log(
                    "error",
                    f'Task run "{run_id}" (definition "{definition}") failed: '
                    f"{summary[0]}: {summary[1]}",
                )
            await self.observe_error(error)
            return
        now = self._now()
        written = self._store.fenced(
            "UPDATE cf_agents_task_runs SET state = 'completed', result = ?, generation = NULL, "
            "next_at = NULL, settled_at = ?, updated_at = ? "
            "WHERE run_id = ? AND generation = ? AND state = 'running'",
            run_id,
            generation,
            result_text,
            now,
            now,
        )
        if written:
            self._emit("task:completed", runId=run_id, definition=definition)
            await self._settlement.finish(run_id, row)

    async def observe_error(self, error: BaseException) -> None:
        try:
            outcome = self._on_error(error)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:  # noqa: BLE001, S110 - the SDK swallows the hook's own error
            pass

    def _now(self) -> int:
        return self._ctx.host.clock.now_ms()
