"""Invariants of incarnations, the platform's rules of life and death (README "The platform's
rules"): `eviction_final` (death is an instant: nothing of a dead incarnation runs afterwards),
`startup_once` (startup runs once per incarnation), `startup_gates_deliveries` (no event is
delivered while startup runs, and one that triggers startup only after it) and
`startup_triggered` (only a startup trigger runs startup, never a plain RPC).

They read the platform's own records: `incarnation:start {trigger}` / `incarnation:end
{reason}`, `startup:begin {trigger}` (the delivery that ran it), `startup:done`,
`startup:failed`, and `delivery:begin {trigger}` (a delivery's handler starts, after the input
gate and startup). Records the platform writes when no incarnation is alive carry incarnation 0.
Which triggers run startup is the spec's list (`SPEC_STARTUP_TRIGGERS`), held here apart from the
platform's own `STARTUP_TRIGGERS`: a platform that changed its list is caught, not trusted.
"""

from __future__ import annotations

from collections import defaultdict

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.trace import TraceRecord, format_sim_time

__all__ = [
    "SPEC_STARTUP_TRIGGERS",
    "deaths_are_whole",
    "eviction_final",
    "startup_gates_deliveries",
    "startup_once",
    "startup_triggered",
]

SPEC_STARTUP_TRIGGERS = frozenset(
    {"get", "request", "connect", "message", "close", "alarm", "facet"}
)
"""The deliveries that run startup (spec fibers §1.4): get-by-name, a request, a connection's
open, message and close, an alarm, a sub-agent's resolution — never a plain RPC on a stub."""

RPC_STARTS = frozenset({"0.32.0"})
"""The releases on which an RPC to a user's async method (and a schedule call) runs startup
(spec sdk-0.32 §1.3): there a `startup:begin` may name an `rpc` delivery."""

AT_DEATH = frozenset({"connection:close"})
"""What the platform itself writes for a dead incarnation in its instant of death, after its
`incarnation:end`: the closing of the connections it held."""
SLOT_WRITES = ("alarm:set", "alarm:deleted")
STARTUP_EVENTS = ("startup:begin", "startup:done", "startup:failed")
LIVE_STEPS = frozenset({*STARTUP_EVENTS, "delivery:begin"})
"""Records only a live incarnation's own steps write (never one at incarnation 0)."""


def _at(record: TraceRecord) -> str:
    return format_sim_time(record.t_ms)


def _lives(context: CheckContext, agent: str) -> list[tuple[int, list[TraceRecord]]]:
    """The agent's records by incarnation, in order of first record (records of incarnation 0
    left out; a path used again after its record was forgotten starts new incarnations)."""
    out: dict[tuple[int, int], list[TraceRecord]] = defaultdict(list)
    resets = context.record_resets(agent)
    for record in context.records_of(agent):
        if record.inc:
            generation = sum(1 for s in resets if s < record.seq)
            out[(generation, record.inc)].append(record)
    return [(inc, records) for (_, inc), records in out.items()]


@invariant("eviction_final")
def eviction_final(context: CheckContext) -> list[Violation]:
    """Platform rule "eviction kills, it never unwinds" — after the instant of death nothing of
    that incarnation runs: no finally, no except, no storage write, no alarm change, no record.

    For every agent:
    1. after the `incarnation:end` of incarnation I, no record of incarnation I follows, except
       the `connection:close` the platform writes for its connections in that same instant;
    2. incarnations are lived one at a time and numbered 1, 2, 3...: `incarnation:start` of I
       comes only once incarnation I-1 has ended;
    3. no `alarm:set` / `alarm:deleted` is written while the agent has no live incarnation
       (incarnation 0): only a live incarnation may change the alarm slot; and no startup or
       delivery (`startup:*`, `delivery:begin`) is recorded then either: those are the steps of
       a live incarnation, so one at incarnation 0 is code of a dead one running on.
    """
    out: list[Violation] = []
    for agent in context.agents():
        ended: dict[int, TraceRecord] = {}
        expected, alive = 1, None
        resets = context.record_resets(agent)
        for record in context.records_of(agent):
            if resets and resets[0] < record.seq:
                # A deleted sub-agent comes back as a fresh record: numbering starts over.
                resets = [s for s in resets if s > record.seq]
                ended, expected, alive = {}, 1, None
            death = ended.get(record.inc)
            if death is not None and not (record.event in AT_DEATH and record.t_ms == death.t_ms):
                out.append(
                    Violation(
                        "eviction_final",
                        agent,
                        "",
                        f"incarnation {record.inc} of {agent} wrote {record.event} at "
                        f"{_at(record)}, after it died ({death.get('reason')}) at {_at(death)}",
                        (death.seq, record.seq),
                    )
                )
                ended.pop(record.inc)  # one sentence per dead incarnation is enough
            if record.event == "incarnation:start":
                if record.inc != expected or alive is not None:
                    why = (
                        f"while incarnation {alive.inc} was still alive"
                        if alive is not None
                        else f"where incarnation {expected} was next"
                    )
                    out.append(
                        Violation(
                            "eviction_final",
                            agent,
                            "",
                            f"incarnation {record.inc} of {agent} started at {_at(record)} {why}",
                            (record.seq,),
                        )
                    )
                expected, alive = record.inc + 1, record
            elif record.event == "incarnation:end":
                ended[record.inc] = record
                if alive is not None and alive.inc == record.inc:
                    alive = None
            elif record.event in SLOT_WRITES and record.inc == 0:
                out.append(
                    Violation(
                        "eviction_final",
                        agent,
                        "",
                        f"the alarm slot of {agent} was changed ({record.event}) at "
                        f"{_at(record)} while no incarnation of it was alive",
                        (record.seq,),
                    )
                )
            elif record.event in LIVE_STEPS and record.inc == 0:
                out.append(
                    Violation(
                        "eviction_final",
                        agent,
                        "",
                        f"{agent} recorded {record.event} at {_at(record)} while no incarnation "
                        f"of it was alive: code of a dead incarnation ran on",
                        (record.seq,),
                    )
                )
    return out


