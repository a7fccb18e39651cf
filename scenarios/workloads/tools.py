"""`ToolsWorkload`: a parent that runs other agents as tools, described in YAML.

Each `RunPlan` is one agent-tool run with a fixed run id: its child (`scripted`, `think`,
`chat`; see `scenarios.workloads.children`), its input (a scripted child's steps, or a chat
child's user message), and `detached` options (`DetachedPlan`) or None for an awaited run.
`dispatch` runs them (every run, or the one named) and returns their results (a detached run's
handle); with `start_on = "on_start"` every run not dispatched yet is dispatched in the
background at startup. `workload_dispatched` remembers durably which runs were dispatched.

`on_finish: true` makes the built-in `workload_on_finish` the run's per-run callback; it emits
`workload:on_finish {runId, status}` and writes a `workload_finishes` row. A run's
`on_finish_work_ms` makes it work that long first (a webhook call that takes time, which a crash
can cut short), and `on_finish_fails: N` makes its first N calls raise after that
(`workload:on_finish_failed {runId, status, call}`), as a flaky webhook does: the ledger keeps
the slot claimed and delivers it again once the claim's lease expires. `notify` and
`on_milestones` tell a chat host to narrate in its chat, so they need `host: think` or `chat`
(the parent is then a `ThinkAgent` / `ChatAgent`; on a plain agent they would do nothing).
`clear(status)` clears the parent's runs (`clear_agent_tool_runs`); a run dispatched again
after it is a new run under the same id.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from agents_core import Agent
from agents_core.chat import ChatAgent, ThinkAgent
from scenarios.workloads.children import CHILD_CLASSES
from scenarios.workloads.plans import one_of, unique_plans
from scenarios.workloads.self_types import ToolsWorkloadSelf

__all__ = [
    "TOOL_HOSTS",
    "TOOL_STARTS",
    "AiChatToolsWorkload",
    "DetachedPlan",
    "RunPlan",
    "ThinkToolsWorkload",
    "ToolsWorkload",
    "WorkloadOnFinishFailed",
    "tools_workload",
]

TOOL_STARTS = ("call", "on_start")
ON_FINISH_METHOD = "workload_on_finish"
_DDL = (
    "CREATE TABLE IF NOT EXISTS workload_dispatched (run_id TEXT PRIMARY KEY, at_ms INTEGER)",
    "CREATE TABLE IF NOT EXISTS workload_finishes (run_id TEXT NOT NULL, status TEXT NOT NULL, "
    "at_ms INTEGER NOT NULL)",
)
_CALLS_DDL = (
    "CREATE TABLE IF NOT EXISTS workload_finish_calls (run_id TEXT NOT NULL, status TEXT, "
    "at_ms INTEGER NOT NULL)"
)


@dataclass(frozen=True)
class DetachedPlan:
    """The `detached` option of one run (durations in ms; None: the runtime's default)."""

    on_finish: bool = True
    max_budget_ms: int | None = None
    no_progress_budget_ms: int | None = None
    notify: bool = False
    on_milestones: tuple[str, ...] = ()
    milestone_mode: str = "narrate"
    on_finish_work_ms: int = 0
    """How long the built-in on_finish works before it records the finish."""
    on_finish_fails: int = 0
    """The built-in on_finish raises in its first N calls for this run (after its work)."""

    def option(self) -> dict[str, Any]:
        """What `run_agent_tool(detached=...)` takes."""
        out: dict[str, Any] = {}
        if self.on_finish:
            out["on_finish"] = ON_FINISH_METHOD
        if self.notify:
            out["notify"] = True
        if self.max_budget_ms is not None:
            out["max_budget_ms"] = self.max_budget_ms
        if self.no_progress_budget_ms is not None:
            out["no_progress_budget_ms"] = self.no_progress_budget_ms
        if self.on_milestones:
            out["on_milestones"] = {"names": list(self.on_milestones), "mode": self.milestone_mode}
        return out

    @property
    def flaky_on_finish(self) -> bool:
        """Whether the built-in on_finish works or fails for this run before recording."""
        return self.on_finish and (self.on_finish_work_ms > 0 or self.on_finish_fails > 0)


@dataclass(frozen=True)
class RunPlan:
    """One agent-tool run of the workload."""

    run_id: str
    child: str = "scripted"
    detached: DetachedPlan | None = None
    """None: an awaited run (`dispatch` returns when it ends)."""
    steps: tuple[tuple[Any, ...], ...] = ()
    """A scripted child's script (see `ScriptedToolChild`)."""
    input: str = "go"
    """A chat child's user message."""
    resume: bool = True
    """Whether a scripted child picks its script up again after a restart."""
    brief: str | None = None
    """A scripted child's input carries it beside its script (a field of the user's own)."""

    def child_input(self) -> Any:
        if self.child == "scripted":
            script = {"steps": [list(step) for step in self.steps], "resume": self.resume}
            return script if self.brief is None else {**script, "brief": self.brief}
        return self.input


class WorkloadOnFinishFailed(RuntimeError):
    """A call of the built-in on_finish scripted to fail (`on_finish_fails`)."""


class _ToolsMixin:
    runs: ClassVar[tuple[RunPlan, ...]] = ()
    start_on: ClassVar[str] = "call"

    def _init_tools(self: ToolsWorkloadSelf) -> None:
        for statement in _DDL:
            self.sql(statement)
        if any(plan.detached and plan.detached.flaky_on_finish for plan in self.runs):
            self.sql(_CALLS_DDL)

    async def on_start(self) -> None:
        # The agent class this is mixed into (after it in the MRO) defines on_start, which
        # the type checker cannot see from a mixin; the cast says what the mixin is mixed into.
        await super().on_start()  # type: ignore[misc]
        await _ToolsMixin._start_runs(cast("ToolsWorkloadSelf", self))

    async def _start_runs(self: ToolsWorkloadSelf) -> None:
        if self.start_on != "on_start":
            return
        for plan in self.runs:
            if not self.sql("SELECT 1 AS x FROM workload_dispatched WHERE run_id = ?", plan.run_id):
                # In the background: startup holds the input gate, and an awaited run is long.
                self.host.tasks.wait_until(self._dispatch_one(plan))

    async def dispatch(self: ToolsWorkloadSelf, run_id: str | None = None) -> list[dict[str, Any]]:
        """Run every run (or the one named): detached runs return their handle, awaited runs
        their result, once they ended."""
        plans = [plan for plan in self.runs if run_id is None or plan.run_id == run_id]
        if not plans:
            known = [plan.run_id for plan in self.runs]
            raise ValueError(f"no run {run_id!r}; this workload's runs: {known}")
        results = await self.host.tasks.gather(*(self._dispatch_one(plan) for plan in plans))
        return list(results)

    async def cancel(
        self: ToolsWorkloadSelf, run_id: str, reason: str = "cancelled by the scenario"
    ) -> None:
        """Cancel a run (`cancel_agent_tool`): a detached one is delivered `aborted`."""
        await self.cancel_agent_tool(run_id, reason)

    async def clear(self: ToolsWorkloadSelf, status: str | None = None) -> int:
        """`clear_agent_tool_runs`: every run (or those of one status) goes, a live child is
        cancelled and its sub-agent deleted; how many runs went."""
        return await self.clear_agent_tool_runs(status=status)

    async def _dispatch_one(self: ToolsWorkloadSelf, plan: RunPlan) -> dict[str, Any]:
        self.sql(
            "INSERT OR IGNORE INTO workload_dispatched (run_id, at_ms) VALUES (?, ?)",
            plan.run_id,
            self.host.clock.now_ms(),
        )
        # As JSON text: a trace record's fields are key-sorted, and a preview keeps key order.
        text = json.dumps(plan.child_input(), ensure_ascii=False)
        self.host.trace.emit("workload:run_input", runId=plan.run_id, input=text)
        result = await self.run_agent_tool(
            CHILD_CLASSES[plan.child],
            input=plan.child_input(),
            run_id=plan.run_id,
            detached=None if plan.detached is None else plan.detached.option(),
        )
        return result.to_dict()

    async def workload_on_finish(self: ToolsWorkloadSelf, run: Any, lifecycle: Any) -> None:
        """The built-in per-run `on_finish`: a trace record and a row per call."""
        status = lifecycle.get("status") if isinstance(lifecycle, dict) else None
        plan = next((p for p in self.runs if p.run_id == run.run_id), None)
        detached = plan.detached if plan is not None else None
        if detached is not None and detached.flaky_on_finish:
            if detached.on_finish_work_ms > 0:
                await self.host.clock.sleep(int(detached.on_finish_work_ms))
            self.sql(
                "INSERT INTO workload_finish_calls (run_id, status, at_ms) VALUES (?, ?, ?)",
                run.run_id,
                status,
                self.host.clock.now_ms(),
            )
            calls = self.sql(
                "SELECT COUNT(*) AS n FROM workload_finish_calls WHERE run_id = ?", run.run_id
            )[0]["n"]
            if calls <= detached.on_finish_fails:
                self.host.trace.emit(
                    "workload:on_finish_failed", runId=run.run_id, status=status, call=calls
                )
                raise WorkloadOnFinishFailed(
                    f"on_finish of run {run.run_id} failed its call {calls} "
                    f"(on_finish_fails: {detached.on_finish_fails})"
                )
        self.sql(
            "INSERT INTO workload_finishes (run_id, status, at_ms) VALUES (?, ?, ?)",
            run.run_id,
            status,
            self.host.clock.now_ms(),
        )
        self.host.trace.emit("workload:on_finish", runId=run.run_id, status=status)


class ToolsWorkload(_ToolsMixin, Agent):
    """A plain agent as the parent of `runs`."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self._init_tools()


class ThinkToolsWorkload(_ToolsMixin, ThinkAgent):
    """A Think-like chat host as the parent (`notify` and `on_milestones` narrate in its chat)."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self._init_tools()


class AiChatToolsWorkload(_ToolsMixin, ChatAgent):
    """An AIChatAgent-like chat host as the parent."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self._init_tools()


TOOL_HOSTS: dict[str, type] = {
    "agent": ToolsWorkload,
    "think": ThinkToolsWorkload,
    "chat": AiChatToolsWorkload,
}
"""The `host:` of a tools workload, to the parent's base class."""


def tools_workload(runs: Sequence[RunPlan], *, host: str = "agent", start: str = "call") -> type:
    """A subclass of the `host`'s parent class (same name) running `runs`, dispatched by a
    call to `dispatch` or at startup (`start: on_start`)."""
    plans = unique_plans(runs, RunPlan, "tools_workload", lambda p: p.run_id, "run ids")
    one_of("host", host, list(TOOL_HOSTS))
    one_of("start", start, TOOL_STARTS)
    for plan in plans:
        if plan.child not in CHILD_CLASSES:
            raise ValueError(f"run {plan.run_id}: child must be one of {list(CHILD_CLASSES)}")
    base = TOOL_HOSTS[host]
    attributes = {
        "runs": plans,
        "start_on": start,
        "__module__": base.__module__,
        "__qualname__": base.__qualname__,
        "__doc__": base.__doc__,
    }
    return type(base.__name__, (base,), attributes)
