"""Agents and an invariant for the strategies tests."""

from __future__ import annotations

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