@invariant("startup_once")
def startup_once(context: CheckContext) -> list[Violation]:
    """Platform rule "startup runs once per incarnation under an input gate" — a started
    incarnation never runs startup again, and two startups never run at once.

    For every incarnation of every agent, its `startup:begin` records each get one outcome
    (`startup:done` or `startup:failed`) before the next `startup:begin`, and a `startup:begin`
    after a `startup:done` is a violation (a failed startup is tried again by the next event
    that triggers it; a completed one never).
    """
    out: list[Violation] = []
    for agent in context.agents():
        for inc, records in _lives(context, agent):
            running: TraceRecord | None = None
            done: TraceRecord | None = None
            for record in records:
                if record.event == "startup:begin":
                    if done is not None:
                        what = f"again at {_at(record)}, after it completed at {_at(done)}"
                        seqs = (done.seq, record.seq)
                    elif running is not None:
                        what = f"again at {_at(record)} while the one begun at {_at(running)} ran"
                        seqs = (running.seq, record.seq)
                    else:
                        running = record
                        continue
                    out.append(
                        Violation(
                            "startup_once",
                            agent,
                            "",
                            f"startup of {agent} began {what}, in incarnation {inc}",
                            seqs,
                        )
                    )
                    break
                if record.event in ("startup:done", "startup:failed"):
                    running = None
                    if record.event == "startup:done":
                        done = record
    return out


@invariant("startup_gates_deliveries")
def startup_gates_deliveries(context: CheckContext) -> list[Violation]:
    """Platform rule "startup runs under an input gate" — no event's handler runs while startup
    runs, and an event that triggers startup is handled only after startup completed.

    For every incarnation of every agent:
    1. no `delivery:begin` lies between a `startup:begin` and its outcome (`startup:done`,
       `startup:failed`, or the incarnation's end);
    2. a `delivery:begin` whose trigger runs startup (`SPEC_STARTUP_TRIGGERS`: a request, a
       connection, a message, a close, an alarm...) comes after a `startup:done` of its
       incarnation.
    """
    out: list[Violation] = []
    for agent in context.agents():
        for inc, records in _lives(context, agent):
            running: TraceRecord | None = None
            done = False
            for record in records:
                if record.event == "startup:begin":
                    running = record
                elif record.event in ("startup:done", "startup:failed"):
                    running = None
                    done = done or record.event == "startup:done"
                elif record.event == "delivery:begin":
                    trigger = record.get("trigger")
                    if running is not None:
                        what = f"while its startup (begun at {_at(running)}) was still running"
                        seqs: tuple[int, ...] = (running.seq, record.seq)
                    elif trigger in SPEC_STARTUP_TRIGGERS and not done:
                        what = "before its startup had completed"
                        seqs = (record.seq,)
                    else:
                        continue
                    out.append(
                        Violation(
                            "startup_gates_deliveries",
                            agent,
                            "",
                            f"{agent} began handling a {trigger} delivery at {_at(record)} "
                            f"{what}, in incarnation {inc}",
                            seqs,
                        )
                    )
    return out


