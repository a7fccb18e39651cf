"""Agents whose code never yields, for the watchdog's tests (a scenario names them by path)."""

from __future__ import annotations

from agents_core import Agent


class Spinner(Agent):
    async def spin(self) -> None:
        while True:  # the line a stop names
            pass

    async def spin_and_swallow(self) -> str:
        try:
            while True:
                pass
        except Exception:  # noqa: BLE001 - what a stop must get through
            return "swallowed"

    async def ping(self) -> str:
        await self.host.clock.sleep(1)
        return "pong"

    async def zero_sleeps(self, count: int) -> int:
        for _ in range(count):
            await self.host.clock.sleep(0)
        return count


SPIN_LINES = {Spinner.spin.__code__.co_firstlineno + 1, Spinner.spin.__code__.co_firstlineno + 2}
"""The lines of the loop (a stop names one of them)."""
