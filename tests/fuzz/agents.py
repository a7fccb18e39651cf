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
from tests.checkers.agents import Worker

__all__ = [
    "Forgetful",
    "HashOrdered",
    "Hurried",
    "Leaky",
    "Session",
    "SometimesForgetful",
    "Steady",
    "Tally",
]


class Steady(Worker):
    """`work(steps)` starts a background fiber of `steps` steps (4 by default) that stashes after
    each; recovery resumes from the stashed step (the checkers' `Worker`)."""

    async def work(self, steps: int = 4) -> None:
        await super().work(steps)


class Forgetful(Steady):
    """Resumes every recovered fiber from step 0, whatever it stashed: a lost stash."""

    def resume_from(self, snapshot: Any) -> int:
        return 0


class Hurried(Steady):
    """Skips loading its checkpoint when its recovery hook is given under 5 s (its options'
    `fiber_recovery_hook_timeout_ms`), and starts over: a lost stash that only a configuration
    with a short hook timeout shows (the default is 10 s)."""

    def resume_from(self, snapshot: Any) -> int:
        if 0 < self.options_resolved.fiber_recovery_hook_timeout_ms < 5_000:
            return 0
        return super().resume_from(snapshot)


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


class Tally(Agent):
    """`tally(n)` takes a keepAlive lease, then bumps a counter row n times a second apart, and
    gives the lease back at the end; the bug: a failing UPDATE skips the release (no
    `finally`), so the heartbeat never stops. Only a storage fault on `UPDATE tally` shows it."""

    options = {"keep_alive_interval_ms": 5_000}

    async def on_start(self) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS tally (id INTEGER PRIMARY KEY, n INTEGER)")
        self.sql("INSERT OR IGNORE INTO tally VALUES (1, 0)")

    async def tally(self, n: int = 3) -> None:
        self.host.tasks.wait_until(self._tally(n))

    async def _tally(self, n: int) -> None:
        dispose = await self.keep_alive()
        for _ in range(n):
            self.sql("UPDATE tally SET n = n + 1 WHERE id = 1")
            await self.host.clock.sleep(1_000)
        dispose()


class Session(Agent):
    """`open()` takes a keepAlive lease for a minute-long session and `close` gives it back;
    the bug: a second `open` overwrites the first lease's disposer, which is then never
    called, so the heartbeat never stops. Only a repeated call shows it."""

    options = {"keep_alive_interval_ms": 5_000}

    async def open(self) -> None:
        self._release = await self.keep_alive()
        self.host.tasks.wait_until(self._close_later())

    async def _close_later(self) -> None:
        await self.host.clock.sleep(60_000)
        release, self._release = getattr(self, "_release", None), None
        if release is not None:
            release()
