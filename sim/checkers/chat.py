"""Invariants of chat hosts: `chat_turns_serial` (turns run one at a time), `progress_done_sent`
(S4: a finished progress report is never coalesced away), `milestones_stored` (S2: a child's
milestone is a stored chunk of its stream) and `chat_recovery_attempts_count` (recovery attempts
of an interrupted turn count up across restarts).

A chat turn is a fiber named `__cf_internal_chat_turn:<requestId>` (`CHAT_TURN_FIBER_PREFIX`);
its `fiber:run:started` and `fiber:run:completed|failed` records bound it. What
`report_progress` answered is known from the workload convention of the chat children's `work`
tool: `workload:reported {runId, kind, outcome, fraction | name}` (outcome `emitted`,
`coalesced` or `inactive`). A chat child keeps its milestone rows in
`cf_ai_chat_agent_tool_milestones` (AIChatAgent-like) or `cf_agent_tool_milestones`
(Think-like) and its streams in `cf_ai_chat_stream_metadata` / `cf_ai_chat_stream_chunks`; a
child facet serves one run, so every stream it holds is a stream of that run. Chat recovery
records `chat:recovery:attempt {originRequestId, attempt}` for each attempt it makes.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.core import time_words as _at
from sim.checkers.models.spec_constants import CHAT_TURN_FIBER_PREFIX
from sim.checkers.registry import invariant
from sim.trace import TraceRecord

__all__ = [
    "chat_recovery_attempts_count",
    "chat_turns_serial",
    "milestones_stored",
    "progress_done_sent",
]

MILESTONE_TABLES = ("cf_ai_chat_agent_tool_milestones", "cf_agent_tool_milestones")
STREAMS = "cf_ai_chat_stream_metadata"
CHUNKS = "cf_ai_chat_stream_chunks"
MILESTONE_PART = "data-agent-milestone"
FIBER_ENDS = ("fiber:run:completed", "fiber:run:failed")


CHAT_TURN_TASK = "__cf_internal_chat_turn"
"""The Task definition a top-level chat host's turn runs as on 0.32.0 (sdk-0.32 §8.3)."""
TASK_ENDS = ("task:completed", "task:failed")


def _turn(record: TraceRecord) -> tuple[str, str] | None:
    """A chat turn's start or end record as (`start` or `end`, the turn's id: its fiber's or
    its Task run's), or None for any other record."""
    if record.event == "fiber:run:started":
        if str(record.get("fiberName")).startswith(CHAT_TURN_FIBER_PREFIX):
            return ("start", f"fiber:{record.get('fiberId')}")
        return None
    if record.event in FIBER_ENDS:
        return ("end", f"fiber:{record.get('fiberId')}")
    if record.get("definition") != CHAT_TURN_TASK:
        return None
    if record.event == "task:attempt:started":
        # Only the first attempt may run the turn: a turn's step allows one attempt, and a
        # later one (its run re-driven after the isolate died) hands the turn to chat recovery.
        if record.get("attempt") != 1:
            return None
        return ("start", f"task:{record.get('runId')}")
    if record.event in TASK_ENDS:
        return ("end", f"task:{record.get('runId')}")
    return None


def _request(record: TraceRecord) -> str:
    if record.event.startswith("task:"):
        return str(record.get("runId"))
    return str(record.get("fiberName"))[len(CHAT_TURN_FIBER_PREFIX) :]


