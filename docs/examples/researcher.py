"""The README's `Researcher`: a research fiber that survives a deploy at any instant.

Three things make it safe, each a hole `agentsim fuzz` finds in `researcher_naive.py`:
- the topic is in the fiber's name, so recovery knows it even when the isolate died before the
  first `stash()` (then `ctx.snapshot` is None and the work starts again from step 0);
- the report's INSERT is idempotent (`topic` is the key, `INSERT OR IGNORE`), because a fiber
  whose last turn committed can still be recovered and run its tail again before its row is gone;
- a second `research` of the same topic is harmless for the same reason.
The README's first example is this class, word for word (tests/test_readme.py checks it).
"""

from __future__ import annotations

from typing import Any

from agents_core import Agent

__all__ = ["Researcher"]


class Researcher(Agent):
    options = {"keep_alive_interval_ms": 2_000}

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        self.sql("CREATE TABLE IF NOT EXISTS reports (topic TEXT PRIMARY KEY)")

    async def research(self, topic: str) -> None:
        self.host.tasks.wait_until(self.run_fiber(f"research:{topic}", self._steps(topic, 0)))

    def _steps(self, topic: str, done: int) -> Any:
        async def steps(ctx: Any) -> None:
            for step in range(done, 5):
                await self.host.clock.sleep(60_000)  # a slow model call
                self.stash({"done": step + 1})
            # Idempotent: a recovery after this turn committed runs it again.
            self.sql("INSERT OR IGNORE INTO reports VALUES (?)", topic)

        return steps

    async def on_fiber_recovered(self, ctx: Any) -> None:
        # The isolate died mid-fiber. ctx.snapshot is the last stash(), or None when it died
        # before the first one: then start again from the beginning.
        topic = ctx.name.removeprefix("research:")
        done = ctx.snapshot["done"] if ctx.snapshot else 0
        self.host.trace.emit("user:resumed", done=done)
        self.host.tasks.wait_until(self.run_fiber(ctx.name, self._steps(topic, done)))
