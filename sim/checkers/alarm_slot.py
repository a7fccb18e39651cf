"""Invariants of the platform's alarm slot and its handlers (README "The platform's rules",
`sim.alarms`): `alarm_fires_on_time` (an armed alarm fires at its time, never before),
`alarms_never_overlap` (two handlers of one agent never run at once), `alarm_retries` (a failed
handler is retried 2, 4, 8... s later, six times at most) and `alarm_limit` (a handler still
running 15 minutes after it started is killed, then and never sooner).

They read the slot's records on each top-level agent: `alarm:set {at}`, `alarm:deleted`,
`alarm:fired {attempt}` (a handler run starts; attempt 0 when the slot came due, N for the N-th
retry), its end — `alarm:done`, `alarm:failed {error}`, or `alarm:interrupted {reason}` (its
incarnation died; preceded by `alarm:killed {limit_ms}` when the platform killed it for the time
limit) — then `alarm:retry {attempt, at}` or `alarm:given_up {attempts}`. Records written when
no incarnation is alive carry incarnation 0. The slot's due instant is `max(at, time of the
set)`: an alarm set in the past fires at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.models.spec_constants import (
    ALARM_HANDLER_LIMIT_MS,
    ALARM_RETRY_BASE_MS,
    ALARM_RETRY_LIMIT,
)
from sim.checkers.registry import invariant
from sim.checkers.sub_agent_registry import registry_entry, registry_history
from sim.trace import TraceRecord, format_sim_time

__all__ = [
    "AlarmRun",
    "alarm_fires_on_time",
    "alarm_limit",
    "alarm_retries",
    "alarm_runs",
    "alarms_never_overlap",
    "keep_alive_heartbeat",
]

ALARM_EVENTS = (
    "alarm:set",
    "alarm:deleted",
    "alarm:fired",
    "alarm:done",
    "alarm:failed",
    "alarm:interrupted",
    "alarm:killed",
    "alarm:retry",
    "alarm:given_up",
)
RUN_ENDS = ("alarm:done", "alarm:failed", "alarm:interrupted")


def _at(t_ms: int) -> str:
    return format_sim_time(t_ms)


@dataclass(frozen=True)
class AlarmRun:
    """One handler run: its `alarm:fired`, its end record (None while it still runs at the end
    of the trace) and the `alarm:killed` that ended it, if any."""

    fired: TraceRecord
    end: TraceRecord | None
    killed: TraceRecord | None

    @property
    def attempt(self) -> int:
        return int(self.fired.get("attempt") or 0)

    def running_at(self, t_ms: int) -> bool:
        """Started at or before `t_ms` and not ended before it."""
        return self.fired.t_ms <= t_ms and (self.end is None or self.end.t_ms >= t_ms)


def alarm_runs(context: CheckContext, agent: str) -> list[AlarmRun]:
    """The agent's handler runs in order; each end record closes the latest open run."""
    runs: list[AlarmRun] = []
    fired: TraceRecord | None = None
    killed: TraceRecord | None = None
    for record in context.records_of(agent, "alarm:fired", "alarm:killed", *RUN_ENDS):
        if record.event == "alarm:fired":
            if fired is not None:
                runs.append(AlarmRun(fired, None, killed))
            fired, killed = record, None
        elif record.event == "alarm:killed":
            killed = record
        elif fired is not None:
            runs.append(AlarmRun(fired, record, killed))
            fired, killed = None, None
    if fired is not None:
        runs.append(AlarmRun(fired, None, killed))
    return runs


def _slot_agents(context: CheckContext) -> list[str]:
    return sorted({r.agent for event in ALARM_EVENTS for r in context.events(event) if r.agent})


