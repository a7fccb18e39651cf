"""Promises of the agent-tools seed about a run's child: `child_turn_once` (one child turn per
runId), `recovered_child_turn_rebound` (a chat host child's own recovery re-binds its run to the
recovered turn, never a settled one) and `clear_cancels_child_first` (clearing a live run
cancels its child before deleting it).

What they read:

- A run's child is the facet `<parent>/<agentType>/<runId>` (agent-tools §2.5) that got
  `rpc {method: start_agent_tool_run}`. Its own run row is the row of that run in a table of
  the facet with `run_id` and `status` columns (not its own registry, `cf_agent_tool_runs`):
  the SDK's chat hosts keep `cf_agent_tool_child_runs` / `cf_ai_chat_agent_tool_runs` (with a
  `request_id`), the workloads' scripted child `child_runs`. The adapter's start writes that
  row when the run is new, and only then kicks the child's turn off (§2.5); a chat host runs
  the turn as the chat turn fiber `__cf_internal_chat_turn:<requestId>`, and a chat recovery's
  turn names its new request id first (`chat:recovery:attempt {requestId}`), then re-binds the
  run to it (`chat:recovery:rebind {requestId, runId}`).
- A registry or a child row over time is its agent's journal, each turn at the instant it
  committed (`CheckContext.journal_ms`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.core import time_words as _at
from sim.checkers.models.spec_constants import CHAT_TURN_FIBER_PREFIX
from sim.checkers.registry import invariant
from sim.checkers.storage import RowChange, row_changes
from sim.trace import TraceRecord

__all__ = [
    "child_turn_once",
    "clear_cancels_child_first",
    "recovered_child_turn_rebound",
    "timed_changes",
]

RUNS = "cf_agent_tool_runs"
LIVE = ("starting", "running")
SETTLED = ("completed", "error", "aborted")
"""A child's own run row's terminal statuses (agent-tools §1.2: no `interrupted` there)."""


def _children(context: CheckContext) -> list[str]:
    """Every facet that was asked to start an agent-tool run."""
    return sorted({r.agent for r in context.events("rpc", method="start_agent_tool_run")})


def timed_changes(
    context: CheckContext, agent: str, table: str, key: str
) -> Iterator[tuple[int | None, RowChange]]:
    """The committed changes of `table`'s rows, each with the instant its turn committed."""
    instants = context.journal_ms.get(agent, ())
    for change in row_changes(context.journals.get(agent, ()), table, key):
        index = change.turn - 1
        yield (instants[index] if index < len(instants) else None), change


# -- child_turn_once ----------------------------------------------------------------------------
@invariant("child_turn_once")
def child_turn_once(context: CheckContext) -> list[Violation]:
    """agent-tools §2.4, §2.5 and the seed — `runAgentTool` is idempotent by runId: a re-issue
    of the same runId, a parent restart or a re-attach never starts a second child turn.

    For every child facet (an agent that got `rpc {method: start_agent_tool_run}`) and the run
    its name carries:
    1. replaying its journal (its current storage), the child's own run row of that run (see
       the module docstring) is inserted at most once;
    2. in each life of the facet (`CheckContext.life_of`: a deleted facet used again is a new
       run), at most one chat turn fiber starts that is not a chat recovery's (its request id
       named by a `chat:recovery:attempt` of the facet), unless the earlier one may have rolled
       back (its start, and the run row with it, may never have landed).
    """
    out = []
    for child in _children(context):
        run_id = child.rsplit("/", 1)[-1]
        for name, rows in sorted((context.storage.get(child) or {}).items()):
            if name == RUNS or not any("status" in r and "run_id" in r for r in rows):
                continue
            born = [
                change.turn
                for change in row_changes(context.journals.get(child, ()), name, "run_id")
                if change.key == run_id and change.before is None and change.after is not None
            ]
            if len(born) > 1:
                out.append(
                    Violation(
                        "child_turn_once",
                        child,
                        run_id,
                        f"the child {child} wrote its run row of {run_id} ({name}) as new "
                        f"{len(born)} times (committed turns {', '.join(map(str, born))}): a "
                        "child starts one turn per runId",
                    )
                )
        recovered = {r.get("requestId") for r in context.events("chat:recovery:attempt", child)}
        turns: dict[int, list[TraceRecord]] = defaultdict(list)
        for start in context.events("fiber:run:started", child):
            name = str(start.get("fiberName") or "")
            if not name.startswith(CHAT_TURN_FIBER_PREFIX):
                continue
            if name.removeprefix(CHAT_TURN_FIBER_PREFIX) in recovered:
                continue
            turns[context.life_of(start)].append(start)
        for starts in turns.values():
            landed = [s for s in starts[:-1] if not context.may_have_rolled_back(s)]
            if not landed:
                continue
            second = starts[starts.index(landed[0]) + 1]
            out.append(
                Violation(
                    "child_turn_once",
                    child,
                    run_id,
                    f"the child {child} started a second turn for run {run_id} at "
                    f"{_at(second.t_ms)} ({second.get('fiberName')}), after the one started at "
                    f"{_at(landed[0].t_ms)}; only a chat recovery may run the turn again",
                    (landed[0].seq, second.seq),
                )
            )
    return out


