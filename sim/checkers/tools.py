"""Invariants of agent-tool runs beyond finish delivery (`sim.checkers.delivery`):
`milestones_once` (S3: a milestone notification is delivered at most once per run and name),
`child_reset_retryable` (S6: a child reset while its parent lives ends the run `interrupted`,
retryable) and `give_up_not_early` (S7: a detached run is given up only once its budget or a
whole no-progress window has passed).

Milestone deliveries leave no trace record; their durable dedupe ledger does: the parent's KV
entry `cf_agents:agent_tool_milestone:<runId>:<name>` is written `{state: claimed, at}` before
the chat host's hook is called and `{state: delivered|failed, at}` after, and the journal keeps
every committed write of it. A chat host's transcript (`cf_ai_chat_agent_messages`) carries the
milestone in each notice's metadata. A workload that wants each hook call checked too could
emit a `workload:milestone {runId, name}` record from its hook (no workload does yet).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.core import time_words as _at
from sim.checkers.models.spec_constants import MILESTONE_CLAIM_LEASE_MS, MILESTONE_DEDUPE_PREFIX
from sim.checkers.registry import invariant
from sim.checkers.storage import KvWrite, kv_writes
from sim.trace import TraceRecord

__all__ = ["child_reset_retryable", "give_up_not_early", "milestones_once"]

RUNS = "cf_agent_tool_runs"
MESSAGES = "cf_ai_chat_agent_messages"
RESET_EXCUSED = frozenset({"deleted"})
"""Child deaths that are the parent's own doing (clearing its runs deletes the child facet)."""


def _state(write: KvWrite) -> str | None:
    return write.value.get("state") if isinstance(write.value, Mapping) else None


def _when(write: KvWrite) -> Any:
    return write.value.get("at") if isinstance(write.value, Mapping) else None


@invariant("milestones_once")
def milestones_once(context: CheckContext) -> list[Violation]:
    """S3 — a milestone notification is delivered at most once per (run, name), whether the
    live path or reconciliation sees it, across evictions.

    1. For every parent, the committed writes of each milestone dedupe entry (see the module
       docstring), in commit order, follow the claim protocol: a `delivered` or `failed` write
       answers an outstanding `claimed` one; a `claimed` write comes first, after a deletion of
       the entry, or after a `claimed` one that went stale (more than the 60 s claim lease older:
       its isolate died mid-call) — never after `delivered` or `failed` (a failed milestone is
       not retried).
    2. In every chat transcript, at most one message carries `metadata` {runId, milestone} for
       one (run, name).
    """
    out: list[Violation] = []
    for agent in sorted(context.journals):
        writes: dict[str, list[KvWrite]] = defaultdict(list)
        for write in kv_writes(context.journals[agent], MILESTONE_DEDUPE_PREFIX):
            writes[write.key].append(write)
        for key, history in sorted(writes.items()):
            problem = _claim_problem(history)
            if problem is None:
                continue
            run_id, _, name = key.removeprefix(MILESTONE_DEDUPE_PREFIX).partition(":")
            out.append(
                Violation(
                    "milestones_once",
                    agent,
                    run_id,
                    f"milestone {name} of run {run_id} on {agent} {problem}",
                )
            )
    for agent in context.paths():
        notices: dict[tuple[Any, Any], list[str]] = defaultdict(list)
        for row in context.table(agent, MESSAGES):
            metadata = _metadata(row.get("message"))
            if metadata.get("milestone") is not None:
                notices[(metadata.get("runId"), metadata["milestone"])].append(str(row.get("id")))
        for (run_id, name), ids in sorted(notices.items(), key=str):
            if len(ids) > 1:
                out.append(
                    Violation(
                        "milestones_once",
                        agent,
                        str(run_id),
                        f"milestone {name} of run {run_id} was announced {len(ids)} times in the "
                        f"chat of {agent} (messages {', '.join(ids)})",
                    )
                )
    return out


def _claim_problem(history: list[KvWrite]) -> str | None:
    """What breaks the claim protocol in one entry's committed writes, or None."""
    last: KvWrite | None = None
    open_claim: KvWrite | None = None
    for write in history:
        state = _state(write)
        if write.value is None:
            last, open_claim = None, None
            continue
        if state == "claimed":
            if last is not None and _state(last) in ("delivered", "failed"):
                return (
                    f"was claimed for delivery again at {_at(_when(write))} after it was "
                    f"{_state(last)} at {_at(_when(last))}"
                )
            if open_claim is not None:
                age = _age(open_claim, write)
                if age is None or age <= MILESTONE_CLAIM_LEASE_MS:
                    return (
                        f"was claimed for delivery twice, at {_at(_when(open_claim))} and again "
                        f"at {_at(_when(write))}, before the first claim's 60 s lease ran out"
                    )
            open_claim = write
        elif state in ("delivered", "failed"):
            if open_claim is None:
                return f"was marked {state} at {_at(_when(write))} without being claimed first"
            open_claim = None
        last = write
    return None


def _age(first: KvWrite, second: KvWrite) -> int | None:
    a, b = _when(first), _when(second)
    if isinstance(a, int | float) and isinstance(b, int | float):
        return int(b - a)
    return None


def _metadata(text: Any) -> dict[str, Any]:
    try:
        message = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {}
    metadata = message.get("metadata") if isinstance(message, Mapping) else None
    return dict(metadata) if isinstance(metadata, Mapping) else {}


