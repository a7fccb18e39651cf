"""`schedule_attempts_bounded`: a schedule's callback is called at most `maxAttempts` times for
one run (fibers §4.3): the first attempt, announced by `schedule:execute`, and one
`schedule:retry` before each later one.

The bound is worked out here, from the spec, never taken from the runtime's records: the row's
own `retry_options` (`maxAttempts`, as the row stores it), else the `retry` option of the class
of the agent that runs the callback, else the spec's default of 3 (`RETRY_DEFAULTS`); a
sub-agent deleted before the end leaves its class unknown, and its runs are judged only by their
rows. A run is the `schedule:execute` of an agent's incarnation and the retries of that
incarnation that follow it for the same schedule id; a new `schedule:execute` starts the next
run.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.models.spec_constants import RETRY_DEFAULTS
from sim.checkers.registry import invariant
from sim.checkers.schedules import schedule_rows
from sim.trace import TraceRecord, format_sim_time

__all__ = ["max_attempts", "schedule_attempts_bounded"]


def _stored_max(row: Mapping[str, Any] | None) -> int | None:
    text = (row or {}).get("retry_options")
    try:
        stored = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    value = stored.get("maxAttempts") if isinstance(stored, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _class_max(options: Mapping[str, Any] | None) -> int | None:
    retry = (options or {}).get("retry")
    value = (
        retry.get("max_attempts")
        if isinstance(retry, Mapping)
        else getattr(retry, "max_attempts", None)
    )
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def max_attempts(context: CheckContext, row: Mapping[str, Any] | None, agent: str) -> int | None:
    """The attempts a run of the schedule `row` may make on `agent` (see the module docstring);
    None when the row names none and the agent's class is not known (a sub-agent deleted
    before the end leaves no options in the context)."""
    stored = _stored_max(row)
    if stored is not None:
        return stored
    if agent not in context.options:
        return None
    given = _class_max(context.options.get(agent))
    return RETRY_DEFAULTS["max_attempts"] if given is None else given


@invariant("schedule_attempts_bounded")
def schedule_attempts_bounded(context: CheckContext) -> list[Violation]:
    """Fibers §4.3 — a schedule callback is called at most maxAttempts times per run: after each
    `schedule:execute`, the same incarnation announces at most maxAttempts - 1 `schedule:retry`
    of that schedule before its next `schedule:execute` (see the module docstring)."""
    rows = schedule_rows(context)
    runs: dict[tuple[str, int, str], list[TraceRecord]] = defaultdict(list)
    out: list[Violation] = []
    flagged: set[str] = set()
    for record in context.records:
        if record.event not in ("schedule:execute", "schedule:retry"):
            continue
        schedule_id = str(record.get("id"))
        key = (record.agent, record.inc, schedule_id)
        if record.event == "schedule:execute":
            runs[key] = [record]
            continue
        if not runs[key]:
            continue  # a retry whose first attempt this trace does not hold
        runs[key].append(record)
        bound = max_attempts(context, rows.get(schedule_id), record.agent)
        if bound is None or len(runs[key]) <= bound or schedule_id in flagged:
            continue
        flagged.add(schedule_id)
        first = runs[key][0]
        out.append(
            Violation(
                "schedule_attempts_bounded",
                record.agent,
                schedule_id,
                f"schedule {schedule_id} (callback {record.get('callback')}) of {record.agent} "
                f"was called {len(runs[key])} times in the run that began at "
                f"{format_sim_time(first.t_ms)}, its retry options allowing {bound} attempts",
                tuple(r.seq for r in runs[key]),
            )
        )
    return out
