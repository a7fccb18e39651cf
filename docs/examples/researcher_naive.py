"""The README's `Researcher` as it was first written: it trusts that a snapshot exists.

A deploy before the fiber's first `stash()` leaves `ctx.snapshot` None, and the recovery hook
fails on `snap["done"]`: the research is lost. `researcher-naive.yaml` is the scenario that
`agentsim fuzz` finds this with (README, "Fuzz finds the hole"); `researcher.py` is the fix.
"""

from __future__ import annotations

from typing import Any

from agents_core import Agent

__all__ = ["Researcher"]


class Researcher(Agent):
    options = {"keep_alive_interval_ms": 2_000}

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql("CREATE TABLE IF NOT EXISTS reports (topic TEXT)")

    async def research(self, topic: str) -> None:
        self.host.tasks.wait_until(self.run_fiber("research", self._steps(topic, done=0)))

    def _steps(self, topic: str, done: int) -> Any:
        async def steps(ctx: Any) -> None:
            for step in range(done, 5):
                await self.host.clock.sleep(60_000)  # a slow model call
                self.stash({"topic": topic, "done": step + 1})
            self.sql("INSERT INTO reports VALUES (?)", topic)

        return steps

    async def on_fiber_recovered(self, ctx: Any) -> None:
        snap = ctx.snapshot  # None when the isolate died before the first stash()
        self.host.trace.emit("user:resumed", done=snap["done"])
        self.host.tasks.wait_until(
            self.run_fiber("research", self._steps(snap["topic"], snap["done"]))
        )
