"""0.32.0's end of a fiber: the run row records how the body ended before it is deleted
(spec sdk-0.32 §5.2).

When the body ran, `finally` first writes its outcome into the run row (`completed_at`,
`outcome`: `completed`, `error` or `aborted`, `error_message`), swallowing a failure of that
write, then deletes the row. A failed DELETE no longer escapes: it is logged ("Failed to
finalize fiber …; leaving run row for recovery") and the fiber's own result or error goes on
unchanged. The row it leaves says the fiber finished, so the recovery scan deletes it without
calling the hook (`finished_rows.py`). The keepAlive lease is always given back; a sub-agent
gives back its lease on the root only once its row is gone, so the root's housekeeping keeps
visiting it until then. A set-up failure before the body (the root lease, keepAlive) records
no outcome.
"""

from __future__ import annotations

from collections.abc import Callable

from agents_core.durable_memo import RUN_ROW_DELETE
from agents_core.fibers import FiberRunner
from agents_core.probes import probe

__all__ = ["RUN_ROW_OUTCOME", "OutcomeFiberRunner"]

RUN_ROW_OUTCOME = (
    "UPDATE cf_agents_runs SET completed_at = ?, outcome = ?, error_message = ? WHERE id = ?"
)


class OutcomeFiberRunner(FiberRunner):
    """The FiberRunner of 0.32.0: run rows carry their outcome, and a failed delete is kept."""

    __slots__ = ()

    async def _finalize_run_row(
        self,
        fiber_id: str,
        name: str,
        outcome: tuple[str, str | None] | None,
        dispose: Callable[[], None] | None,
        registered: bool,
    ) -> None:
        deleted = False
        try:
            if outcome is not None:
                status, error = outcome
                try:
                    # An update changes no run-row id: the memo stays right without a note.
                    self.host.sql.execute(
                        RUN_ROW_OUTCOME, (self.host.clock.now_ms(), status, error, fiber_id)
                    )
                except Exception:  # noqa: BLE001 - the SDK swallows a failed outcome write
                    probe(self.host, "fiber.outcome_write_failed")
            self.sql(RUN_ROW_DELETE, fiber_id)
            self._memo.run_row_deleted(fiber_id)
            deleted = True
        except Exception as exc:  # noqa: BLE001 - logged; the fiber's own result goes on
            probe(self.host, "fiber.finalize_failed_row_left")
            self._log(
                "error",
                f'[Agent] Failed to finalize fiber "{name}" ({fiber_id}); leaving run row for '
                f"recovery: {exc}",
            )
        if dispose is not None:
            dispose()
        if registered and deleted:
            await self._parts._facet_unregister_run_logged(fiber_id)