@invariant("alarms_never_overlap")
def alarms_never_overlap(context: CheckContext) -> list[Violation]:
    """Platform rule "one alarm slot per top-level agent" — two alarm handlers of one agent never
    run at the same time: a slot that comes due while one runs fires when it ends.

    For every agent, between an `alarm:fired` and the end of that run (`alarm:done`,
    `alarm:failed` or `alarm:interrupted`) there is no other `alarm:fired`.
    """
    out = []
    for agent in _slot_agents(context):
        running: TraceRecord | None = None
        for record in context.records_of(agent, "alarm:fired", *RUN_ENDS):
            if record.event in RUN_ENDS:
                running = None
                continue
            if running is not None:
                out.append(
                    Violation(
                        "alarms_never_overlap",
                        agent,
                        "",
                        f"an alarm handler of {agent} (attempt {record.get('attempt')}) started "
                        f"at {_at(record.t_ms)} while the one started at {_at(running.t_ms)} "
                        f"(attempt {running.get('attempt')}) was still running",
                        (running.seq, record.seq),
                    )
                )
            running = record
    return out


@invariant("alarm_retries")
def alarm_retries(context: CheckContext) -> list[Violation]:
    """Platform rule "a throwing handler is retried: 2 s, doubling, 6 retries" — a failed or
    interrupted alarm handler is run again 2, 4, 8, 16, 32 and 64 s later, then given up.

    For every handler run of attempt a that ends `alarm:failed`, or `alarm:interrupted` for any
    reason but `destroyed` (the agent deleted itself) and `reset` (the agent aborted itself
    asking for no retry, 0.32.0's `ctx.abort(reason, {retryAlarm: false})`), at time t:
    1. if a < 6: the agent's next retry record is `alarm:retry {attempt: a+1, at: t + 2 s * 2**a}`
       written at t, and an `alarm:fired {attempt: a+1}` follows at exactly that time — unless
       that time is not before the end of the trace, or another handler run was running then
       (the retry then waits, as a slot that comes due while a handler runs does);
    2. if a >= 6: `alarm:given_up {attempts: a+1}` is written at t and no retry follows.
    A run interrupted by a `reset` gets neither: no `alarm:retry` or `alarm:given_up` is written
    for it.
    And every `alarm:fired` of attempt k > 0 answers its own earlier `alarm:retry {attempt: k,
    at}` of the agent with `at` equal to its time, or earlier when another handler was running
    at `at` (the held retry runs when that one ends, keeping its attempt number; two chains of
    retries interleave that way when a slot comes due between a failure and its retry); no
    attempt goes beyond 6.
    """
    out: list[Violation] = []
    for agent in _slot_agents(context):
        runs = alarm_runs(context, agent)
        follow = context.records_of(agent, "alarm:retry", "alarm:given_up")
        retries = [r for r in follow if r.event == "alarm:retry"]
        for run in runs:
            end = run.end
            if end is None or end.event == "alarm:done" or end.get("reason") == "destroyed":
                continue
            if end.get("reason") == "reset":
                out += _not_retried(agent, run, end, follow, runs)
                continue
            out += _retry_of(context, agent, run, end, follow, runs)
        asked: list[TraceRecord] = []  # retries asked for and not yet run, in order
        events = sorted([*retries, *(run.fired for run in runs)], key=lambda r: r.seq)
        for record in events:
            if record.event == "alarm:retry":
                asked.append(record)
                continue
            attempt = int(record.get("attempt") or 0)
            if attempt == 0:
                continue
            match = next(
                (r for r in asked if r.get("attempt") == attempt and _answers(r, record, runs)),
                None,
            )
            if match is not None and attempt <= ALARM_RETRY_LIMIT:
                asked.remove(match)
                continue
            out.append(
                Violation(
                    "alarm_retries",
                    agent,
                    "",
                    f"the alarm handler of {agent} ran as attempt {attempt} at "
                    f"{_at(record.t_ms)}, but no retry had asked for attempt {attempt} then",
                    (record.seq,),
                )
            )
    return out


def _answers(retry: TraceRecord, fired: TraceRecord, runs: list[AlarmRun]) -> bool:
    """`fired` runs the `retry`: at its time, or later because another handler was running then
    (a held retry keeps its attempt number and runs when that handler ends)."""
    at = int(retry.get("at"))
    if at == fired.t_ms:
        return True
    return at < fired.t_ms and any(
        run.fired is not fired
        and run.running_at(at)
        and run.end is not None
        and run.end.t_ms <= fired.t_ms
        for run in runs
    )


