"""`ThinkAgent`: the Think-like chat host, and its side of the agent-tool child contract.

Where it differs from `ChatAgent` (spec agent-tools §2.5, §11 E16, E25): tables
`cf_agent_tool_child_runs` / `cf_agent_tool_milestones`, created on first use; rows are born
`starting` and turn `running` inside the background task; the input is a user message with a
random id; the active run is the current turn's (found through the turn context); the default
output is None and the default summary the text of the first assistant message the run created
(text parts joined by newlines); `stream_id` is written only at the terminal update, so stored
chunks are visible only once the run settled, and never for a row reconciled after eviction;
the terminal update applies only while `completed_at` is NULL (a cancel's `aborted` wins); an
inspection reports `error_message` whatever the status (a cancel carries its reason).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from agents_core.agent_tools.registry import AgentToolRunInfo
from agents_core.chat.base import ChatHost
from agents_core.chat.child_runs import abort_reason, maybe_await
from agents_core.chat.messages import message_text, user_message
from agents_core.chat.notify_inject import ThinkSubmissions
from agents_core.chat.turns import TurnPlan, current_chat_turn
from agents_core.host import Host
from agents_core.jsontext import to_json_text
from agents_core.signals import AbortController

__all__ = ["ThinkAgent"]

THINK_TABLES_DDL = (
    "CREATE TABLE IF NOT EXISTS cf_agent_tool_child_runs ("
    "run_id TEXT PRIMARY KEY NOT NULL, request_id TEXT, stream_id TEXT, status TEXT NOT NULL, "
    "summary TEXT, output_json TEXT, error_message TEXT, started_at INTEGER NOT NULL, "
    "completed_at INTEGER, progress_json TEXT, last_signal_at INTEGER)",
    "CREATE TABLE IF NOT EXISTS cf_agent_tool_milestones ("
    "run_id TEXT NOT NULL, sequence INTEGER NOT NULL, name TEXT NOT NULL, data_json TEXT, "
    "at INTEGER NOT NULL, PRIMARY KEY (run_id, sequence))",
)
SKIPPED_BEFORE_FINISH = "Agent tool run was skipped before the child could finish."


class ThinkAgent(ChatHost):
    """A Think-like chat agent: override `get_tools`, `system_prompt`, and the agent-tool hooks
    `format_agent_tool_input(input)`, `get_agent_tool_output(run_id)`,
    `get_agent_tool_summary(run_id, output)`."""

    _agent_tool_runs_table: ClassVar[str] = "cf_agent_tool_child_runs"
    _agent_tool_milestones_table: ClassVar[str] = "cf_agent_tool_milestones"
    _agent_tool_active_statuses: ClassVar[tuple[str, ...]] = ("starting", "running")
    _think_tables_seen = False

    def __init__(self, host: Host, name: str) -> None:
        super().__init__(host, name)
        self._submissions = ThinkSubmissions(self._context, self._messages, self._turns, self)

    # -- startup and the detached runs' notify hooks (spec agent-tools §4.9, §4.10) -------------
    async def _cf_start(self) -> None:
        await super()._cf_start()
        self._submissions.resume()

    async def _cf_detached_notify_finish(self, run: AgentToolRunInfo, lifecycle: Any) -> None:
        await self._submissions.notify_finish(run, lifecycle)

    async def _cf_detached_notify_milestone(
        self, run: AgentToolRunInfo, milestone: Any, mode: str
    ) -> None:
        await self._submissions.notify_milestone(run, milestone, mode)

    # -- hooks ---------------------------------------------------------------------------------
    def format_agent_tool_input(self, input: Any) -> dict[str, Any]:
        """The user message an agent-tool run starts with."""
        text = input if isinstance(input, str) else json.dumps(input, indent=2)
        return user_message(text, self.host.entropy.nanoid())

    def get_agent_tool_output(self, run_id: str) -> Any:
        """The run's structured output (None by default)."""
        return None

    def get_agent_tool_summary(self, run_id: str, output: Any) -> str:
        """What the parent model reads: the first new assistant text, else the output."""
        answers = [m for m in self._run_messages(run_id) if m.get("role") == "assistant"]
        if answers:
            return message_text(answers[0], "\n")
        if isinstance(output, str):
            return output
        return "" if output is None else to_json_text(output, "agent-tool output")

    # -- tables and rows -----------------------------------------------------------------------
    def _agent_tool_tables_exist(self) -> bool:
        if self._think_tables_seen:
            return True
        rows = self.sql(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?",
            self._agent_tool_runs_table,
        )
        self._think_tables_seen = bool(rows)
        return self._think_tables_seen

    def _ensure_agent_tool_tables(self) -> None:
        for statement in THINK_TABLES_DDL:
            self.host.sql.execute(statement)
        self._think_tables_seen = True

    def _insert_agent_tool_row(self, run_id: str, input: Any, now: int) -> None:
        self.sql(
            "INSERT INTO cf_agent_tool_child_runs (run_id, status, started_at) "
            "VALUES (?, 'starting', ?)",
            run_id,
            now,
        )

    def _active_agent_tool_run(self) -> tuple[str | None, str | None]:
        turn = current_chat_turn()
        if turn is None or turn.agent is not self:
            return None, None
        run_id = self._child_adapter.request_runs.get(turn.request_id)
        return (run_id, turn.request_id) if run_id is not None else (None, None)

    # -- the headless turn ---------------------------------------------------------------------
    async def _drive_agent_tool_run(
        self, run_id: str, input: Any, controller: AbortController
    ) -> dict[str, Any]:
        self.sql(
            "UPDATE cf_agent_tool_child_runs SET status = 'running' "
            "WHERE run_id = ? AND status = 'starting'",
            run_id,
        )
        request_id = self.host.entropy.nanoid()
        self._child_adapter.bind_request(run_id, request_id)
        message = await maybe_await(self.format_agent_tool_input(input))
        (message,) = self._messages.check([message])

        def admit(_request_id: str) -> None:
            # At admission, not submission: a run queued behind another turn must not count
            # that turn's answer as its own.
            self._child_adapter.pre_turn_ids[run_id] = {r["id"] for r in self._messages.rows()}
            self._messages.persist(message)
            self._turns.broadcast_messages()

        plan = TurnPlan(request_id, trigger="agent-tool", signal=controller.signal, prepare=admit)
        result = await self._turns.submit(plan)
        base = {"requestId": request_id, "streamId": result.stream_id}
        last_error = self._child_adapter.last_errors.get(run_id)
        failed = result.status in ("error", "skipped") or (
            result.status == "aborted" and result.cleared
        )
        if failed or last_error is not None:
            error = result.error or last_error or SKIPPED_BEFORE_FINISH
            return {**base, "status": "error", "error": error}
        if result.status == "aborted":
            return {**base, "status": "aborted", "error": abort_reason(controller)}
        return {**base, **await self._think_completion(run_id)}

    async def _think_completion(self, run_id: str) -> dict[str, Any]:
        output = await maybe_await(self.get_agent_tool_output(run_id))
        summary = await maybe_await(self.get_agent_tool_summary(run_id, output))
        return {"status": "completed", "output": output, "summary": summary}

    def _agent_tool_exception_terminal(
        self, error: Exception, controller: AbortController
    ) -> dict[str, Any]:
        return {"status": "error", "error": str(error) or type(error).__name__}

    def _run_messages(self, run_id: str) -> list[dict[str, Any]]:
        """Messages this run added: those not there before its turn (live), else those
        created since it started (after a restart, when the snapshot is gone)."""
        before = self._child_adapter.pre_turn_ids.get(run_id)
        if before is not None:
            return [r["message"] for r in self._messages.rows() if r["id"] not in before]
        row = self._child_adapter.row(run_id)
        return [] if row is None else self._messages.created_since(row["started_at"])

    async def _messages_after_run_start(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        return self._run_messages(row["run_id"])

    async def _stale_completion(self, row: dict[str, Any]) -> dict[str, Any]:
        return await self._think_completion(row["run_id"])

    # -- terminal writes -----------------------------------------------------------------------
    def _write_agent_tool_terminal(self, run_id: str, terminal: dict[str, Any]) -> None:
        output = terminal.get("output")
        self.sql(
            "UPDATE cf_agent_tool_child_runs SET status = ?, "
            "request_id = COALESCE(?, request_id), stream_id = COALESCE(?, stream_id), "
            "summary = ?, output_json = ?, error_message = ?, completed_at = ? "
            "WHERE run_id = ? AND completed_at IS NULL",
            terminal["status"],
            terminal.get("requestId"),
            terminal.get("streamId"),
            terminal.get("summary"),
            None if output is None else to_json_text(output, "agent-tool output"),
            terminal.get("error"),
            self.host.clock.now_ms(),
            run_id,
        )

    def _seal_agent_tool_aborted(self, run_id: str, reason: str | None) -> None:
        self.sql(
            "UPDATE cf_agent_tool_child_runs SET status = 'aborted', error_message = ?, "
            "completed_at = ? WHERE run_id = ? AND completed_at IS NULL",
            reason,
            self.host.clock.now_ms(),
            run_id,
        )

    # -- reading -------------------------------------------------------------------------------
    def _agent_tool_stream_id(self, row: dict[str, Any]) -> str | None:
        stream_id: str | None = row["stream_id"]
        return stream_id

    async def _inspection_from_row(self, row: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"runId": row["run_id"], "status": row["status"]}
        if row["request_id"] is not None:
            out["requestId"] = row["request_id"]
        if row["stream_id"] is not None:
            out["streamId"] = row["stream_id"]
        if row["output_json"] is not None:
            out["output"] = json.loads(row["output_json"])
        elif row["status"] == "completed":
            output = await maybe_await(self.get_agent_tool_output(row["run_id"]))
            if output is not None:
                out["output"] = output
        if row["summary"] is not None:
            out["summary"] = row["summary"]
        if row["error_message"] is not None:
            out["error"] = row["error_message"]
        out["startedAt"] = row["started_at"]
        if row["completed_at"] is not None:
            out["completedAt"] = row["completed_at"]
        return out