@invariant("chat_turns_serial")
def chat_turns_serial(context: CheckContext) -> list[Violation]:
    """Chat turns — a chat host runs its turns one at a time, in the order they were submitted:
    a turn starts only once the one before it ended.

    A turn is a chat-turn fiber (named `__cf_internal_chat_turn:<requestId>`: `fiber:run:started`
    to `fiber:run:completed` or `fiber:run:failed` of that fiber id) or, on 0.32.0 for a
    top-level host, the first attempt of a Task run of definition `__cf_internal_chat_turn`
    (`task:attempt:started {attempt: 1}` to `task:completed` or `task:failed` of that run id,
    its body begun: the agent's keepAlive taken in that instant; a later attempt, or one with no
    live turn to run, only hands the turn to chat recovery). For every
    agent and each of its incarnations, between a turn's start and its end no other turn
    starts. A turn that neither ended in that incarnation nor (a fiber) took its keepAlive lease
    (`keep_alive:acquire {holder: fiber:<id>}`) is left out: a fiber whose setup threw (an
    initial snapshot write failed) before its body ran has no end record (fibers §5.2), and an
    attempt its incarnation died in holds no later incarnation's turn back. A sub-agent deleted
    (`facet:deleted`) and made again under its name is a new agent whose incarnations count
    from 1 again: the turns of the deleted one ended with it.
    """
    out: list[Violation] = []
    events = (
        "fiber:run:started",
        *FIBER_ENDS,
        "task:attempt:started",
        *TASK_ENDS,
        "keep_alive:acquire",
        "facet:deleted",
        "chat:recovery:detected",
    )
    for agent in context.agents():
        running: dict[tuple[int, int], tuple[TraceRecord, str]] = {}
        records, lives, life = [], [], 0
        for record in context.records_of(agent, *events):
            if record.event == "facet:deleted":
                life += 1
                continue
            records.append(record)
            lives.append(life)
        ran: set[tuple[int, int, str]] = set()
        detected = [r.seq for r in records if r.event == "chat:recovery:detected"]
        opened: dict[tuple[int, int, str], TraceRecord] = {}
        leased: set[tuple[int, int, str]] = set()
        for record, life in zip(records, lives, strict=True):
            if record.event == "keep_alive:acquire" and record.get("holder") == "keep_alive":
                # A Task-run turn takes the agent's keepAlive as its body begins, in the
                # instant its attempt starts.
                leased.update(
                    key
                    for key, start in opened.items()
                    if key[:2] == (life, record.inc) and start.t_ms == record.t_ms
                )
                continue
            turn = _turn(record)
            if turn is None:
                continue
            key3 = (life, record.inc, turn[1])
            if turn[0] == "start":
                opened[key3] = record
            else:
                began = opened.get(key3)
                # A Task-run attempt that hands its turn to chat recovery (no live turn to run
                # in it: its caller failed, or its isolate died) is not a turn; one whose
                # attempt a hand-off fell within is left unjudged too (records cannot tell
                # whose hand-off it was). Nor is one whose body never began (no keepAlive
                # taken: a hand-off or the turn's first write failed before it).
                if turn[1].startswith("task:") and (
                    key3 not in leased
                    or any(began is not None and began.seq < seq < record.seq for seq in detected)
                ):
                    continue
                ran.add(key3)
        for record, life in zip(records, lives, strict=True):
            holder = str(record.get("holder"))
            if record.event == "keep_alive:acquire" and holder.startswith("fiber:"):
                ran.add((life, record.inc, holder))
        for record, life in zip(records, lives, strict=True):
            turn = _turn(record)
            if turn is None:
                continue
            kind, turn_id = turn
            if (life, record.inc, turn_id) not in ran:
                continue
            key = (life, record.inc)
            current = running.get(key)
            if kind == "end":
                if current is not None and current[1] == turn_id:
                    del running[key]
                continue
            if current is not None:
                started = current[0]
                out.append(
                    Violation(
                        "chat_turns_serial",
                        agent,
                        _request(record),
                        f"chat turn {_request(record)} of {agent} started at "
                        f"{_at(record.t_ms)} while turn {_request(started)} (started at "
                        f"{_at(started.t_ms)}) was still running; turns run one at a time",
                        (started.seq, record.seq),
                    )
                )
                break
            running[key] = (record, turn_id)
    return out


@invariant("progress_done_sent")
def progress_done_sent(context: CheckContext) -> list[Violation]:
    """S4 — progress with `fraction >= 1` is always sent at once, never coalesced: a client
    never misses that a run's work is done.

    For every `workload:reported {kind: progress}` of an active run (`runId` set) whose
    `fraction` is a number >= 1, the outcome is `emitted`.
    """
    out: list[Violation] = []
    for report in context.events("workload:reported", kind="progress"):
        fraction = report.get("fraction")
        if report.get("runId") is None or isinstance(fraction, bool):
            continue
        if not isinstance(fraction, int | float) or fraction < 1:
            continue
        if report.get("outcome") == "emitted":
            continue
        out.append(
            Violation(
                "progress_done_sent",
                report.agent,
                str(report.get("runId")),
                f"run {report.get('runId')} of {report.agent} reported progress {fraction} at "
                f"{_at(report.t_ms)} and it was {report.get('outcome')} instead of sent; a "
                "finished progress report is always sent at once",
                (report.seq,),
            )
        )
    return out


def _parse(body: Any) -> Any:
    try:
        return json.loads(body) if isinstance(body, str) else None
    except ValueError:
        return None


def _stored_milestones(chunks: list[Mapping[str, Any]]) -> set[tuple[Any, Any]]:
    """(name, sequence) of every milestone chunk stored in the chunks."""
    found = set()
    for row in chunks:
        chunk = _parse(row.get("body"))
        if not isinstance(chunk, dict) or chunk.get("type") != MILESTONE_PART:
            continue
        data = chunk.get("data")
        if isinstance(data, dict):
            found.add((data.get("name"), data.get("sequence")))
    return found