def _retry_of(
    context: CheckContext,
    agent: str,
    run: AlarmRun,
    end: TraceRecord,
    follow: list[TraceRecord],
    runs: list[AlarmRun],
) -> list[Violation]:
    attempt = run.attempt
    nxt = next((r for r in follow if r.seq > end.seq), None)
    ended = f"ended ({end.event.removeprefix('alarm:')}) at {_at(end.t_ms)}"
    what = f"the alarm handler of {agent} (attempt {attempt}, started at {_at(run.fired.t_ms)})"
    if attempt >= ALARM_RETRY_LIMIT:
        if (
            nxt is not None
            and nxt.t_ms == end.t_ms
            and nxt.event == "alarm:given_up"
            and nxt.get("attempts") == attempt + 1
        ):
            return []
        return [
            Violation(
                "alarm_retries",
                agent,
                "",
                f"{what} {ended} and should have been given up after {attempt + 1} attempts "
                f"then, but the next record is {_describe(nxt)}",
                (end.seq, *((nxt.seq,) if nxt is not None else ())),
            )
        ]
    due = end.t_ms + ALARM_RETRY_BASE_MS * 2**attempt
    if not (
        nxt is not None
        and nxt.event == "alarm:retry"
        and nxt.t_ms == end.t_ms
        and nxt.get("attempt") == attempt + 1
        and nxt.get("at") == due
    ):
        return [
            Violation(
                "alarm_retries",
                agent,
                "",
                f"{what} {ended} and should have been retried as attempt {attempt + 1} at "
                f"{_at(due)}, but the next record is {_describe(nxt)}",
                (end.seq, *((nxt.seq,) if nxt is not None else ())),
            )
        ]
    if due >= context.end or any(r is not run and r.running_at(due) for r in runs):
        return []
    if any(r.fired.t_ms == due and r.attempt == attempt + 1 for r in runs):
        return []
    return [
        Violation(
            "alarm_retries",
            agent,
            "",
            f"{what} {ended}; its retry (attempt {attempt + 1}) was due at {_at(due)} but "
            "never ran",
            (end.seq, nxt.seq),
        )
    ]


def _not_retried(
    agent: str,
    run: AlarmRun,
    end: TraceRecord,
    follow: list[TraceRecord],
    runs: list[AlarmRun],
) -> list[Violation]:
    """A run its agent reset with no retry asked: nothing answers its end (a retry record before
    the next run starts, if one does, is this run's)."""
    nxt_run = min((r.fired.seq for r in runs if r.fired.seq > end.seq), default=None)
    answer = next(
        (r for r in follow if r.seq > end.seq and (nxt_run is None or r.seq < nxt_run)), None
    )
    if answer is None:
        return []
    return [
        Violation(
            "alarm_retries",
            agent,
            "",
            f"the alarm handler of {agent} (attempt {run.attempt}, started at "
            f"{_at(run.fired.t_ms)}) was cut short at {_at(end.t_ms)} by a reset that asked for "
            f"no retry, but the next record is {_describe(answer)}",
            (end.seq, answer.seq),
        )
    ]


def _describe(record: TraceRecord | None) -> str:
    if record is None:
        return "missing"
    fields = ", ".join(f"{k} {v}" for k, v in sorted(record.fields.items()))
    return f"{record.event} ({fields}) at {_at(record.t_ms)}"


