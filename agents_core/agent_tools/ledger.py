"""The finish-delivery ledger: every terminal delivery of every run goes through here.

Two independent slots per run, `finish` and `give_up`, each with a claim lease and a delivered
mark (columns `<slot>_claimed_at` / `<slot>_delivered_at`). A delivery claims its slot with one
compare-and-set UPDATE (unclaimed, or claimed more than 60 s ago, and not delivered); the loser
returns silently. The winner writes the guarded terminal update, broadcasts the terminal frame,
calls `on_agent_tool_finish` and the run's `on_finish` method, and only then marks the slot
delivered. So a delivery happens exactly once normally and at least once across a crash or a
throwing handler (re-claimed after the lease) — spec agent-tools §4.4.

Seed decision S8 extends this to awaited runs: the SDK calls their hook unguarded (a throwing
hook re-finishes the run as `error` and calls the hook again; two observers of one run both call
it); here they use the same `finish` slot, so the hook fires once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agents_core.agent_tools.frames import frame, terminal_event
from agents_core.agent_tools.registry import AgentToolRunInfo, RunAgentToolResult

__all__ = ["DETACHED_DELIVERY_LEASE_MS", "LedgerMixin", "SLOTS"]

DETACHED_DELIVERY_LEASE_MS = 60_000
SLOTS = ("finish", "give_up")


class LedgerMixin:
    async def _deliver_agent_tool_terminal(
        self: Any,
        run_id: str,
        slot: str,
        result: RunAgentToolResult,
        *,
        sequence: int | None = None,
        completed_at: int | None = None,
        serialize: bool = False,
        defer_handlers_to: list[Callable[[], Awaitable[None]]] | None = None,
    ) -> bool:
        """Deliver `result` through `slot`; True if this call delivered it. A handler that
        throws leaves the slot claimed and undelivered, and the error propagates.

        With `defer_handlers_to`, the row and the frame are written now and the handlers (and
        the delivered mark) are appended there as one callable for the caller to run later:
        startup recovery finishes rows during its sweep and calls the hooks after it (§7.1)."""
        if slot not in SLOTS:
            raise ValueError(f"ledger slot must be one of {SLOTS}, got {slot!r}")
        now = self.host.clock.now_ms()
        claimed = self.host.sql.execute(
            f"UPDATE cf_agent_tool_runs SET {slot}_claimed_at = ? WHERE run_id = ? "
            f"AND {slot}_delivered_at IS NULL "
            f"AND ({slot}_claimed_at IS NULL OR {slot}_claimed_at < ?)",
            (now, run_id, now - DETACHED_DELIVERY_LEASE_MS),
        )
        if not claimed:
            return False
        row = self._read_agent_tool_run(run_id)
        if row is None:
            return False
        completed_at = now if completed_at is None else completed_at
        self._update_agent_tool_terminal(run_id, result, completed_at)
        self.broadcast(
            frame(
                row["parent_tool_call_id"],
                now if sequence is None else sequence,
                terminal_event(result),
            )
        )
        info = AgentToolRunInfo.from_row(row, status=result.status, completed_at=completed_at)

        async def invoke() -> None:
            await self._invoke_finish_handlers(row, slot, info, result)

        async def complete() -> None:
            if serialize:
                await self._run_serialized_delivery(invoke)
            else:
                await invoke()
            self.sql(
                f"UPDATE cf_agent_tool_runs SET {slot}_delivered_at = ? WHERE run_id = ?",
                self.host.clock.now_ms(),
                run_id,
            )
            self.host.trace.emit("hook:delivered", runId=run_id, slot=slot, status=result.status)

        if defer_handlers_to is not None:
            defer_handlers_to.append(complete)
        else:
            await complete()
        return True

    async def _invoke_finish_handlers(
        self: Any,
        row: dict[str, Any],
        slot: str,
        info: AgentToolRunInfo,
        result: RunAgentToolResult,
    ) -> None:
        lifecycle = result.lifecycle()
        # Trace-only records (not SDK events): what checkers count deliveries by.
        self.host.trace.emit(
            "hook:on_agent_tool_finish", runId=row["run_id"], slot=slot, status=result.status
        )
        try:
            await self.on_agent_tool_finish(info, result if not row["detached"] else lifecycle)
        except Exception as exc:  # noqa: BLE001 - the global hook's failure goes to on_error
            await self._call_on_error_quietly(exc)
        name = row["detached_on_finish"]
        method = getattr(self, name, None) if name else None
        if not callable(method):
            return  # a name that no longer resolves is skipped silently, as in the SDK
        self.host.trace.emit(
            "hook:on_finish", runId=row["run_id"], slot=slot, status=result.status, callback=name
        )
        try:
            await method(info, lifecycle)
        except Exception as exc:
            self._emit(
                "agent_tool:detached:delivery_failed",
                runId=row["run_id"],
                kind=slot,
                status=result.status,
                callback=name,
                error=str(exc),
            )
            await self._call_on_error_quietly(exc)
            raise

    async def _call_on_error_quietly(self: Any, error: BaseException) -> None:
        try:
            outcome = self.on_error(error)
            if hasattr(outcome, "__await__"):
                await outcome
        except Exception:  # noqa: BLE001 - on_error's own failure is swallowed
            return

    async def _run_serialized_delivery(self: Any, invoke: Any) -> None:
        """Chat hosts run serialized deliveries between turns; a plain agent runs them inline."""
        await invoke()
