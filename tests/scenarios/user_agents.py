"""Agents as a user writes them, for the tests of what a user meets: a constructor that
raises, and a plain counter to run under names in any script."""

from __future__ import annotations

from typing import Any

from agents_core import Agent

__all__ = [
    "BrokenConstructor",
    "SlowStart",
    "Tally",
    "count_of",
    "is_ready",
    "read_tally",
    "reset_tally",
]


class BrokenConstructor(Agent):
    """Its constructor raises, as one reading a missing setting would."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        raise RuntimeError("missing setting: API_URL")  # the line the failure names

    async def ping(self) -> int:
        return 1


class Tally(Agent):
    """Counts calls in its own table; a storage write per call."""

    async def add(self, amount: int = 1) -> int:
        if amount < 1:
            raise ValueError(f"amount must be positive, got {amount}")
        self.sql("CREATE TABLE IF NOT EXISTS tally (id INTEGER PRIMARY KEY, n INTEGER)")
        self.sql("INSERT OR IGNORE INTO tally (id, n) VALUES (1, 0)")
        self.sql("UPDATE tally SET n = n + ? WHERE id = 1", amount)
        rows = self.sql("SELECT n FROM tally WHERE id = 1")
        return int(rows[0]["n"])


def read_tally(agent: Tally) -> int:
    """For `run_in`: the count in the agent's table, read from its live instance."""
    return int(agent.sql("SELECT n FROM tally WHERE id = 1")[0]["n"])


async def reset_tally(agent: Tally) -> str:
    """For `run_in`: set the count to 40 (a write that commits as a turn), then wait a while."""
    agent.sql("UPDATE tally SET n = 40 WHERE id = 1")
    await agent.host.clock.sleep(1_000)
    return agent.name


class SlowStart(Tally):
    """Its startup takes five seconds and ends by marking it ready."""

    ready = False

    async def on_start(self) -> None:
        await self.host.clock.sleep(5_000)
        self.ready = True


def is_ready(agent: SlowStart) -> bool:
    """For `run_in`: whether startup had finished when the function ran."""
    return agent.ready


def count_of(agent: Any) -> int:
    """For `run_in` on a `scenarios.workloads:Counter`: its count, read from its instance."""
    return int(agent.state["count"])