@invariant("startup_triggered")
def startup_triggered(context: CheckContext) -> list[Violation]:
    """Platform rule (spec fibers §1.4) — startup is run by a delivery that triggers it: a get
    by name, a request, a connection's open, message or close, an alarm or a sub-agent's
    resolution, never by a plain RPC (one on a stale stub starts an incarnation that never runs
    `on_start` until such a trigger comes).

    Every `startup:begin` that names its trigger (`trigger`) names one of
    `SPEC_STARTUP_TRIGGERS` (and, on a release that starts for an RPC, `rpc`: `RPC_STARTS`).
    """
    out: list[Violation] = []
    allowed = SPEC_STARTUP_TRIGGERS
    if context.release in RPC_STARTS:
        allowed = allowed | {"rpc"}
    for record in context.events("startup:begin"):
        trigger = record.get("trigger")
        if trigger is None or trigger in allowed:
            continue
        out.append(
            Violation(
                "startup_triggered",
                record.agent,
                "",
                f"startup of {record.agent} began at {_at(record)} for a {trigger} delivery, in "
                f"incarnation {record.inc}; only {', '.join(sorted(SPEC_STARTUP_TRIGGERS))} "
                "deliveries run startup",
                (record.seq,),
            )
        )
    return out


@invariant("deaths_are_whole")
def deaths_are_whole(context: CheckContext) -> list[Violation]:
    """Platform rules "kill is the instant of death" and "a crash kills the whole isolate" — a
    death takes everything the incarnation held, in that instant: the sub-agents living in it,
    its clients' connections; a crash anywhere takes the top-level agent; a deploy restarts
    every live incarnation.

    Following every agent's lives in trace order:
    1. when an incarnation of an agent ends at t, no sub-agent under it is still alive (sub-agents
       die first, in that instant);
    2. a sub-agent's `incarnation:end {reason: crash}` at t is followed by its top-level agent's
       `incarnation:end` at t;
    3. every connection its incarnation opened and had not closed gets its `connection:close` at
       t, after the `incarnation:end`;
    4. after a `platform:deploy` at t, every agent then alive has an `incarnation:end {reason:
       deploy}` at t.
    """
    out: list[Violation] = []
    alive: dict[str, TraceRecord] = {}
    open_connections: dict[str, TraceRecord] = {}
    owed: list[tuple[str, TraceRecord, TraceRecord]] = []  # (what must follow, death, subject)
    for record in context.records:
        agent = record.agent
        if record.event == "incarnation:start":
            alive[agent] = record
        elif record.event == "connection:open":
            open_connections[str(record.get("connection"))] = record
        elif record.event == "connection:close":
            open_connections.pop(str(record.get("connection")), None)
        elif record.event in ("facet:deleted", "storage:wiped"):
            for other in [a for a in alive if a.startswith(agent + "/")]:
                alive.pop(other)
        elif record.event == "platform:deploy":
            owed += [("deploy", record, life) for life in alive.values()]
        elif record.event == "incarnation:end":
            life = alive.pop(agent, None)
            for other in sorted(a for a in alive if a.startswith(agent + "/")):
                out.append(
                    _whole(
                        other,
                        f"{other} was still alive when {agent} (incarnation {record.inc}), which "
                        f"it lives in, died ({record.get('reason')}) at "
                        f"{format_sim_time(record.t_ms)}",
                        (alive[other].seq, record.seq),
                    )
                )
                alive.pop(other)
            if record.get("reason") == "crash" and context.root_of(agent) != agent:
                owed.append(("crash", record, record))
            if life is not None:
                for connection in [
                    c for c in open_connections.values() if c.agent == agent and c.inc == record.inc
                ]:
                    owed.append(("close", record, connection))
                    open_connections.pop(str(connection.get("connection")))
    for kind, death, subject in owed:
        out += _owed(context, kind, death, subject)
    return out


def _whole(agent: str, message: str, seqs: tuple[int, ...]) -> Violation:
    return Violation("deaths_are_whole", agent, "", message, seqs)


def _owed(
    context: CheckContext, kind: str, death: TraceRecord, subject: TraceRecord
) -> list[Violation]:
    at = format_sim_time(death.t_ms)
    if kind == "close":
        connection = subject.get("connection")
        closes = context.events("connection:close", subject.agent, connection=connection)
        if any(c.seq > death.seq and c.t_ms == death.t_ms for c in closes):
            return []
        return [
            _whole(
                subject.agent,
                f"connection {connection} of {subject.agent} (client {subject.get('client')}) "
                f"was not closed when its incarnation {death.inc} died at {at}",
                (subject.seq, death.seq),
            )
        ]
    if kind == "crash":
        root = context.root_of(death.agent)
        ends = context.incarnation_ends(root)
        if any(e.seq > death.seq and e.t_ms == death.t_ms for e in ends):
            return []
        return [
            _whole(
                root,
                f"{death.agent} crashed at {at}, but {root}, whose isolate it lives in, did not "
                "die with it",
                (death.seq,),
            )
        ]
    ends = context.incarnation_ends(subject.agent)
    if any(
        e.seq > death.seq and e.t_ms == death.t_ms and e.inc == subject.inc
        for e in ends
        if e.get("reason") == "deploy"
    ):
        return []
    return [
        _whole(
            subject.agent,
            f"incarnation {subject.inc} of {subject.agent} lived on through the deploy at {at}",
            (subject.seq, death.seq),
        )
    ]
