"""0.32.0's Tasks capability, as far as a chat host's turns and recovery continuations need it
(spec sdk-0.32 §6.5, §8.3).

Every 0.32.0 agent installs Tasks on its Lifecycle (capability `tasks`). A run is a row of
`cf_agents_task_runs` (state `pending`, `running`, `waiting`, `completed`, `failed`,
`cancelled`, claimed by a `generation`, with a deadline `next_at`), its step journal the rows
of `cf_agents_task_steps` (`task_steps.py`); both tables are made at startup while
`cf_agents:tasks_schema_version` is below 1. A run's deadline is mirrored into the job queue as
one job `task:<runId>` (fn `wake`, one attempt), re-pushed or cancelled whenever the deadline or
the state changes.

What is modelled (the rest of the capability is not: `run`, `handle`, `list`, `cancel`,
`delete`, step timeouts, runs routed from a sub-agent, the memory-limit breaker's policy for a
run):

- accepting a run of a registered (`__cf`) definition: the row `pending` with its deadline now
  and its wake job pushed, under the caller's run id (by default `task_<nanoid>`); a run id or
  an idempotency key already held joins that run instead (`accepted` false);
  `run_attached` then drives the first attempt in the caller, to its next durable boundary
  (the SDK's `__DO_NOT_USE_WILL_BREAK__runAttached`); `enqueue` leaves it to the wake job, so
  the attempt runs under an alarm (`__DO_NOT_USE_WILL_BREAK__enqueue`);
- an attempt claims the run (`running`, a new generation, the attempt number up by one,
  deadline `now + 330 000`: the default step timeout and the claim slack) and runs the handler
  with a `TaskStep` (`do` and `sleep`, `task_steps.py`); an attempt a sleep or a step's retry
  suspends parks the run `waiting` until then (`task:waiting`), and the wake job drives the
  next attempt at that time;
- a run that completes or fails settles (fenced by its generation) and, with `retain` false, is
  deleted with its steps; its wake job is cancelled;
- startup: the tables under the schema key, then every `running` run still claimed wakes now
  (`_reconcile`) and every live run's wake job is re-pushed; the wake job's dispatch (`on_job`)
  drives the run again (an attempt still live in this isolate only has its claim moved on), within
  a 5 s budget, after which the attempt goes on in the background;
- the capability's events (`task:accepted`, `task:attempt:started`,
  `task:attempt:interrupted`, `task:step:started`, `task:step:retry`, `task:step:completed`,
  `task:waiting`, `task:completed`, `task:failed`), published through the Lifecycle.

Decisions where the port differs in form: the SDK installs Tasks after MCP and State (A:1957);
the port runs those two inside 0.21.0's startup steps, so Tasks' `on_start` runs with the
Scheduler's and the Queue's, before them (only the order of their startup statements differs).
A step's timeout is not raced (no step here runs near its bound).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents_core.errors import InvalidArgument
from agents_core.releases.v0_32.job_driver import is_platform_failure
from agents_core.releases.v0_32.schema_keys import TASKS_SCHEMA
from agents_core.releases.v0_32.task_steps import (
    AttemptSuperseded,
    StepContext,
    StepJournal,
    TaskDefinition,
    TaskStep,
    TaskSuspension,
    deserialize,
    error_summary,
    serialize,
)
from agents_core.signals import AbortController, AbortSignal

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.releases.v0_32.job_queue import Job
    from agents_core.releases.v0_32.lifecycle import Lifecycle

__all__ = [
    "TASKS_CAPABILITY",
    "TASK_RUNS_DDL",
    "TASK_STEPS_DDL",
    "StepContext",
    "TaskDefinition",
    "TaskStep",
    "Tasks",
]

TASKS_CAPABILITY = "tasks"
WAKE_JOB_PREFIX = "task:"
WAKE_JOB_FN = "wake"
WAKE_JOB_RETRY: Mapping[str, int] = {"maxAttempts": 1}
DEFAULT_STEP_TIMEOUT_MS = 300_000
CLAIM_SLACK_MS = 30_000
CLAIM_TIMEOUT_MS = DEFAULT_STEP_TIMEOUT_MS + CLAIM_SLACK_MS
"""A claimed attempt's deadline: the durable wake when its isolate disappears."""
DISPATCH_BUDGET_MS = 5_000
LIVE_STATES = ("pending", "waiting", "running")

