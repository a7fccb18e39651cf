"""The step journal of one attempt of a Task run: the SQL `step.do` and `step.sleep` drive
(spec sdk-0.32 §6.5; the SDK's step-engine port).

Every write to `cf_agents_task_steps` is fenced by the attempt's generation: an attempt another
one superseded unwinds (`AttemptSuperseded`) without touching the journal. The journal also
moves the run's claim on (at most every 15 s, as a step starts), writes its status message
(fenced, and not again when unchanged) and reads its cancellation request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents_core.releases.v0_32.task_errors import AttemptSuperseded
from agents_core.releases.v0_32.task_values import error_summary, serialize

if TYPE_CHECKING:
    from agents_core.context import AgentContext
    from agents_core.host import Host

__all__ = ["CLAIM_REFRESH_AFTER_MS", "StepJournal"]

CLAIM_REFRESH_AFTER_MS = 15_000
"""Half the claim slack: a step starting this long after the last claim write moves it on."""


class StepJournal:
    """The step rows of one run, written for one attempt (fenced by its generation)."""

    __slots__ = (
        "_ctx",
        "run_id",
        "_generation",
        "_claim_timeout_ms",
        "_last_claim_write_ms",
        "_last_status",
    )

    def __init__(
        self,
        ctx: AgentContext,
        run_id: str,
        generation: str,
        *,
        claimed_at_ms: int = 0,
        claim_timeout_ms: int = 0,
    ) -> None:
        self._ctx = ctx
        self.run_id = run_id
        self._generation = generation
        self._claim_timeout_ms = claim_timeout_ms
        self._last_claim_write_ms = claimed_at_ms
        self._last_status: str | None = None

    @property
    def host(self) -> Host:
        return self._ctx.host

    def _now(self) -> int:
        return self._ctx.host.clock.now_ms()

    def _assert_current(self) -> None:
        rows = self._ctx.sql(
            "SELECT generation FROM cf_agents_task_runs WHERE run_id = ?", self.run_id
        )
        if not rows or rows[0]["generation"] != self._generation:
            raise AttemptSuperseded(self.run_id)

    def _fenced_run_write(self, assignments: str, *params: Any) -> bool:
        query = (
            f"UPDATE cf_agents_task_runs SET {assignments} "
            "WHERE run_id = ? AND generation = ? AND state = 'running'"
        )
        return self._ctx.host.sql.execute(query, (*params, self.run_id, self._generation)) > 0

    # -- reads --------------------------------------------------------------------------------
    def read(self, name: str) -> dict[str, Any] | None:
        rows = self._ctx.sql(
            "SELECT * FROM cf_agents_task_steps WHERE run_id = ? AND step_name = ?",
            self.run_id,
            name,
        )
        return rows[0] if rows else None

    def count(self) -> int:
        rows = self._ctx.sql(
            "SELECT COUNT(*) AS count FROM cf_agents_task_steps WHERE run_id = ?", self.run_id
        )
        return int(rows[0]["count"]) if rows else 0

    def cancellation_requested(self) -> tuple[str | None] | None:
        """`(reason,)` when the run's cancellation was requested, else None."""
        rows = self._ctx.sql(
            "SELECT cancel_requested, cancel_reason FROM cf_agents_task_runs WHERE run_id = ?",
            self.run_id,
        )
        if not rows or rows[0]["cancel_requested"] != 1:
            return None
        return (rows[0]["cancel_reason"],)

    # -- the run row --------------------------------------------------------------------------
    def refresh_claim(self) -> None:
        now = self._now()
        if now - self._last_claim_write_ms < CLAIM_REFRESH_AFTER_MS:
            return
        if self._fenced_run_write("next_at = ?, updated_at = ?", now + self._claim_timeout_ms, now):
            self._last_claim_write_ms = now

    def write_status(self, message: str) -> None:
        if message == self._last_status:
            return
        if self._fenced_run_write("status_message = ?, updated_at = ?", message, self._now()):
            self._last_status = message

    # -- step rows ------------------------------------------------------------------------------
    def insert_do(self, name: str) -> None:
        self._assert_current()
        now = self._now()
        self._ctx.sql(
            "INSERT INTO cf_agents_task_steps (run_id, step_name, kind, state, attempt, next_at, "
            "created_at, started_at, updated_at) VALUES (?, ?, 'do', 'running', 1, NULL, ?, ?, ?)",
            self.run_id,
            name,
            now,
            now,
            now,
        )

    def insert_sleep(self, name: str, wake_at: int) -> None:
        self._assert_current()
        now = self._now()
        self._ctx.sql(
            "INSERT INTO cf_agents_task_steps (run_id, step_name, kind, state, attempt, next_at, "
            "created_at, started_at, updated_at) "
            "VALUES (?, ?, 'sleep', 'waiting', 0, ?, ?, NULL, ?)",
            self.run_id,
            name,
            wake_at,
            now,
            now,
        )

    def insert_completed_sleep(self, name: str) -> None:
        self._assert_current()
        now = self._now()
        self._ctx.sql(
            "INSERT INTO cf_agents_task_steps (run_id, step_name, kind, state, attempt, next_at, "
            "created_at, completed_at, updated_at) "
            "VALUES (?, ?, 'sleep', 'completed', 0, NULL, ?, ?, ?)",
            self.run_id,
            name,
            now,
            now,
            now,
        )

    def claim_attempt(self, name: str) -> int:
        self._assert_current()
        now = self._now()
        self._ctx.sql(
            "UPDATE cf_agents_task_steps SET state = 'running', attempt = attempt + 1, "
            "next_at = NULL, started_at = ?, updated_at = ? WHERE run_id = ? AND step_name = ?",
            now,
            now,
            self.run_id,
            name,
        )
        row = self.read(name)
        return int(row["attempt"]) if row else 1

    def complete(self, name: str, result: Any) -> None:
        self._assert_current()
        text = serialize(result, f'result of step "{name}" in run "{self.run_id}"')
        now = self._now()
        self._ctx.sql(
            "UPDATE cf_agents_task_steps SET state = 'completed', result = ?, next_at = NULL, "
            "completed_at = ?, updated_at = ? WHERE run_id = ? AND step_name = ?",
            text,
            now,
            now,
            self.run_id,
            name,
        )

    def fail(self, name: str, error: BaseException) -> None:
        self._assert_current()
        error_name, message = error_summary(error)
        self._ctx.sql(
            "UPDATE cf_agents_task_steps SET state = 'failed', error_name = ?, error_message = ?, "
            "next_at = NULL, updated_at = ? WHERE run_id = ? AND step_name = ?",
            error_name,
            message,
            self._now(),
            self.run_id,
            name,
        )

    def wait(self, name: str, wake_at: int) -> None:
        self._assert_current()
        self._ctx.sql(
            "UPDATE cf_agents_task_steps SET state = 'waiting', next_at = ?, updated_at = ? "
            "WHERE run_id = ? AND step_name = ?",
            wake_at,
            self._now(),
            self.run_id,
            name,
        )
