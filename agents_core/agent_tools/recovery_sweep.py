"""Parent restart: the startup recovery sweep of awaited agent-tool runs (spec agent-tools §7.1,
§7.2, §9), and the interrupted-reason vocabulary it shares with re-attach (`reattach.py`).

At startup, after the fiber recovery scan and before the user's `on_start`, the run ids of every
`starting`/`running` row are snapshotted; once `on_start` has returned, one sweep over exactly
that snapshot is scheduled in the background after a 0 ms timer (single-flight). Detached rows
are skipped: they belong to the backbone, which is re-armed at the end if one still owes its
finish. Pass 1 walks the rows in start order under a 5 s deadline, inspecting each child with a
2 s timeout: a terminal (or untailable) child is finalized at once, after its stored chunks are
sent again; a child still running is queued. Pass 2 re-attaches to every queued child in
parallel, so that a hung child never holds up a sibling. Rows are written and their terminal
frames sent as they are finalized; the `on_agent_tool_finish` calls are deferred until the sweep
is over, and go through the delivery ledger like every finish (seed decision S8).

A run the sweep could not finalize (a storage fault reading its row or claiming its slot, before
anything durable changed) would stay `running` until the next restart, with nothing to wake the
parent for it. Its outcome is kept in memory and `_cf_retry_agent_tool_recovery` is scheduled: it
finalizes it with that outcome (or sweeps it again, when the sweep failed before reaching it), in
a sweep of its own whose hooks again wait for its end. A later incarnation needs no retry: its
own startup sweep covers every run still open (divergence A13).

A sweep with runs to recover holds a keepAlive lease until its last hook has run (divergence
A17): nobody awaits these runs any more, so if the parent dies after a claim, the heartbeat
alarm is what wakes it for the redelivery of that slot (the ledger's startup arming, A6).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents_core.agent_tools.bounded_calls import (
    RECOVERY_TIMEOUT_MS,
    RECOVERY_TOTAL_TIMEOUT_MS,
    settled,
    within,
)
from agents_core.agent_tools.give_up_reasons import (
    ACTIVE_CHILD_STATUSES,
    ACTIVE_ROW_STATUSES,
    interrupted_result,
)
from agents_core.agent_tools.registry import RunAgentToolResult
from agents_core.agent_tools.run_store import result_from_inspection
from agents_core.probes import probe
from agents_core.stored_names import RECOVERY_RETRY_CALLBACK

if TYPE_CHECKING:
    from agents_core.agent_tools.backbone import DetachedBackbone
    from agents_core.agent_tools.hooks import AgentToolHooks
    from agents_core.agent_tools.ledger import DeliveryLedger
    from agents_core.agent_tools.reattach import Reattach
    from agents_core.agent_tools.run_store import RunStore
    from agents_core.context import AgentContext
    from agents_core.host import Task
    from agents_core.keep_alive import KeepAlive

__all__ = [
    "RECOVERY_RETRY_CALLBACK",
    "RECOVERY_TIMEOUT_MS",
    "RECOVERY_TOTAL_TIMEOUT_MS",
    "RecoverySweep",
]

RECOVERY_LEASE_HOLDER = "agent_tool:recovery"
"""The `holder` of the keepAlive lease a sweep holds (trace `keep_alive:acquire/release`)."""

RECOVERY_RETRY_DELAYS_S = (2, 4, 8, 16, 32, 60)
"""How long a retry of runs a sweep could not finalize waits, by attempt (the last repeats)."""

DeferredHook = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class KeptOutcome:
    """What a sweep decided for a run whose finalization failed, to finalize it again."""

    row: dict[str, Any]
    result: RunAgentToolResult
    sequence: int
    completed_at: int | None


def _no_lease() -> None:
    """The release of a sweep that holds no keepAlive lease."""


class RecoverySweep:
    """The startup sweep of awaited runs, and the retry of what a sweep could not finalize."""

    __slots__ = (
        "_ctx",
        "_agent",
        "_store",
        "_ledger",
        "_backbone",
        "_reattach",
        "_keep_alive",
        "snapshot",
        "_task",
        "_retry_attempt",
        "_owed_runs",
    )

    def __init__(
        self,
        ctx: AgentContext,
        agent: AgentToolHooks,
        store: RunStore,
        ledger: DeliveryLedger,
        backbone: DetachedBackbone,
        reattach: Reattach,
        keep_alive: KeepAlive,
    ) -> None:
        self._ctx = ctx
        self._agent = agent
        self._store = store
        self._ledger = ledger
        self._backbone = backbone
        self._reattach = reattach
        self._keep_alive = keep_alive
        self.snapshot: list[str] = []
        """The run ids live when this incarnation started (taken before the user's on_start)."""
        self._task: Task[Any] | None = None
        self._retry_attempt = 0
        self._owed_runs: dict[str, KeptOutcome | None] = {}

    def collect_runs(self) -> None:
        """Snapshot the runs that were live when this incarnation started (before `on_start`,
        so rows it creates are not recovered)."""
        self.snapshot = [
            row["run_id"]
            for row in self._ctx.sql(
                "SELECT run_id FROM cf_agent_tool_runs WHERE status IN ('starting', 'running') "
                "ORDER BY started_at, rowid"
            )
        ]

    def schedule(self) -> Any:
        """Start the sweep of the snapshot in the background (only reached once `on_start`
        has returned). Single-flight: while one is pending, its task is returned again; an
        empty snapshot starts nothing and returns None."""
        pending = self._task
        if pending is not None and not pending.done():
            return pending
        snapshot = self.snapshot
        if not snapshot:
            return None
        self.snapshot = []
        self._task = self._ctx.host.tasks.wait_until(
            self._run_scheduled_agent_tool_recovery(snapshot)
        )
        return self._task

    async def _run_scheduled_agent_tool_recovery(self, run_ids: list[str]) -> None:
        await self._ctx.host.clock.sleep(0)  # startup returns first
        await self._reconcile_agent_tool_runs(
            run_ids,
            child_timeout_ms=self._agent._agent_tool_recovery_timeout_ms,
            total_timeout_ms=self._agent._agent_tool_recovery_total_timeout_ms,
        )

    async def _agent_tool_recovery_lease(self) -> Callable[[], None]:
        """A keepAlive lease held from before the sweep's first claim until its last hook has
        run (divergence A17). The sweep finalizes runs and calls their hooks later, with no
        caller left to re-issue them: if the parent dies in between, the heartbeat alarm this
        lease armed wakes it, and that startup redelivers the claimed slots (A6) or sweeps the
        runs still open. A lease that cannot be taken leaves the sweep to run without it (the
        failed arming still leaves a check-back alarm, K5)."""
        try:
            return await self._keep_alive.lease(RECOVERY_LEASE_HOLDER)
        except Exception as exc:  # noqa: BLE001 - the recovery itself must still run
            self._ctx.log("error", f"agent tool recovery runs without its keepAlive lease: {exc}")
            return _no_lease

    def _agent_tool_recovery_owed(self) -> dict[str, KeptOutcome | None]:
        """Run id -> its kept outcome (None: to be swept again) of every run a sweep of this
        incarnation has taken on and not finalized yet."""
        return self._owed_runs

    async def _reconcile_agent_tool_runs(
        self,
        run_ids: list[str],
        *,
        child_timeout_ms: float,
        total_timeout_ms: float,
    ) -> None:
        """Finalize or re-attach every awaited run of `run_ids` that is still live."""
        started = self._ctx.host.clock.now_ms()
        deferred: list[DeferredHook] = []
        owed = self._agent_tool_recovery_owed()
        for run_id in run_ids:
            owed.setdefault(run_id, None)
        release = _no_lease
        try:
            rows = []
            for run_id in run_ids:
                row = self._store.read(run_id)
                if row is None or row["detached"] or row["status"] not in ACTIVE_ROW_STATUSES:
                    owed.pop(run_id, None)
                else:
                    rows.append(row)
            if rows:
                release = await self._agent_tool_recovery_lease()
            self._ctx.emit(
                "agent_tool:recovery:begin", runCount=len(rows), totalTimeoutMs=total_timeout_ms
            )
            unsettled = await self._finalize_kept_outcomes(rows, deferred)
            queued = await self._recovery_pass_one(
                unsettled, started, child_timeout_ms, total_timeout_ms, deferred
            )
            # Every re-attach runs to its end before a failure of one is reported, so that
            # no hook is appended to `deferred` after the hooks have run.
            outcomes = await self._ctx.host.tasks.gather(
                *(
                    settled(self._recover_by_reattach(row, child, started, deferred))
                    for row, child in queued
                )
            )
            failures = [value for tag, value in outcomes if tag == "error"]
            if failures:
                raise failures[0]
            self._ctx.emit(
                "agent_tool:recovery:complete",
                runCount=len(rows),
                elapsedMs=self._ctx.host.clock.now_ms() - started,
            )
        except Exception as exc:  # noqa: BLE001 - reported, never thrown out of a background task
            self._ctx.emit("agent_tool:recovery:failed", error=str(exc))
            await self._ledger.call_on_error_quietly(exc)
        try:
            # Rows already finalized still get their hooks, even after a failure: their frames
            # went out and their ledger slots are claimed.
            for complete in deferred:
                try:
                    await complete()
                except Exception as exc:  # noqa: BLE001 - one hook's failure never skips the rest
                    await self._ledger.call_on_error_quietly(exc)
            await self._rearm_detached_backbone_after_recovery()
            await self._arm_agent_tool_recovery_retry()
        finally:
            release()

    async def _recovery_pass_one(
        self,
        rows: list[dict[str, Any]],
        started: int,
        child_timeout_ms: float,
        total_timeout_ms: float,
        deferred: list[DeferredHook],
    ) -> list[tuple[dict[str, Any], Any]]:
        """Inspect each row's child in turn; finalize what can be, return the rest (row and
        child) for re-attach."""
        deadline = started + total_timeout_ms if total_timeout_ms > 0 else math.inf
        queued: list[tuple[dict[str, Any], Any]] = []
        for row in rows:
            now = self._ctx.host.clock.now_ms()
            if now >= deadline:
                probe(self._ctx.host, "agent_tool.recovery_deadline")
                self._ctx.emit(
                    "agent_tool:recovery:deadline",
                    runId=row["run_id"],
                    agentType=row["agent_type"],
                    elapsedMs=now - started,
                )
                result = interrupted_result(row, "recovery-deadline")
                await self._finalize_recovered_run(row, result, 1, started, deferred)
                continue
            remaining = deadline - now
            timeout = remaining if child_timeout_ms <= 0 else min(child_timeout_ms, remaining)
            tag, value = await within(self._ctx.host, self._inspect_recovered_child(row), timeout)
            if tag != "ok":
                probe(self._ctx.host, "agent_tool.recovery_inspect_failed")
                reason = "inspect-timeout" if tag == "timeout" else "inspect-failed"
                result = interrupted_result(row, reason)
                await self._finalize_recovered_run(row, result, 1, started, deferred)
                continue
            child, inspection = value
            still_running = (
                not isinstance(inspection, dict)
                or inspection.get("status") in ACTIVE_CHILD_STATUSES
            )
            if still_running and self._store.can_tail(child):
                probe(self._ctx.host, "agent_tool.recovery_reattached")
                queued.append((row, child))
                continue
            sequence = await self._reattach.rebroadcast_stored_chunks(row, child, timeout)
            completed_at = None
            if still_running:  # only an in-process adapter without a tail gets here
                result = interrupted_result(row, "not-tailable", child_still_running=True)
            else:
                result = result_from_inspection(row["run_id"], row["agent_type"], inspection)
                completed_at = inspection.get("completedAt")
            await self._finalize_recovered_run(
                row, result, sequence, started, deferred, completed_at
            )
        return queued

    async def _inspect_recovered_child(self, row: dict[str, Any]) -> tuple[Any, Any]:
        child = await self._store.child(row["agent_type"], row["run_id"])
        return child, await child.call("inspect_agent_tool_run", row["run_id"])

    async def _recover_by_reattach(
        self,
        row: dict[str, Any],
        child: Any,
        started: int,
        deferred: list[DeferredHook],
    ) -> None:
        no_progress_ms, max_window_ms = self._reattach.budgets()
        outcome = await self._reattach.to_terminal(child, row, 1, no_progress_ms, max_window_ms)
        if outcome.result is not None:
            await self._finalize_recovered_run(
                row, outcome.result, outcome.sequence, started, deferred, outcome.completed_at
            )
            return
        torn_down = await self._reattach.teardown_given_up_child(child, row, outcome.reason)
        result = interrupted_result(row, outcome.reason, child_still_running=not torn_down)
        await self._finalize_recovered_run(row, result, outcome.sequence, started, deferred)

    async def _finalize_recovered_run(
        self,
        row: dict[str, Any],
        result: RunAgentToolResult,
        sequence: int,
        started: int,
        deferred: list[DeferredHook],
        completed_at: int | None = None,
    ) -> None:
        """Write the row and send its terminal frame now, through the ledger's `finish_run`;
        the hooks wait in `deferred`."""
        self._ctx.emit(
            "agent_tool:recovery:row",
            runId=row["run_id"],
            agentType=row["agent_type"],
            status=result.status,
            reason=result.error,
            elapsedMs=self._ctx.host.clock.now_ms() - started,
        )
        await self._finish_recovered_row(KeptOutcome(row, result, sequence, completed_at), deferred)

    async def _finish_recovered_row(self, kept: KeptOutcome, deferred: list[DeferredHook]) -> None:
        """The ledger's `finish_run` with the hooks deferred; a failure keeps the outcome for
        the retry instead of ending the sweep (the other runs are still recovered)."""
        owed = self._agent_tool_recovery_owed()
        try:
            await self._ledger.finish_run(
                kept.row, kept.result, kept.sequence, kept.completed_at, defer_handlers_to=deferred
            )
        except Exception as exc:  # noqa: BLE001 - nothing durable changed: finish it later
            probe(self._ctx.host, "agent_tool.recovery_finalize_failed")
            owed[kept.row["run_id"]] = kept
            self._ctx.log(
                "error", f"finalizing recovered agent tool run {kept.row['run_id']}: {exc}"
            )
            return
        owed.pop(kept.row["run_id"], None)

    async def _finalize_kept_outcomes(
        self, rows: list[dict[str, Any]], deferred: list[DeferredHook]
    ) -> list[dict[str, Any]]:
        """Finalize the rows a failed finalization left with a kept outcome; the others."""
        owed = self._agent_tool_recovery_owed()
        rest = []
        for row in rows:
            kept = owed.get(row["run_id"])
            if kept is None:
                rest.append(row)
                continue
            probe(self._ctx.host, "agent_tool.recovery_finalize_retried")
            await self._finish_recovered_row(kept, deferred)
        return rest

    async def _arm_agent_tool_recovery_retry(self) -> None:
        """At a sweep's end: if a run it took on is still owed, schedule the retry (a backoff
        by attempt); else reset the attempts."""
        if not self._agent_tool_recovery_owed():
            self._retry_attempt = 0
            return
        attempt = self._retry_attempt
        self._retry_attempt = attempt + 1
        delay_s = RECOVERY_RETRY_DELAYS_S[min(attempt, len(RECOVERY_RETRY_DELAYS_S) - 1)]
        try:
            await self._agent.schedule(delay_s, RECOVERY_RETRY_CALLBACK, None)
        except Exception as exc:  # noqa: BLE001 - the next startup sweep still covers them
            await self._ledger.call_on_error_quietly(exc)

    async def retry(self, payload: Any = None, row: Any = None) -> None:
        """Schedule callback: sweep again the runs a sweep of this incarnation took on and could
        not finalize. Nothing in a later incarnation (its startup sweep covers every open run),
        nor while a sweep runs (it arms the retry again at its end)."""
        pending = self._task
        owed = self._agent_tool_recovery_owed()
        if not owed or (pending is not None and not pending.done()):
            return
        self._task = self._ctx.host.tasks.wait_until(
            self._run_scheduled_agent_tool_recovery(list(owed))
        )

    async def _rearm_detached_backbone_after_recovery(self) -> None:
        """Re-arm the backbone (keeping its cadence) if a detached row still owes its finish."""
        try:
            if self._ledger.owes_detached_finish():
                await self._backbone.arm(reset_cadence=False)
        except Exception as exc:  # noqa: BLE001 - the persisted schedule still drives it
            await self._ledger.call_on_error_quietly(exc)
