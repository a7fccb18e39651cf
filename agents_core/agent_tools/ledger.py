"""The finish-delivery ledger: every terminal delivery of every run goes through here.

Two independent slots per run, `finish` and `give_up`, each with a claim lease and a delivered
mark (columns `<slot>_claimed_at` / `<slot>_delivered_at`). A delivery claims its slot with one
compare-and-set UPDATE (unclaimed, or claimed more than 60 s ago, and not delivered); the loser
returns silently. The winner writes the guarded terminal update, broadcasts the terminal frame,
calls `on_agent_tool_finish` and the run's `on_finish` method, and only then marks the slot
delivered. So a delivery happens exactly once normally and at least once across a crash or a
throwing handler (re-claimed after the lease) — spec agent-tools §4.4.

When the handlers ran but the delivered mark cannot be written (a storage error), the slot is
remembered in memory as handled: any later delivery of it in this incarnation writes only the
mark, so the hooks are not called again (exactly once), and a redelivery is armed so that the
mark is written soon (awaited runs: `_cf_redeliver_agent_tool_hooks`; detached: the backbone).
If the incarnation dies first, the claim is taken again after its lease (at least once).

The lease is how a later incarnation tells a dead claimer from a live one, so it only ever
frees a claim this incarnation does not hold itself: a claim whose delivery is still pending
here (its handlers run late, as a startup sweep's deferred hooks do, or run long) is never taken
over, however old it is. Without that, a re-issue racing a sweep that outlived the lease would
call the same slot's hooks twice with no crash between (S8: exactly once normally).

Seed decision S8 extends this to awaited runs: the SDK calls their hook unguarded (a throwing
hook re-finishes the run as `error` and calls the hook again; two observers of one run both call
it); here they use the same slots, so the hook fires once. Detached slots are re-delivered by
the backbone; for awaited runs a slot left claimed by a dead incarnation is re-delivered by
`_cf_redeliver_agent_tool_hooks`, armed at startup, once the lease has expired (at least once).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agents_core.agent_tools.frames import frame, terminal_event
from agents_core.agent_tools.registry import AgentToolRunInfo, RunAgentToolResult
from agents_core.probes import probe
from agents_core.stored_names import AWAITED_REDELIVERY_CALLBACK, callback_method

if TYPE_CHECKING:
    from agents_core.agent_tools.hooks import AgentToolHooks
    from agents_core.agent_tools.run_store import RunStore
    from agents_core.context import AgentContext

__all__ = ["DETACHED_DELIVERY_LEASE_MS", "HANDLED_MARK_RETRY_MS", "DeliveryLedger", "SLOTS"]

DETACHED_DELIVERY_LEASE_MS = 60_000
HANDLED_MARK_RETRY_MS = 1_000
"""How soon an awaited slot whose handlers ran, but whose delivered mark failed, is marked again."""
SLOTS = ("finish", "give_up")


class DeliveryLedger:
    """The two delivery slots of every run, their claims and delivered marks, and the handlers
    a delivery calls (one per agent instance, so per incarnation)."""

    __slots__ = ("_ctx", "_agent", "_store", "_claims_held", "_claims_failed", "_claims_handled")

    def __init__(self, ctx: AgentContext, agent: AgentToolHooks, store: RunStore) -> None:
        self._ctx = ctx
        self._agent = agent
        self._store = store
        # In memory, so gone with the incarnation: (run id, slot) -> claim time of every claim
        # whose delivery this incarnation has not finished yet, and the claims whose handlers
        # threw here (released for a redelivery once their lease expires).
        self._claims_held: dict[tuple[str, str], int] = {}
        self._claims_failed: set[tuple[str, str, int]] = set()
        # (run id, slot, claim time) of the claims whose handlers ran here but whose delivered
        # mark could not be written: only the mark is owed.
        self._claims_handled: set[tuple[str, str, int]] = set()

    async def finish_run(
        self,
        row: dict[str, Any],
        result: RunAgentToolResult,
        sequence: int | None,
        completed_at: int | None = None,
        *,
        serialize: bool = False,
        defer_handlers_to: list[Any] | None = None,
    ) -> bool:
        """Finish a run through the ledger (S8): a soft `interrupted` through the `give_up` slot,
        a real result through `finish`. The slot's first delivery writes the row, broadcasts the
        terminal frame and calls the hooks; a later one writes the (guarded) row and, when that
        changed it (a second give-up with another reason), broadcasts the new terminal frame so
        clients follow the row, without calling the hooks again."""
        slot = "give_up" if result.status == "interrupted" else "finish"
        delivered = await self.deliver(
            row["run_id"],
            slot,
            result,
            sequence=sequence,
            completed_at=completed_at,
            serialize=serialize,
            defer_handlers_to=defer_handlers_to,
        )
        if not delivered and row["run_id"] in self._store.cleared_in_flight:
            return await self._finish_cleared_awaited_run(row, result, sequence, completed_at)
        if not delivered and self._store.update_terminal(row["run_id"], result, completed_at):
            now = self._ctx.host.clock.now_ms()
            self._agent.broadcast(
                frame(
                    row["parent_tool_call_id"],
                    now if sequence is None else sequence,
                    terminal_event(result),
                )
            )
        return delivered

    async def _finish_cleared_awaited_run(
        self,
        row: dict[str, Any],
        result: RunAgentToolResult,
        sequence: int | None,
        completed_at: int | None,
    ) -> bool:
        """An awaited run cleared while its call was in flight (E22): its row is gone, so the
        ledger has nothing to claim, yet the call still ends (`aborted` by the clear's cancel,
        see `AgentToolRuns._finish_awaited`), broadcasts its terminal frame and calls
        `on_agent_tool_finish`, as the SDK does (docs/divergences.md A16). Once: the run id
        leaves the cleared set here, and nothing else finishes a run without a row."""
        self._store.cleared_in_flight.discard(row["run_id"])
        probe(self._ctx.host, "agent_tool.cleared_awaited_run_finished")
        now = self._ctx.host.clock.now_ms()
        self._agent.broadcast(
            frame(
                row["parent_tool_call_id"],
                now if sequence is None else sequence,
                terminal_event(result),
            )
        )
        slot = "give_up" if result.status == "interrupted" else "finish"
        completed_at = now if completed_at is None else completed_at
        info = AgentToolRunInfo.from_row(row, status=result.status, completed_at=completed_at)
        await self._invoke_finish_handlers(row, slot, info, result)
        return True

    def slot_held(self, run_id: str, slot: str) -> bool:
        """Whether a delivery of this incarnation holds the slot's claim and has not finished:
        no other path may claim it, however old the claim (its holder is alive)."""
        claimed_at = self._claims_held.get((run_id, slot))
        if claimed_at is None:
            return False
        if claimed_at < self._ctx.host.clock.now_ms() - DETACHED_DELIVERY_LEASE_MS:
            probe(self._ctx.host, "ledger.live_claim_outlived_lease")
        return True

    async def deliver(
        self,
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
        if self.slot_held(run_id, slot):
            return False
        now = self._ctx.host.clock.now_ms()
        row = self._store.read(run_id)
        if row is None:
            return False
        if self.mark_handled_slot(row, slot):
            return False
        claimed = self._ctx.host.sql.execute(
            f"UPDATE cf_agent_tool_runs SET {slot}_claimed_at = ? WHERE run_id = ? "
            f"AND {slot}_delivered_at IS NULL "
            f"AND ({slot}_claimed_at IS NULL OR {slot}_claimed_at < ?)",
            (now, run_id, now - DETACHED_DELIVERY_LEASE_MS),
        )
        if not claimed:
            return False
        self._note_reclaimed_slot(row, slot)
        if slot == "finish" and row["give_up_delivered_at"] is not None:
            # S7: a soft give-up never hides a later genuine result.
            probe(self._ctx.host, "ledger.finish_after_give_up")
        held = (run_id, slot)
        self._claims_held[held] = now
        completed_at = now if completed_at is None else completed_at
        try:
            self._store.update_terminal(run_id, result, completed_at)
            self._agent.broadcast(
                frame(
                    row["parent_tool_call_id"],
                    now if sequence is None else sequence,
                    terminal_event(result),
                )
            )
        except BaseException as exc:
            # No handler has run: give the claim back, so that the next delivery (an awaited
            # run's `error` finish, the next tick) can take it at once instead of finding it
            # held for good by a delivery that is over.
            del self._claims_held[held]
            released = self._release_unused_claim(run_id, slot, now)
            if not released and not row["detached"] and isinstance(exc, Exception):
                # The claim stays until its lease expires, and an awaited run has no backbone
                # tick to take it then: the redelivery call does (S8, at least once).
                await self._arm_awaited_redelivery()
            raise
        info = AgentToolRunInfo.from_row(row, status=result.status, completed_at=completed_at)

        async def invoke() -> None:
            await self._invoke_finish_handlers(row, slot, info, result)

        async def complete() -> None:
            if serialize:
                await self._agent._run_serialized_delivery(invoke)
            else:
                await invoke()
            try:
                self.write_delivered_mark(run_id, slot, result.status, now)
            except Exception as exc:
                # The handlers ran, so the delivery stands and only its mark is owed: never
                # the hooks again in this incarnation. A detached run's backbone tick comes
                # round anyway; an awaited run gets a redelivery call soon.
                probe(self._ctx.host, "ledger.delivered_mark_failed")
                self._claims_handled.add((run_id, slot, now))
                self._ctx.log("error", f"marking agent tool run {run_id} {slot} delivered: {exc}")
                if not row["detached"] and not await self._arm_awaited_redelivery():
                    raise

        async def release_after(delivery: Callable[[], Awaitable[None]]) -> None:
            try:
                await delivery()
            except BaseException:
                if (run_id, slot, now) not in self._claims_handled:
                    self._claims_failed.add((run_id, slot, now))
                raise
            finally:
                if self._claims_held.get(held) == now:
                    del self._claims_held[held]

        if defer_handlers_to is not None:
            defer_handlers_to.append(lambda: release_after(complete))
        else:
            await release_after(complete)
        return True

    def write_delivered_mark(self, run_id: str, slot: str, status: str, claimed_at: int) -> None:
        """The slot is delivered: its hooks ran for the claim taken at `claimed_at`. The mark
        lands only on the row that claim is on (divergence A20): a run cleared and dispatched
        again under its id while the hooks ran is a new row, whose own slot stays owed (the
        SDK marks any row of that id, so the new run's give-up or finish is never delivered)."""
        self._ctx.sql(
            f"UPDATE cf_agent_tool_runs SET {slot}_delivered_at = ? "
            f"WHERE run_id = ? AND {slot}_claimed_at = ?",
            self._ctx.host.clock.now_ms(),
            run_id,
            claimed_at,
        )
        self._ctx.host.trace.emit("hook:delivered", runId=run_id, slot=slot, status=status)

    def mark_handled_slot(self, row: dict[str, Any], slot: str) -> bool:
        """If this incarnation ran the slot's handlers for its current claim and only the
        delivered mark failed, write the mark now (no hook); True when the slot was such."""
        handled = (row["run_id"], slot, row[f"{slot}_claimed_at"])
        if handled not in self._claims_handled or row[f"{slot}_delivered_at"] is not None:
            return False
        self.write_delivered_mark(row["run_id"], slot, row["status"], row[f"{slot}_claimed_at"])
        self._claims_handled.discard(handled)
        probe(self._ctx.host, "ledger.handled_slot_marked")
        return True

    def mark_handled_slots(self, row: dict[str, Any]) -> bool:
        """`mark_handled_slot` for both slots; True if any mark was written."""
        return any([self.mark_handled_slot(row, slot) for slot in SLOTS])

    async def _arm_awaited_redelivery(self) -> bool:
        """Schedule `_cf_redeliver_agent_tool_hooks` for the awaited slots claimed and not
        delivered in this live incarnation: soon for one whose handlers ran and whose mark
        failed, when its lease expires for a claim a failed write could not give back. False
        if that failed too (the next startup then redelivers the slot)."""
        try:
            rows = self.claimed_undelivered_awaited_rows()
            if rows:
                await self.schedule_awaited_redelivery(rows, idempotent=True)
        except Exception as exc:  # noqa: BLE001 - the delivery's own failure is what propagates
            self._ctx.log("error", f"arming the redelivery of an awaited agent tool slot: {exc}")
            return False
        return True

    def _release_unused_claim(self, run_id: str, slot: str, claimed_at: int) -> bool:
        """Undo a claim whose delivery failed before any handler ran; if even that write fails
        (False), the claim stays and is taken again once its lease expires, like a throwing
        handler's."""
        try:
            self._ctx.host.sql.execute(
                f"UPDATE cf_agent_tool_runs SET {slot}_claimed_at = NULL WHERE run_id = ? "
                f"AND {slot}_claimed_at = ? AND {slot}_delivered_at IS NULL",
                (run_id, claimed_at),
            )
        except Exception:  # noqa: BLE001 - the lease still frees it
            self._claims_failed.add((run_id, slot, claimed_at))
            return False
        probe(self._ctx.host, "ledger.unused_claim_released")
        return True

    def _note_reclaimed_slot(self, row: dict[str, Any], slot: str) -> None:
        """This claim took over an expired one (read from `row`, before the claim): mark who
        had left it, a handler that threw here, or an incarnation that died between its claim
        and its delivered mark (the at-least-once redelivery across a crash)."""
        prior = row[f"{slot}_claimed_at"]
        if prior is None:
            return
        failed = (row["run_id"], slot, prior)
        if failed in self._claims_failed:
            self._claims_failed.discard(failed)
            probe(self._ctx.host, "ledger.failed_handler_reclaimed")
        else:
            probe(self._ctx.host, "ledger.dead_claim_reclaimed")
            if row["detached"] and slot == "finish":
                probe(self._ctx.host, "agent_tool.detached_finish_redelivered")

    def claimed_undelivered_awaited_rows(self) -> list[dict[str, Any]]:
        return self._ctx.sql(
            "SELECT * FROM cf_agent_tool_runs WHERE detached = 0 AND ("
            "(finish_claimed_at IS NOT NULL AND finish_delivered_at IS NULL) OR "
            "(give_up_claimed_at IS NOT NULL AND give_up_delivered_at IS NULL)) "
            "ORDER BY started_at, rowid"
        )

    def owes_detached_finish(self) -> bool:
        """Whether any detached run has not had its finish delivered yet."""
        return bool(
            self._ctx.sql(
                "SELECT 1 AS x FROM cf_agent_tool_runs WHERE detached = 1 "
                "AND finish_delivered_at IS NULL LIMIT 1"
            )
        )

    async def schedule_awaited_redelivery(
        self, rows: list[dict[str, Any]], *, idempotent: bool
    ) -> None:
        """One `_cf_redeliver_agent_tool_hooks` call for when the oldest of these claims
        leaves its lease (or soon, for a claim that owes only its delivered mark)."""
        now = self._ctx.host.clock.now_ms()

        def due_ms(row: dict[str, Any], slot: str) -> int:
            claimed_at = row[f"{slot}_claimed_at"]
            if (row["run_id"], slot, claimed_at) in self._claims_handled:
                return now + HANDLED_MARK_RETRY_MS  # only its mark is owed: no lease to wait
            due: int = claimed_at + DETACHED_DELIVERY_LEASE_MS + 1
            return due

        due = min(
            due_ms(row, slot)
            for row in rows
            for slot in SLOTS
            if row[f"{slot}_claimed_at"] is not None and row[f"{slot}_delivered_at"] is None
        )
        delay_s = max(0, -(-(due - now) // 1000))
        await self._agent.schedule(
            delay_s, AWAITED_REDELIVERY_CALLBACK, None, idempotent=idempotent
        )

    async def redeliver_hooks(self, payload: Any = None, row: Any = None) -> None:
        """Schedule callback: deliver every awaited slot whose claim has expired, from the row;
        re-arm for claims still within their lease."""
        for stored in self.claimed_undelivered_awaited_rows():
            result = self._store.result_from_row(stored)
            for slot in SLOTS:
                if (
                    stored[f"{slot}_claimed_at"] is None
                    or stored[f"{slot}_delivered_at"] is not None
                ):
                    continue
                if slot == "give_up" and stored["status"] != "interrupted":
                    # Superseded by a real terminal, whose own finish slot delivers it.
                    probe(self._ctx.host, "ledger.superseded_give_up_closed")
                    self._ctx.sql(
                        "UPDATE cf_agent_tool_runs SET give_up_delivered_at = ? WHERE run_id = ?",
                        self._ctx.host.clock.now_ms(),
                        stored["run_id"],
                    )
                    continue
                await self.deliver(
                    stored["run_id"], slot, result, completed_at=stored["completed_at"]
                )
        remaining = self.claimed_undelivered_awaited_rows()
        if remaining:
            # Not idempotent: the one pending call of this callback is the one running now,
            # whose row goes when it returns; an idempotent schedule would dedupe against it
            # and leave the claims still within their lease with no redelivery at all.
            probe(self._ctx.host, "ledger.awaited_redelivery_rearmed")
            await self.schedule_awaited_redelivery(remaining, idempotent=False)

    async def _invoke_finish_handlers(
        self,
        row: dict[str, Any],
        slot: str,
        info: AgentToolRunInfo,
        result: RunAgentToolResult,
    ) -> None:
        lifecycle = result.lifecycle()
        # Trace-only records (not SDK events): what checkers count deliveries by.
        self._ctx.host.trace.emit(
            "hook:on_agent_tool_finish", runId=row["run_id"], slot=slot, status=result.status
        )
        try:
            await self._agent.on_agent_tool_finish(
                info, result if not row["detached"] else lifecycle
            )
        except Exception as exc:  # noqa: BLE001 - the global hook's failure goes to on_error
            await self.call_on_error_quietly(exc)
        name = row["detached_on_finish"]
        method = callback_method(self._agent, name)
        if method is None:
            return  # a name that no longer resolves is skipped silently, as in the SDK
        self._ctx.host.trace.emit(
            "hook:on_finish", runId=row["run_id"], slot=slot, status=result.status, callback=name
        )
        try:
            await method(info, lifecycle)
        except Exception as exc:
            self._ctx.emit(
                "agent_tool:detached:delivery_failed",
                runId=row["run_id"],
                kind=slot,
                status=result.status,
                callback=name,
                error=str(exc),
            )
            await self.call_on_error_quietly(exc)
            raise

    async def call_on_error_quietly(self, error: BaseException) -> None:
        try:
            outcome = self._agent.on_error(error)
            if hasattr(outcome, "__await__"):
                await outcome
        except Exception:  # noqa: BLE001 - on_error's own failure is swallowed
            return
