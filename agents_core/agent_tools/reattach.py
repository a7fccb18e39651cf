"""Parent restart: startup recovery and re-attach of agent-tool runs (being written in this
session)."""

from __future__ import annotations

from typing import Any

__all__ = ["ReattachMixin"]


class ReattachMixin:
    def _collect_agent_tool_runs_for_recovery(self: Any) -> None:
        self._agent_tool_recovery_snapshot = [
            row["run_id"] for row in self.sql(
                "SELECT run_id FROM cf_agent_tool_runs WHERE status IN ('starting', 'running') "
                "ORDER BY started_at, rowid"
            )
        ]

    def _schedule_agent_tool_recovery(self: Any) -> None:
        if getattr(self, "_agent_tool_recovery_snapshot", None):
            raise NotImplementedError("agent-tool recovery after a parent restart is not built yet")

    async def _reattach_on_reissue(self: Any, cls: type, row: dict[str, Any]) -> Any:
        raise NotImplementedError("re-attach is not built yet")