def _streaming_at(streams: list[Mapping[str, Any]], at: Any) -> bool:
    """The child's latest stream created at or before `at` had not ended by then (a stream a
    dead incarnation left `streaming` is superseded by the next turn's)."""
    if not isinstance(at, int | float):
        return False
    begun = [
        s for s in streams if isinstance(s.get("created_at"), int | float) and s["created_at"] <= at
    ]
    if not begun:
        return False
    latest = max(reversed(begun), key=lambda s: s["created_at"])  # the last one on a tie
    ended = latest.get("completed_at")
    return ended is None or ended > at


@invariant("milestones_stored")
def milestones_stored(context: CheckContext) -> list[Violation]:
    """S2 — a chat child's milestone is stored in its turn's resumable stream: it has a chunk
    index, is part of the answer, survives eviction and is replayed.

    For every agent with a milestone table (see the module docstring), every milestone row
    (run, sequence, name, at) written while a turn streamed (the agent's latest stream created
    at or before `at` had not ended at or before it) has a stored `data-agent-milestone` chunk
    with that name and sequence in one of the agent's streams. A row written when no turn
    streamed (a report after the turn ended) is not judged. The row and its chunk commit in one
    turn, so both or neither are in storage.
    """
    out: list[Violation] = []
    for agent in context.paths():
        tables = context.storage.get(agent) or {}
        streams = list(tables.get(STREAMS, ()))
        stored = _stored_milestones(list(tables.get(CHUNKS, ())))
        for table in MILESTONE_TABLES:
            for row in tables.get(table, ()):
                key = (row.get("name"), row.get("sequence"))
                if key in stored or not _streaming_at(streams, row.get("at")):
                    continue
                out.append(
                    Violation(
                        "milestones_stored",
                        agent,
                        str(row.get("run_id")),
                        f"milestone {row.get('name')} (sequence {row.get('sequence')}) of run "
                        f"{row.get('run_id')} on {agent} was reported at {_at(row.get('at'))} "
                        "while its turn streamed, but no stream of the child stored it as a "
                        "chunk; a milestone is stored in the turn's stream",
                    )
                )
                break
    return out


ATTEMPTS_DEBOUNCED = frozenset({"0.32.0"})
"""Releases whose chat recovery numbers a wake's attempt by the incident, not by a count of
wakes (sdk-0.32 §8.1): the attempt stays as it was for a wake within 30 s of the last with no
progress between, and goes back to 1 once the turn made progress."""


@invariant("chat_recovery_attempts_count")
def chat_recovery_attempts_count(context: CheckContext) -> list[Violation]:
    """Chat recovery — the attempts to recover an interrupted turn are counted durably, so they
    number 1, 2, 3… per first-interrupted turn across restarts, and recovery gives up after
    `max_chat_recovery_attempts`.

    For every agent and origin turn (`originRequestId`), its `chat:recovery:attempt` records in
    trace order carry `attempt` values where each is greater than the last earlier one not
    written in a turn that may have rolled back (0 before the first), and is exactly one more
    than the one just before it unless an `incarnation:end` of the agent lies between them (an
    attempt counted and then cut short before its record) — for the first, between the origin's
    first `chat:recovery:scheduled` and it. On a release in `ATTEMPTS_DEBOUNCED` an attempt
    may also repeat the last number (a debounced wake) or go back to 1 (progress was made).
    """
    out: list[Violation] = []
    attempts: dict[tuple[str, str], list[TraceRecord]] = defaultdict(list)
    for record in context.events("chat:recovery:attempt"):
        attempts[(record.agent, str(record.get("originRequestId")))].append(record)
    for (agent, origin), records in sorted(attempts.items()):
        deaths = [e.seq for e in context.incarnation_ends(agent)]
        scheduled = context.events("chat:recovery:scheduled", agent, originRequestId=origin)
        previous: TraceRecord | None = None
        durable = 0
        for record in records:
            value = record.get("attempt")
            if not isinstance(value, int) or isinstance(value, bool):
                continue
            last = int(previous.get("attempt")) if previous is not None else 0
            since = (
                previous.seq if previous is not None else (scheduled[0].seq if scheduled else -1)
            )
            died = any(since < seq < record.seq for seq in deaths)
            problem = None
            if value <= durable and not (
                context.release in ATTEMPTS_DEBOUNCED and value in (1, last)
            ):
                problem = f"numbered an attempt {value} again after attempt {durable}"
            elif value > last + 1 and not died:
                problem = f"skipped from attempt {last} to {value} with no restart between"
            if problem is not None:
                out.append(
                    Violation(
                        "chat_recovery_attempts_count",
                        agent,
                        origin,
                        f"chat recovery of turn {origin} on {agent} {problem} (at "
                        f"{_at(record.t_ms)}); attempts count up 1, 2, 3… across restarts",
                        tuple(r.seq for r in (previous, record) if r is not None),
                    )
                )
                break
            previous = record
            if not context.may_have_rolled_back(record):
                durable = value
    return out
