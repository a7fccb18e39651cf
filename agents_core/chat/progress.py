"""`report_progress`: a child's progress and milestones while it runs as an agent tool.

The active run is found from the current turn (callers never pass a run id); outside one the call
is a no-op with a `console:warn` and answers `inactive`. Two tiers (spec agent-tools §5.2):

- **Milestone** (`milestone` a non-empty string): never coalesced. A milestone row with the next
  per-run sequence (0, 1, …), `last_signal_at` bumped (`progress_json` untouched), and a
  `data-agent-milestone` chunk `{name, sequence, at, fraction?, message?, phase?, data?}`.
  Seed decision S2: that chunk is *stored* in the turn's resumable stream (so it has a stored
  chunk index, is part of the answer's persisted parts, survives eviction and is replayed), and
  broadcast like any other chunk.
- **Ephemeral progress**: a transient `data-agent-progress` frame, broadcast (never stored), and
  the snapshot persisted in `progress_json` (`data` only with `persist=True`). Within 200 ms of
  the run's previous signal it is coalesced. Seed decision S4: the latest coalesced value is
  kept and flushed when the window ends (a trailing flush; also right before the run settles);
  `fraction >= 1` is always sent at once.

`AgentToolProgress` is the component: it owns the coalescing windows and the milestone rows,
stores a milestone's chunk through `ResumableStream` and publishes it with the turn through
`ChatTurns`, and reads the host's agent-tool tables and runs through `ProgressHooks`. The SDK's
counterpart is the chat hosts' `reportProgress` with its milestone tier.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agents_core.chat.turns import CHAT_RESPONSE_TYPE
from agents_core.jsontext import to_json_text
from agents_core.probes import probe

if TYPE_CHECKING:
    from agents_core.chat.stream_store import ResumableStream
    from agents_core.chat.turns import ChatTurns
    from agents_core.context import AgentContext

__all__ = ["AGENT_TOOL_PROGRESS_COALESCE_MS", "AgentToolProgress", "ProgressHooks"]

AGENT_TOOL_PROGRESS_COALESCE_MS = 200
PROGRESS_PART = "data-agent-progress"
MILESTONE_PART = "data-agent-milestone"


@dataclass
class _Pending:
    """The latest coalesced progress of a run, waiting for the end of its window."""

    request_id: str
    fields: dict[str, Any]
    data: Any
    persist: bool


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class ProgressHooks(Protocol):
    """What progress reads of its chat host: the host's agent-tool tables, the run each request
    serves (the child adapter's memory), and the broadcast that passes the snoop. The host
    passes itself."""

    @property
    def _agent_tool_runs_table(self) -> str: ...
    @property
    def _agent_tool_milestones_table(self) -> str: ...
    @property
    def _agent_tool_request_runs(self) -> dict[str, str | None]: ...
    def _active_agent_tool_run(self) -> tuple[str | None, str | None]: ...
    def _broadcast_chat_frame(self, frame: Any, chunk_index: int | None = None) -> None: ...


class AgentToolProgress:
    """One chat host's progress reports: the coalescing window of each run, the latest value it
    holds back, and the runs' milestones (rows in the host's milestones table)."""

    __slots__ = ("_ctx", "_stream", "_turns", "_hooks", "_last_emit", "_pending", "_flushers")

    def __init__(
        self, ctx: AgentContext, stream: ResumableStream, turns: ChatTurns, hooks: ProgressHooks
    ) -> None:
        self._ctx = ctx
        self._stream = stream
        self._turns = turns
        self._hooks = hooks
        self._last_emit: dict[str, int] = {}
        self._pending: dict[str, _Pending] = {}
        self._flushers: set[str] = set()

    def report_progress(
        self,
        fraction: float | None = None,
        message: str | None = None,
        phase: str | None = None,
        milestone: str | None = None,
        data: Any = None,
        persist: bool = False,
    ) -> str:
        """Report progress of the agent-tool run this turn serves: `emitted`, `coalesced`, or
        `inactive` (outside an active run: nothing sent or stored, a warning logged)."""
        run_id, request_id = self._hooks._active_agent_tool_run()
        if run_id is None or request_id is None:
            self._ctx.log(
                "warn",
                "report_progress() called outside an active agent-tool run; ignoring. Progress "
                "is only reported while a chat agent runs as an agent tool.",
            )
            return "inactive"
        return self.report(run_id, request_id, fraction, message, phase, milestone, data, persist)

    def report(
        self,
        run_id: str,
        request_id: str,
        fraction: Any = None,
        message: Any = None,
        phase: Any = None,
        milestone: Any = None,
        data: Any = None,
        persist: bool = False,
    ) -> str:
        fields: dict[str, Any] = {}
        if _number(fraction):
            fields["fraction"] = fraction
        if isinstance(message, str):
            fields["message"] = message
        if isinstance(phase, str):
            fields["phase"] = phase
        now = self._ctx.host.clock.now_ms()
        if isinstance(milestone, str) and milestone:
            self._last_emit[run_id] = now
            self._emit_milestone(run_id, request_id, milestone, fields, data, now)
            return "emitted"
        last = self._last_emit.get(run_id)
        done = _number(fraction) and fraction >= 1
        if last is not None and now - last < AGENT_TOOL_PROGRESS_COALESCE_MS and not done:
            self._pending[run_id] = _Pending(request_id, fields, data, persist)
            if run_id not in self._flushers:
                self._flushers.add(run_id)
                self._ctx.host.tasks.wait_until(self._flush_later(run_id))
            return "coalesced"
        self._pending.pop(run_id, None)
        self._emit_progress(run_id, request_id, fields, data, persist, now)
        return "emitted"

    def _emit_progress(
        self,
        run_id: str,
        request_id: str,
        fields: dict[str, Any],
        data: Any,
        persist: bool,
        now: int,
    ) -> None:
        self._last_emit[run_id] = now
        live = dict(fields)
        if data is not None:
            live["data"] = data
        chunk = {"type": PROGRESS_PART, "transient": True, "data": live}
        frame = {"type": CHAT_RESPONSE_TYPE, "id": request_id, "done": False}
        self._hooks._broadcast_chat_frame({**frame, "body": to_json_text(chunk, "progress")})
        stored = dict(fields)
        if persist and data is not None:
            stored["data"] = data
        self._ctx.sql(
            f"UPDATE {self._hooks._agent_tool_runs_table} SET progress_json = ?, "
            "last_signal_at = ? WHERE run_id = ?",
            to_json_text(stored, "progress"),
            now,
            run_id,
        )

    def _emit_milestone(
        self,
        run_id: str,
        request_id: str,
        name: str,
        fields: dict[str, Any],
        data: Any,
        now: int,
    ) -> None:
        table = self._hooks._agent_tool_milestones_table
        rows = self._ctx.sql(
            f"SELECT COALESCE(MAX(sequence), -1) + 1 AS next FROM {table} WHERE run_id = ?",
            run_id,
        )
        sequence = int(rows[0]["next"])
        payload: dict[str, Any] = {"name": name, "sequence": sequence, "at": now, **fields}
        if data is not None:
            payload["data"] = data
        chunk = {"type": MILESTONE_PART, "id": f"{run_id}:{sequence}", "data": payload}
        body = to_json_text(chunk, "milestone")
        state = self._turns.states.get(request_id)
        self._ctx.sql(
            f"INSERT OR IGNORE INTO {table} (run_id, sequence, name, data_json, at) "
            "VALUES (?, ?, ?, ?, ?)",
            run_id,
            sequence,
            name,
            None if data is None else to_json_text(data, "milestone data"),
            now,
        )
        try:
            self._ctx.sql(
                f"UPDATE {self._hooks._agent_tool_runs_table} SET last_signal_at = ? "
                "WHERE run_id = ?",
                now,
                run_id,
            )
            # S2: stored, part of the answer, replayed.
            index = self._stream.append(state.stream_id, body) if state is not None else None
        except Exception:
            # The row and its stored chunk go together (S2), and a storage error rolls nothing
            # back: a report that raises takes its row back out, so inspection never lists a
            # milestone the stream does not hold.
            self._drop_milestone_row(run_id, sequence)
            raise
        if state is not None:  # index None: too large to store, still part of the answer
            self._turns.publish_chunk(state, chunk, body, index)
            return
        frame = {"type": CHAT_RESPONSE_TYPE, "id": request_id, "done": False}
        self._hooks._broadcast_chat_frame({**frame, "body": body})

    def _drop_milestone_row(self, run_id: str, sequence: int) -> None:
        try:
            self._ctx.sql(
                f"DELETE FROM {self._hooks._agent_tool_milestones_table} "
                "WHERE run_id = ? AND sequence = ?",
                run_id,
                sequence,
            )
        except Exception as exc:  # noqa: BLE001 - the report's own error is the one raised
            self._ctx.log(
                "error", f"milestone {sequence} of run {run_id} could not be undone: {exc}"
            )

    async def _flush_later(self, run_id: str) -> None:
        """S4's trailing flush: wait out the window, then send the latest coalesced value."""
        try:
            while run_id in self._pending:
                due = self._last_emit.get(run_id, 0) + AGENT_TOOL_PROGRESS_COALESCE_MS
                now = self._ctx.host.clock.now_ms()
                if now >= due:
                    self._flush_pending(run_id)
                    return
                await self._ctx.host.clock.sleep(due - now)
        finally:
            self._flushers.discard(run_id)

    def _flush_pending(self, run_id: str) -> None:
        pending = self._pending.pop(run_id, None)
        if (
            pending is None
            or self._hooks._agent_tool_request_runs.get(pending.request_id) != run_id
        ):
            return  # the run settled or moved on: a post-terminal signal is dropped
        probe(self._ctx.host, "chat.progress_trailing_flush")
        now = self._ctx.host.clock.now_ms()
        self._emit_progress(
            run_id, pending.request_id, pending.fields, pending.data, pending.persist, now
        )

    def forget(self, run_id: str) -> None:
        """The run's turn settled: flush what is pending (latest wins), drop the clock."""
        self._flush_pending(run_id)
        self._last_emit.pop(run_id, None)

    # -- inspection projection (§5.4) --------------------------------------------------------------
    def projection(self, row: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if row.get("progress_json") is not None and row.get("last_signal_at") is not None:
            try:
                parsed = json.loads(row["progress_json"])
            except ValueError:
                parsed = {}
            progress = parsed if isinstance(parsed, dict) else {}
            out["progress"] = {**progress, "at": row["last_signal_at"]}
        milestones = self._ctx.sql(
            f"SELECT sequence, name, data_json, at FROM {self._hooks._agent_tool_milestones_table} "
            "WHERE run_id = ? ORDER BY sequence",
            row["run_id"],
        )
        if milestones:
            out["milestones"] = [_milestone(m) for m in milestones]
        return out


def _milestone(row: dict[str, Any]) -> dict[str, Any]:
    out = {"name": row["name"], "sequence": row["sequence"], "at": row["at"]}
    if row["data_json"] is not None:
        out["data"] = json.loads(row["data_json"])
    return out