@invariant("alarm_limit")
def alarm_limit(context: CheckContext) -> list[Violation]:
    """Platform rule "a handler past 15 minutes is killed with its incarnation" — an alarm
    handler, a retry included, is killed exactly 15 minutes after it started, never sooner.

    For every handler run (`alarm:fired {attempt}` at t):
    1. an `alarm:killed` for it is written at exactly t + 15 min (`ALARM_HANDLER_LIMIT_MS`),
       with the same attempt, and the agent's `incarnation:end {reason: alarm-limit}` follows in
       that instant;
    2. a run that had not ended by t + 15 min (no `alarm:done|failed|interrupted` before that
       instant, and the trace goes past it) has that `alarm:killed`.
    A run ended at t + 15 min exactly, by its own completion or by another death, is not one
    the platform had to kill.
    """
    out: list[Violation] = []
    for agent in _slot_agents(context):
        ends = context.incarnation_ends(agent)
        for run in alarm_runs(context, agent):
            start = run.fired.t_ms
            limit = start + ALARM_HANDLER_LIMIT_MS
            what = f"the alarm handler of {agent} (attempt {run.attempt}, started at {_at(start)})"
            killed = run.killed
            if killed is not None:
                death = next((e for e in ends if e.seq > killed.seq), None)
                if (
                    killed.t_ms == limit
                    and killed.get("attempt") == run.attempt
                    and death is not None
                    and death.t_ms == limit
                    and death.get("reason") == "alarm-limit"
                ):
                    continue
                early = "before" if killed.t_ms < limit else "after"
                if killed.t_ms == limit:
                    died = f"died {death.get('reason')}" if death is not None else "lived on"
                    message = f"{what} was killed at its limit, but its incarnation {died}"
                else:
                    message = (
                        f"{what} was killed at {_at(killed.t_ms)}, {early} its 15-minute limit "
                        f"at {_at(limit)}"
                    )
                out.append(
                    Violation("alarm_limit", agent, "", message, (run.fired.seq, killed.seq))
                )
                continue
            if (run.end is not None and run.end.t_ms <= limit) or context.end <= limit:
                continue
            until = (
                f"until {run.end.event.removeprefix('alarm:')} at {_at(run.end.t_ms)}"
                if run.end is not None
                else f"still at {context.end_words()}"
            )
            out.append(
                Violation(
                    "alarm_limit",
                    agent,
                    "",
                    f"{what} was not killed at its 15-minute limit at {_at(limit)}: it ran {until}",
                    (run.fired.seq, *((run.end.seq,) if run.end is not None else ())),
                )
            )
    return out


@invariant("alarm_fires_on_time")
def alarm_fires_on_time(context: CheckContext) -> list[Violation]:
    """Platform rule "one alarm slot, replace-on-set, surviving eviction" — an armed alarm fires
    at its time, never before, and a replaced or deleted one never fires.

    Following each agent's slot records in order (due instant D = max(at, time of the set);
    a later `alarm:set` replaces it, `alarm:deleted` or a destroy's `storage:wiped` clears it):
    1. every `alarm:fired {attempt: 0}` at t consumes a slot due at exactly t, or comes in the
       instant a handler run ended while something came due during that run (a due slot, or a
       retry, that found a handler running and waited for it; a slot due in that same instant
       is held with them and run by that one firing); a held retry firing as the run ends
       (`attempt` N > 0: the slot is one alarm, and the higher count stands) runs them so too;
    2. a slot due at D with no handler running then fires at D: once the trace passes D, it was
       fired, replaced or cleared at D, or it was due while a handler ran.
    """
    out: list[Violation] = []
    for agent in _slot_agents(context):
        out += _follow_slot(context, agent)
    return out


