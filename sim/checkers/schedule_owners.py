"""`schedules_owned_by_caller`: a schedule an agent creates is its own (fibers §4.1, §4.7): an
idempotent `schedule()` of a sub-agent never answers with a row of its root or of a sibling, and
a root's never with a sub-agent's.

Read from the workloads' convention: `workload:scheduled {scheduleId}` is written by the agent
that called `schedule()` with the id it was answered. The row with that id (stored at the end,
or inserted by a journal) must name that agent as its owner: no `owner_path` for a top-level
agent; for a sub-agent, the steps of its own path, root first (`[{className, name}, ...]`, as
the spec stores it), never the root's or a sibling's.
"""

from __future__ import annotations

import json
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.checkers.schedules import schedule_rows

__all__ = ["schedules_owned_by_caller"]


def _steps_of(path: str) -> list[tuple[str, str]]:
    """`Cls/a/Sub/b` -> [(Cls, a), (Sub, b)]."""
    parts = path.split("/")
    return [(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]


def _owner_steps(owner_path: Any) -> list[tuple[str, str]] | None:
    """The stored owner path as (className, name) steps; None for a row of its holder's own."""
    if owner_path is None:
        return None
    try:
        steps = json.loads(owner_path) if isinstance(owner_path, str) else owner_path
    except ValueError:
        return []
    if not isinstance(steps, list):
        return []
    return [
        (str(step.get("className")), str(step.get("name")))
        for step in steps
        if isinstance(step, dict)
    ]


@invariant("schedules_owned_by_caller")
def schedules_owned_by_caller(context: CheckContext) -> list[Violation]:
    """Fibers §4.1, §4.7 — the schedule an agent's `schedule()` answers with is owned by that
    agent: a sub-agent's row names the sub-agent's own path, a top-level agent's names none
    (read from the workloads' `workload:scheduled` records; see the module docstring)."""
    rows = schedule_rows(context)
    out: list[Violation] = []
    seen: set[tuple[str, str]] = set()
    for record in context.events("workload:scheduled"):
        schedule_id = str(record.get("scheduleId"))
        row = rows.get(schedule_id)
        if row is None or (record.agent, schedule_id) in seen:
            continue
        seen.add((record.agent, schedule_id))
        mine = _steps_of(record.agent)
        owner = _owner_steps(row.get("owner_path"))
        expected = None if len(mine) == 1 else mine
        if owner == expected:
            continue
        whose = "its holder's own" if owner is None else "/".join(f"{c}/{n}" for c, n in owner)
        out.append(
            Violation(
                "schedules_owned_by_caller",
                record.agent,
                schedule_id,
                f"{record.agent} was answered schedule {schedule_id} for its schedule "
                f"{record.get('name')!r}, a row owned by {whose or 'nobody it names'} (held by "
                f"{row.get('holder')}), not by {record.agent}",
                (record.seq,),
            )
        )
    return out
