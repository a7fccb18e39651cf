"""Agent-tool parents for the seed page "agents as tools" (seed 000).

`StoryParent` runs `StoryChild` scripts awaited or detached and notes every hook it gets;
`SlowFinishParent` has a slow `on_done` (a crash can land inside it); `NarratingParent` stands
in for a chat host in the notify contract (finish and milestone messages).
"""

from __future__ import annotations

from typing import Any, ClassVar

from agents_core import Response
from agents_core.agent_tools import failure_envelope
from agents_core.agent_tools.notify import detached_finish_key, detached_milestone_key
from scenarios.library_agents.children import CHILDREN, StoryChild
from scenarios.library_agents.story import StoryAgent

__all__ = ["NarratingParent", "SlowFinishParent", "StoryParent"]


class StoryParent(StoryAgent):
    """A parent that runs `StoryChild` scripts as agent tools, awaited or detached, and notes
    every hook: `finish` (on_agent_tool_finish), `on-finish` (the run's own `on_done`),
    `progress` (on_progress), `attempt` (an awaited result with its failure envelope). Drill-in
    requests to a child are refused (404) unless the registry has that run."""

    async def dispatch(
        self, run_id: str, steps: list[Any], detached: Any = True, child: str = "StoryChild"
    ) -> str:
        """A detached run; returns the handle's status (`running`, or `error` when rejected)."""
        handle = await self.run_agent_tool(
            CHILDREN[child], input={"steps": steps}, run_id=run_id, detached=detached
        )
        self._note("dispatched", run=run_id, status=handle.status)
        return handle.status

    async def run_awaited(
        self, run_id: str, steps: list[Any], retries: int = 0, child: str = "StoryChild"
    ) -> dict[str, Any]:
        """An awaited run; an interrupted, retryable result is sent again as the same call (the
        same run id) up to `retries` times."""
        for attempt in range(retries + 1):
            result = await self.run_agent_tool(
                CHILDREN[child], input={"steps": steps}, run_id=run_id
            )
            envelope = failure_envelope(result) if result.status != "completed" else None
            retryable = None if envelope is None else envelope["retryable"]
            self._note(
                "attempt",
                run=run_id,
                attempt=attempt,
                status=result.status,
                retryable=retryable,
                summary=result.summary,
            )
            if not retryable:
                break
        return result.to_dict()

    async def run_in_parallel(
        self, run_ids: list[str], steps: list[Any], child: str = "StoryChild"
    ) -> list[str]:
        runs = [
            self.run_agent_tool(CHILDREN[child], input={"steps": steps}, run_id=r) for r in run_ids
        ]
        results = await self.host.tasks.gather(*runs)
        for result in results:
            self._note(
                "attempt",
                run=result.run_id,
                attempt=0,
                status=result.status,
                retryable=None,
                summary=result.summary,
                error=result.error,
            )
        return [result.status for result in results]

    async def cancel(self, run_id: str) -> None:
        await self.cancel_agent_tool(run_id)

    async def clear(self, statuses: list[str] | None = None) -> int:
        cleared = await self.clear_agent_tool_runs(status=statuses)
        self._note("cleared", count=cleared)
        return cleared

    # -- hooks ------------------------------------------------------------------------------
    async def on_agent_tool_finish(self, run: Any, result: Any) -> None:
        lifecycle = result.lifecycle() if hasattr(result, "lifecycle") else result
        self._note(
            "finish", run=run.run_id, status=lifecycle["status"], reason=lifecycle.get("reason")
        )

    async def on_done(self, run: Any, result: Any) -> None:
        still = result.get("childStillRunning")
        self._note(
            "on-finish",
            run=run.run_id,
            status=result["status"],
            reason=result.get("reason"),
            still_running=still,
        )

    async def on_progress(self, run: Any, progress: dict[str, Any]) -> None:
        self._note(
            "progress",
            run=run.run_id,
            fraction=progress.get("fraction"),
            milestone=progress.get("milestone"),
        )

    async def on_before_sub_agent(self, request: Any, class_name: str, name: str) -> Any:
        if not self.has_agent_tool_run(class_name, name):
            self._note("drill-in", child=class_name, run=name, allowed=False)
            return Response(404, "Not found")
        self._note("drill-in", child=class_name, run=name, allowed=True)
        return None


class SlowFinishParent(StoryParent):
    """Its `on_done` takes `handler_ms` and notes when it begins and when it ends, so that a
    restart in the middle of a delivery shows (S8: at least once across a crash)."""

    handler_ms: ClassVar[int] = 2_000

    async def on_done(self, run: Any, result: Any) -> None:
        self._note("on-finish-begin", run=run.run_id, status=result["status"])
        await self.host.clock.sleep(int(self.handler_ms))
        self._note("on-finish-end", run=run.run_id, status=result["status"])


class NarratingParent(StoryParent):
    """Stands in for a chat host (Think / AIChatAgent) in the notify contract: it implements the
    two notify hooks and keeps the messages it would inject in `transcript`, keyed by the SDK's
    idempotency keys. Its "model turn" for a `react` milestone approves the child."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql(
            "CREATE TABLE IF NOT EXISTS transcript (key TEXT PRIMARY KEY, role TEXT, "
            "text TEXT, at INTEGER)"
        )

    def _inject(self, key: str, role: str, text: str) -> bool:
        return bool(
            self.host.sql.execute(
                "INSERT OR IGNORE INTO transcript VALUES (?, ?, ?, ?)",
                (key, role, text, self.host.clock.now_ms()),
            )
        )

    async def _cf_detached_notify_finish(self, run: Any, lifecycle: Any) -> None:
        status = lifecycle["status"]
        text = self.format_detached_completion(run, lifecycle)
        fresh = self._inject(detached_finish_key(run.run_id, status), "user", text)
        self._note("finish-message", run=run.run_id, status=status, fresh=fresh)

    async def _cf_detached_notify_milestone(self, run: Any, milestone: Any, mode: str) -> None:
        name = milestone["name"]
        role = "assistant" if mode == "narrate" else "user"
        text = self.format_detached_milestone(run, milestone)
        fresh = self._inject(detached_milestone_key(run.run_id, name), role, text)
        self._note("milestone-message", run=run.run_id, name=name, mode=mode, fresh=fresh)
        if mode == "react":
            child = await self.sub_agent(StoryChild, run.run_id)
            await child.call("approve", run.run_id)
            self._note("reacted", run=run.run_id, name=name)
