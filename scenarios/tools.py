"""Agent-tool children of your own: `ToolChild` does the child's side of an agent-tool run, so
that a child is one method, `work(run)`.

A parent delegates a task with `await self.run_agent_tool(Child, input=..., run_id=...)`,
awaited or `detached=` (docs/agent-tools.md). The child it names must implement the child
adapter the parent calls (start a run, cancel it, inspect it, its stored chunks, a live tail;
spec agent-tools §2.5). `ToolChild` implements all of it, durably, as the bundled scripted
child does (it is built on it): the run's row, its progress and milestones, its stored text
chunks, and the keepAlive lease that holds the isolate while the work runs. Subclass it and
write `work(run)`: report through `run.progress`, `run.milestone` and `run.text`, wait with
`run.sleep`, and return the summary (a string) or a `ToolResult`; an exception ends the run
`error`. A cancel seals the run `aborted` and makes the next `run.sleep` raise
`ToolRunCancelled`. When the child's isolate dies mid-run (a deploy), the next incarnation runs
`work` again from the start with `run.resumed` true and `run.saved` holding what the work last
gave `run.save(...)` (`resume = False`: it leaves the run silent, for the parent's budgets to
catch), so make the work's effects idempotent, or skip what `run.saved` says is done, as any
code that a crash can cut short.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from scenarios.workloads.children import ScriptedToolChild

__all__ = ["ToolChild", "ToolResult", "ToolRun", "ToolRunCancelled"]

_WORK = "work"
"""The one step of a `ToolChild`'s script: run `work` with the run's input."""


@dataclass(frozen=True)
class ToolResult:
    """What `work` may return: the summary the parent (and its model) sees, and a structured
    output (JSON) for an `agent_tool(..., output_schema=...)` to validate."""

    summary: str = ""
    output: Any = None


class ToolRunCancelled(Exception):
    """Raised by `run.sleep` once the parent cancelled the run (it is already sealed
    `aborted`): let it propagate, and `work` stops there."""


class ToolRun:
    """One agent-tool run as `work` sees it: its id and input, and how it reports."""

    def __init__(
        self, child: ToolChild, run_id: str, input: Any, resumed: bool, saved: Any
    ) -> None:
        self._child = child
        self.id = run_id
        self.input = input
        self.resumed = resumed
        """True when a new incarnation runs `work` again after the isolate died mid-run."""
        self.saved = saved
        """What `save` last stored for this run (None before the first save)."""

    def save(self, data: Any) -> None:
        """Store `data` (JSON) for this run, as a fiber's `stash()`: it commits with the turn,
        and a resumed `work` finds it in `run.saved`. Each save replaces the last."""
        self.saved = data
        self._child.sql(
            "INSERT OR REPLACE INTO tool_child_saved (run_id, data_json) VALUES (?, ?)",
            self.id,
            json.dumps(data, separators=(",", ":")),
        )

    @property
    def cancelled(self) -> bool:
        """Whether the run is over (cancelled by the parent): reports are then ignored."""
        child = self._child
        return self.id in child._cancels or child._is_settled(self.id)

    def _report(self, step: list[Any]) -> bool:
        if self.cancelled:
            return False
        self._child._act(self.id, step)
        return True

    def progress(
        self, fraction: float | None = None, message: str | None = None, phase: str | None = None
    ) -> bool:
        """An ephemeral progress signal (the parent's clients see it live; the last one is
        kept for `inspect`, and it resets a detached run's no-progress budget). False when
        the run is over."""
        fields = {"fraction": fraction, "message": message, "phase": phase}
        return self._report(["progress", {k: v for k, v in fields.items() if v is not None}])

    def milestone(self, name: str, data: Any = None) -> bool:
        """A stored milestone (replayed to reconnecting clients, listed by `inspect`)."""
        return self._report(["milestone", name, data])

    def text(self, words: str) -> bool:
        """A stored text chunk of the run's answer."""
        return self._report(["text", words])

    async def sleep(self, ms: int) -> None:
        """Let `ms` of virtual time pass (a slow call); raises `ToolRunCancelled` when the
        parent cancels the run meanwhile, or had cancelled it already."""
        if not self.cancelled:
            await self._child._pause(self.id, ms)
        if self.cancelled:
            raise ToolRunCancelled(self.id)


class ToolChild(ScriptedToolChild):
    """An agent-tool child whose run is `work(run)` (see the module docstring)."""

    resume: bool = True
    """Whether a new incarnation runs an unfinished run's `work` again (else it stays silent)."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql(
            "CREATE TABLE IF NOT EXISTS tool_child_saved (run_id TEXT PRIMARY KEY, data_json TEXT)"
        )
        self._resumed_runs: dict[str, None] = {}

    async def work(self, run: ToolRun) -> str | ToolResult:
        """The run's work: override it. Returns the summary, or a `ToolResult`."""
        raise NotImplementedError(f"{type(self).__name__} must define async def work(self, run)")

    async def start_agent_tool_run(
        self, input: Any, run_id: str, event_delivery: str | None = None
    ) -> dict[str, Any]:
        script = {"steps": [[_WORK, input]], "resume": self.resume}
        return await super().start_agent_tool_run(script, run_id, event_delivery)

    def _resume(self, run_id: str, steps: list[Any]) -> None:
        self._resumed_runs[run_id] = None
        super()._resume(run_id, steps)

    async def _step(self, run_id: str, index: int, step: list[Any]) -> bool:
        if step[0] != _WORK:
            return await super()._step(run_id, index, step)
        rows = self.sql("SELECT data_json FROM tool_child_saved WHERE run_id = ?", run_id)
        saved = json.loads(rows[0]["data_json"]) if rows else None
        run = ToolRun(self, run_id, step[1], run_id in self._resumed_runs, saved)
        try:
            result = await self.work(run)
        except ToolRunCancelled:
            return False
        except Exception as exc:
            self._settle(run_id, "error", error=str(exc) or type(exc).__name__)
            return False
        if not isinstance(result, ToolResult):
            result = ToolResult("" if result is None else str(result))
        self._settle(run_id, "completed", summary=result.summary, output=result.output)
        return False
