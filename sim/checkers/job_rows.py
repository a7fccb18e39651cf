"""A root's committed `cf_agents_jobs` rows (sdk-0.32 §2.1), instant by instant, replayed from
the journal of its committed turns (`sim.checkers.storage.timed_row_changes`), never read from
the runtime: what the job checkers judge an alarm run by.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.checkers.core import CheckContext
from sim.checkers.storage import timed_row_changes

__all__ = ["JOBS", "JobTimes"]

JOBS = "cf_agents_jobs"


class JobTimes:
    """The root's committed `cf_agents_jobs` rows, instant by instant."""

    def __init__(self, context: CheckContext, agent: str) -> None:
        self._changes = [
            (when, change.key, change.after)
            for when, change in timed_row_changes(context, agent, JOBS, "id")
        ]
        self.ever = bool(self._changes)
        self._applied = 0
        self._rows: dict[str, Mapping[str, Any]] = {}

    def due_before(self, t_ms: int) -> dict[str, int]:
        """Job id -> due time of the rows committed before instant `t_ms` and due by then. A
        row whose first change in that instant moved its time (or removed it) is left out: that
        change may have come before the firing. A first change that keeps the time (the drive
        marking the job running) leaves it in. Asked with instants that never decrease."""
        first = self._first_changes_at(t_ms)
        due: dict[str, int] = {}
        for key, row in self._rows.items():
            if row.get("time") is None or int(row["time"]) > t_ms:
                continue
            if key in first:
                changed = first[key]
                if changed is None or changed.get("time") != row.get("time"):
                    continue
            due[key] = int(row["time"])
        return due

    def queued_through(self, t_ms: int) -> dict[str, Mapping[str, Any]]:
        """The rows committed before instant `t_ms` (id -> row) that no change of that instant
        deletes: queued all through it, whatever came first there. Asked with instants that
        never decrease, as `due_before`."""
        self._first_changes_at(t_ms)
        deleted = set()
        for when, key, after in self._changes[self._applied :]:
            if when != t_ms:
                break
            if after is None:
                deleted.add(str(key))
        return {key: row for key, row in self._rows.items() if key not in deleted}

    def _first_changes_at(self, t_ms: int) -> dict[str, Mapping[str, Any] | None]:
        """Apply every change before `t_ms`; return each row's first change in `t_ms`."""
        changes = self._changes
        while self._applied < len(changes) and changes[self._applied][0] < t_ms:
            _when, key, after = changes[self._applied]
            if after is None:
                self._rows.pop(str(key), None)
            else:
                self._rows[str(key)] = after
            self._applied += 1
        first: dict[str, Mapping[str, Any] | None] = {}
        for when, key, after in changes[self._applied :]:
            if when != t_ms:
                break
            first.setdefault(str(key), after)
        return first
