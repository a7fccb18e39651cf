"""`ChatAgent`: the AIChatAgent-like chat host, and its side of the agent-tool child contract.

Where it differs from `ThinkAgent` (spec agent-tools §2.5, §11 E16, E25): tables
`cf_ai_chat_agent_tool_runs` / `cf_ai_chat_agent_tool_milestones`, created with the agent; rows
are born `running` and keep the input JSON; the input message has the id
`agent-tool-<runId>-input` and is appended when the turn is admitted, which also binds the
turn's request id; the model request carries `body: {"agentToolInput": input}`; the active run is
the instance's active request's; the default output is the latest assistant text (parts
concatenated) and the default summary that output; stored chunks are found through the row's
request id, so they are visible mid-run; the terminal update is unguarded and a cancel only
touches `running` rows; an inspection reports `error` only for `error` and `summary` only for
`completed` (default "").
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from agents_core.agent_tools.registry import AgentToolRunInfo
from agents_core.chat.base import ChatHost
from agents_core.chat.child_runs import abort_reason, maybe_await
from agents_core.chat.messages import message_text, user_message
from agents_core.chat.notify_inject import DetachedInjections
from agents_core.chat.turns import TurnPlan
from agents_core.host import Host
from agents_core.jsontext import to_json_text
from agents_core.signals import AbortController

__all__ = ["ChatAgent"]

AI_CHAT_TABLES_DDL = (
    "CREATE TABLE IF NOT EXISTS cf_ai_chat_agent_tool_runs ("
    "run_id TEXT PRIMARY KEY NOT NULL, request_id TEXT, status TEXT NOT NULL, input_json TEXT, "
    "output_json TEXT, summary TEXT, error_message TEXT, started_at INTEGER NOT NULL, "
    "completed_at INTEGER, progress_json TEXT, last_signal_at INTEGER)",
    "CREATE INDEX IF NOT EXISTS cf_ai_chat_agent_tool_runs_request "
    "ON cf_ai_chat_agent_tool_runs (request_id)",
    "CREATE TABLE IF NOT EXISTS cf_ai_chat_agent_tool_milestones ("
    "run_id TEXT NOT NULL, sequence INTEGER NOT NULL, name TEXT NOT NULL, data_json TEXT, "
    "at INTEGER NOT NULL, PRIMARY KEY (run_id, sequence))",
)
SKIPPED_CHAT_CLEARED = "Agent tool run was skipped because the chat was cleared."
FAILED_DURING_STREAMING = "Agent tool run failed during streaming."


class ChatAgent(ChatHost):
    """An AIChatAgent-like chat agent: override `get_tools`, `system_prompt`, and the agent-tool
    hooks `format_agent_tool_input(input, run_id=)`, `get_agent_tool_output(run,
    messages_after_start)`, `get_agent_tool_summary(run, output, messages_after_start)` where
    `run` is `{"runId", "input"}`."""

    _agent_tool_runs_table: ClassVar[str] = "cf_ai_chat_agent_tool_runs"
    _agent_tool_milestones_table: ClassVar[str] = "cf_ai_chat_agent_tool_milestones"
    _agent_tool_active_statuses: ClassVar[tuple[str, ...]] = ("running",)

    def __init__(self, host: Host, name: str) -> None:
        super().__init__(host, name)
        self._ensure_agent_tool_tables()
        self._injections = DetachedInjections(self._context, self._messages, self._turns, self)

    # -- the detached runs' notify hooks (spec agent-tools §4.9, §4.10, §11 E29) ----------------
    async def _cf_detached_notify_finish(self, run: AgentToolRunInfo, lifecycle: Any) -> None:
        await self._injections.notify_finish(run, lifecycle)

    async def _cf_detached_notify_milestone(
        self, run: AgentToolRunInfo, milestone: Any, mode: str
    ) -> None:
        await self._injections.notify_milestone(run, milestone, mode)

    # -- hooks ---------------------------------------------------------------------------------
    def format_agent_tool_input(self, input: Any, *, run_id: str) -> dict[str, Any]:
        """The user message an agent-tool run starts with."""
        if isinstance(input, str):
            text = input
        else:
            try:
                text = json.dumps(input, indent=2)
            except (TypeError, ValueError):
                text = str(input)
        return user_message(text, f"agent-tool-{run_id}-input")

    def get_agent_tool_output(
        self, run: dict[str, Any], messages_after_start: list[dict[str, Any]]
    ) -> Any:
        """The run's output: the latest assistant text (None when there is none)."""
        return _latest_assistant_text(messages_after_start)

    def get_agent_tool_summary(
        self, run: dict[str, Any], output: Any, messages_after_start: list[dict[str, Any]]
    ) -> str:
        if isinstance(output, str):
            return output
        if output is None:
            return _latest_assistant_text(messages_after_start) or ""
        return to_json_text(output, "agent-tool output")

    # -- tables and rows -----------------------------------------------------------------------
    def _agent_tool_tables_exist(self) -> bool:
        return True

    def _ensure_agent_tool_tables(self) -> None:
        for statement in AI_CHAT_TABLES_DDL:
            self.host.sql.execute(statement)

    def _insert_agent_tool_row(self, run_id: str, input: Any, now: int) -> None:
        self.sql(
            "INSERT INTO cf_ai_chat_agent_tool_runs (run_id, status, input_json, started_at) "
            "VALUES (?, 'running', ?, ?)",
            run_id,
            to_json_text(input, "agent-tool input"),
            now,
        )

    def _active_agent_tool_run(self) -> tuple[str | None, str | None]:
        request_id = self._turns.active_request_id
        run_id = self._child_adapter.request_runs.get(request_id) if request_id else None
        return (run_id, request_id) if run_id is not None else (None, None)

    # -- the headless turn ---------------------------------------------------------------------
    async def _drive_agent_tool_run(
        self, run_id: str, input: Any, controller: AbortController
    ) -> dict[str, Any]:
        message = await maybe_await(self.format_agent_tool_input(input, run_id=run_id))
        (message,) = self._messages.check([message])

        def admit(request_id: str) -> None:
            self._child_adapter.bind_request(run_id, request_id)
            self._turns.persist_messages([message])

        plan = TurnPlan(
            self.host.entropy.nanoid(),
            trigger="agent-tool",
            signal=controller.signal,
            body={"agentToolInput": input},
            prepare=admit,
        )
        result = await self._turns.submit(plan)
        base = {"requestId": plan.request_id}
        if result.status == "aborted":
            return {**base, "status": "aborted", "error": abort_reason(controller)}
        if result.status == "skipped":
            return {**base, "status": "error", "error": SKIPPED_CHAT_CLEARED}
        last_error = self._child_adapter.last_errors.get(run_id)
        if result.status == "error" or last_error is not None:
            error = result.error or last_error or FAILED_DURING_STREAMING
            return {**base, "status": "error", "error": error}
        row = self._child_adapter.row(run_id)
        assert row is not None
        return {**base, **await self._ai_chat_completion(row, input)}

    async def _ai_chat_completion(self, row: dict[str, Any], input: Any) -> dict[str, Any]:
        after = await self._messages_after_run_start(row)
        run = {"runId": row["run_id"], "input": input}
        output = await maybe_await(self.get_agent_tool_output(run, after))
        summary = await maybe_await(self.get_agent_tool_summary(run, output, after))
        return {"status": "completed", "output": output, "summary": summary}

    def _agent_tool_exception_terminal(
        self, error: Exception, controller: AbortController
    ) -> dict[str, Any]:
        if controller.signal.aborted:
            return {"status": "aborted", "error": abort_reason(controller)}
        return {"status": "error", "error": str(error) or type(error).__name__}

    async def _messages_after_run_start(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        rows = self._messages.rows()
        input_id = f"agent-tool-{row['run_id']}-input"
        for index, message_row in enumerate(rows):
            if message_row["id"] == input_id:
                return [r["message"] for r in rows[index + 1 :]]
        return self._messages.created_since(row["started_at"])

    async def _stale_completion(self, row: dict[str, Any]) -> dict[str, Any]:
        input = json.loads(row["input_json"]) if row["input_json"] is not None else None
        return await self._ai_chat_completion(row, input)

    # -- terminal writes -----------------------------------------------------------------------
    def _write_agent_tool_terminal(self, run_id: str, terminal: dict[str, Any]) -> None:
        output = terminal.get("output")
        self.sql(
            "UPDATE cf_ai_chat_agent_tool_runs SET status = ?, "
            "request_id = COALESCE(?, request_id), output_json = ?, summary = ?, "
            "error_message = ?, completed_at = ? WHERE run_id = ?",
            terminal["status"],
            terminal.get("requestId"),
            None if output is None else to_json_text(output, "agent-tool output"),
            terminal.get("summary"),
            terminal.get("error"),
            self.host.clock.now_ms(),
            run_id,
        )

    def _seal_agent_tool_aborted(self, run_id: str, reason: str | None) -> None:
        self.sql(
            "UPDATE cf_ai_chat_agent_tool_runs SET status = 'aborted', error_message = ?, "
            "completed_at = ? WHERE run_id = ? AND status = 'running'",
            reason,
            self.host.clock.now_ms(),
            run_id,
        )

    # -- reading -------------------------------------------------------------------------------
    def _agent_tool_stream_id(self, row: dict[str, Any]) -> str | None:
        return self._stream.for_request(row["request_id"])

    async def _inspection_from_row(self, row: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"runId": row["run_id"], "status": row["status"]}
        if row["request_id"] is not None:
            out["requestId"] = row["request_id"]
            stream_id = self._stream.for_request(row["request_id"])
            if stream_id is not None:
                out["streamId"] = stream_id
        if row["output_json"] is not None:
            out["output"] = json.loads(row["output_json"])
        if row["status"] == "completed":
            out["summary"] = row["summary"] if row["summary"] is not None else ""
        if row["status"] == "error" and row["error_message"] is not None:
            out["error"] = row["error_message"]
        out["startedAt"] = row["started_at"]
        if row["completed_at"] is not None:
            out["completedAt"] = row["completed_at"]
        return out


def _latest_assistant_text(messages: list[dict[str, Any]]) -> str | None:
    for message in reversed(messages):
        if message.get("role") == "assistant":
            return message_text(message)
    return None
