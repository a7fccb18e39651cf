"""The agents the registry machine drives: one public method per API call it makes.

`RegistryRoot` is a top-level agent and `RegistryChild` its sub-agent; both carry the calls of
`_Calls` (schedules of every kind and their cancel, `run_fiber` and `start_fiber` with or without
an id and a key, `cancel_fiber`, `resolve_fiber`, `delete_fibers`), and the root also makes and
deletes sub-agents and runs agent tools on scripted children (`ScriptedToolChild`). Every
method answers plain data (dicts, bools, ints), so what a call answered can be compared with what
the model says it should answer.

A fiber sleeps `ms` of virtual time and returns, or raises at the end (`fail`); it ignores its
abort signal, so a cancelled fiber's run row stays until its sleep ends (fibers §5.8). The
recovery hook returns nothing, so an orphaned managed fiber stays `interrupted`, except for a
fiber whose name ends in `:settle`, whose hook answers `{"status": "completed"}` (fibers §6.4).
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from agents_core import Agent
from scenarios.workloads.children import ScriptedToolChild

__all__ = ["SETTLE_SUFFIX", "FiberFailed", "RegistryChild", "RegistryRoot"]

SETTLE_SUFFIX = ":settle"
"""A fiber whose name ends so is settled `completed` by the recovery hook."""


class FiberFailed(RuntimeError):
    """A fiber scripted to fail (`fail`)."""


class _Calls(Agent):
    """The schedule and fiber calls a root and a sub-agent both answer."""

    async def tick(self, payload: Any = None, row: Any = None) -> None:
        """Every schedule's callback: returns at once."""

    async def add_schedule(
        self, kind: str, value: Any, payload: Any = None, idempotent: bool | None = None
    ) -> dict[str, Any]:
        """`schedule` (kind `delayed`: seconds, `scheduled`: sim seconds since the epoch, `cron`:
        an expression) or `schedule_every` (kind `interval`: seconds); the row's id, type and
        time."""
        if kind == "interval":
            made = await self.schedule_every(int(value), "tick", payload)
        else:
            when: Any = value
            if kind == "scheduled":
                when = datetime.fromtimestamp(int(value), UTC)
            elif kind == "delayed":
                when = int(value)
            if idempotent is None:
                made = await self.schedule(when, "tick", payload)
            else:
                made = await self.schedule(when, "tick", payload, idempotent=idempotent)
        return {"id": made.id, "type": made.type, "time": made.time}

    async def drop_schedule(self, schedule_id: str) -> bool:
        return await self.cancel_schedule(schedule_id)

    async def fiber(self, name: str, ms: int, fail: bool = False) -> bool:
        """Start an unmanaged fiber (`run_fiber`) in the background; True once started."""

        async def body(_ctx: Any) -> None:
            await self._fiber_body(name, ms, fail)

        async def run() -> None:
            with contextlib.suppress(FiberFailed):  # scripted: the row records the failure
                await self.run_fiber(name, body)

        self.host.tasks.wait_until(run())
        return True

    async def managed(
        self,
        name: str,
        ms: int,
        fail: bool = False,
        fiber_id: str | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """`start_fiber`: the answer's id, status and whether it was accepted, or the error."""
        try:
            result = await self.start_fiber(
                name,
                lambda _ctx: self._fiber_body(name, ms, fail),
                fiber_id=fiber_id,
                idempotency_key=key,
            )
        except Exception as exc:  # noqa: BLE001 - the answer is what the model compares
            return {"error": str(exc)}
        return {
            "fiber_id": result.fiber_id,
            "status": result.status,
            "accepted": result.accepted,
        }

    async def _fiber_body(self, name: str, ms: int, fail: bool) -> None:
        await self.host.clock.sleep(int(ms))
        if fail:
            raise FiberFailed(f"fiber {name} failed")

    async def cancel(self, fiber_id: str, reason: str | None = None) -> bool:
        return self.cancel_fiber(fiber_id, reason)

    async def resolve(self, fiber_id: str, status: str) -> bool:
        return self.resolve_fiber(fiber_id, {"status": status})

    async def forget(self, statuses: list[str] | None = None, limit: int | None = None) -> int:
        return self.delete_fibers(status=statuses, limit=limit)

    async def on_fiber_recovered(self, ctx: Any) -> Any:
        if ctx.name.endswith(SETTLE_SUFFIX):
            return {"status": "completed"}
        return None


class RegistryChild(_Calls):
    """A sub-agent of `RegistryRoot`."""


class RegistryRoot(_Calls):
    """The top-level agent: the calls of `_Calls`, sub-agents and agent tools."""

    async def make_child(self, name: str) -> bool:
        """`sub_agent(RegistryChild, name)`: the child made, or found."""
        await self.sub_agent(RegistryChild, name)
        return True

    async def drop_child(self, name: str) -> bool:
        await self.delete_sub_agent(RegistryChild, name)
        return True

    async def tool(self, run_id: str, ms: int, detached: bool) -> dict[str, Any]:
        """`run_agent_tool` on a scripted child that sleeps `ms` and completes; its answer."""
        steps = [["sleep", int(ms)], ["finish", "completed", f"{run_id} done"]]
        result = await self.run_agent_tool(
            ScriptedToolChild,
            input={"steps": steps},
            run_id=run_id,
            detached=True if detached else None,
        )
        answer = result.to_dict()
        return {"status": answer.get("status"), "run_id": answer.get("runId")}

    async def cancel_tool(self, run_id: str) -> bool:
        await self.cancel_agent_tool(run_id, "cancelled by the machine")
        return True

    async def clear_tools(self, status: str | None = None) -> int:
        return await self.clear_agent_tool_runs(status=status)
