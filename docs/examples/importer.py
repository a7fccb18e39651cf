"""docs/agent-tools.md's example: an agent-tool child of one's own and the parent that runs it,
awaited and detached. `tests/test_tool_child.py` checks that the page's classes are these."""

from __future__ import annotations

from typing import Any

from agents_core import Agent
from scenarios.tools import ToolChild, ToolResult, ToolRun

__all__ = ["Dispatcher", "Importer"]


class Importer(ToolChild):
    async def work(self, run: ToolRun) -> ToolResult:
        rows = run.input["rows"]
        for batch in range(1, 5):
            await run.sleep(60_000)  # a slow upstream call
            run.progress(fraction=batch / 4, message=f"batch {batch} of 4")
            if batch == 2:
                run.milestone("halfway", {"rows": rows // 2})
        return ToolResult(summary=f"Imported {rows} rows", output={"rows": rows})


class Dispatcher(Agent):
    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql("CREATE TABLE IF NOT EXISTS imports (run_id TEXT PRIMARY KEY, status TEXT)")

    async def lookup(self, rows: int) -> str | None:
        # Awaited: returns once the child's run has ended.
        result = await self.run_agent_tool(Importer, input={"rows": rows}, run_id="lookup")
        return result.summary

    async def start_import(self, rows: int) -> str:
        # Detached: returns at once; import_done is called when the run ends.
        handle = await self.run_agent_tool(
            Importer,
            input={"rows": rows},
            run_id="import",
            detached={"on_finish": "import_done", "max_budget_ms": 3_600_000},
        )
        return handle.status

    async def import_done(self, run: Any, lifecycle: dict[str, Any]) -> None:
        # At least once across a crash (exactly once otherwise): keep it idempotent.
        self.sql("INSERT OR IGNORE INTO imports VALUES (?, ?)", run.run_id, lifecycle["status"])

    async def on_agent_tool_finish(self, run: Any, result: Any) -> None:
        # Every run, awaited or detached.
        self.host.trace.emit("user:finished", runId=run.run_id, status=run.status)