def _follow_slot(context: CheckContext, agent: str) -> list[Violation]:
    out: list[Violation] = []
    slot: tuple[int, TraceRecord] | None = None  # (due instant, the alarm:set)
    retries: list[int] = []
    running = False
    waiting = False  # something came due while a handler ran: it fires when the run ends
    last_end: int | None = None

    def passed(now: int) -> None:
        nonlocal slot, waiting
        if slot is not None and slot[0] < now:
            if running:
                waiting = True
            else:
                out.append(
                    Violation(
                        "alarm_fires_on_time",
                        agent,
                        "",
                        f"the alarm of {agent} armed at {_at(slot[1].t_ms)} for "
                        f"{_at(slot[0])} did not fire at {_at(slot[0])}",
                        (slot[1].seq,),
                    )
                )
            slot = None
        for due in [d for d in retries if d < now]:
            retries.remove(due)
            waiting = waiting or running

    for record in context.records_of(agent, *ALARM_EVENTS, "storage:wiped"):
        passed(record.t_ms)
        if record.event == "storage:wiped":
            # A destroy deletes the alarm with everything else: nothing armed fires after it.
            slot, waiting = None, False
            retries.clear()
        elif record.event in ("alarm:set", "alarm:deleted"):
            if slot is not None and slot[0] == record.t_ms and running:
                waiting = True  # it may have come due in this instant, before this change
            if record.event == "alarm:set":
                slot = (max(int(record.get("at") or 0), record.t_ms), record)
            else:
                slot = None
        elif record.event == "alarm:retry":
            retries.append(int(record.get("at") or 0))
        elif record.event == "alarm:fired":
            attempt = record.get("attempt") or 0
            if attempt:
                if record.t_ms in retries:
                    retries.remove(record.t_ms)
                elif waiting and record.t_ms == last_end:
                    # A retry held behind a run fires as it ends, merged with whatever else
                    # came due under that run (the slot is one alarm; the higher attempt
                    # stands), a slot due in that same instant included.
                    waiting = False
                    if slot is not None and slot[0] == record.t_ms:
                        slot = None
            elif waiting and record.t_ms == last_end:
                waiting = False
                if slot is not None and slot[0] == record.t_ms:
                    slot = None  # due as the run ended: held with the rest, run in this once
            elif record.t_ms == last_end and record.t_ms in retries:
                retries.remove(record.t_ms)  # a retry due as the run ended waited for it
            elif slot is not None and slot[0] == record.t_ms:
                slot = None
            else:
                armed = (
                    f"its slot was armed for {_at(slot[0])} (at {_at(slot[1].t_ms)})"
                    if slot is not None
                    else "its slot was not armed"
                )
                out.append(
                    Violation(
                        "alarm_fires_on_time",
                        agent,
                        "",
                        f"the alarm of {agent} fired at {_at(record.t_ms)}, but {armed}",
                        (*((slot[1].seq,) if slot is not None else ()), record.seq),
                    )
                )
            running = True
        elif record.event in RUN_ENDS:
            running, last_end = False, record.t_ms
    if context.end is not None:
        passed(context.end)
    return out


STARTUP_HOLDS_REARMS = frozenset({"0.32.0"})
"""Releases whose Lifecycle holds the re-arms asked for during startup and, when the startup
fails, arms the startup fallback instead (sdk-0.32 §1.2, J-04)."""


@invariant("keep_alive_heartbeat")
def keep_alive_heartbeat(context: CheckContext) -> list[Violation]:
    """Seed, keepAlive — while any keepAlive lease is held, the alarm fires every
    `keep_alive_interval_ms` (30 s by default) and keeps the agent from idling out.

    For every top-level agent, over its own leases (`keep_alive:acquire` / `keep_alive:release`
    records on the agent) and its sub-agents' (the seed's sub-agent section: a sub-agent's
    keepAlive is a lease on its root, whose alarm is the heartbeat; such a lease ends with its
    release, the sub-agent's incarnation, or its deletion): from the moment its first lease of a
    held period is acquired, and from the end of every
    alarm run that ends `done` while a lease is held, an `alarm:fired` comes within the
    interval — unless every lease was released, or the incarnation died, first. An `alarm:set`
    outside a run while a lease is held starts the wait anew (the SDK computes the alarm afresh
    with the candidate now + interval, so a reschedule slides the heartbeat). While a handler
    runs the heartbeat waits for it; after a run that failed or was interrupted the platform's
    retries (`alarm_retries`) govern the next fire; on a release in `STARTUP_HOLDS_REARMS`, so
    does the startup fallback after a `startup:failed` of the agent.
    """
    out: list[Violation] = []
    for agent in sorted(context.alarms):
        interval = int(context.option(agent, "keep_alive_interval_ms"))
        out += _heartbeat(context, agent, interval)
    return out


def _unlisted_by(context: CheckContext, sub: str, after_ms: int, by_ms: int) -> bool:
    """Sub-agent `sub`'s registry entry on its parent was deleted in [after_ms, by_ms]."""
    entry = registry_entry(sub)
    if entry is None:
        return False
    parent, cls, name = entry
    entries = registry_history(context, parent).get((cls, name), [])
    return any(after_ms <= when <= by_ms and not present for when, present in entries)


