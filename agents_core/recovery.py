"""Fiber recovery: the scan that finds orphaned fibers and hands them to `on_fiber_recovered`.

An orphan is a run row whose fiber is not executing in this incarnation (its isolate died), or
a managed ledger row left `pending`/`running` with no run row. The scan runs before the user's
`on_start`, in alarm housekeeping, and for a duplicate waiting `start_fiber`; one scan at a time.
Rows go one by one, each hook awaited; a soft deadline stops a long pass, and leftovers are
offered again on the follow-up alarm with its backoff (spec fibers §6).

Seed decision S1: when the hook throws for a managed fiber, the ledger stays `interrupted` and
records the hook's error (the SDK writes `error`); `resolve_fiber` can still settle it.

`Recovery` is the component: it owns the one-pass-at-a-time guard and the no-progress count the
follow-up alarm backs off by, reads the FiberRunner's live fibers and the FiberLedger's rows, and
calls the hooks (`on_fiber_recovered`, and the framework hosts' `_handle_internal_fiber_recovery`)
through `RecoveryHooks`, its port of the agent. The SDK's counterpart is the Agent's
`_checkRunFibers` and `onFiberRecovered`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agents_core.durable_memo import LEDGER, RUN_ROW_DELETE
from agents_core.fiber_ledger import TERMINAL_STATUSES, FiberRecoveryResult
from agents_core.jsontext import parse_json_text
from agents_core.probes import probe

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.fiber_ledger import FiberLedger
    from agents_core.fibers import FiberRunner

__all__ = [
    "FIBER_RECOVERY_BACKOFF_MAX_EXP",
    "FIBER_RECOVERY_MAX_BACKOFF_MS",
    "FiberRecoveryContext",
    "Recovery",
    "RecoveryHooks",
]

FIBER_RECOVERY_MAX_BACKOFF_MS = 300_000
FIBER_RECOVERY_BACKOFF_MAX_EXP = 20


@dataclass(frozen=True)
class FiberRecoveryContext:
    """What `on_fiber_recovered` receives; managed-only fields are None for unmanaged fibers."""

    id: str
    name: str
    snapshot: Any
    created_at: int
    recovery_reason: str = "interrupted"
    status: str | None = None
    idempotency_key: str | None = None
    metadata: dict[str, Any] | None = None

    @property
    def managed(self) -> bool:
        return self.status is not None


class RecoveryHooks(Protocol):
    """What Recovery calls of the agent: the user's hook, and the one framework hosts (chat)
    override to claim their own fibers first; both may be overridden and call `super()`."""

    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> Any: ...
    async def _handle_internal_fiber_recovery(self, ctx: FiberRecoveryContext) -> bool: ...


class Recovery:
    """One agent's fiber recovery: the scan, its guard, and its no-progress count."""

    __slots__ = (
        "_ctx",
        "_ledger",
        "_hooks",
        "host",
        "sql",
        "_memo",
        "_options",
        "_emit",
        "_log",
        "_run_fiber_active_fibers",
        "_run_fiber_recovery_in_progress",
        "_recovery_no_progress_scans",
    )

    def __init__(
        self, ctx: AgentContext, fibers: FiberRunner, ledger: FiberLedger, hooks: RecoveryHooks
    ) -> None:
        self._ctx = ctx
        self._ledger = ledger
        self._hooks = hooks
        self.host = ctx.host
        self.sql = ctx.sql
        self._memo = ctx.memo
        self._options = ctx.options
        self._emit = ctx.emit
        self._log = ctx.log
        self._run_fiber_active_fibers = fibers.active
        """The FiberRunner's live fibers (the same dict: a row of one of them is no orphan)."""
        self._run_fiber_recovery_in_progress = False
        self._recovery_no_progress_scans = 0
        """Passes in a row that left recovery pending without progress (the backoff's exponent)."""

    def _has_pending_fiber_recovery(self) -> bool:
        active = self._run_fiber_active_fibers
        for fiber_id in self._memo.run_row_ids():
            if fiber_id not in active:
                return True
        if self._memo.empty(LEDGER):
            return False
        ledger_only = self.sql(
            "SELECT 1 AS x FROM cf_agents_fibers WHERE status IN ('pending', 'running') "
            "AND fiber_id NOT IN (SELECT id FROM cf_agents_runs) LIMIT 1"
        )
        return bool(ledger_only)

    def _recovery_alarm_candidates(self, now: int) -> list[int]:
        """The Lifecycle's alarm source: a follow-up scan while recovery is pending, backing off
        (doubling from one keepAlive interval, capped) after scans that made no progress."""
        if not self._has_pending_fiber_recovery():
            return []
        exponent = min(self._recovery_no_progress_scans, FIBER_RECOVERY_BACKOFF_MAX_EXP)
        delay = self._options.keep_alive_interval_ms * 2**exponent
        if delay >= FIBER_RECOVERY_MAX_BACKOFF_MS and self._recovery_no_progress_scans > 0:
            probe(self.host, "fiber.recovery_backoff_at_cap")
        at = now + min(FIBER_RECOVERY_MAX_BACKOFF_MS, delay)
        # Trace-only (not an SDK event): the recovery candidate itself, which the slot may not
        # show when an earlier candidate wins (checker `recovery_backoff`).
        self.host.trace.emit("fiber:recovery:backoff", at=at, delayMs=at - now)
        return [at]

    async def _check_run_fibers(self) -> None:
        """One recovery pass; returns at once if a pass is already running in this incarnation."""
        if self._run_fiber_recovery_in_progress:
            probe(self.host, "fiber.recovery_scan_already_running")
            return
        self._run_fiber_recovery_in_progress = True
        scan_start = self.host.clock.now_ms()
        progress = False
        try:
            # A deadline stops each pass at its next row; the ledger-only pass still runs its
            # own check, so a stopped scan may report a second skip (managed) as the SDK does.
            progress = await self._recover_run_rows(scan_start)
            progress = await self._recover_ledger_only_rows(scan_start) or progress
        finally:
            self._run_fiber_recovery_in_progress = False
            before = self._recovery_no_progress_scans
            if progress:
                self._recovery_no_progress_scans = 0
            elif self._has_pending_fiber_recovery():
                self._recovery_no_progress_scans += 1
            else:
                self._recovery_no_progress_scans = 0
            scans = self._recovery_no_progress_scans
            if progress or scans or before:
                # Trace-only (not an SDK event): the pass's outcome and the no-progress count
                # the follow-up alarm's backoff is computed from (checker `recovery_backoff`).
                self.host.trace.emit("fiber:recovery:pass", progress=progress, scans=scans)

    def _past_deadline(self, scan_start: int, row_id: str, name: str, managed: bool) -> bool:
        deadline = self._options.fiber_recovery_scan_deadline_ms
        elapsed = self.host.clock.now_ms() - scan_start
        if deadline > 0 and elapsed > deadline:
            probe(self.host, "fiber.recovery_scan_deadline")
            extra = {"managed": True} if managed else {}
            self._emit(
                "fiber:recovery:skipped",
                fiberId=row_id,
                fiberName=name,
                reason="scan_deadline_exceeded",
                elapsedMs=elapsed,
                **extra,
            )
            return True
        return False

    async def _recover_run_rows(self, scan_start: int) -> bool:
        progress = False
        known = self._memo.known_run_row_ids()
        active = self._run_fiber_active_fibers
        if known is not None and all(fiber_id in active for fiber_id in known):
            # Every run row is a fiber executing here: the scan would offer none of them.
            return False
        columns = self._RUN_ROW_COLUMNS
        rows = self.sql(f"SELECT {columns} FROM cf_agents_runs ORDER BY rowid")
        self._memo.saw_run_rows(rows)
        for row in rows:
            fiber_id, name = row["id"], row["name"]
            if self._past_deadline(scan_start, fiber_id, name, managed=False):
                break
            # The rows were read up front and each hook is awaited: a fiber that was live then
            # may have finished since, its row gone. Only a row that is still there is an
            # orphan (the SDK recovers the stale copy: F6).
            current = self.sql(f"SELECT {columns} FROM cf_agents_runs WHERE id = ?", fiber_id)
            if not current:
                probe(self.host, "fiber.finished_during_scan_skipped")
                continue
            row = current[0]
            if fiber_id in self._run_fiber_active_fibers:
                continue
            progress = await self._recover_run_row(row) or progress
        return progress

    _RUN_ROW_COLUMNS = "id, name, snapshot, created_at"
    """The columns of `cf_agents_runs` the scan reads."""

    async def _recover_run_row(self, row: dict[str, Any]) -> bool:
        """One orphaned run row (no fiber of this incarnation runs it); whether the pass made
        progress with it. 0.21.0 reports every row as detected and interrupted first, then drops
        a stale row beside a terminal ledger row, or hands it to the hook."""
        fiber_id, name, created_at = row["id"], row["name"], row["created_at"]
        parsed, snapshot = parse_json_text(row["snapshot"])
        if not parsed:
            self._log("warn", f"corrupted snapshot of fiber {fiber_id}; recovering with null")
        ledger = self._ledger.row(fiber_id)
        self._emit_detected(fiber_id, name, ledger is not None, created_at)
        if ledger is not None and ledger["status"] in TERMINAL_STATUSES:
            self._drop_stale_run_row(fiber_id)
            return True
        return await self._offer_orphan(row, snapshot, ledger)

    def _drop_stale_run_row(self, fiber_id: str) -> None:
        """A run row left beside a terminal ledger row: deleted, its waiters told."""
        probe(self.host, "fiber.stale_terminal_run_row_dropped")
        self.sql(RUN_ROW_DELETE, fiber_id)
        self._memo.run_row_deleted(fiber_id)
        self._ledger.notify_terminal(fiber_id)

    async def _offer_orphan(
        self, row: dict[str, Any], snapshot: Any, ledger: dict[str, Any] | None
    ) -> bool:
        """An interrupted fiber's run row: the ledger (managed) becomes `interrupted`, the hook
        runs, and the row goes when the hook succeeded, the fiber was managed or is too old."""
        fiber_id, name, created_at = row["id"], row["name"], row["created_at"]
        progress = False
        ctx = FiberRecoveryContext(fiber_id, name, snapshot, created_at)
        if ledger is not None:
            self.sql(
                "UPDATE cf_agents_fibers SET status = 'interrupted', snapshot = ?, "
                "completed_at = ? WHERE fiber_id = ? AND status IN ('pending', 'running')",
                row["snapshot"],
                self.host.clock.now_ms(),
                fiber_id,
            )
            ctx = self._managed_context(ctx, ledger)
        ok = await self._run_fiber_recovery_hook(ctx, ledger)
        max_age = self._options.fiber_recovery_max_age_ms
        age = self.host.clock.now_ms() - created_at
        too_old = max_age > 0 and age > max_age
        self._probe_recovered_row(ok, ledger is not None, too_old)
        if ok or ledger is not None or too_old:
            if not ok and ledger is None and too_old:
                self._emit(
                    "fiber:recovery:skipped",
                    fiberId=fiber_id,
                    fiberName=name,
                    reason="max_age_exceeded",
                    elapsedMs=age,
                )
            self.sql(RUN_ROW_DELETE, fiber_id)
            self._memo.run_row_deleted(fiber_id)
            progress = True
        if ledger is not None:
            self._ledger.notify_terminal(fiber_id)
        return progress

    def _probe_recovered_row(self, ok: bool, managed: bool, too_old: bool) -> None:
        if managed:
            probe(self.host, "fiber.managed_orphan_recovered")
        elif ok:
            probe(self.host, "fiber.orphan_recovered")
        elif too_old:
            probe(self.host, "fiber.max_age_dropped")
        else:
            probe(self.host, "fiber.recovery_failed_row_kept")

    async def _recover_ledger_only_rows(self, scan_start: int) -> bool:
        progress = False
        if self._memo.known_empty(LEDGER):
            return False  # no managed fiber at all: none can be left without its run row
        rows = self.sql(
            "SELECT * FROM cf_agents_fibers WHERE status IN ('pending', 'running') "
            "AND fiber_id NOT IN (SELECT id FROM cf_agents_runs) ORDER BY created_at, fiber_id"
        )
        for ledger in rows:
            fiber_id, name = ledger["fiber_id"], ledger["name"]
            if self._past_deadline(scan_start, fiber_id, name, managed=True):
                break
            if fiber_id in self._run_fiber_active_fibers:
                continue
            self.sql(
                "UPDATE cf_agents_fibers SET status = 'interrupted', completed_at = ? "
                "WHERE fiber_id = ? AND status IN ('pending', 'running')",
                self.host.clock.now_ms(),
                fiber_id,
            )
            probe(self.host, "fiber.ledger_only_row_recovered")
            _, snapshot = parse_json_text(ledger["snapshot"])
            ctx = self._managed_context(
                FiberRecoveryContext(fiber_id, name, snapshot, ledger["created_at"]), ledger
            )
            self._emit_detected(fiber_id, name, True, ledger["created_at"])
            await self._run_fiber_recovery_hook(ctx, ledger)
            progress = True
            self._ledger.notify_terminal(fiber_id)
        return progress

    def _managed_context(
        self, ctx: FiberRecoveryContext, ledger: dict[str, Any]
    ) -> FiberRecoveryContext:
        ok, metadata = parse_json_text(ledger["metadata_json"])
        return FiberRecoveryContext(
            ctx.id,
            ctx.name,
            ctx.snapshot,
            ctx.created_at,
            ctx.recovery_reason,
            status="interrupted",
            idempotency_key=ledger["idempotency_key"],
            metadata=metadata if ok and isinstance(metadata, dict) else None,
        )

    def _emit_detected(self, fiber_id: str, name: str, managed: bool, created_at: int) -> None:
        age = self.host.clock.now_ms() - created_at
        for event in ("fiber:recovery:detected", "fiber:run:interrupted"):
            self._emit(
                event,
                fiberId=fiber_id,
                fiberName=name,
                managed=managed,
                recoveryReason="interrupted",
                elapsedMs=age,
            )

    async def _run_fiber_recovery_hook(
        self, ctx: FiberRecoveryContext, ledger: dict[str, Any] | None
    ) -> bool:
        managed = ledger is not None
        common = {
            "fiberId": ctx.id,
            "fiberName": ctx.name,
            "managed": managed,
            "recoveryReason": ctx.recovery_reason,
        }
        # elapsedMs is `undefined` in the SDK: absent from its JSON, so absent here too.
        self._emit("fiber:recovery:attempt", **common)
        started = self.host.clock.now_ms()
        try:
            handled = await self._internal_recovery_with_timeout(ctx)
            if not handled:
                result = await self._hooks.on_fiber_recovered(ctx)
                if managed and result:
                    self._ledger.apply_recovery_result(ctx.id, FiberRecoveryResult.coerce(result))
            status = "internal" if handled else ("managed" if managed else "user")
            self._emit(
                "fiber:recovery:handled",
                **common,
                elapsedMs=self.host.clock.now_ms() - started,
                status=status,
            )
            return True
        except Exception as exc:  # noqa: BLE001 - a failing hook is recorded, never propagated
            message = str(exc) or type(exc).__name__
            if managed:
                # S1: stays `interrupted`; the hook's error is recorded for later analysis.
                probe(self.host, "fiber.managed_recovery_hook_threw")
                self.sql(
                    "UPDATE cf_agents_fibers SET error_message = ? "
                    "WHERE fiber_id = ? AND status = 'interrupted'",
                    message,
                    ctx.id,
                )
                self._ledger.notify_terminal(ctx.id)
            self._emit(
                "fiber:recovery:failed",
                **common,
                elapsedMs=self.host.clock.now_ms() - started,
                error=message,
                reason="handler_error",
            )
            self._log("error", f'recovery of fiber "{ctx.name}" ({ctx.id}) failed: {message}')
            return False

    async def _internal_recovery_with_timeout(self, ctx: FiberRecoveryContext) -> bool:
        timeout_ms = self._options.fiber_recovery_hook_timeout_ms
        if timeout_ms <= 0:
            return bool(await self._hooks._handle_internal_fiber_recovery(ctx))
        handler = self.host.tasks.wait_until(self._hooks._handle_internal_fiber_recovery(ctx))
        if handler.done():
            return bool(await handler)
        timeout = self.host.tasks.deferred()

        async def expire() -> None:
            await self.host.clock.sleep(timeout_ms)
            if not handler.done():
                probe(self.host, "fiber.internal_recovery_timed_out")
            timeout.reject(TimeoutError(f"internal fiber recovery timed out after {timeout_ms} ms"))

        self.host.tasks.wait_until(expire())
        return bool(await self.host.tasks.race(handler, timeout))
