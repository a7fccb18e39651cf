"""The admission of a new agent-tool run: its row in `cf_agent_tool_runs` and the
`max_concurrent_agent_tools` cap (spec agent-tools §2.2).

`run_agent_tool` (`runs.py`) checks the cap synchronously, before any await: a run over the cap
is recorded as a born-error row with its started and error frames, and is never dispatched.
Otherwise the run's row is inserted as `starting`, with the detached columns when the run is
detached. The cap is per instance, each nesting level its own; the agent's options give its
default.
"""

from __future__ import annotations

from typing import Any

from agents_core.agent_tools.frames import frame, started_event
from agents_core.agent_tools.registry import (
    DetachedRunAgentToolResult,
    RunAgentToolResult,
    preview_json,
)
from agents_core.agent_tools.self_type import AgentToolsSelf
from agents_core.jsontext import to_json_text
from agents_core.probes import probe

__all__ = ["AdmissionMixin"]


class AdmissionMixin:
    def _insert_agent_tool_run(
        self: AgentToolsSelf,
        run_id: str,
        agent_type: str,
        parent_tool_call_id: str | None,
        display_order: int,
        preview: Any,
        display: Any,
        now: int,
        config: Any,
        status: str = "starting",
        error: str | None = None,
    ) -> None:
        columns = self._detached_columns(config, now) if config is not None else {}
        values = {
            "run_id": run_id,
            "parent_tool_call_id": parent_tool_call_id,
            "agent_type": agent_type,
            "input_preview": preview_json(preview),
            "input_redacted": 1,
            "status": status,
            "error_message": error,
            "display_metadata": None if display is None else to_json_text(display, "display"),
            "display_order": display_order,
            "started_at": now,
            "completed_at": now if status == "error" else None,
            **columns,
        }
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        self.sql(f"INSERT INTO cf_agent_tool_runs ({names}) VALUES ({marks})", *values.values())
        # The id names a run with a row again: a cleared one's late finish is no longer its.
        self._agent_tool_runs_cleared_in_flight.discard(run_id)

    def _agent_tool_cap_rejection(
        self: AgentToolsSelf,
        run_id: str,
        agent_type: str,
        parent_tool_call_id: str | None,
        display_order: int,
        preview: Any,
        display: Any,
        config: Any,
    ) -> Any:
        cap = self.max_concurrent_agent_tools
        if cap is None or cap == float("inf"):
            return None
        live = self.sql(
            "SELECT count(*) AS n FROM cf_agent_tool_runs WHERE status IN ('starting', 'running')"
        )[0]["n"]
        if live < cap:
            return None
        probe(self.host, "agent_tool.cap_rejected")
        error = f"maxConcurrentAgentTools ({cap if cap != int(cap) else int(cap)}) exceeded"
        now = self.host.clock.now_ms()
        self._insert_agent_tool_run(
            run_id,
            agent_type,
            parent_tool_call_id,
            display_order,
            preview,
            display,
            now,
            None,
            status="error",
            error=error,
        )
        self.broadcast(
            frame(
                parent_tool_call_id,
                0,
                started_event(run_id, agent_type, preview, display_order, display),
            )
        )
        self.broadcast(
            frame(parent_tool_call_id, 1, {"kind": "error", "runId": run_id, "error": error})
        )
        if config is not None:
            return DetachedRunAgentToolResult(run_id, agent_type, "error", error)
        return RunAgentToolResult(run_id, agent_type, "error", error=error)

    @property
    def max_concurrent_agent_tools(self: AgentToolsSelf) -> float | None:
        """Per instance (each nesting level has its own); default: no limit."""
        value = getattr(self, "_max_concurrent_agent_tools", None)
        return value if value is not None else self._options.max_concurrent_agent_tools

    @max_concurrent_agent_tools.setter
    def max_concurrent_agent_tools(self: AgentToolsSelf, value: float | None) -> None:
        self._max_concurrent_agent_tools = value
