"""Agent-tool children for the seed page "agents as tools" (seed 000).

`StoryChild` is the shipped scripted child (`scenarios.workloads.children.ScriptedToolChild`,
which implements the child adapter by hand) with story notes and extra steps: these stories are
about the parent's side of the contract, and a script says exactly when the child streams,
signals, waits or resets, with no model in between. The script and the child's place in it are
durable, so a restarted child resumes where it was, as a chat host's own recovery would.
"""

from __future__ import annotations

from typing import Any

from agents_core import Request, Response
from scenarios.library_agents.story import StoryAgent
from scenarios.workloads.children import ScriptedToolChild

__all__ = ["CHILDREN", "MiddleChild", "StoryChild", "StubbornChild"]

APPROVALS_DDL = "CREATE TABLE IF NOT EXISTS child_approvals (run_id TEXT PRIMARY KEY)"


class StoryChild(ScriptedToolChild, StoryAgent):
    """An agent-tool child driven by a script in its input (`{"steps": [...]}`): the shipped
    `ScriptedToolChild` (start, cancel, inspect, stored chunks and a live tail), with notes and
    extra steps.

    Steps: `["text", s]` a stored text chunk; `["progress", {...}]` an ephemeral progress frame;
    `["milestone", name, data?]` a stored milestone (S2); `["sleep", ms]` (durable: a restart
    sleeps only what is left); `["await-approval"]` until `approve(run_id)`; `["reset"]` the
    child's own isolate resets (its parent lives); `["fan-out", n, steps]` n awaited grandchild
    runs in parallel; `["finish", status, summary_or_error]`; `["hang"]`. The script and its
    cursor are durable, so a restarted child resumes where it was (as chat recovery would); a
    cancel lets a waiting script go."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql(APPROVALS_DDL)
        self._approvals: dict[str, Any] = {}

    def _resume(self, run_id: str, steps: list[Any]) -> None:
        self._note("child-resumed", run=run_id)
        super()._resume(run_id, steps)

    async def on_request(self, request: Request) -> Response:
        """A drill-in (`/sub/StoryChild/<run id>/...` on the parent) reads the run's status."""
        rows = self.sql("SELECT status FROM child_runs WHERE run_id = ?", self.name)
        return Response(200, {"run": self.name, "status": rows[0]["status"] if rows else None})

    async def cancel_agent_tool_run(self, run_id: str, reason: Any = None) -> None:
        if self._cancel(run_id, reason):
            self._note(
                "child-cancelled", run=run_id, reason=None if reason is None else str(reason)
            )

    async def approve(self, run_id: str) -> None:
        """What the parent's reaction to `needs-approval` does: let the script go on."""
        self.sql(
            "INSERT OR IGNORE INTO child_approvals SELECT run_id FROM child_runs WHERE run_id = ?",
            run_id,
        )
        waiter = self._approvals.pop(run_id, None)
        if waiter is not None:
            waiter.resolve(None)

    # -- the extra steps --------------------------------------------------------------------
    async def _step(self, run_id: str, index: int, step: list[Any]) -> bool:
        kind = step[0]
        if kind == "reset":
            self._advance(run_id, index)
            await self.host.clock.sleep(0)  # commit the cursor before the isolate goes
            self._note("child-reset", run=run_id)
            self.host.lifecycle.abort("reset")
            return False
        if kind == "await-approval":
            while not self.sql("SELECT 1 AS x FROM child_approvals WHERE run_id = ?", run_id):
                self._approvals[run_id] = self.host.tasks.deferred()
                await self._wait(run_id, self._approvals[run_id])
                if run_id not in self._stops:
                    return False  # settled while waiting (a cancel): the script lets go
            return True
        if kind == "fan-out":
            await self._fan_out(run_id, int(step[1]), step[2])
            return True
        return await super()._step(run_id, index, step)

    async def _pause(self, run_id: str, remaining_ms: int) -> None:
        await self._wait(run_id, self.host.clock.sleep(max(0, remaining_ms)))

    async def _fan_out(self, run_id: str, count: int, steps: list[Any]) -> None:
        runs = [
            self.run_agent_tool(StoryChild, input={"steps": steps}, run_id=f"{run_id}-g{i}")
            for i in range(count)
        ]
        for result in await self.host.tasks.gather(*runs):
            self._note("grandchild", run=result.run_id, status=result.status, error=result.error)


class StubbornChild(StoryChild):
    """A child that cannot be cancelled: its script runs to its own end whatever the parent
    decided (a give-up cannot tear it down)."""

    async def cancel_agent_tool_run(self, run_id: str, reason: Any = None) -> None:
        raise RuntimeError("this child cannot be cancelled")


class MiddleChild(StoryChild):
    """A child that is itself a parent, with its own cap of one concurrent agent tool."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.max_concurrent_agent_tools = 1


CHILDREN = {cls.__name__: cls for cls in (StoryChild, StubbornChild, MiddleChild)}
