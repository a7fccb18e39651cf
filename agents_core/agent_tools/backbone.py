"""The self-scheduling reconcile backbone of detached runs: arming, the tick, budgets and the
give-up (spec agent-tools §4.5, §4.6).

The backbone is one delayed schedule row calling `_cf_detached_reconcile_tick` with
`{cadenceIndex}`. A tick inspects every detached run whose finish is still undelivered: a row
already hard terminal (its delivery failed) is delivered again from the row (A9); a hard
terminal child is delivered through the `finish` slot; otherwise the budgets are checked and an
exceeded one gives the run up (child cancelled, `interrupted` through the `give_up` slot; a
teardown that failed is tried again on later ticks, B4), and a given-up run whose child never
got it has its finish slot closed (A10). While any finish is
outstanding the tick schedules the next one, 5, 15, 30, then every 120 s. It is the guarantee
behind every detached delivery: it survives eviction and deploys because it is a schedule row,
and the fast path only makes the common case faster.

Arming is serialized in-isolate through a chain of deferreds so concurrent arms never
interleave, and the backbone never has more than one pending row: a fresh dispatch resets it to
5 s, anything else keeps the row it finds.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from agents_core.agent_tools.ledger import DETACHED_DELIVERY_LEASE_MS
from agents_core.agent_tools.registry import HARD_TERMINAL, RunAgentToolResult
from agents_core.agent_tools.run_store import result_from_inspection
from agents_core.probes import probe
from agents_core.stored_names import DETACHED_RECONCILE_CALLBACK

if TYPE_CHECKING:
    from agents_core.agent_tools.hooks import AgentToolHooks
    from agents_core.agent_tools.ledger import DeliveryLedger
    from agents_core.agent_tools.notify import MilestoneNotifier
    from agents_core.agent_tools.run_store import RunStore
    from agents_core.context import AgentContext
    from agents_core.host import Deferred
    from agents_core.lifecycle import Lifecycle

__all__ = [
    "DetachedBackbone",
    "DETACHED_BACKBONE_CADENCE_S",
    "DETACHED_RECONCILE_CALLBACK",
    "TEARDOWN_MARKER_PREFIX",
    "detached_budget_exceeded",
]

DETACHED_BACKBONE_CADENCE_S = (5, 15, 30, 120)
TEARDOWN_MARKER_PREFIX = "cf_agents:agent_tool_teardown:"
"""KV key prefix of the durable note that the parent itself cancelled a given-up child (S7)."""

GIVE_UP = {
    "budget-exceeded": (
        "detached budget exceeded",
        "detached run exceeded its budget before completing",
    ),
    "no-progress": (
        "detached run went silent past its no-progress window",
        "detached run went silent past its no-progress window",
    ),
}
"""reason -> (the cancel reason the child is given, the error of the give-up result)."""


def detached_budget_exceeded(
    row: Mapping[str, Any], inspection: Mapping[str, Any] | None, now: int
) -> str | None:
    """`budget-exceeded`, `no-progress` or None for a run whose child is not hard terminal.

    The absolute ceiling wins. The no-progress window counts from the latest signal (the
    inspection's progress, its last milestone, or the parent-observed `last_progress_at`) and
    is off for a run that never signalled and for a budget of 0, below 0, infinite or NULL."""
    budget_at = row["detached_max_budget_at"]
    if budget_at is not None and now >= budget_at:
        return "budget-exceeded"
    window = row["detached_no_progress_budget_ms"]
    if window is None or not math.isfinite(window) or window <= 0:
        return None
    signals = [row["last_progress_at"]]
    if inspection:
        progress = inspection.get("progress")
        if isinstance(progress, Mapping):
            signals.append(progress.get("at"))
        milestones = inspection.get("milestones")
        if isinstance(milestones, list) and milestones and isinstance(milestones[-1], Mapping):
            signals.append(milestones[-1].get("at"))
    known = [at for at in signals if isinstance(at, int | float) and not isinstance(at, bool)]
    if known and now - max(known) >= window:
        return "no-progress"
    return None


class DetachedBackbone:
    """The reconcile backbone of detached runs: its one tick row, the budgets, the give-up, and
    the delivery of a detached terminal."""

    __slots__ = ("_ctx", "_agent", "_store", "_ledger", "_notifier", "_lifecycle", "_arm_chain")

    def __init__(
        self,
        ctx: AgentContext,
        agent: AgentToolHooks,
        store: RunStore,
        ledger: DeliveryLedger,
        notifier: MilestoneNotifier,
        lifecycle: Lifecycle,
    ) -> None:
        self._ctx = ctx
        self._agent = agent
        self._store = store
        self._ledger = ledger
        self._notifier = notifier
        self._lifecycle = lifecycle
        self._arm_chain: Deferred[Any] | None = None
        """The last arm in this isolate: the next one waits for it (arms never interleave)."""

    async def arm_hook_redelivery(self, *, sweeping: bool = False) -> None:
        """At startup: if an awaited run's hook was claimed by an incarnation that died before
        it was marked delivered, schedule its redelivery for when the claim's lease expires; if
        a detached run still owes its finish, make sure the backbone tick exists and the alarm
        slot is armed for it (the platform may have given the alarm up after repeated crashes)."""
        if self._ledger.owes_detached_finish():
            probe(self._ctx.host, "agent_tool.startup_found_owed_detached_finish")
            if not sweeping:
                # When a startup sweep runs, it arms the backbone at its end (spec §7.1).
                await self.arm(reset_cadence=False)
            # Arming keeps an existing tick as it is; the alarm slot itself may be empty.
            await self._lifecycle.rearm()
        rows = self._ledger.claimed_undelivered_awaited_rows()
        if not rows:
            return
        probe(self._ctx.host, "ledger.awaited_redelivery_armed")
        await self._ledger.schedule_awaited_redelivery(rows, idempotent=True)

    async def arm(self, *, reset_cadence: bool) -> None:
        """Make sure a tick is pending: with `reset_cadence` (a fresh dispatch) replace whatever
        is there by one at 5 s; without it keep the first pending row (drop any extras) or
        create one at 5 s."""

        async def arm() -> None:
            ticks = await self._pending_ticks()
            if not reset_cadence and ticks:
                for extra in ticks[1:]:
                    await self._agent.cancel_schedule(extra.id)
                return
            # The new tick first: if writing it fails, the ticks other runs rely on are still
            # there (the SDK cancels them first, and a failed create leaves none: B3).
            await self._agent.schedule(
                DETACHED_BACKBONE_CADENCE_S[0], DETACHED_RECONCILE_CALLBACK, {"cadenceIndex": 0}
            )
            for tick in ticks:
                await self._agent.cancel_schedule(tick.id)

        await self._serialized_arm(arm)

    async def _serialized_arm(self, step: Callable[[], Awaitable[None]]) -> None:
        previous = self._arm_chain
        mine = self._ctx.host.tasks.deferred()
        self._arm_chain = mine
        try:
            if previous is not None:
                await previous
            await step()
        finally:
            mine.resolve(None)

    async def _pending_ticks(self, excluding: str | None = None) -> list[Any]:
        return [
            s
            for s in await self._agent.list_schedules()
            if s.callback == DETACHED_RECONCILE_CALLBACK and s.id != excluding
        ]

    async def tick(self, payload: Any, row: Mapping[str, Any] | None = None) -> None:
        """One reconcile pass over the detached runs whose finish is undelivered, then the next
        tick if any is still outstanding. A throwing `on_finish` ends the pass and is re-raised
        (the scheduler retries the tick; the failed slot stays leased for 60 s)."""
        index = payload.get("cadenceIndex", 0) if isinstance(payload, Mapping) else 0
        if not isinstance(index, int) or isinstance(index, bool):
            index = 0
        index = min(max(index, 0), len(DETACHED_BACKBONE_CADENCE_S) - 1)
        executing = row["id"] if row is not None else None
        try:
            for run in self._ctx.sql(
                "SELECT * FROM cf_agent_tool_runs WHERE detached = 1 "
                "AND finish_delivered_at IS NULL ORDER BY started_at, rowid"
            ):
                await self.reconcile_run(run["run_id"])
        finally:
            # Even after a throwing handler: the SDK reschedules only on a clean pass, so three
            # failed attempts would leave no tick behind and an owed delivery would wait for the
            # next dispatch or restart (S8: at least once).
            await self._schedule_next_tick(index, executing)

    async def _schedule_next_tick(self, index: int, executing: str | None) -> None:
        if not self._ledger.owes_detached_finish():
            return
        following = min(index + 1, len(DETACHED_BACKBONE_CADENCE_S) - 1)

        async def reschedule() -> None:
            # A row armed while this tick ran (a fresh dispatch's 5 s reset) already covers it.
            if await self._pending_ticks(excluding=executing):
                return
            await self._agent.schedule(
                DETACHED_BACKBONE_CADENCE_S[following],
                DETACHED_RECONCILE_CALLBACK,
                {"cadenceIndex": following},
            )

        await self._serialized_arm(reschedule)

    async def reconcile_run(self, run_id: str) -> None:
        row = self._store.read(run_id)
        if row is not None and self._ledger.mark_handled_slots(row):
            # A slot whose handlers ran here and whose mark failed owes only that mark.
            row = self._store.read(run_id)
        if row is None or row["finish_delivered_at"] is not None:
            return
        child, inspection, answered = None, None, False
        try:
            child = await self._store.child(row["agent_type"], run_id)
            inspection = await child.call("inspect_agent_tool_run", run_id)
            answered = True
        except LookupError:
            # The child facet was never created (the dispatch died before it): it has no
            # record of the run, as surely as a child that answers null.
            answered = child is None
        except Exception:  # noqa: BLE001 - an uninspectable child is "not terminal yet"
            inspection = None
        if isinstance(inspection, Mapping):
            # S3: reconciliation delivers every configured milestone the child reached.
            self._notifier.notify_all(row, inspection.get("milestones"), reconciled=True)
        else:
            inspection = None
        if row["status"] in HARD_TERMINAL:
            await self._redeliver_hard_terminal_row(row, inspection)
            return
        if inspection is not None and inspection.get("status") in HARD_TERMINAL:
            result = result_from_inspection(run_id, row["agent_type"], dict(inspection))
            delivered = await self.deliver_terminal(
                run_id,
                "finish",
                result,
                completed_at=inspection.get("completedAt"),
                serialize=True,
                from_child=True,
            )
            if delivered:
                # No fast path of this incarnation got there first (the dispatching isolate is
                # gone, or its fast path could not see the terminal).
                probe(self._ctx.host, "agent_tool.backbone_delivered_finish")
            return
        reason = detached_budget_exceeded(row, inspection, self._ctx.host.clock.now_ms())
        if reason is not None and row["give_up_delivered_at"] is None:
            await self._give_up_detached_run(row, child, reason)
            row = self._store.read(run_id)
        elif reason is not None and _teardown_owed(row, inspection):
            await self._retry_give_up_teardown(row, child)
        if answered and inspection is None and row is not None:
            await self._close_finish_of_unstarted_run(row)

    async def _redeliver_hard_terminal_row(
        self, row: Mapping[str, Any], inspection: Mapping[str, Any] | None
    ) -> None:
        """The row is hard terminal, so immutable, and its finish slot was claimed by the path
        that wrote it (a cancel, the fast path, an earlier tick). If that delivery's handler
        threw, or its incarnation died before the delivered mark, the slot is delivered again
        from the row once the claim's lease has expired (the ledger's compare-and-set decides).

        S8 (at least once): the SDK's tick delivers only from a hard-terminal inspection, so a
        run the parent made terminal itself (a cancel) whose child has no record of it, or
        still runs, would never be delivered again; and the row, not a child that may since
        report something else, is what the first delivery announced."""
        delivered = await self._ledger.deliver(
            row["run_id"],
            "finish",
            self._store.result_from_row(dict(row)),
            completed_at=row["completed_at"],
            serialize=True,
        )
        if delivered:
            probe(self._ctx.host, "agent_tool.backbone_delivered_finish")
            if inspection is None or inspection.get("status") not in HARD_TERMINAL:
                probe(self._ctx.host, "agent_tool.finish_redelivered_from_row")

    async def _close_finish_of_unstarted_run(self, row: Mapping[str, Any]) -> None:
        """A given-up run whose child answered that it has no record of it, and whose start no
        dispatch of this incarnation has in flight, can never produce a result: the child start
        died with an earlier incarnation or failed. Its finish slot is closed silently, as the
        abort of the parent's own teardown closes it (S7); the row stays `interrupted`.

        The seed's "null is not a failure, keep watching within the budget" is kept: the close
        comes only after the budget's give-up was delivered. The SDK leaves the slot open, and
        its backbone then ticks every 120 s for as long as the parent exists (E11)."""
        run_id = row["run_id"]
        if row["give_up_delivered_at"] is None or run_id in self._store.dispatching:
            return
        if self._close_finish_slot_silently(run_id):
            probe(self._ctx.host, "agent_tool.unstarted_run_finish_closed")
            self._ctx.log(
                "info",
                f"detached run {run_id} was given up and its child has no record of it; "
                "nothing more is delivered",
            )

    def _close_finish_slot_silently(self, run_id: str) -> bool:
        """Mark the finish slot delivered with no frame and no hook, unless a delivery of this
        incarnation holds it or another holds a claim within its lease; True if closed."""
        if self._ledger.slot_held(run_id, "finish"):
            return False
        now = self._ctx.host.clock.now_ms()
        closed = self._ctx.host.sql.execute(
            "UPDATE cf_agent_tool_runs SET finish_claimed_at = ?, finish_delivered_at = ? "
            "WHERE run_id = ? AND finish_delivered_at IS NULL "
            "AND (finish_claimed_at IS NULL OR finish_claimed_at < ?)",
            (now, now, run_id, now - DETACHED_DELIVERY_LEASE_MS),
        )
        if closed:
            self._ctx.host.kv.delete(f"{TEARDOWN_MARKER_PREFIX}{run_id}")
        return bool(closed)

    async def _give_up_detached_run(self, row: Mapping[str, Any], child: Any, reason: str) -> None:
        """Cancel the child, then deliver `interrupted`/`reason` through the `give_up` slot."""
        run_id = row["run_id"]
        if reason == "budget-exceeded":
            probe(self._ctx.host, "agent_tool.give_up_budget_exceeded")
        else:
            probe(self._ctx.host, "agent_tool.give_up_no_progress")
        cancel_reason, error = GIVE_UP[reason]
        marker = f"{TEARDOWN_MARKER_PREFIX}{run_id}"
        # S7: noted durably before the cancel, so the `aborted` the child reports because of it
        # is recognised as the parent's own doing, whichever path sees it and across restarts.
        # The earliest note is kept: an abort from the first teardown must stay "ours".
        if self._ctx.host.kv.get(marker) is None:
            self._ctx.host.kv.put(marker, {"at": self._ctx.host.clock.now_ms(), "reason": reason})
        torn_down = reached = False
        try:
            if child is None:
                child = await self._store.child(row["agent_type"], run_id)
            reached = True
            await child.call("cancel_agent_tool_run", run_id, cancel_reason)
            torn_down = True
        except Exception as exc:  # noqa: BLE001 - the give-up stands; the child may run on
            probe(self._ctx.host, "agent_tool.give_up_teardown_failed")
            self._ctx.log("warn", f"tearing down detached run {run_id} failed: {exc}")
            if reached:
                # The call failed after it reached the child, which may have aborted the run
                # before failing (its cancel settled the run, then a later write threw): that
                # abort is still ours, so the note stays (S7).
                probe(self._ctx.host, "agent_tool.give_up_teardown_may_have_landed")
        if not reached:
            self._ctx.host.kv.delete(marker)
        result = RunAgentToolResult(
            run_id,
            row["agent_type"],
            "interrupted",
            error=error,
            reason=reason,
            child_still_running=not torn_down,
        )
        await self._ledger.deliver(run_id, "give_up", result, serialize=True)

    async def _retry_give_up_teardown(self, row: Mapping[str, Any], child: Any) -> None:
        """B4: the give-up could not cancel the child (childStillRunning true was delivered), the
        child still runs and the budget is still exceeded: cancel it again. Its abort is the
        parent's own teardown (S7), so it closes the finish slot silently on a later tick. The
        SDK never tries again, and its backbone ticks every 120 s for as long as the child runs
        (a transient failure of one cancel call leaves a child the parent gave up for ever)."""
        run_id, given_up = row["run_id"], row["interrupted_reason"]
        marker = f"{TEARDOWN_MARKER_PREFIX}{run_id}"
        if self._ctx.host.kv.get(marker) is None:
            self._ctx.host.kv.put(marker, {"at": self._ctx.host.clock.now_ms(), "reason": given_up})
        try:
            if child is None:
                child = await self._store.child(row["agent_type"], run_id)
            await child.call("cancel_agent_tool_run", run_id, GIVE_UP[given_up][0])
        except Exception as exc:  # noqa: BLE001 - the next tick tries again
            self._ctx.log("warn", f"tearing down detached run {run_id} failed again: {exc}")
            return
        probe(self._ctx.host, "agent_tool.give_up_teardown_retried")

    def _give_up_result_from_marker(self, row: Mapping[str, Any]) -> RunAgentToolResult | None:
        marker = self._ctx.host.kv.get(f"{TEARDOWN_MARKER_PREFIX}{row['run_id']}")
        if not isinstance(marker, Mapping) or marker.get("reason") not in GIVE_UP:
            return None
        reason = marker["reason"]
        return RunAgentToolResult(
            row["run_id"],
            row["agent_type"],
            "interrupted",
            error=GIVE_UP[reason][1],
            reason=reason,
            child_still_running=False,
        )

    def _aborted_by_own_teardown(self, run_id: str, completed_at: int | None) -> bool:
        """True when the parent's give-up cancelled this child and the child's abort is not
        older than that cancel."""
        marker = self._ctx.host.kv.get(f"{TEARDOWN_MARKER_PREFIX}{run_id}")
        if not isinstance(marker, Mapping):
            return False
        return completed_at is None or completed_at >= marker.get("at", 0)

    async def deliver_terminal(
        self,
        run_id: str,
        slot: str,
        result: RunAgentToolResult,
        *,
        sequence: int | None = None,
        completed_at: int | None = None,
        serialize: bool = False,
        from_child: bool = False,
    ) -> bool:
        """The ledger funnel, except for the `aborted` a child reports because the parent's own
        give-up cancelled it (`from_child`: the result is the child's inspection)."""
        if (
            slot == "finish"
            and from_child
            and result.status == "aborted"
            and self._aborted_by_own_teardown(run_id, completed_at)
        ):
            await self._close_finish_after_own_teardown(run_id, serialize)
            return False
        return await self._ledger.deliver(
            run_id, slot, result, sequence=sequence, completed_at=completed_at, serialize=serialize
        )

    async def _close_finish_after_own_teardown(self, run_id: str, serialize: bool) -> None:
        # S7: the give-up was the delivery; the abort it caused closes the finish slot silently
        # (no frame, no hook) and the row stays `interrupted`.
        row = self._store.read(run_id)
        if row is None:
            return
        if row["give_up_delivered_at"] is None:
            # The give-up itself is still owed (its handler threw, or the isolate died in it).
            give_up = self._give_up_result_from_marker(row)
            if give_up is not None:
                await self._ledger.deliver(run_id, "give_up", give_up, serialize=serialize)
            row = self._store.read(run_id)
            if row is None or row["give_up_delivered_at"] is None:
                return
        if self._close_finish_slot_silently(run_id):
            probe(self._ctx.host, "agent_tool.own_teardown_abort_closed")
            self._ctx.log(
                "info",
                f"detached run {run_id} was aborted by the parent's own give-up teardown; "
                "nothing more is delivered",
            )


def _teardown_owed(row: Mapping[str, Any], inspection: Mapping[str, Any] | None) -> bool:
    """The run's give-up was delivered saying its child still runs, and the child (which
    answered) still does: the teardown the give-up meant is owed (B4)."""
    return (
        row["give_up_delivered_at"] is not None
        and row["status"] == "interrupted"
        and row["interrupted_reason"] in GIVE_UP
        and row["child_still_running"] == 1
        and inspection is not None
        and inspection.get("status") in ("starting", "running")
    )