TASK_RUNS_DDL = """CREATE TABLE IF NOT EXISTS cf_agents_task_runs (
        run_id TEXT PRIMARY KEY,
        definition TEXT NOT NULL,
        input TEXT,
        state TEXT NOT NULL CHECK (state IN (
          'pending', 'running', 'waiting',
          'completed', 'failed', 'cancelled'
        )),
        result TEXT,
        error_name TEXT,
        error_message TEXT,
        status_message TEXT,
        metadata TEXT,
        idempotency_key TEXT UNIQUE,
        retain INTEGER NOT NULL DEFAULT 1,
        attempt INTEGER NOT NULL DEFAULT 0,
        generation TEXT,
        next_at INTEGER,
        wait_reason TEXT,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        cancel_reason TEXT,
        created_at INTEGER NOT NULL,
        started_at INTEGER,
        updated_at INTEGER NOT NULL,
        settled_at INTEGER
      ) WITHOUT ROWID"""
TASK_RUNS_INDEX_DDL = """CREATE INDEX IF NOT EXISTS cf_agents_task_runs_definition
      ON cf_agents_task_runs (definition, created_at)"""
TASK_STEPS_DDL = """CREATE TABLE IF NOT EXISTS cf_agents_task_steps (
        run_id TEXT NOT NULL,
        step_name TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('do', 'sleep')),
        state TEXT NOT NULL CHECK (state IN (
          'running', 'waiting', 'completed', 'failed'
        )),
        result TEXT,
        error_name TEXT,
        error_message TEXT,
        attempt INTEGER NOT NULL DEFAULT 0,
        next_at INTEGER,
        created_at INTEGER NOT NULL,
        started_at INTEGER,
        updated_at INTEGER NOT NULL,
        completed_at INTEGER,
        PRIMARY KEY (run_id, step_name)
      ) WITHOUT ROWID"""


@dataclass
class _Active:
    generation: str
    controller: AbortController
    done: Any
    """Resolved when the attempt has ended (however)."""


