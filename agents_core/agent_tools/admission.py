"""The admission of a new agent-tool run: its row in `cf_agent_tool_runs` and the
`max_concurrent_agent_tools` cap (spec agent-tools §2.2).

`run_agent_tool` (`runs.py`) checks the cap synchronously, before any await: a run over the cap
is recorded as a born-error row with its started and error frames, and is never dispatched.
Otherwise the run's row is inserted as `starting`, with the detached columns when the run is
detached. The cap is per instance, each nesting level its own; the agent's options give its
default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents_core.agent_tools.detached_option import detached_columns
from agents_core.agent_tools.frames import frame, started_event
from agents_core.agent_tools.registry import (
    DetachedRunAgentToolResult,
    RunAgentToolResult,
    preview_json,
)
from agents_core.jsontext import to_json_text
from agents_core.probes import probe

if TYPE_CHECKING:
    from agents_core.agent_tools.hooks import AgentToolHooks
    from agents_core.agent_tools.run_store import RunStore
    from agents_core.context import AgentContext

__all__ = ["Admission"]


class Admission:
    """A new run's row and the concurrency cap it is admitted under."""

    __slots__ = ("_ctx", "_agent", "_store", "_max_concurrent")

    def __init__(self, ctx: AgentContext, agent: AgentToolHooks, store: RunStore) -> None:
        self._ctx = ctx
        self._agent = agent
        self._store = store
        self._max_concurrent: float | None = None
        """Set per instance (`max_concurrent_agent_tools = n`); None falls back to the option."""

    @property
    def max_concurrent(self) -> float | None:
        """Per instance (each nesting level has its own); default: the agent's option."""
        value = self._max_concurrent
        return value if value is not None else self._ctx.options.max_concurrent_agent_tools

    @max_concurrent.setter
    def max_concurrent(self, value: float | None) -> None:
        self._max_concurrent = value

    def insert(
        self,
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
        event_delivery: str | None = None,
    ) -> None:
        columns = detached_columns(config, now, self._ctx.options) if config is not None else {}
        if event_delivery is not None:
            columns["event_delivery"] = event_delivery
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
        self._ctx.sql(
            f"INSERT INTO cf_agent_tool_runs ({names}) VALUES ({marks})", *values.values()
        )
        # The id names a run with a row again: a cleared one's late finish is no longer its.
        self._store.cleared_in_flight.discard(run_id)

    def cap_rejection(
        self,
        run_id: str,
        agent_type: str,
        parent_tool_call_id: str | None,
        display_order: int,
        preview: Any,
        display: Any,
        config: Any,
    ) -> Any:
        cap = self.max_concurrent
        if cap is None or cap == float("inf"):
            return None
        live = self._ctx.sql(
            "SELECT count(*) AS n FROM cf_agent_tool_runs WHERE status IN ('starting', 'running')"
        )[0]["n"]
        if live < cap:
            return None
        probe(self._ctx.host, "agent_tool.cap_rejected")
        error = f"maxConcurrentAgentTools ({cap if cap != int(cap) else int(cap)}) exceeded"
        now = self._ctx.host.clock.now_ms()
        self.insert(
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
        self._agent.broadcast(
            frame(
                parent_tool_call_id,
                0,
                started_event(run_id, agent_type, preview, display_order, display),
            )
        )
        self._agent.broadcast(
            frame(parent_tool_call_id, 1, {"kind": "error", "runId": run_id, "error": error})
        )
        if config is not None:
            return DetachedRunAgentToolResult(run_id, agent_type, "error", error)
        return RunAgentToolResult(run_id, agent_type, "error", error=error)
