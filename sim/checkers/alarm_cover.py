"""`alarm_covers_schedules`: the alarm slot is armed no later than the schedule rows need it
(fibers §1.5, §4.1: one alarm multiplexes every source, armed at the earliest candidate), and a
re-arm that could not read its sources never postpones an alarm already pending (the check-back
of docs/divergences.md K5).

What the rows need is read from the journal of committed turns (`cf_agents_schedules`,
replayed by `sim.checkers.storage.row_changes`), never from the runtime: at an `alarm:set` in
instant t, each row whose last change was committed before t holds its due time (`time` in
seconds); an interval row marked `running` asks for nothing until its hung timeout. A row
changed in the instant of the re-arm is not judged (its turn may commit after the record), nor
is a re-arm whose incarnation crashed later in its instant (its turn may have rolled back; the
slot the platform put back is judged instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.checkers.alarm_slot import RUN_ENDS
from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.checkers.schedule_store import SCHEDULES_ON_JOBS, SCHEDULES_TABLE
from sim.checkers.storage import RowTimeline
from sim.trace import TraceRecord, format_sim_time

__all__ = ["alarm_covers_schedules"]


@invariant("alarm_covers_schedules")
def alarm_covers_schedules(context: CheckContext) -> list[Violation]:
    """Fibers §1.5, §4.1, K5 (0.21.0) — for every `alarm:set` of a top-level agent arming the
    slot at B in instant t:

    - B is no later than max(D, t + 1 ms) for the due time D of every schedule row committed
      before t and not changed in t, or inserted in t by a write whose `schedule:create` came
      before the record (an interval row marked `running` excepted, and, during an alarm run,
      the rows due by its firing, which that run runs);
    - except after a read of the agent that failed on storage in t, since its previous alarm
      record (the re-arm may not have read its sources): then B may instead be a check-back,
      no later than an alarm still pending (armed for t or later) if there is one; and in any
      case no later than t + `keep_alive_interval_ms`;
    - a slot the platform put back after a crash (`alarm:set {rolled_back}`) at the value last
      judged is that arm, not a re-arm: not judged again.

    On 0.32.0 the rows live in `cf_agents_jobs` with a Lifecycle of its own: not judged.
    """
    if context.release in SCHEDULES_ON_JOBS:
        return []
    out: list[Violation] = []
    for agent in sorted(context.alarms):
        found = _first_uncovered(context, agent)
        if found is not None:
            out.append(found)
    return out


def _first_uncovered(context: CheckContext, agent: str) -> Violation | None:
    history = _RowHistory(context, agent)
    created = {str(r.get("id")): r.seq for r in context.events("schedule:create", agent)}
    interval = int(context.option(agent, "keep_alive_interval_ms"))
    pending: int | None = None
    faulted = False
    fired: int | None = None  # when the alarm run under way fired (its due rows are its own)
    events = ("alarm:set", "alarm:deleted", "alarm:fired", "fault:storage_error")
    for record in context.records_of(agent, *events, *RUN_ENDS):
        if record.event in RUN_ENDS:
            fired = None
            continue
        if record.event == "alarm:fired":
            fired = record.t_ms
        if record.event == "fault:storage_error":
            # A re-arm only reads its sources: a failed read may be one of them.
            faulted = faulted or str(record.get("statement", "")).lstrip().upper().startswith(
                "SELECT"
            )
            continue
        if record.event != "alarm:set":
            pending, faulted = None, False
            continue
        at = int(record.get("at") or 0)
        if record.get("rolled_back") and at == pending:
            # The platform put back the slot judged last (a crash rolled the turn's re-arms
            # back): nothing re-armed it, and that arm was judged with what its re-arm read.
            continue
        if not record.get("rolled_back") and context.may_have_rolled_back(record):
            # Its turn may have rolled back with the crash in its instant, and the platform put
            # the slot back (`alarm:set {rolled_back}`): judged are the rows committed and the
            # slot as the rollback left it.
            continue
        row = history.earliest_due(record.t_ms, record.seq, created, fired)
        covers = row is None or at <= max(row[0], record.t_ms + 1)
        if faulted:
            # The re-arm read its sources (then it covers the rows) or armed a check-back: one
            # interval at most, and never later than an alarm already pending.
            waiting = pending is not None and pending >= record.t_ms
            check_back = at <= record.t_ms + interval and not (waiting and at > (pending or 0))
            if not (covers or check_back):
                limit = record.t_ms + interval
                if waiting and pending is not None:
                    limit = min(limit, pending)
                why = (
                    f"a re-arm after a failed read in its instant armed it at {_at(at)}, later "
                    f"than {_at(limit)} (the check-back, or the alarm already pending) and "
                    f"than schedule {row[1] if row else '?'} needs it"
                )
                return _violation(agent, record, why)
        elif not covers and row is not None:
            why = f"armed at {_at(at)}, later than schedule {row[1]} needs it (due {_at(row[0])})"
            return _violation(agent, record, why)
        pending, faulted = at, False
    return None


class _RowHistory:
    """The agent's schedule rows as committed turn by turn, read forward in time: ask
    `earliest_due` with instants that never decrease."""

    def __init__(self, context: CheckContext, agent: str) -> None:
        self._timeline = RowTimeline(context, agent, SCHEDULES_TABLE, "id")

    def earliest_due(
        self, t_ms: int, seq: int, created: Mapping[str, int], fired: int | None = None
    ) -> tuple[int, str] | None:
        """(due ms, id) of the earliest row committed before `t_ms` and unchanged in it, or
        inserted in it (and nothing more) by a write whose `schedule:create` came before record
        `seq`: the rows the re-arm at `seq` had to see; inside an alarm run fired at `fired`,
        not the rows due by then, which that run runs itself."""
        committed, changes = self._timeline.at(t_ms)
        rows = dict(committed)
        now: dict[Any, list[tuple[bool, Mapping[str, Any] | None]]] = {}
        for key, after in changes:
            existed = key in rows or key in now
            now.setdefault(key, []).append((existed, after))
        for key, seen in now.items():
            inserted = len(seen) == 1 and not seen[0][0] and seen[0][1] is not None
            if inserted and created.get(str(key), seq) < seq:
                rows[key] = seen[0][1]
            else:
                rows.pop(key, None)
        due = [
            (int(row["time"]) * 1000, str(key))
            for key, row in rows.items()
            if row.get("time") is not None
            and not (row.get("type") == "interval" and row.get("running") == 1)
            and (fired is None or int(row["time"]) * 1000 > fired)
        ]
        return min(due) if due else None


def _at(t_ms: int) -> str:
    return format_sim_time(t_ms)


def _violation(agent: str, record: TraceRecord, why: str) -> Violation:
    return Violation(
        "alarm_covers_schedules",
        agent,
        str(record.seq),
        f"{agent}'s alarm slot at {_at(record.t_ms)}: {why}",
        (record.seq,),
    )
