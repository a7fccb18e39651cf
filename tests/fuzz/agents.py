"""Agents the fuzz tests run: `Steady` keeps every stash across any death; `Forgetful` is the
same agent with a recovery hook that loses the stash (it starts the work over), the kind of bug
the fuzzer must find by itself. `Leaky` and `HashOrdered` are nondeterministic on
purpose, for the determinism checks.

The first two follow the `no_lost_stash` workload convention of `sim.checkers.fibers`:
`workload:stashed` after each stash returns, `workload:resumed` from the recovery hook.
"""

from __future__ import annotations

from typing import Any

from agents_core import Agent

__all__ = ["Forgetful", "HashOrdered", "Leaky", "SometimesForgetful", "Steady"]

STEP_MS = 10_000


class Steady(Agent):
    """`work(steps)` starts a background fiber of `steps` steps STEP_MS apart that stashes
    `{"step": n, "of": steps}` after step n; recovery resumes from the stashed step."""

    options = {"keep_alive_interval_ms": 2_000}

    async def work(self, steps: int = 4) -> None:
        self.host.tasks.wait_until(self.run_fiber("work", lambda ctx: self._steps(ctx, 0, steps)))

    async def _steps(self, ctx: Any, done: int, steps: int) -> None:
        for step in range(done + 1, steps + 1):
            await self.host.clock.sleep(STEP_MS)
            ctx.stash({"step": step, "of": steps})
            self.host.trace.emit("workload:stashed", fiberId=ctx.id, step=step)

    def resume_from(self, snapshot: Any) -> int:
        return int(snapshot["step"]) if snapshot else 0

    async def on_fiber_recovered(self, ctx: Any) -> None:
        if ctx.name != "work":
            return
        step = self.resume_from(ctx.snapshot)
        self.host.trace.emit("workload:resumed", fiberId=ctx.id, step=step)
        steps = ctx.snapshot["of"] if ctx.snapshot else 4
        self.host.tasks.wait_until(self.run_fiber("work", lambda c: self._steps(c, step, steps)))


class Forgetful(Steady):
    """Resumes every recovered fiber from step 0, whatever it stashed: a lost stash."""

    def resume_from(self, snapshot: Any) -> int:
        return 0


_PINGS = iter(range(1_000_000))


class Leaky(Agent):
    """Nondeterministic on purpose: `ping` records a counter that lives in this module, so a
    second run in the same process sees other values than the first."""

    async def ping(self) -> int:
        n = next(_PINGS)
        self.host.trace.emit("user:ping", n=n)
        return n


class HashOrdered(Agent):
    """Nondeterministic across processes only: `ping` records the iteration order of a set of
    strings, which `PYTHONHASHSEED` decides."""

    async def ping(self) -> list[str]:
        order = list({"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"})
        self.host.trace.emit("user:order", order=order)
        return order


_FORGETS = iter(range(1_000_000))


class SometimesForgetful(Steady):
    """Loses the stash on its first three recoveries in a process, then never again: a failure
    that does not come back when run once more."""

    def resume_from(self, snapshot: Any) -> int:
        return 0 if next(_FORGETS) < 3 else super().resume_from(snapshot)
