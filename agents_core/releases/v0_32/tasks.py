"""0.32.0's Tasks capability: durable, replayed runs of named definitions (spec sdk-0.32 §6.5,
§8.3), as an agent's `self.tasks`.

Every 0.32.0 agent installs Tasks on its Lifecycle (capability `tasks`). A run is a row of
`cf_agents_task_runs` (state `pending`, `running`, `waiting`, `completed`, `failed`,
`cancelled`, claimed by a `generation`, with a deadline `next_at`), its step journal the rows
of `cf_agents_task_steps` (`task_store.py`, `task_journal.py`, `task_steps.py`); an attempt is
`task_attempts.py`'s, how it ends in the row `task_settle.py`'s. A run's
deadline is mirrored into the job queue as one job `task:<runId>` (fn `wake`, one attempt),
re-pushed or cancelled whenever the deadline or the state changes (`task_wakes.py`).

- Definitions: an agent declares its own in `task_definitions` (a mapping, read again on every
  dispatch, so a property is the way to bind methods); a framework registers reserved
  (`__cf`-prefixed) ones with `register`.
- `run(definition, input, idempotency_key=, run_id=, metadata=, retain=)` accepts a run of a
  declared, unreserved definition: the row `pending` with its deadline now and its wake job
  pushed, under the caller's run id (by default `task_<nanoid>`); a run id or idempotency key
  already held joins that run instead (`accepted` false). Its first attempt starts at once in
  the background (not while startup runs). There is no delay option: a handler sleeps.
  `run_attached` (the SDK's `__DO_NOT_USE_WILL_BREAK__runAttached`) drives the first attempt
  in the caller; `enqueue` (`__DO_NOT_USE_WILL_BREAK__enqueue`) leaves it to the wake job; both
  take reserved names too. `handle(definition)` is a view of one definition's runs.
- An attempt claims the run (`running`, a new generation, the attempt number up by one,
  deadline `now + 330 000`: the default step timeout and the claim slack) and replays the
  handler with a `TaskStep`; a sleep or a step's retry parks the run `waiting` until then
  (`task:waiting`), and the wake job drives the next attempt at that time. A run whose claim
  was lost (its isolate died mid-attempt) is reclaimed at startup; its step still `running` is
  the next attempt's `step.interrupted`.
- A run that completes, fails or is cancelled settles (fenced by its generation), and with
  `retain` false is deleted with its steps at once; its wake job is cancelled.
- `cancel(run_id, reason)`: a run parked or not running here settles `cancelled` at once; a
  running attempt is asked to stop (`cancel_requested` 1, its step's signal aborted) and
  settles `cancelled` at its next step boundary (or as its running step is aborted); false for
  an unknown or settled run.
- `get`, `get_by_idempotency_key`, `list(definition=, status=, limit=100)` (newest first) read
  runs as snapshots; `delete(status=, settled_before=, limit=100)` removes settled runs with
  their journals (oldest settlement first) and answers how many.
- The memory-limit breaker (spec sdk-0.32 §2.5): a wake whose attempt outlives the dispatch
  budget, or that finds the attempt still running here, hands the attempt to the breaker
  (`track_alarm_work`). A strike charged to a run's wake (`on_memory_limit`) strips the run's
  claim and pushes its deadline to the backoff; a sealing one fails the run with
  `TaskMemoryLimitSealed`.
- Events, through the Lifecycle: `task:accepted`, `task:attempt:started`,
  `task:attempt:interrupted`, `task:step:started`, `task:step:retry`, `task:step:completed`,
  `task:waiting`, `task:completed`, `task:failed`, `task:cancelled`, `task:deleted`.

Decisions where the port differs in form: the SDK installs Tasks after MCP and State (A:1957);
the port runs those two inside 0.21.0's startup steps, so Tasks' `on_start` runs with the
Scheduler's and the Queue's, before them. `delete` refuses a live state in `status` (the SDK's
types forbid one; its code would delete the run: docs/divergences.md T19), and `list` an
unknown state. `settled_before` is epoch ms or an aware datetime (the SDK's `Date`). A step
whose callback ignores its signal is cut loose from it at its timeout or a cancel, as in the
SDK, but the caller of an attached run goes on only as the abandoned callback's await
completes, and a step the handler runs in a task of its own ends then too (`task_race.py`,
T18). Not modelled: runs accepted on a sub-agent (their wake routed to the root, and the
breaker's policy routed back to them), capability-wide step defaults (an Agent's Tasks takes
none).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agents_core.errors import InvalidArgument
from agents_core.releases.v0_32.schema_keys import TASKS_SCHEMA
from agents_core.releases.v0_32.task_attempts import CLAIM_TIMEOUT_MS, Attempts
from agents_core.releases.v0_32.task_errors import (
    TaskCancellation,
    TaskMemoryLimitSealed,
)
from agents_core.releases.v0_32.task_handle import TaskHandle
from agents_core.releases.v0_32.task_settle import Settlement
from agents_core.releases.v0_32.task_steps import (
    StepContext,
    TaskDefinition,
    TaskStep,
)
from agents_core.releases.v0_32.task_store import (
    DEFAULT_LIST_LIMIT,
    RUN_STATES,
    TASK_RUNS_DDL,
    TASK_STEPS_DDL,
    TERMINAL_STATES,
    TaskStore,
    snapshot,
)
from agents_core.releases.v0_32.task_values import error_summary, serialize
from agents_core.releases.v0_32.task_wakes import WAKE_JOB_PREFIX, RunWakes

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.releases.v0_32.breaker import MemoryLimitContext
    from agents_core.releases.v0_32.job_queue import Job
    from agents_core.releases.v0_32.lifecycle import Lifecycle

__all__ = [
    "TASKS_CAPABILITY",
    "TASK_RUNS_DDL",
    "TASK_STEPS_DDL",
    "StepContext",
    "TaskDefinition",
    "TaskHandle",
    "TaskStep",
    "Tasks",
    "declared_on",
]

TASKS_CAPABILITY = "tasks"
DISPATCH_BUDGET_MS = 5_000
MAX_DEFINITION_NAME_LENGTH = 256

DefinitionResolver = Callable[[str], "TaskDefinition | None"]


def declared_on(agent: object) -> DefinitionResolver:
    """The resolver of an agent's own definitions: its `task_definitions` mapping, read again
    on every lookup (the SDK's `this.taskDefinitions?.[name]`)."""

    def resolve(name: str) -> TaskDefinition | None:
        declared = getattr(agent, "task_definitions", None)
        found = declared.get(name) if isinstance(declared, Mapping) else None
        return found if callable(found) else None

    return resolve


class Tasks:
    """One agent's Tasks capability (one per incarnation; its tables are the agent's)."""

    __slots__ = (
        "_ctx",
        "_lc",
        "_emit",
        "_on_error",
        "_resolver",
        "_registered",
        "_store",
        "_wakes",
        "_settlement",
        "_attempts",
    )

    def __init__(
        self,
        ctx: AgentContext,
        lifecycle: Lifecycle,
        on_error: Callable[[BaseException], Any],
        resolve_definition: DefinitionResolver | None = None,
    ) -> None:
        self._ctx = ctx
        self._lc = lifecycle
        self._emit = lifecycle.emit_event
        self._on_error = on_error
        """The agent's `on_error` (the SDK's `new Tasks({onError})`)."""
        self._resolver = resolve_definition
        """The agent's `task_definitions`, looked up on every dispatch."""
        self._registered: dict[str, TaskDefinition] = {}
        self._store = TaskStore(ctx)
        self._wakes = RunWakes(ctx, lifecycle.jobs_for(TASKS_CAPABILITY), lifecycle.rearm)
        self._settlement = Settlement(ctx, self._store, self._wakes, self._emit)
        self._attempts = Attempts(
            ctx, self._store, self._wakes, self._settlement, self._emit, self._resolve, on_error
        )

    # -- the capability ---------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return TASKS_CAPABILITY

    @property
    def on_job_error(self) -> None:
        return None

    async def on_start(self) -> None:
        """The tables under the schema key, then interrupted attempts wake now and every live
        run's wake job is pushed again."""
        kv = self._ctx.host.kv
        if not await TASKS_SCHEMA.is_current(kv):
            self._store.ensure_tables()
            await TASKS_SCHEMA.put_current(kv)
        await self._wakes.reconcile(self._now())

    async def on_job(self, job: Job, _attempt: int) -> Any:
        """A run's wake: drive it (within the dispatch budget) and answer its next deadline."""
        payload = job.payload
        run_id = (
            payload["runId"] if isinstance(payload, Mapping) else job.id[len(WAKE_JOB_PREFIX) :]
        )
        wakes = self._wakes
        attempts = self._attempts
        if attempts.active(run_id):
            wakes.refresh_claim(run_id, self._now() + CLAIM_TIMEOUT_MS)
            self._lc.track_alarm_work(attempts.settled(run_id))
            return wakes.outcome(run_id)
        host = self._ctx.host
        # `finished`, not the task: a step cut loose from its callback ends the attempt while
        # the task still waits on the abandoned callback (T18).
        finished = host.tasks.deferred()
        host.tasks.wait_until(attempts.execute(run_id, finished))
        # An attempt that fails first fails the wake (a platform failure leaves the alarm); one
        # still running after the budget goes on in the background, in the breaker's domain.
        await host.tasks.race(finished, host.clock.sleep(DISPATCH_BUDGET_MS))
        if not finished.done():
            self._lc.track_alarm_work(attempts.settled(run_id) or finished)
        return wakes.outcome(run_id)

    async def on_memory_limit(self, context: MemoryLimitContext) -> None:
        """The breaker's policy for the run whose wake struck (`_apply_memory_limit`); a strike
        charged to another owner's job, or to none, is not Tasks'. A wake routed from a
        sub-agent (its payload names an `owner_path`) would be the sub-agent's to apply; such
        runs are not modelled."""
        job = context.executing
        if job is None or job.capability != TASKS_CAPABILITY:
            return
        payload = job.payload
        if isinstance(payload, Mapping) and payload.get("owner_path"):
            return
        run_id = (
            payload["runId"]
            if isinstance(payload, Mapping) and isinstance(payload.get("runId"), str)
            else job.id[len(WAKE_JOB_PREFIX) :]
        )
        await self._apply_memory_limit(run_id, context)

    async def _apply_memory_limit(self, run_id: str, context: MemoryLimitContext) -> None:
        """A sealing strike fails the run (`TaskMemoryLimitSealed`, `task:failed`). Below the
        limit its claim is stripped and its deadline pushed to the backoff (never pulled in):
        the row keeps its state, so a struck `running` run is an interrupted attempt when it
        runs again, and the next incarnation's startup leaves a run without a claim alone
        instead of waking it at once (which would undo the backoff)."""
        if context.sealed:
            await self._settlement.failed(run_id, None, error_summary(TaskMemoryLimitSealed()))
            return
        if context.next_time is None:
            return
        backoff = context.next_time
        self._store.write(
            "UPDATE cf_agents_task_runs SET generation = NULL, next_at = CASE "
            "WHEN next_at IS NULL OR next_at < ? THEN ? ELSE next_at END, updated_at = ? "
            "WHERE run_id = ? AND state IN ('pending', 'waiting', 'running')",
            backoff,
            backoff,
            self._now(),
            run_id,
        )
        await self._wakes.sync(run_id)

    # -- definitions ----------------------------------------------------------------------------
    def register(self, name: str, definition: TaskDefinition) -> None:
        """A framework's reserved (`__cf`) definition, registered once per construction."""
        if not isinstance(name, str) or not name:
            raise InvalidArgument("Task definition names must be non-empty strings")
        if len(name) > MAX_DEFINITION_NAME_LENGTH:
            raise InvalidArgument("Task definition name exceeds 256 characters")
        if not name.startswith("__cf"):
            raise InvalidArgument(
                f'register() requires a "__cf"-prefixed reserved definition name, got "{name}"'
            )
        if name in self._registered:
            raise InvalidArgument(
                f'Task definition "{name}" is already registered on this Tasks capability'
            )
        self._registered[name] = definition

    def _resolve(self, name: str) -> TaskDefinition | None:
        found = self._registered.get(name)
        if found is None and self._resolver is not None:
            found = self._resolver(name)
        return found

    def _validate_public_name(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidArgument("Task definition names must be non-empty strings")
        if len(name) > MAX_DEFINITION_NAME_LENGTH:
            raise InvalidArgument("Task definition name exceeds 256 characters")
        if name.startswith("__cf"):
            raise InvalidArgument('Task definition names must not use the reserved "__cf" prefix')
        if self._resolve(name) is None:
            raise InvalidArgument(
                f'Unknown Task definition "{name}": not declared on this Tasks (declare it in '
                "the agent's task_definitions)"
            )

    # -- starting runs --------------------------------------------------------------------------
    async def run(
        self,
        definition: str,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        retain: bool = True,
    ) -> dict[str, Any]:
        """Accept a run of a declared definition and answer its receipt without waiting for
        it; its first attempt starts in the background."""
        self._validate_public_name(definition)
        return await self._accept(
            definition, input, run_id, idempotency_key, retain, metadata, start="warm"
        )

    def handle(self, definition: str) -> TaskHandle:
        """A view of one declared definition: its `run`, `get`, `get_by_idempotency_key` and
        `cancel` see only that definition's runs."""
        self._validate_public_name(definition)
        return TaskHandle(self, definition)

    async def run_attached(
        self,
        definition: str,
        input: Any,
        *,
        run_id: str | None = None,
        idempotency_key: str | None = None,
        retain: bool = True,
        metadata: Any = None,
    ) -> dict[str, Any]:
        """Accept a run of any registered definition and drive its first attempt here, to its
        next durable boundary (the SDK's `__DO_NOT_USE_WILL_BREAK__runAttached`); its receipt."""
        receipt = await self._accept_reserved(
            definition, input, run_id, idempotency_key, retain, metadata
        )
        if receipt["accepted"]:
            await self._attempts.execute(receipt["runId"])
        return receipt

    async def enqueue(
        self,
        definition: str,
        input: Any,
        *,
        run_id: str | None = None,
        idempotency_key: str | None = None,
        retain: bool = True,
        metadata: Any = None,
    ) -> dict[str, Any]:
        """Accept a run of any registered definition and leave its first attempt to its wake
        job, so that it runs under an alarm (the SDK's `__DO_NOT_USE_WILL_BREAK__enqueue`); its
        receipt."""
        return await self._accept_reserved(
            definition, input, run_id, idempotency_key, retain, metadata
        )

    async def _accept_reserved(
        self,
        definition: str,
        input: Any,
        run_id: str | None,
        idempotency_key: str | None,
        retain: bool,
        metadata: Any,
    ) -> dict[str, Any]:
        if self._resolve(definition) is None:
            raise InvalidArgument(
                f'Unknown Task definition "{definition}": not declared on this Tasks'
            )
        return await self._accept(
            definition, input, run_id, idempotency_key, retain, metadata, start="queued"
        )

    async def _accept(
        self,
        definition: str,
        input: Any,
        run_id: str | None,
        idempotency_key: str | None,
        retain: bool,
        metadata: Any,
        *,
        start: str,
    ) -> dict[str, Any]:
        await self._lc.start()  # `lifecycle.ready()`
        if run_id == "":
            raise InvalidArgument("runId must be a non-empty string when provided")
        if idempotency_key == "":
            raise InvalidArgument("idempotencyKey must be a non-empty string when provided")
        input_text = serialize(input, f'input for Task definition "{definition}"')
        metadata_text = serialize(metadata, f'metadata for Task definition "{definition}"')
        store = self._store
        existing = None if run_id is None else store.run(run_id)
        if existing is None and idempotency_key is not None:
            existing = store.run_by_key(idempotency_key)
        if existing is not None:
            held = existing["run_id"]
            if existing["definition"] != definition:
                what = "run ID" if run_id is not None else "idempotency key"
                raise InvalidArgument(
                    f'Task run "{held}" already belongs to definition '
                    f'"{existing["definition"]}"; refusing to reuse its {what} for "{definition}"'
                )
            key = existing["idempotency_key"]
            if idempotency_key is not None and key != idempotency_key:
                carried = "none" if key is None else f'"{key}"'
                raise InvalidArgument(
                    f'Task run "{held}" carries idempotency key {carried}; refusing to join '
                    f'it with conflicting key "{idempotency_key}"'
                )
            await self._wakes.sync(held)
            return {
                "runId": held,
                "definition": definition,
                "accepted": False,
                "state": existing["state"],
                "createdAt": existing["created_at"],
            }
        if run_id is None:
            run_id = f"task_{self._ctx.host.entropy.nanoid()}"
        now = self._now()
        self._ctx.sql(
            "INSERT INTO cf_agents_task_runs (run_id, definition, input, state, metadata, "
            "idempotency_key, retain, attempt, next_at, cancel_requested, created_at, updated_at) "
            "VALUES (?, ?, ?, 'pending', ?, ?, ?, 0, ?, 0, ?, ?)",
            run_id,
            definition,
            input_text,
            metadata_text,
            idempotency_key,
            0 if retain is False else 1,
            now,
            now,
            now,
        )
        await self._wakes.sync(run_id)
        self._emit("task:accepted", runId=run_id, definition=definition, accepted=True)
        if start == "warm" and self._lc.status != "starting":
            self._ctx.host.tasks.wait_until(self._warm_start(run_id))
        return {
            "runId": run_id,
            "definition": definition,
            "accepted": True,
            "state": "pending",
            "createdAt": now,
        }

    async def _warm_start(self, run_id: str) -> None:
        # A failure here is the wake job's to recover (the SDK drops this promise's error).
        with contextlib.suppress(Exception):
            await self._attempts.execute(run_id)

    def created_at(self, run_id: str) -> int | None:
        row = self._store.run(run_id)
        return None if row is None else int(row["created_at"])

    # -- reading, cancelling and deleting runs --------------------------------------------------
    async def get(self, run_id: str, *, definition: str | None = None) -> dict[str, Any] | None:
        """One run's snapshot (`task_store.snapshot`), or None."""
        await self._lc.start()
        row = self._store.run(run_id)
        if row is None or (definition is not None and row["definition"] != definition):
            return None
        return snapshot(row)

    async def get_by_idempotency_key(
        self, idempotency_key: str, *, definition: str | None = None
    ) -> dict[str, Any] | None:
        """The snapshot of the run that idempotency key accepted, or None."""
        await self._lc.start()
        row = self._store.run_by_key(idempotency_key)
        if row is None or (definition is not None and row["definition"] != definition):
            return None
        return snapshot(row)

    async def list(
        self,
        *,
        definition: str | None = None,
        status: str | Sequence[str] | None = None,
        limit: int = DEFAULT_LIST_LIMIT,
    ) -> list[dict[str, Any]]:
        """Runs' snapshots, newest first: of one definition, in some states, at most `limit`."""
        states = [status] if isinstance(status, str) else list(status or ())
        unknown = [s for s in states if s not in RUN_STATES]
        if unknown:
            raise InvalidArgument(
                f"list(status=...): unknown run state {unknown[0]!r}; valid: "
                f"{', '.join(RUN_STATES)}"
            )
        await self._lc.start()
        return [snapshot(row) for row in self._store.list_rows(definition, states, limit)]

    async def cancel(
        self, run_id: str, reason: str | None = None, *, definition: str | None = None
    ) -> bool:
        """Ask a live run to stop: one not running here settles `cancelled` now, a running
        attempt at its next step boundary. False for an unknown or settled run."""
        await self._lc.start()
        row = self._store.run(run_id)
        if row is None or row["state"] in TERMINAL_STATES:
            return False
        if definition is not None and row["definition"] != definition:
            return False
        if not self._attempts.active(run_id):
            await self._settlement.cancelled(run_id, None, reason)
            return True
        now = self._now()
        self._ctx.sql(
            "UPDATE cf_agents_task_runs SET cancel_requested = 1, cancel_reason = ?, "
            "next_at = ?, updated_at = ? WHERE run_id = ?",
            reason,
            now,
            now,
            run_id,
        )
        self._attempts.abort(run_id, TaskCancellation(reason))
        await self._wakes.sync(run_id)
        return True

    async def delete(
        self,
        *,
        status: Sequence[str] | None = None,
        settled_before: int | datetime | None = None,
        limit: int = DEFAULT_LIST_LIMIT,
    ) -> int:
        """Delete settled runs (`completed`, `failed`, `cancelled`, or those of `status`) with
        their steps, oldest settlement first, at most `limit`; how many."""
        states = list(TERMINAL_STATES if status is None else status)
        live = [s for s in states if s not in TERMINAL_STATES]
        if live:
            raise InvalidArgument(
                f"delete(status=...) takes settled states only ({', '.join(TERMINAL_STATES)}), "
                f"got {live[0]!r}; cancel a live run first"
            )
        await self._lc.start()
        if not states:
            return 0
        before = (
            int(settled_before.timestamp() * 1_000)
            if isinstance(settled_before, datetime)
            else settled_before
        )
        store = self._store
        rows = store.settled_rows(states, before, limit)
        for row in rows:
            store.delete_run(row["run_id"])
            self._emit("task:deleted", runId=row["run_id"], definition=row["definition"])
        return len(rows)

    def _now(self) -> int:
        return self._ctx.host.clock.now_ms()
