"""How a Task run's attempt ends in its row (spec sdk-0.32 §6.5): parked `waiting` until a
sleep's or a retry's wake time, or settled `failed` or `cancelled` (`completed` is the attempt's
own, in `tasks.py`). A write for an attempt is fenced by its generation (an attempt another one
superseded changes nothing); one without (a run not running here) takes any live run. A
settled run with `retain` false is deleted with its steps at once; then its wake job follows
the row (`task_wakes.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agents_core.releases.v0_32.task_store import TaskStore

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.releases.v0_32.task_errors import TaskSuspension
    from agents_core.releases.v0_32.task_wakes import RunWakes

__all__ = ["Settlement"]


class Settlement:
    """The end of attempts, for one agent's Tasks."""

    __slots__ = ("_ctx", "_store", "_wakes", "_emit")

    def __init__(
        self, ctx: AgentContext, store: TaskStore, wakes: RunWakes, emit: Callable[..., None]
    ) -> None:
        self._ctx = ctx
        self._store = store
        self._wakes = wakes
        self._emit = emit

    def _now(self) -> int:
        return self._ctx.host.clock.now_ms()

    async def park(
        self, run_id: str, definition: str, generation: str, suspension: TaskSuspension
    ) -> None:
        """A sleep or a step's retry ended the attempt: the run waits until the wake time
        (unless its cancellation was asked for meanwhile)."""
        current = self._store.run(run_id)
        if current is not None and current["cancel_requested"] == 1:
            await self.cancelled(run_id, generation, current["cancel_reason"])
            return
        written = self._store.fenced(
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
            await self._wakes.sync(run_id)

    async def _settle(
        self, run_id: str, generation: str | None, assignments: str, *values: Any
    ) -> dict[str, Any] | None:
        """Settle a live run (fenced by `generation` when given); its row if this did."""
        now = self._now()
        query = (
            f"UPDATE cf_agents_task_runs SET {assignments}, generation = NULL, next_at = NULL, "
            "settled_at = ?, updated_at = ? WHERE run_id = ? "
        )
        store = self._store
        if generation is not None:
            settled = store.fenced(
                query + "AND generation = ? AND state = 'running'",
                run_id,
                generation,
                *values,
                now,
                now,
            )
        else:
            settled = (
                store.write(
                    query + "AND state IN ('pending', 'waiting', 'running')",
                    *values,
                    now,
                    now,
                    run_id,
                )
                > 0
            )
        return store.run(run_id) if settled else None

    async def failed(self, run_id: str, generation: str | None, error: tuple[str, str]) -> bool:
        row = await self._settle(
            run_id,
            generation,
            "state = 'failed', error_name = ?, error_message = ?",
            error[0],
            error[1],
        )
        if row is not None:
            self._emit("task:failed", runId=run_id, definition=row["definition"], error=error[0])
            await self.finish(run_id, row)
        return row is not None

    async def cancelled(self, run_id: str, generation: str | None, reason: str | None) -> None:
        row = await self._settle(
            run_id,
            generation,
            "state = 'cancelled', cancel_requested = 1, cancel_reason = ?",
            reason,
        )
        if row is not None:
            self._emit("task:cancelled", runId=run_id, definition=row["definition"], reason=reason)
            await self.finish(run_id, row)

    async def finish(self, run_id: str, row: Mapping[str, Any]) -> None:
        """Retention (a run with `retain` false goes at once), then the wake job."""
        if row["retain"] == 0:
            self._store.delete_run(run_id)
        await self._wakes.sync(run_id)
