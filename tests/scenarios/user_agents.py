"""Agents as a user writes them, for the tests of what a user meets: a constructor that
raises, and a plain counter to run under names in any script."""

from __future__ import annotations

from typing import Any

from agents_core import Agent

__all__ = ["BrokenConstructor", "Tally"]


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
