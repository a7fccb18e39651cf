"""Invariants of schedule runs beyond `schedules_fire` (which lives with the alarm slot in
`sim.checkers.alarms`): `schedules_fire_once` (a schedule never fires twice for one occurrence)
and `one_shot_completes` (a due one-shot's callback completes, or is run again).

A schedule's kind and timing come from its final `cf_agents_schedules` row or, for a row that no
longer exists, from the journal's INSERT of it (`type`, `cron`, `intervalSeconds`): the
`schedule:*` records carry only `callback` and `id`. Rows live on the top-level agent; a facet's
callbacks run (and their `schedule:execute` records are written) on the facet.

"Its run was cut short" is what allows a schedule to run again for the same occurrence (at
least once across a crash): an `incarnation:end` of the agent that ran it or of one it lives in,
the alarm run that ran it ending failed or interrupted rather than done, a failed dispatch to a
facet (`schedule:error {attempts: 0}` on the root), or the alarm's memory-limit breaker
(`alarm:memory_limit_reset`), each between the two runs.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from sim.checkers.alarm_slot import AlarmRun, alarm_runs
from sim.checkers.core import CheckContext, Violation
from sim.checkers.models.cron import InvalidCron, next_cron_due_ms
from sim.checkers.registry import invariant
from sim.checkers.schedule_store import inserted_schedules, stored_schedules
from sim.trace import TraceRecord, format_sim_time

__all__ = ["one_shot_completes", "schedule_rows", "schedules_armed", "schedules_fire_once"]

ONE_SHOT = ("delayed", "scheduled")
TABLE = "cf_agents_schedules"

REARM_HELD_DURING_STARTUP = frozenset({"0.32.0"})
"""The releases whose Lifecycle holds a re-arm asked for during startup and does it once, right
after startup succeeds (spec sdk-0.32 §1.1); on 0.21.0 a schedule write re-arms at once."""


def schedule_rows(context: CheckContext) -> dict[str, dict[str, Any]]:
    """Schedule id -> its row as last known: the final row if it still exists, else the last
    INSERT of it in a journal (with `holder`, the path of the agent that stores it)."""
    rows: dict[str, dict[str, Any]] = {}
    for path in sorted(context.journals):
        for row in inserted_schedules(context, context.journals[path]):
            rows[str(row.get("id"))] = {**row, "holder": path}
    for path in context.paths():
        for stored in stored_schedules(context, path):
            rows[str(stored.get("id"))] = {**stored, "holder": path}
    return rows


def _at(record: TraceRecord) -> str:
    return format_sim_time(record.t_ms)


def _lines(agent: str) -> list[str]:
    """The agent and every agent it lives in, itself first."""
    parts = agent.split("/")
    return ["/".join(parts[:n]) for n in range(len(parts), 1, -2)]


class _Cuts:
    """What may cut a schedule's run short, indexed once per context (seqs sorted for bisect):
    each agent's deaths, each top-level agent's alarm runs, its failed facet dispatches by
    schedule id and its memory-limit resets."""

    def __init__(self, context: CheckContext) -> None:
        self._context = context
        self._deaths: dict[str, list[int]] = {}
        self._runs: dict[str, tuple[list[AlarmRun], list[int]]] = {}
        self._errors: dict[tuple[str, str], list[int]] = defaultdict(list)
        for record in context.events("schedule:error"):
            if record.get("attempts") == 0:
                self._errors[(record.agent, str(record.get("id")))].append(record.seq)
        self._resets: dict[str, list[int]] = defaultdict(list)
        for record in context.events("alarm:memory_limit_reset"):
            self._resets[record.agent].append(record.seq)

    def _deaths_of(self, agent: str) -> list[int]:
        if agent not in self._deaths:
            self._deaths[agent] = [e.seq for e in self._context.incarnation_ends(agent)]
        return self._deaths[agent]

    def _runs_of(self, root: str) -> tuple[list[AlarmRun], list[int]]:
        if root not in self._runs:
            runs = alarm_runs(self._context, root)
            self._runs[root] = (runs, [run.fired.seq for run in runs])
        return self._runs[root]

    def between(self, root: str, first: TraceRecord, second: TraceRecord) -> bool:
        """The run of `first` may not have completed before `second`."""

        def any_between(seqs: list[int]) -> bool:
            at = bisect_right(seqs, first.seq)
            return at < len(seqs) and seqs[at] < second.seq

        if any(any_between(self._deaths_of(line)) for line in _lines(first.agent)):
            return True
        runs, fired = self._runs_of(root)
        at = bisect_left(fired, first.seq) - 1
        end = runs[at].end if at >= 0 else None
        if end is not None and first.seq < end.seq < second.seq and end.event != "alarm:done":
            return True
        errors = self._errors.get((root, str(first.get("id"))), [])
        return any_between(errors) or any_between(self._resets.get(root, []))


def _next_due_ms(row: Mapping[str, Any], context: CheckContext, first: TraceRecord) -> int | None:
    """The earliest instant a recurring row may run again after a completed run at `first`."""
    if row.get("type") == "cron":
        try:
            return next_cron_due_ms(str(row.get("cron") or ""), first.t_ms)
        except InvalidCron:
            return None
    interval_s = int(row.get("intervalSeconds") or 0)
    hung_s = int(context.option(str(row.get("holder")), "hung_schedule_timeout_seconds"))
    return (first.t_ms // 1000 + min(interval_s, hung_s)) * 1000


@invariant("schedules_fire_once")
def schedules_fire_once(context: CheckContext) -> list[Violation]:
    """Fibers §4.4 — a schedule fires once per occurrence: a one-shot row once, a cron or
    interval row once per occurrence; a second run for the same occurrence needs a run that was
    cut short (at least once across a crash).

    For every two consecutive `schedule:execute` records of one schedule id with nothing
    between them that cut the first run short (see the module docstring):
    1. a one-shot row (`delayed`, `scheduled`) never runs a second time: a completed run
       deletes it;
    2. a cron row runs again no earlier than its next occurrence strictly after the first run
       (whole seconds, as the row stores them);
    3. an interval row runs again no earlier than min(interval, hung timeout) seconds after the
       first run's second (the next run is due one interval after the first completes, and a
       run still going after the hung timeout is reset).
    Ids whose kind is unknown (no row and no journal) are skipped.
    """
    rows = schedule_rows(context)
    executes: dict[str, list[TraceRecord]] = defaultdict(list)
    for record in context.events("schedule:execute"):
        executes[str(record.get("id"))].append(record)
    cuts = _Cuts(context)
    out: list[Violation] = []
    for schedule_id, runs in sorted(executes.items()):
        row = rows.get(schedule_id)
        if row is None or row.get("type") not in (*ONE_SHOT, "cron", "interval"):
            continue
        root = context.root_of(runs[0].agent)
        for first, second in zip(runs, runs[1:], strict=False):
            if cuts.between(root, first, second):
                continue
            kind = row.get("type")
            if kind in ONE_SHOT:
                rule = "a one-shot runs once"
            else:
                due = _next_due_ms(row, context, first)
                if due is None or second.t_ms >= due:
                    continue
                rule = f"its next occurrence was not due before {format_sim_time(due)}"
            out.append(
                Violation(
                    "schedules_fire_once",
                    second.agent,
                    schedule_id,
                    f"{kind} schedule {schedule_id} (callback {row.get('callback')}) of "
                    f"{second.agent} fired at {_at(first)} and again at {_at(second)} with no "
                    f"crash or failure between ({rule})",
                    (first.seq, second.seq),
                )
            )
            break
    return out


@invariant("one_shot_completes")
def one_shot_completes(context: CheckContext) -> list[Violation]:
    """Fibers §4.3 — a due one-shot schedule's callback completes (its row is deleted, or its
    failure is reported and the row dropped), or it is run again.

    Only when a liveness phase ran. For every one-shot row (`delayed`, `scheduled`) left at the
    end whose last `schedule:execute` was at t and whose due time is not after t (a row moved
    later, by the memory-limit breaker, is due again later): once the run went quiet, or
    `LIVENESS_GRACE_MS` after t, the row must have been deleted — unless its agent's alarm was
    given up (`alarm:given_up`) after t: the platform stopped retrying it.
    """
    if not context.liveness_ran:
        return []
    executes: dict[str, list[TraceRecord]] = defaultdict(list)
    for record in context.events("schedule:execute"):
        executes[str(record.get("id"))].append(record)
    out: list[Violation] = []
    for path in context.paths():
        for row in stored_schedules(context, path):
            schedule_id = str(row.get("id"))
            runs = executes.get(schedule_id)
            if row.get("type") not in ONE_SHOT or not runs:
                continue
            last = runs[-1]
            if int(row.get("time") or 0) * 1000 > last.t_ms or not context.had_time_since(
                last.t_ms
            ):
                continue
            if any(g.seq > last.seq for g in context.events("alarm:given_up", path)):
                continue
            out.append(
                Violation(
                    "one_shot_completes",
                    last.agent,
                    schedule_id,
                    f"{row.get('type')} schedule {schedule_id} (callback {row.get('callback')}) "
                    f"of {last.agent} ran at {_at(last)} and neither completed (its row was "
                    f"still there at {context.end_words()}) nor ran again",
                    (last.seq,),
                )
            )
    return out


def _startup_end_after(context: CheckContext, create: TraceRecord) -> TraceRecord | None:
    """The end (`startup:done` / `startup:failed`, or the `incarnation:end` of an incarnation
    that died in it) of the startup `create` was written in, or None when it was written
    outside a startup."""
    inside = None
    for record in context.records_of(
        create.agent, "startup:begin", "startup:done", "startup:failed", "incarnation:end"
    ):
        if record.inc != create.inc:
            continue
        if record.seq < create.seq:
            inside = record if record.event == "startup:begin" else None
        elif inside is not None:
            return record
        else:
            return None
    return None


@invariant("schedules_armed")
def schedules_armed(context: CheckContext) -> list[Violation]:
    """Fibers §4.1 / §1.5 — every schedule write re-arms the alarm slot: a new schedule's row
    is covered by the slot the moment it exists, so no wake-up is ever lost.

    For every `schedule:create` written by a top-level agent (a sub-agent's rows are armed on
    its root through a call, at another moment), whose row's due time D is known from the
    journal's INSERT of it (`time` × 1000): the agent's latest `alarm:set` / `alarm:deleted`
    before the record is an `alarm:set` of that same instant armed no later than max(D, that
    instant + 1 ms) — the multiplexer's earliest candidate. On a release whose Lifecycle holds
    the re-arms of a startup until it succeeds (0.32.0), a schedule written during startup is
    judged by the slot at that startup's end instead (none is owed when the startup failed, or
    its incarnation died in it).
    """
    inserted: dict[str, dict[str, Any]] = {}
    for path in sorted(context.journals):
        for insert in inserted_schedules(context, context.journals[path]):
            inserted.setdefault(str(insert.get("id")), insert)
    out: list[Violation] = []
    slots: dict[str, tuple[list[TraceRecord], list[int]]] = {}
    for create in context.events("schedule:create"):
        agent = create.agent
        row = inserted.get(str(create.get("id")))
        if row is None or context.root_of(agent) != agent or row.get("time") is None:
            continue
        due = max(int(row["time"]) * 1000, create.t_ms + 1)
        if agent not in slots:
            writes = context.records_of(agent, "alarm:set", "alarm:deleted")
            slots[agent] = (writes, [r.seq for r in writes])
        writes, seqs = slots[agent]
        at_seq = create.seq
        if context.release in REARM_HELD_DURING_STARTUP:
            end = _startup_end_after(context, create)
            if end is not None and end.event in ("startup:failed", "incarnation:end"):
                # A failed startup arms its fallback instead (J-04), never sooner; one its
                # incarnation died in re-arms nothing (the fallback, or the platform's retry of
                # the alarm that started it, wakes the agent again).
                continue
            if end is not None:
                at_seq = end.seq
        before = bisect_left(seqs, at_seq)
        last = writes[before - 1] if before else None
        if (
            last is not None
            and last.event == "alarm:set"
            and last.t_ms == create.t_ms
            and int(last.get("at") or 0) <= due
        ):
            continue
        if last is None or last.t_ms != create.t_ms:
            armed = "the slot was not re-armed when it was written"
        elif last.event == "alarm:deleted":
            armed = "the slot was cleared when it was written"
        else:
            armed = f"the slot was armed for {format_sim_time(int(last.get('at') or 0))}"
        out.append(
            Violation(
                "schedules_armed",
                agent,
                str(create.get("id")),
                f"{row.get('type')} schedule {create.get('id')} (callback "
                f"{create.get('callback')}) of {agent} was created at {_at(create)}, due at "
                f"{format_sim_time(due)}, but {armed}",
                (*((last.seq,) if last is not None else ()), create.seq),
            )
        )
    return out