def _finish_calls(context: CheckContext, parent: str, run_id: str) -> list[TraceRecord]:
    return context.events("hook:on_agent_tool_finish", parent, runId=run_id)


@invariant("child_reset_retryable")
def child_reset_retryable(context: CheckContext) -> list[Violation]:
    """S6 — an awaited run whose child is reset while the parent lives ends `interrupted`
    (retryable: sending the same call again may succeed), not as a non-retryable `error`.

    For every awaited run (`detached = 0`) of a parent and every `incarnation:end` of its child
    (`<parent>/<agent_type>/<run_id>`) at t that is not the parent's own doing (the parent has no
    `incarnation:end` at t, and the reason is not `deleted`) while the run was open (a start of
    the run — the child's `rpc {method: start_agent_tool_run}` or the parent's
    `agent_tool:recovery:reattach` — before it with no `on_agent_tool_finish` call between):
    the parent's first `hook:on_agent_tool_finish` for the run after t has status `interrupted`,
    or the status the child's own run row ends with (the child had finished before the parent
    looked).
    """
    out: list[Violation] = []
    for parent in context.paths():
        parent_deaths = {e.t_ms for e in context.incarnation_ends(parent)}
        for row in context.table(parent, RUNS):
            if row.get("detached"):
                continue
            run_id = str(row.get("run_id"))
            child = f"{parent}/{row.get('agent_type')}/{run_id}"
            calls = _finish_calls(context, parent, run_id)
            starts = context.events("rpc", child, method="start_agent_tool_run")
            starts += context.events("agent_tool:recovery:reattach", parent, runId=run_id)
            own = context.child_run(parent, row)
            own_status = own[1].get("status") if own is not None else None
            for death in context.incarnation_ends(child):
                if death.t_ms in parent_deaths or death.get("reason") in RESET_EXCUSED:
                    continue
                began = max((s.seq for s in starts if s.seq < death.seq), default=None)
                if began is None or any(began < c.seq < death.seq for c in calls):
                    continue
                after = next((c for c in calls if c.seq > death.seq), None)
                if after is None or after.get("status") in ("interrupted", own_status):
                    continue
                out.append(
                    Violation(
                        "child_reset_retryable",
                        parent,
                        run_id,
                        f"awaited run {run_id} of {parent} lost its child {child} "
                        f"({death.get('reason')}) at {_at(death.t_ms)} while the parent lived, "
                        f"and finished {after.get('status')} at {_at(after.t_ms)}; a reset child "
                        "makes the run 'interrupted' (retryable)",
                        (death.seq, after.seq),
                    )
                )
                break
    return out


@invariant("give_up_not_early")
def give_up_not_early(context: CheckContext) -> list[Violation]:
    """S7 / agent-tools §4.6 — a detached run is given up only when its absolute budget has run
    out, or when a whole no-progress window passed with no signal; a slow run is never given up
    for being slow.

    For every detached run of a parent whose `give_up` slot was handed to a handler (its first
    `hook:on_agent_tool_finish {slot: give_up}` at g, no earlier than the row's start: one before
    was an earlier run's under the same id, cleared since), with `detached_max_budget_at` B,
    `detached_no_progress_budget_ms` N and `started_at` S in its final row:
    1. g >= B, or N is a positive finite window and g >= S + N (no signal comes before the run
       starts, so no window can close earlier);
    2. if the row ends `interrupted` with reason `budget-exceeded`, then g >= B.
    """
    out: list[Violation] = []
    for parent in context.paths():
        for row in context.table(parent, RUNS):
            if not row.get("detached"):
                continue
            run_id = str(row.get("run_id"))
            started = int(row.get("started_at") or 0)
            # The final row is the id's last run: a give-up before it started was an earlier
            # run's, one that was cleared and whose id was used again.
            give_up = next(
                (
                    c
                    for c in _finish_calls(context, parent, run_id)
                    if c.get("slot") == "give_up" and c.t_ms >= started
                ),
                None,
            )
            if give_up is None:
                continue
            budget_at, window = (
                row.get("detached_max_budget_at"),
                row.get("detached_no_progress_budget_ms"),
            )
            budget_passed = budget_at is not None and give_up.t_ms >= int(budget_at)
            window_passed = (
                isinstance(window, int | float)
                and 0 < window < float("inf")
                and give_up.t_ms >= started + window
            )
            labelled = row.get("status") == "interrupted" and (
                row.get("interrupted_reason") == "budget-exceeded"
            )
            if budget_passed or (window_passed and not labelled):
                continue
            budget = f"its budget ran out at {_at(budget_at)}" if budget_at is not None else ""
            if labelled:
                why = f"as budget-exceeded, before {budget or 'any budget ran out'}"
            else:
                windows = (
                    f"a {int(window)} ms no-progress window could pass since it started at "
                    f"{_at(started)}"
                    if isinstance(window, int | float) and window > 0
                    else "it had no no-progress window"
                )
                why = f"before {budget + ' and before ' if budget else ''}{windows}"
            out.append(
                Violation(
                    "give_up_not_early",
                    parent,
                    run_id,
                    f"detached run {run_id} of {parent} was given up at {_at(give_up.t_ms)}, {why}",
                    (give_up.seq,),
                )
            )
    return out
