"""A root's committed `cf_agents_jobs` rows (sdk-0.32 §2.1), instant by instant, replayed from
the journal of its committed turns (`sim.checkers.storage.RowTimeline`), never read from
the runtime: what the job checkers judge an alarm run by.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.checkers.core import CheckContext
from sim.checkers.storage import RowTimeline

__all__ = ["JOBS", "JobTimes"]

JOBS = "cf_agents_jobs"


class JobTimes:
    """The root's committed `cf_agents_jobs` rows, instant by instant."""

    def __init__(self, context: CheckContext, agent: str) -> None:
        self._timeline = RowTimeline(context, agent, JOBS, "id")
        self.ever = bool(self._timeline.changes)

    def due_before(self, t_ms: int) -> dict[str, int]:
        """Job id -> due time of the rows committed before instant `t_ms` and due by then. A
        row whose first change in that instant moved its time (or removed it) is left out: that
        change may have come before the firing. A first change that keeps the time (the drive
        marking the job running) leaves it in. Asked with instants that never decrease."""
        rows, now = self._timeline.at(t_ms)
        first: dict[str, Mapping[str, Any] | None] = {}
        for key, after in now:
            first.setdefault(str(key), after)
        due: dict[str, int] = {}
        for key, row in rows.items():
            if row.get("time") is None or int(row["time"]) > t_ms:
                continue
            if str(key) in first:
                changed = first[str(key)]
                if changed is None or changed.get("time") != row.get("time"):
                    continue
            due[str(key)] = int(row["time"])
        return due

    def queued_through(self, t_ms: int) -> dict[str, Mapping[str, Any]]:
        """The rows committed before instant `t_ms` (id -> row) that no change of that instant
        deletes: queued all through it, whatever came first there. Asked with instants that
        never decrease, as `due_before`."""
        rows, now = self._timeline.at(t_ms)
        deleted = {str(key) for key, after in now if after is None}
        return {str(key): row for key, row in rows.items() if str(key) not in deleted}