class Tasks:
    """One agent's Tasks capability (one per incarnation; its tables are the agent's)."""

    __slots__ = ("_ctx", "_lc", "_emit", "_on_error", "_definitions", "_active")

    def __init__(
        self,
        ctx: AgentContext,
        lifecycle: Lifecycle,
        on_error: Callable[[BaseException], Any],
    ) -> None:
        self._ctx = ctx
        self._lc = lifecycle
        self._emit = lifecycle.emit_event
        self._on_error = on_error
        """The agent's `on_error` (the SDK's `new Tasks({onError})`)."""
        self._definitions: dict[str, TaskDefinition] = {}
        self._active: dict[str, _Active] = {}
        """The attempts running in this isolate, by run id."""

    # -- the capability ---------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return TASKS_CAPABILITY

    @property
    def on_job_error(self) -> None:
        return None

    def register(self, name: str, definition: TaskDefinition) -> None:
        """A framework's reserved (`__cf`) definition, registered once per construction."""
        if not isinstance(name, str) or not name:
            raise InvalidArgument("Task definition names must be non-empty strings")
        if not name.startswith("__cf"):
            raise InvalidArgument(
                f'register() requires a "__cf"-prefixed reserved definition name, got "{name}"'
            )
        if name in self._definitions:
            raise InvalidArgument(
                f'Task definition "{name}" is already registered on this Tasks capability'
            )
        self._definitions[name] = definition

    async def on_start(self) -> None:
        """The tables under the schema key, then interrupted attempts wake now and every live
        run's wake job is pushed again."""
        kv = self._ctx.host.kv
        if not await TASKS_SCHEMA.is_current(kv):
            self._ensure_tables()
            await TASKS_SCHEMA.put_current(kv)
        now = self._now()
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
            if await self._sync_wake(row["run_id"]):
                pushed = True
        if rows and not pushed:
            await self._lc.rearm()

    async def on_job(self, job: Job, _attempt: int) -> Any:
        """A run's wake: drive it (within the dispatch budget) and answer its next deadline."""
        payload = job.payload
        run_id = (
            payload["runId"] if isinstance(payload, Mapping) else job.id[len(WAKE_JOB_PREFIX) :]
        )
        active = self._active.get(run_id)
        if active is not None:
            self._refresh_claim(run_id)
            return self._wake_outcome(run_id)
        host = self._ctx.host
        attempt = host.tasks.wait_until(self._execute_run(run_id))
        # An attempt that fails first fails the wake (a platform failure leaves the alarm); one
        # still running after the budget goes on in the background.
        await host.tasks.race(attempt, host.clock.sleep(DISPATCH_BUDGET_MS))
        return self._wake_outcome(run_id)

    # -- what a framework host calls --------------------------------------------------------------
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
        """Accept a run of a registered definition and drive its first attempt here, to its
        next durable boundary (the SDK's `__DO_NOT_USE_WILL_BREAK__runAttached`); its receipt."""
        receipt = await self._accept(definition, input, run_id, idempotency_key, retain, metadata)
        if receipt["accepted"]:
            await self._execute_run(receipt["runId"])
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
        """Accept a run of a registered definition and leave its first attempt to its wake job,
        so that it runs under an alarm (the SDK's `__DO_NOT_USE_WILL_BREAK__enqueue`); its
        receipt."""
        return await self._accept(definition, input, run_id, idempotency_key, retain, metadata)

    async def _accept(
        self,
        definition: str,
        input: Any,
        run_id: str | None,
        idempotency_key: str | None,
        retain: bool,
        metadata: Any,
    ) -> dict[str, Any]:
        if definition not in self._definitions:
            raise InvalidArgument(
                f'Unknown Task definition "{definition}": not declared on this Tasks'
            )
        await self._lc.start()  # `lifecycle.ready()`
        if run_id == "":
            raise InvalidArgument("runId must be a non-empty string when provided")
        if idempotency_key == "":
            raise InvalidArgument("idempotencyKey must be a non-empty string when provided")
        existing = None if run_id is None else self._run_row(run_id)
        if existing is None and idempotency_key is not None:
            keyed = self._ctx.sql(
                "SELECT * FROM cf_agents_task_runs WHERE idempotency_key = ?", idempotency_key
            )
            existing = keyed[0] if keyed else None
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
            await self._sync_wake(held)
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
            serialize(input),
            serialize(metadata),
            idempotency_key,
            1 if retain else 0,
            now,
            now,
            now,
        )
        await self._sync_wake(run_id)
        self._emit("task:accepted", runId=run_id, definition=definition, accepted=True)
        return {
            "runId": run_id,
            "definition": definition,
            "accepted": True,
            "state": "pending",
            "createdAt": now,
        }

    def created_at(self, run_id: str) -> int | None:
        row = self._run_row(run_id)
        return None if row is None else int(row["created_at"])

    # -- one attempt ----------------------------------------------------------------------------
    async def _execute_run(self, run_id: str) -> None:
        if run_id in self._active:
            return
        row = self._run_row(run_id)
        if row is None or row["state"] not in LIVE_STATES:
            return
        now = self._now()
        if row["next_at"] is not None and row["next_at"] > now:
            return
        definition = row["definition"]
        handler = self._definitions.get(definition)
        if handler is None:
            message = f'Task definition "{definition}" is not declared'
            self._ctx.log("error", message)
            await self._settle_failed(run_id, None, ("MissingTaskDefinitionError", message))
            return
        if row["state"] == "running":
            step = self._ctx.sql(
                "SELECT step_name, attempt FROM cf_agents_task_steps "
                "WHERE run_id = ? AND state = 'running' ORDER BY started_at DESC LIMIT 1",
                run_id,
            )
            self._emit(
                "task:attempt:interrupted",
                runId=run_id,
                definition=definition,
                attempt=row["attempt"],
                step=step[0]["step_name"] if step else None,
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
        await self._sync_wake(run_id)
        controller = AbortController()
        self._emit("task:attempt:started", runId=run_id, definition=definition, attempt=attempt)
        active = _Active(generation, controller, self._ctx.host.tasks.deferred())
        self._active[run_id] = active
        try:
            await self._run_attempt(row, handler, generation, controller.signal)
        finally:
            if self._active.get(run_id) is active:
                del self._active[run_id]
            active.done.resolve(None)

    async def _run_attempt(
        self, row: Mapping[str, Any], handler: TaskDefinition, generation: str, signal: AbortSignal
    ) -> None:
        run_id = row["run_id"]
        definition = row["definition"]
        journal = StepJournal(self._ctx, run_id, generation)
        step = TaskStep(journal, definition, signal, self._emit, self._now)
        try:
            result = await handler(deserialize(row["input"]), step)
        except AttemptSuperseded:
            return
        except TaskSuspension as suspension:
            await self._park(run_id, definition, generation, suspension)
            return
        except Exception as error:
            if is_platform_failure(error):
                raise
            summary = error_summary(error)
            if await self._settle_failed(run_id, generation, summary):
                self._ctx.log(
                    "error",
                    f'Task run "{run_id}" (definition "{definition}") failed: '
                    f"{summary[0]}: {summary[1]}",
                )
            try:
                outcome = self._on_error(error)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:  # noqa: BLE001, S110 - the SDK swallows the hook's own error
                pass
            return
        now = self._now()
        written = self._fenced(
            "UPDATE cf_agents_task_runs SET state = 'completed', result = ?, generation = NULL, "
            "next_at = NULL, settled_at = ?, updated_at = ? "
            "WHERE run_id = ? AND generation = ? AND state = 'running'",
            run_id,
            generation,
            serialize(result),
            now,
            now,
        )
        if written:
            self._emit("task:completed", runId=run_id, definition=definition)
            await self._finish_settlement(run_id, row)

    async def _park(
        self, run_id: str, definition: str, generation: str, suspension: TaskSuspension
    ) -> None:
        """A sleep or a step's retry ended the attempt: the run waits until the wake time."""
        written = self._fenced(
            "UPDATE cf_agents_task_runs SET state = 'waiting', wait_reason = ?, next_at = ?, "
            "generation = NULL, updated_at = ? "
            "WHERE run_id = ? AND generation = ? AND state = 'running'",
            run_id,
            generation,
            suspension.reason,
            suspension.wake_at,
            self._now(),
        )
        if written:
            self._emit(
                "task:waiting",
                runId=run_id,
                definition=definition,
                reason=suspension.reason,
                wakeAt=suspension.wake_at,
            )
            await self._sync_wake(run_id)

    async def _settle_failed(
        self, run_id: str, generation: str | None, error: tuple[str, str]
    ) -> bool:
        now = self._now()
        query = (
            "UPDATE cf_agents_task_runs SET state = 'failed', error_name = ?, error_message = ?, "
            "generation = NULL, next_at = NULL, settled_at = ?, updated_at = ? WHERE run_id = ? "
        )
        if generation is not None:
            settled = self._fenced(
                query + "AND generation = ? AND state = 'running'",
                run_id,
                generation,
                error[0],
                error[1],
                now,
                now,
            )
        else:
            settled = (
                self._ctx.host.sql.execute(
                    query + "AND state IN ('pending', 'waiting', 'running')",
                    (error[0], error[1], now, now, run_id),
                )
                > 0
            )
        row = self._run_row(run_id) if settled else None
        if row is not None:
            self._emit("task:failed", runId=run_id, definition=row["definition"], error=error[0])
            await self._finish_settlement(run_id, row)
        return settled

    async def _finish_settlement(self, run_id: str, row: Mapping[str, Any]) -> None:
        if row["retain"] == 0:
            self._ctx.sql("DELETE FROM cf_agents_task_steps WHERE run_id = ?", run_id)
            self._ctx.sql("DELETE FROM cf_agents_task_runs WHERE run_id = ?", run_id)
        await self._sync_wake(run_id)

    # -- the run's wake job ---------------------------------------------------------------------
    def _refresh_claim(self, run_id: str) -> None:
        now = self._now()
        self._ctx.sql(
            "UPDATE cf_agents_task_runs SET next_at = ?, updated_at = ? "
            "WHERE run_id = ? AND state = 'running'",
            now + CLAIM_TIMEOUT_MS,
            now,
            run_id,
        )

    def _live_next_at(self, run_id: str) -> int | None:
        rows = self._ctx.sql(
            "SELECT next_at FROM cf_agents_task_runs "
            "WHERE run_id = ? AND state IN ('pending', 'waiting', 'running')",
            run_id,
        )
        if not rows or not isinstance(rows[0]["next_at"], int):
            return None
        return int(rows[0]["next_at"])

    def _wake_outcome(self, run_id: str) -> Any:
        """The wake job's outcome from the run row: re-timed to its deadline, or deleted."""
        nxt = self._live_next_at(run_id)
        return None if nxt is None else {"rescheduleAt": nxt}

    async def _sync_wake(self, run_id: str) -> bool:
        """Mirror the run's deadline into its wake job (cancelled when it has none); whether
        anything was written."""
        jobs = self._lc.jobs_for(TASKS_CAPABILITY)
        job_id = WAKE_JOB_PREFIX + run_id
        nxt = self._live_next_at(run_id)
        if nxt is None:
            await jobs.cancel(job_id)
            return True
        existing = jobs.get(job_id)
        if (
            existing is not None
            and existing.fn == WAKE_JOB_FN
            and existing.time == nxt
            and (existing.retry or {}).get("maxAttempts") == WAKE_JOB_RETRY["maxAttempts"]
        ):
            return False
        await jobs.push(
            WAKE_JOB_FN, nxt, id=job_id, payload={"runId": run_id}, retry=WAKE_JOB_RETRY
        )
        return True

    # -- storage --------------------------------------------------------------------------------
    def _ensure_tables(self) -> None:
        self._ctx.sql(TASK_RUNS_DDL)
        self._ctx.sql(TASK_RUNS_INDEX_DDL)
        self._ctx.sql(TASK_STEPS_DDL)

    def _run_row(self, run_id: str) -> dict[str, Any] | None:
        rows = self._ctx.sql("SELECT * FROM cf_agents_task_runs WHERE run_id = ?", run_id)
        return rows[0] if rows else None

    def _fenced(self, query: str, run_id: str, generation: str, *leading: Any) -> bool:
        """A write guarded by the attempt's generation (`... AND generation = ?`); whether it
        changed the row."""
        return self._ctx.host.sql.execute(query, (*leading, run_id, generation)) > 0

    def _now(self) -> int:
        return self._ctx.host.clock.now_ms()
