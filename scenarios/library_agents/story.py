"""`StoryAgent`: the base of every library agent, and the one way they record what they see.

`_note(kind, **fields)` writes a `story_log` row (it survives eviction, so a scenario's `query:`
can read it) and a `story:<kind>` trace record (so `event:` matchers can count and time it), in
the same turn: both vanish together if the incarnation dies before the turn commits.
"""

from __future__ import annotations

import json
from typing import Any

from agents_core import Agent

__all__ = ["StoryAgent"]

STORY_LOG_DDL = (
    "CREATE TABLE IF NOT EXISTS story_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
    "t INTEGER NOT NULL, inc INTEGER NOT NULL, kind TEXT NOT NULL, data TEXT NOT NULL)"
)


class StoryAgent(Agent):
    """The base of every library agent: `_note` records one observation, durably and in the
    trace, together (both vanish if the incarnation dies before the turn commits)."""

    def __init__(self, host: Any, name: str) -> None:
        super().__init__(host, name)
        # At construction: fiber recovery runs before on_start and may already take notes.
        self.sql(STORY_LOG_DDL)

    def _note(self, kind: str, **fields: Any) -> None:
        self.sql(
            "INSERT INTO story_log (t, inc, kind, data) VALUES (?, ?, ?, ?)",
            self.host.clock.now_ms(),
            self.host.incarnation_number,
            kind,
            json.dumps(fields, sort_keys=True),
        )
        self.host.trace.emit(f"story:{kind}", **fields)
