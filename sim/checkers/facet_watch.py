"""`facet_runs_watched`: while a root indexes a sub-agent's fiber run, its alarm comes back every
keepAlive interval, whatever its own recovery backoff (fibers §6.9, F-123; on 0.32.0 the
`cf:housekeeping` job takes the earliest of the two moments, sdk-0.32 §3.4).

What the root indexes is read from the journal of its committed turns (`cf_agents_facet_runs`,
replayed by `sim.checkers.storage.row_changes`), never from the runtime. The wait is judged from
the end of each alarm run that ended `done` (the run re-armed the slot from its sources), or
from an `alarm:set` between runs (a re-arm computed afresh), with rows indexed once the instant
is over; it ends at the next `alarm:fired`.
"""

from __future__ import annotations

from typing import Any

from sim.checkers.alarm_slot import RUN_ENDS, STARTUP_HOLDS_REARMS
from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.checkers.storage import timed_row_changes
from sim.trace import TraceRecord, format_sim_time

__all__ = ["facet_runs_watched"]

FACET_RUNS = "cf_agents_facet_runs"
KEY = ("owner_path_key", "run_id")


@invariant("facet_runs_watched")
def facet_runs_watched(context: CheckContext) -> list[Violation]:
    """Fibers §6.9, F-123 — while the root's committed `cf_agents_facet_runs` holds a row, the
    root's alarm fires within `keep_alive_interval_ms` of the end of every alarm run that ended
    `done` and of every `alarm:set` outside a run, the rows judged as committed once that
    instant is over. The wait ends early, unjudged, when every row is gone by the deadline, the
    root's incarnation ends, a storage fault hit the root in the run or the instant (its re-arm
    may not have read the rows), its startup failed on a release that then arms the startup
    fallback, or its storage was wiped.
    """
    out: list[Violation] = []
    for agent in sorted(context.alarms):
        if context.root_of(agent) != agent:
            continue
        rows = _IndexedRows(context, agent)
        if not rows.ever:
            continue
        interval = int(context.option(agent, "keep_alive_interval_ms"))
        found = _first_late(context, agent, rows, interval)
        if found is not None:
            out.append(found)
    return out


def _first_late(
    context: CheckContext, agent: str, rows: _IndexedRows, interval: int
) -> Violation | None:
    events = ("alarm:fired", "alarm:set", "incarnation:end", "fault:storage_error", "fault:crash")
    records = list(context.records_of(agent, *events, *RUN_ENDS, "storage:wiped"))
    if context.release in STARTUP_HOLDS_REARMS:
        records += context.records_of(agent, "startup:failed")
    records.sort(key=lambda r: r.seq)
    since: TraceRecord | None = None
    running = False
    faulted = False
    for record in records:
        if since is not None and record.t_ms > since.t_ms + interval:
            late = _late(context, agent, rows, since, interval)
            if late is not None:
                return late
            since = None
        if record.event == "alarm:fired":
            running, since, faulted = True, None, False
        elif record.event in RUN_ENDS:
            running = False
            ok = record.event == "alarm:done" and not faulted
            since = record if ok else None
            faulted = False
        elif record.event == "alarm:set":
            if not running and not faulted:
                since = record
        elif record.event in ("fault:storage_error", "fault:crash"):
            faulted = True
            since = None
        else:  # a death, a failed startup, a wipe
            since, faulted = None, False
    if since is not None and context.end > since.t_ms + interval:
        return _late(context, agent, rows, since, interval)
    return None


def _late(
    context: CheckContext,
    agent: str,
    rows: _IndexedRows,
    since: TraceRecord,
    interval: int,
) -> Violation | None:
    """The violation of a wait from `since` that saw no fire by its deadline, or None when the
    root indexed nothing then (after `since`'s instant, or at the deadline)."""
    held = rows.at_end_of(since.t_ms)
    deadline = since.t_ms + interval
    if not held or not rows.at_end_of(deadline):
        return None
    owner, run_id = sorted(held)[0]
    what = "an alarm run that ended" if since.event == "alarm:done" else "an alarm:set at"
    return Violation(
        "facet_runs_watched",
        agent,
        str(run_id),
        f"{agent} indexed sub-agent run {run_id} (owner {owner}) after {what} "
        f"{format_sim_time(since.t_ms)}, but its alarm did not fire by "
        f"{format_sim_time(deadline)} (every {interval} ms while a sub-agent's run is indexed, "
        "whatever the recovery backoff)",
        (since.seq,),
    )


class _IndexedRows:
    """The root's `cf_agents_facet_runs` keys as committed, instant by instant."""

    def __init__(self, context: CheckContext, agent: str) -> None:
        self._changes = [
            (when, change.key, change.after)
            for when, change in timed_row_changes(context, agent, FACET_RUNS, KEY)
        ]
        self.ever = any(after is not None for _when, _key, after in self._changes)

    def at_end_of(self, t_ms: int) -> set[tuple[Any, Any]]:
        """The keys committed once instant `t_ms` is over."""
        held: set[tuple[Any, Any]] = set()
        for when, key, after in self._changes:
            if when > t_ms:
                break
            if after is None:
                held.discard(key)
            else:
                held.add(key)
        return held
