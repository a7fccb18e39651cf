"""Agents and an invariant for the strategies tests."""

from __future__ import annotations

from typing import Any

from agents_core import Agent
from sim.checkers import Violation


class ForgetfulCounter(Agent):
    """Counts in memory only: an eviction starts it from zero again (the planted bug)."""

    async def increment(self) -> int:
        self.n = getattr(self, "n", 0) + 1
        self.host.trace.emit("user:count", value=self.n)
        return self.n


def counts_go_up(context) -> list[Violation]:
    """Each agent's `user:count` values only go up (registered by the tests that need it)."""
    found = []
    last: dict[str, int] = {}
    for record in context.events("user:count"):
        value = record.get("value")
        if record.agent in last and value <= last[record.agent]:
            found.append(
                Violation(
                    "counts_go_up",
                    record.agent,
                    "",
                    f"the count went from {last[record.agent]} to {value}",
                    (record.seq,),
                )
            )
        last[record.agent] = value
    return found


STEP_MS = 60_000
"""How long one research step takes (a slow model call)."""


class HastyResearcher(Agent):
    """A fiber of three steps that stashes `{"step": n, "of": 3}` after each (and emits the
    stash convention's records, for `no_lost_stash`); its recovery hook resumes from the stash.
    The planted bug: a fiber that stashed only its first step starts over (an off-by-one a user
    makes when "nothing much was done yet" reads as step < 2)."""

    options = {"keep_alive_interval_ms": 2_000}

    async def research(self, steps: int = 3) -> None:
        self.host.tasks.wait_until(self.run_fiber("research", lambda c: self._steps(c, 0, steps)))

    async def _steps(self, ctx: Any, done: int, steps: int) -> None:
        for step in range(done + 1, steps + 1):
            await self.host.clock.sleep(STEP_MS)
            ctx.stash({"step": step, "of": steps})
            self.host.trace.emit("workload:stashed", fiberId=ctx.id, step=step)

    async def on_fiber_recovered(self, ctx: Any) -> None:
        snapshot = ctx.snapshot
        step = snapshot["step"] if snapshot else 0
        if step == 1:
            step = 0  # the planted bug: the first step's stash is thrown away
        self.host.trace.emit("workload:resumed", fiberId=ctx.id, step=step)
        steps = snapshot["of"] if snapshot else 3
        self.host.tasks.wait_until(
            self.run_fiber("research", lambda c: self._steps(c, step, steps))
        )


class Careful(HastyResearcher):
    """The same researcher, bug fixed: it resumes from whatever it stashed."""

    async def on_fiber_recovered(self, ctx: Any) -> None:
        snapshot = ctx.snapshot
        step = snapshot["step"] if snapshot else 0
        self.host.trace.emit("workload:resumed", fiberId=ctx.id, step=step)
        steps = snapshot["of"] if snapshot else 3
        self.host.tasks.wait_until(
            self.run_fiber("research", lambda c: self._steps(c, step, steps))
        )


class Grumpy(Agent):
    """Refuses a second greeting with a TypeError (a bug a call makes visible)."""

    async def greet(self) -> int:
        self.n = getattr(self, "n", 0) + 1
        if self.n > 1:
            raise TypeError("greeted twice")
        return self.n
