"""When a child's signals must reach the parent's side: `progress_flushed` (S4: a coalesced
progress value is sent when its 200 ms window ends, latest wins) and `milestones_before_finish`
(S3: a milestone notification comes as soon as the milestone is reached, before the run's end is
delivered).

Progress is known from the chat children's workload convention: their `work` tool records what
`report_progress` answered, `workload:reported {runId, kind, outcome, fraction | name}` (outcome
`emitted`, `coalesced` or `inactive`), on the child's path `<parent>/<agent type>/<run id>`. A
progress frame reaches a client of the parent as a `chunk` event whose body is a
`data-agent-progress` chunk (agent-tools §3.1, §5.2); the simulated platform's calls take no
time, so the parent forwards a child's frame in the instant the child sent it, in the order it
sent them.

A milestone is reached when the child writes its milestone row (`child_milestones` of the
scripted child, `cf_agent_tool_milestones` of a Think-like child,
`cf_ai_chat_agent_tool_milestones` of an AIChatAgent-like one; `at` is when). The parent answers
it when the dedupe entry of the claim protocol (`milestones_once`) is committed `delivered`
(`hook:milestone_delivered {runId, name}` in that instant) or `failed` (its hook threw; S3 does
not retry); the end of a run is delivered with `hook:delivered {runId, slot}`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.models.spec_constants import MILESTONE_DEDUPE_PREFIX, PROGRESS_COALESCE_MS
from sim.checkers.registry import invariant
from sim.checkers.storage import kv_writes
from sim.checkers.timeline import decode_frame
from sim.trace import TraceRecord, format_sim_time

__all__ = ["milestones_before_finish", "progress_flushed"]

PROGRESS = "data-agent-progress"
MILESTONE_TABLES = (
    "child_milestones",
    "cf_agent_tool_milestones",
    "cf_ai_chat_agent_tool_milestones",
)
TRANSCRIPT = "cf_ai_chat_agent_messages"
"""A parent that keeps a chat transcript is a chat host: only a chat host announces milestones
(agent-tools §4.10; a plain `Agent` has no hook to announce them with)."""


def _parent_of(child: str) -> str:
    return child.rsplit("/", 2)[0] if child.count("/") >= 2 else ""


def _live_chunks(context: CheckContext, parent: str, run_id: str) -> dict[str, list[TraceRecord]]:
    """Connection -> the live (not replayed) `chunk` frames of the run it received, in order."""
    out: dict[str, list[TraceRecord]] = {}
    for record in context.events("connection:frame", parent):
        frame = decode_frame(record.get("frame"))
        if frame is None or frame.get("replay") or frame["event"]["runId"] != run_id:
            continue
        if frame["event"].get("kind") == "chunk":
            out.setdefault(str(record.get("connection")), []).append(record)
    return out


def _progress_fraction(record: TraceRecord) -> tuple[bool, Any]:
    """(is a progress chunk, its fraction) of a chunk frame record."""
    frame = decode_frame(record.get("frame")) or {}
    try:
        body = json.loads(frame.get("event", {}).get("body"))
    except (TypeError, ValueError):
        return False, None
    if not isinstance(body, dict) or body.get("type") != PROGRESS:
        return False, None
    data = body.get("data")
    return True, data.get("fraction") if isinstance(data, dict) else None


@invariant("progress_flushed")
def progress_flushed(context: CheckContext) -> list[Violation]:
    """S4 — progress reports coalesce, and the latest value of a batch is still sent, with a
    trailing flush when its 200 ms window ends: a client watching the run never keeps a stale
    value.

    For every `workload:reported {kind: progress, outcome: coalesced}` r of run R by child C at
    t, due D = t + 200 ms (`PROGRESS_COALESCE_MS`), when no later report of R by C comes by D (a
    later one is the batch's latest), neither C nor its parent P (nor P's top-level agent) ended
    an incarnation after r and by D (a crash in r's instant included: the pending value dies with
    the isolate), and C's run row does not show the run ended by D (the flush of a run that ended
    is not owed): every
    connection of P open at r and not closed by D that received a live chunk of R after D (the
    run's frames still flowed after the flush was due) received, after r and before that chunk,
    a live progress chunk of R with r's `fraction`.
    """
    out: list[Violation] = []
    for report in context.events("workload:reported", kind="progress", outcome="coalesced"):
        run_id, child = report.get("runId"), report.agent
        parent = _parent_of(child)
        if not isinstance(run_id, str) or not parent:
            continue
        due = report.t_ms + PROGRESS_COALESCE_MS
        later = [
            r
            for r in context.events("workload:reported", child, runId=run_id)
            if r.seq > report.seq and r.t_ms <= due
        ]
        deaths = [
            e
            for agent in sorted({child, parent, context.root_of(parent)})
            for e in context.incarnation_ends(agent)
            if e.seq > report.seq and e.t_ms <= due
        ]
        if later or deaths or _ended_by(context, child, run_id, due):
            continue
        wanted = report.get("fraction")
        for connection, chunks in sorted(_live_chunks(context, parent, run_id).items()):
            if not _open_through(context, parent, connection, report, due):
                continue
            witness = next((c for c in chunks if c.seq > report.seq and c.t_ms > due), None)
            if witness is None:
                continue
            if any(
                _progress_fraction(c) == (True, wanted)
                for c in chunks
                if report.seq < c.seq < witness.seq
            ):
                continue
            out.append(
                Violation(
                    "progress_flushed",
                    parent,
                    run_id,
                    f"run {run_id} of {child} reported progress {wanted} at "
                    f"{format_sim_time(report.t_ms)} and it was coalesced, but connection "
                    f"{connection} of {parent} received a later chunk of the run at "
                    f"{format_sim_time(witness.t_ms)} with no progress {wanted} before it: the "
                    "latest value of a batch is sent when its 200 ms window ends, by "
                    f"{format_sim_time(due)}",
                    (report.seq, witness.seq),
                )
            )
    return out


def _ended_by(context: CheckContext, child: str, run_id: str, due: int) -> bool:
    """The child's own run row shows the run ended (`completed_at`) by `due`."""
    for table in ("cf_agent_tool_child_runs", "cf_ai_chat_agent_tool_runs", "child_runs"):
        for row in context.table(child, table):
            done = row.get("completed_at")
            if row.get("run_id") == run_id and isinstance(done, int | float) and done <= due:
                return True
    return False


def _open_through(
    context: CheckContext, parent: str, connection: str, report: TraceRecord, due: int
) -> bool:
    """The connection was opened before `report` and not closed by `due`."""
    opened = context.events("connection:open", parent, connection=connection)
    closed = context.events("connection:close", parent, connection=connection)
    return (
        bool(opened)
        and opened[0].seq < report.seq
        and not any(c.seq > report.seq and c.t_ms <= due or c.seq < report.seq for c in closed)
    )


@invariant("milestones_before_finish")
def milestones_before_finish(context: CheckContext) -> list[Violation]:
    """S3 — a milestone notification is delivered as soon as the milestone is reached, before
    the run finishes, whether the parent saw the milestone live or reconciles it later.

    For every detached run R in the final rows of a parent P that keeps a chat transcript, whose
    `detached_on_milestones` names n, and whose child reached a milestone named n (the earliest
    of its milestone rows with that name, at m): the milestone is answered (a committed
    `delivered` or `failed` of its dedupe entry) no later than the first `hook:delivered` of R
    (either slot; not one whose turn may have rolled back) at or after m; and, when no slot of R
    is delivered after m, at all, once the liveness phase ran and had time since m (and P was
    not left asleep). Not judged: an answer held up by a claim whose incarnation died with the
    claim open before that delivery (the claim's 60 s lease keeps the milestone until it runs
    out; `milestones_once` holds the at most once), and a milestone reached in the instant its
    run was delivered `aborted` (a cancel settles the run at once, in that instant).
    """
    out: list[Violation] = []
    for parent in context.paths():
        if TRANSCRIPT not in (context.storage.get(parent) or {}):
            continue
        answers = _answers(context, parent)
        for row in context.table(parent, "cf_agent_tool_runs"):
            names = _names(row.get("detached_on_milestones"))
            if not row.get("detached") or not names:
                continue
            run_id = str(row.get("run_id"))
            reached = _reached(context, f"{parent}/{row.get('agent_type')}/{run_id}", run_id)
            for name in sorted(names & set(reached)):
                problem = _milestone_problem(context, parent, run_id, name, reached[name], answers)
                if problem is not None:
                    out.append(
                        Violation(
                            "milestones_before_finish",
                            parent,
                            run_id,
                            f"milestone {name} of run {run_id} of {parent}, reached at "
                            f"{format_sim_time(reached[name])}, {problem[0]}",
                            problem[1],
                        )
                    )
    return out


def _names(config: Any) -> set[str]:
    """The milestone names a run's stored `detached_on_milestones` asks to announce."""
    try:
        parsed = json.loads(config) if isinstance(config, str) else config
    except ValueError:
        return set()
    names = parsed.get("names") if isinstance(parsed, Mapping) else None
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()


def _reached(context: CheckContext, child: str, run_id: str) -> dict[str, int]:
    """Milestone name -> when the child first reached it (its rows' earliest `at`)."""
    reached: dict[str, int] = {}
    for table in MILESTONE_TABLES:
        for row in context.table(child, table):
            at, name = row.get("at"), row.get("name")
            if row.get("run_id") == run_id and isinstance(name, str) and isinstance(at, int):
                reached[name] = min(at, reached.get(name, at))
    return reached


Answers = dict[str, list[tuple[str, int]]]
"""Dedupe key -> its committed writes `(state, commit instant)`, in commit order."""


def _answers(context: CheckContext, parent: str) -> Answers:
    instants = context.journal_ms.get(parent, ())
    out: Answers = {}
    for write in kv_writes(context.journals.get(parent, ()), MILESTONE_DEDUPE_PREFIX):
        value = write.value if isinstance(write.value, Mapping) else {}
        state = "deleted" if write.value is None else str(value.get("state"))
        at = instants[write.turn - 1] if write.turn - 1 < len(instants) else value.get("at")
        out.setdefault(write.key, []).append((state, int(at or 0)))
    return out


def _milestone_problem(
    context: CheckContext,
    parent: str,
    run_id: str,
    name: str,
    reached: int,
    answers: Answers,
) -> tuple[str, tuple[int, ...]] | None:
    """What is wrong with when the milestone was answered, and the records that show it."""
    history = answers.get(f"{MILESTONE_DEDUPE_PREFIX}{run_id}:{name}", [])
    answered = next((at for state, at in history if state in ("delivered", "failed")), None)
    end = next(
        (
            d
            for d in context.events("hook:delivered", parent, runId=run_id)
            if d.t_ms >= reached and not context.may_have_rolled_back(d)
        ),
        None,
    )
    if end is None:
        if answered is not None or not context.liveness_ran:
            return None
        if not context.had_time_since(reached) or context.left_asleep(parent) is not None:
            return None
        return f"was never announced by {context.end_words()}", ()
    if answered is not None and answered <= end.t_ms:
        return None
    if _claim_cut(context, parent, history, end):
        return None
    if end.get("status") == "aborted" and end.t_ms == reached:
        return None  # cancelled in the instant the milestone was reached: aborted at once
    delivered = f"the run's {end.get('slot')} was delivered at {format_sim_time(end.t_ms)}"
    said = (
        f"was never announced, though {delivered}"
        if answered is None
        else f"was announced only at {format_sim_time(answered)}, after {delivered}"
    )
    return f"{said}: a milestone is announced before its run finishes", (end.seq,)


def _claim_cut(
    context: CheckContext, parent: str, history: list[tuple[str, int]], end: TraceRecord
) -> bool:
    """A claim of the entry was still open when an incarnation of the parent's root died, before
    the run's end was delivered."""
    deaths = [e.t_ms for e in context.incarnation_ends(context.root_of(parent)) if e.seq < end.seq]
    opened = None
    for state, at in [*[h for h in history if h[1] <= end.t_ms], ("end", end.t_ms)]:
        if opened is not None and any(opened <= t <= at for t in deaths):
            return True
        opened = at if state == "claimed" else None
    return False