def _holder(root: str, lease: TraceRecord) -> str:
    """Who held a lease, as a violation names it: the root, or its sub-agent."""
    return root if lease.agent == root else f"{root}'s sub-agent {lease.agent}"


def _heartbeat(context: CheckContext, agent: str, interval: int) -> list[Violation]:
    out: list[Violation] = []
    held: dict[tuple[str, int, Any], TraceRecord] = {}
    since: TraceRecord | None = None  # what started the current wait for a heartbeat
    running = False

    def late(now: int) -> None:
        nonlocal since, held
        if since is None or running or now <= since.t_ms + interval:
            return
        # A sub-agent's lease ends too when its parent's registry drops it (the delete's
        # clean-up gives its leases up on the root, even if the delete stops after it).
        due = since.t_ms + interval
        held = {
            k: v
            for k, v in held.items()
            if k[0] == agent or not _unlisted_by(context, str(k[0]), v.t_ms, due)
        }
        if not held:
            since = None
            return
        lease = next(iter(held.values()))
        out.append(
            Violation(
                "keep_alive_heartbeat",
                agent,
                str(lease.get("holder")),
                f"{_holder(agent, lease)} held keepAlive lease {lease.get('lease')} "
                f"({lease.get('holder')}) but {agent}'s alarm did not fire between "
                f"{format_sim_time(since.t_ms)} and "
                f"{format_sim_time(since.t_ms + interval)} (every {interval} ms while a lease "
                "is held)",
                (since.seq,),
            )
        )
        since = None

    events = ("keep_alive:acquire", "keep_alive:release", "incarnation:end", "alarm:fired")
    records = context.records_of(agent, *events, "alarm:set", *RUN_ENDS)
    if context.release in STARTUP_HOLDS_REARMS:
        records += context.records_of(agent, "startup:failed")
    below = [a for a in context.agents() if a.startswith(agent + "/")]
    for sub in below:
        records += context.records_of(sub, "keep_alive:acquire", "keep_alive:release")
        records += context.records_of(sub, "incarnation:end", "facet:deleted")
    for record in sorted(records, key=lambda r: r.seq):
        late(record.t_ms)
        if record.agent != agent:
            # A sub-agent's lease: held from its acquire to its release, or until the
            # sub-agent's incarnation ends or the sub-agent (or one above it) is deleted.
            key = (record.agent, record.inc, record.get("lease"))
            if record.event == "keep_alive:acquire":
                if not held:
                    since = record
                held[key] = record
            elif record.event == "keep_alive:release":
                held.pop(key, None)
            elif record.event == "incarnation:end":
                held = {k: v for k, v in held.items() if k[:2] != (record.agent, record.inc)}
            else:
                gone = record.agent
                held = {
                    k: v
                    for k, v in held.items()
                    if not (k[0] == gone or str(k[0]).startswith(gone + "/"))
                }
            if not held:
                since = None
            continue
        if record.event == "alarm:set":
            # Fibers §3.2: the alarm is computed afresh with the candidate now + interval while
            # a lease is held, so a reschedule between runs slides the heartbeat.
            if held and not running:
                since = record
            continue
        if record.event == "startup:failed":
            # 0.32.0 holds a startup's re-arms, and one that fails arms its fallback instead
            # (at least 30 s on, J-04): that alarm, or the platform's retry, is the next fire.
            since = None
            continue
        if record.event == "keep_alive:acquire":
            if not held:
                since = record
            held[(agent, record.inc, record.get("lease"))] = record
        elif record.event == "keep_alive:release":
            held.pop((agent, record.inc, record.get("lease")), None)
        elif record.event == "incarnation:end":
            # A root's death takes its sub-agents and their leases with it.
            held = {key: lease for key, lease in held.items() if key[0] == agent}
            held = {key: lease for key, lease in held.items() if key[1] != record.inc}
        elif record.event == "alarm:fired":
            running, since = True, None
        else:
            running = False
            since = record if held and record.event == "alarm:done" else None
        if not held:
            since = None
    late(context.end)
    return out
