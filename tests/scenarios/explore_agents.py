"""Agents with bugs planted for `agentsim explore` to find by itself.

`SplitProgress` keeps its place twice, in the fiber's stash and in a `progress` row of its own,
and writes the row in a later turn than the stash (it reports to a dashboard in between): a
crash between the two turns makes its recovery, which trusts the row, resume behind the stash
(`no_lost_stash`). `Handoff` hands a keepAlive lease from a worker to a closer whose timers are
due at the same instant: the closer assumes the worker woke first, so when it wakes first it
finds nothing to give back, the worker's lease is never released and the heartbeat never stops
(the liveness rule). FIFO order never shows either bug. `Nest` has a sub-agent whose name no
scenario step can spell (`a leaf`), for the points explore cannot write down.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agents_core import Agent
from tests.checkers.agents import Worker

__all__ = ["Handoff", "Leaf", "Nest", "SplitProgress"]

PROGRESS_DDL = "CREATE TABLE IF NOT EXISTS progress (id INTEGER PRIMARY KEY, step INTEGER)"


class SplitProgress(Worker):
    """The checkers' `Worker`, with its place also kept in a row written one turn too late."""

    async def _steps(self, ctx: Any, done: int, steps: int) -> None:
        for step in range(done + 1, steps + 1):
            await self.host.clock.sleep(10_000)
            ctx.stash({"step": step, "of": steps})
            self.host.trace.emit("workload:stashed", fiberId=ctx.id, step=step)
            await self.host.clock.sleep(200)  # the dashboard call: a turn boundary
            self.sql(PROGRESS_DDL)
            self.sql("INSERT OR REPLACE INTO progress (id, step) VALUES (1, ?)", step)

    def resume_from(self, snapshot: Any) -> int:
        self.sql(PROGRESS_DDL)
        rows = self.sql("SELECT step FROM progress WHERE id = 1")
        return int(rows[0]["step"]) if rows else 0


class Handoff(Agent):
    """`start()`: a worker and a closer each sleep a second; the worker takes a keepAlive lease,
    the closer gives it back."""

    options: ClassVar[dict[str, Any]] = {"keep_alive_interval_ms": 5_000}
    _taken: Any = None

    async def start(self) -> None:
        self.host.tasks.wait_until(self._worker())
        self.host.tasks.wait_until(self._closer())

    async def _worker(self) -> None:
        await self.host.clock.sleep(1_000)
        self._taken = self.host.tasks.deferred()
        self._taken.resolve(await self.keep_alive())

    async def _closer(self) -> None:
        await self.host.clock.sleep(1_000)
        if self._taken is None:
            return  # the bug: "no lease to give back" assumes the worker woke first
        release = await self._taken
        release()


class Leaf(Agent):
    """A sub-agent that writes one row when asked."""

    async def write(self) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS leaves (n INTEGER)")
        self.sql("INSERT INTO leaves VALUES (1)")


class Nest(Agent):
    """`grow()`: asks its sub-agent `a leaf` to write; no scenario step can spell that name."""

    async def grow(self) -> None:
        child = await self.sub_agent(Leaf, "a leaf")
        await child.write()
