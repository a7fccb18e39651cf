"""0.32.0's recovery scan: run rows that say their fiber finished are settled, not recovered
(spec sdk-0.32 §5.3).

The scan reads the outcome columns too. After the deadline and active checks, in this order:
1. a **finished row** (`completed_at` set, and no ledger row or an `outcome`): a managed
   fiber's ledger row still `pending`/`running` takes the row's outcome, error and
   `completed_at`; the run row is deleted and waiters are told. No event, no hook, no snapshot
   read: this is the fiber whose row delete failed in `finally`, now deleted quietly;
2. a **stale row beside a terminal ledger row**: deleted, waiters told, no event (0.21.0
   reported it as detected and interrupted first);
3. otherwise as 0.21.0: detected, interrupted, the hook.
"""

from __future__ import annotations

from typing import Any

from agents_core.durable_memo import RUN_ROW_DELETE
from agents_core.fiber_ledger import TERMINAL_STATUSES
from agents_core.jsontext import parse_json_text
from agents_core.probes import probe
from agents_core.recovery import Recovery

__all__ = ["FinishedRowRecovery"]


class FinishedRowRecovery(Recovery):
    """The Recovery of 0.32.0: finished and stale run rows go without events or hook."""

    __slots__ = ()

    _RUN_ROW_COLUMNS = "id, name, snapshot, created_at, completed_at, outcome, error_message"

    async def _recover_run_row(self, row: dict[str, Any]) -> bool:
        fiber_id, name, created_at = row["id"], row["name"], row["created_at"]
        ledger = self._ledger.row(fiber_id)
        if row["completed_at"] is not None and (ledger is None or row["outcome"] is not None):
            self._settle_finished_row(row, ledger)
            return True
        if ledger is not None and ledger["status"] in TERMINAL_STATUSES:
            self._drop_stale_run_row(fiber_id)
            return True
        parsed, snapshot = parse_json_text(row["snapshot"])
        if not parsed:
            self._log("warn", f"corrupted snapshot of fiber {fiber_id}; recovering with null")
        self._emit_detected(fiber_id, name, ledger is not None, created_at)
        return await self._offer_orphan(row, snapshot, ledger)

    def _settle_finished_row(self, row: dict[str, Any], ledger: dict[str, Any] | None) -> None:
        fiber_id = row["id"]
        probe(self.host, "fiber.finished_run_row_settled")
        if ledger is not None:
            self.sql(
                "UPDATE cf_agents_fibers SET status = ?, error_message = ?, completed_at = ? "
                "WHERE fiber_id = ? AND status IN ('pending', 'running')",
                row["outcome"],
                row["error_message"],
                row["completed_at"],
                fiber_id,
            )
        self.sql(RUN_ROW_DELETE, fiber_id)
        self._memo.run_row_deleted(fiber_id)
        if ledger is not None:
            self._ledger.notify_terminal(fiber_id)