# -- recovered_child_turn_rebound --------------------------------------------------------------
@invariant("recovered_child_turn_rebound")
def recovered_child_turn_rebound(context: CheckContext) -> list[Violation]:
    """agent-tools §7.7 (T-100, T-101) — a chat host child's own recovery keeps its agent-tool
    run attributable: before the recovered turn runs, the run's active child row is re-bound to
    the turn's new request id, and a settled row is never re-bound.

    For every child facet whose own run row has a `request_id` column (the chat hosts'):
    1. a chat turn fiber started for a chat recovery's request id (a `chat:recovery:attempt
       {requestId}` of the facet in that incarnation), while the run row was `starting` or
       `running` by the facet's journal when the attempt came (not judged when the row's
       status changed in a turn committed in that instant), comes after a
       `chat:recovery:rebind {requestId, runId}` of that request id and run, in that
       incarnation;
    2. replaying the facet's journal, no committed write changes the row's `request_id` from
       one request to another while it stays `completed`, `error` or `aborted` (the turn's first
       binding, from none, is not a re-bind: a Think child binds it unguarded, agent-tools §3).
    """
    out = []
    for child in _children(context):
        run_id = child.rsplit("/", 1)[-1]
        table = next(
            (
                name
                for name, rows in sorted((context.storage.get(child) or {}).items())
                if name != RUNS
                and any(r.get("run_id") == run_id and "request_id" in r for r in rows)
            ),
            None,
        )
        if table is None:
            continue
        history = [
            (instant, change)
            for instant, change in timed_changes(context, child, table, "run_id")
            if change.key == run_id
        ]
        for _, change in history:
            before, after = change.before, change.after
            if (
                before is not None
                and after is not None
                and before.get("status") in SETTLED
                and after.get("status") in SETTLED
                # A first binding is no re-bind: a Think child's turn binds its request id
                # unguarded (agent-tools §3), also to a row a cancel sealed just before.
                and before.get("request_id") is not None
                and before.get("request_id") != after.get("request_id")
            ):
                out.append(
                    Violation(
                        "recovered_child_turn_rebound",
                        child,
                        run_id,
                        f"the child {child} re-bound its settled run {run_id} "
                        f"({before.get('status')}) from request {before.get('request_id')} to "
                        f"{after.get('request_id')} in its committed turn {change.turn}",
                    )
                )
        for attempt in context.events("chat:recovery:attempt", child):
            found = _unbound_turn(context, child, run_id, attempt, history)
            if found is not None:
                out.append(found)
    return out


def _unbound_turn(
    context: CheckContext,
    child: str,
    run_id: str,
    attempt: TraceRecord,
    history: list[tuple[int | None, RowChange]],
) -> Violation | None:
    if any(
        instant is None
        or (instant == attempt.t_ms and change.value("status", "before") != change.value("status"))
        for instant, change in history
    ):
        return None
    states = [
        change.after
        for instant, change in history
        if instant is not None and instant < attempt.t_ms
    ]
    if not states or states[-1] is None or states[-1].get("status") not in LIVE:
        return None
    request = attempt.get("requestId")
    turn = next(
        (
            s
            for s in context.events(
                "fiber:run:started", child, fiberName=f"{CHAT_TURN_FIBER_PREFIX}{request}"
            )
            if s.seq > attempt.seq and s.inc == attempt.inc
        ),
        None,
    )
    if turn is None:
        return None
    rebinds = context.events("chat:recovery:rebind", child, requestId=request, runId=run_id)
    if any(attempt.seq < r.seq < turn.seq and r.inc == attempt.inc for r in rebinds):
        return None
    return Violation(
        "recovered_child_turn_rebound",
        child,
        run_id,
        f"the child {child} ran its recovered turn {request} at {_at(turn.t_ms)} while its run "
        f"{run_id} was {states[-1].get('status')}, without re-binding the run to that request "
        "first, so the turn's frames are not attributed to the run",
        (attempt.seq, turn.seq),
    )


# -- clear_cancels_child_first ------------------------------------------------------------------
@invariant("clear_cancels_child_first")
def clear_cancels_child_first(context: CheckContext) -> list[Violation]:
    """agent-tools §8.1 and the seed — clearing a run that is still starting or running cancels
    its child first, then deletes the child's facet and the run's row.

    For every committed deletion of a `cf_agent_tool_runs` row whose status was `starting` or
    `running`, committed at instant T, and the last `facet:deleted` of its child facet
    `<parent>/<agent_type>/<run_id>` since the row was inserted and no later than T (none: the
    clear had no facet to delete, nothing to judge): the facet got an
    `rpc {method: cancel_agent_tool_run}` in that life, before its `facet:deleted`.
    """
    out = []
    for parent in context.paths():
        inserted: dict[Any, int] = {}
        for instant, change in timed_changes(context, parent, RUNS, "run_id"):
            if instant is None:
                break
            if change.before is None:
                inserted[change.key] = instant
                continue
            if change.after is not None or change.before.get("status") not in LIVE:
                continue
            child = f"{parent}/{change.before.get('agent_type')}/{change.key}"
            since = inserted.get(change.key, 0)
            deleted = [
                r for r in context.events("facet:deleted", child) if since <= r.t_ms <= instant
            ]
            if not deleted:
                continue
            gone = deleted[-1]
            life = context.life_of(gone)
            cancels = [
                r
                for r in context.events("rpc", child, method="cancel_agent_tool_run")
                if r.seq < gone.seq and context.life_of(r) == life
            ]
            if cancels:
                continue
            out.append(
                Violation(
                    "clear_cancels_child_first",
                    parent,
                    str(change.key),
                    f"run {change.key} of {parent} was cleared while "
                    f"{change.before.get('status')}, and its child {child} was deleted at "
                    f"{_at(gone.t_ms)} without being cancelled first",
                    (gone.seq,),
                )
            )
    return out
