"""Invariants of agent-tool finish delivery: `exactly_once_finish` (seed decision S8),
`budget_interrupts` (S7) and `reattach_terminal` (spec agent-tools §7).

They read the delivery ledger's trace records — `hook:on_agent_tool_finish` and `hook:on_finish`
(a handler was called for a run's slot) and `hook:delivered` (the slot was marked delivered),
each with `runId`, `slot` (`finish` | `give_up`) and `status` — the parent's `incarnation:end`
records, and the final `cf_agent_tool_runs` rows (plus the child facet's own run row, found at
`<parent>/<agent_type>/<run_id>`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from sim.checkers.core import HARD_TERMINAL, LIVENESS_GRACE_MS, CheckContext, Violation
from sim.checkers.registry import invariant
from sim.trace import TraceRecord, format_sim_time

__all__ = ["budget_interrupts", "exactly_once_finish", "reattach_terminal"]

HOOK_EVENTS = ("hook:on_agent_tool_finish", "hook:on_finish")
OWN_TEARDOWN_REASONS = frozenset(
    {"detached budget exceeded", "detached run went silent past its no-progress window"}
)
"""The reasons a detached give-up cancels its child with (spec agent-tools §4.5 step 2d): an
`aborted` carrying one of them is the parent's own teardown (S7: it delivers nothing more)."""

Key = tuple[str, str, str, int]
"""(parent, run id, slot, which run of that id: a cleared run's id may be used again)."""


Lives = tuple[dict[tuple[str, str], list[int]], dict[tuple[str, str], list[int]]]
"""(parent, run id) -> where its lives ended, and where its children started (`_run_lives`)."""


def _by_run_slot(context: CheckContext, event: str, lives: Lives) -> dict[Key, list[TraceRecord]]:
    """The `event` records by (parent, run id, slot, life). A cleared run's id may be used again
    for a new run, so a run id has lives, divided by the deletions of its child
    (`<parent>/<class>/<run id>`). A record after a deletion still belongs to the life before it
    until the new life's child starts (clearing a running run deletes its child before the
    cancelled run's own finish is handed over), unless that life already has such a record for
    the slot (the new life's child never started, its creation failed, say)."""
    out: dict[Key, list[TraceRecord]] = defaultdict(list)
    deletions, starts = lives
    for record in context.events(event):
        run_id = str(record.get("runId"))
        slot = str(record.get("slot"))
        gone = deletions.get((record.agent, run_id), [])
        life = bisect_left(gone, record.seq)
        if life:
            last_deletion = gone[life - 1]
            started = starts.get((record.agent, run_id), [])
            begun = bisect_left(started, record.seq) > bisect_left(started, last_deletion)
            if not begun and not out.get((record.agent, run_id, slot, life - 1)):
                life -= 1
        out[(record.agent, run_id, slot, life)].append(record)
    return out


def _run_lives(context: CheckContext) -> Lives:
    """(parent, run id) -> the seqs, in order, at which a life of the run id ended, and those at
    which a child of it started. A life ends when the run's child (`<parent>/<class>/<run id>`)
    is deleted (clearing a run deletes it), or when a child turn is started for the id again
    after the life's finish was delivered (a clear whose child could not be reached deletes the
    row and leaves the child: the id's next run starts a turn on it; no delivered run is ever
    started again)."""
    deletions: dict[tuple[str, str], list[int]] = defaultdict(list)
    starts: dict[tuple[str, str], list[int]] = defaultdict(list)
    for event, into in (("facet:deleted", deletions), ("incarnation:start", starts)):
        for record in context.events(event):
            parts = record.agent.rsplit("/", 2)
            if len(parts) == 3:
                into[(parts[0], parts[2])].append(record.seq)
    delivered: dict[tuple[str, str], list[int]] = defaultdict(list)
    for record in context.events("hook:delivered"):
        delivered[(record.agent, str(record.get("runId")))].append(record.seq)
    for record in context.events("rpc", method="start_agent_tool_run"):
        parts = record.agent.rsplit("/", 2)
        if len(parts) != 3:
            continue
        key = (parts[0], parts[2])
        ended = [seq for seq in deletions.get(key, ()) if seq < record.seq]
        since = ended[-1] if ended else -1
        if any(since < seq < record.seq for seq in delivered.get(key, ())):
            deletions[key].append(record.seq)
            starts[key].append(record.seq)
    for seqs in (*deletions.values(), *starts.values()):
        seqs.sort()
    return deletions, starts


def _at(record: TraceRecord) -> str:
    return format_sim_time(record.t_ms)


def _slot_words(slot: str) -> str:
    return "finish slot" if slot == "finish" else "give_up slot"


def _crash_between(
    context: CheckContext, key: Key, first: TraceRecord, second: TraceRecord
) -> bool:
    """An incarnation of the parent ended, the run's handler threw (`delivery_failed`: the
    slot stays claimed and is delivered again after the lease), or a storage fault failed the
    write of the slot's delivered mark (`fault:storage_error` of a statement naming
    `<slot>_delivered_at`: the claim is left to go stale), between the two records."""
    agent, run_id, slot, _ = key
    for end in context.incarnation_ends(agent):
        if first.seq < end.seq < second.seq:
            return True
    if any(
        first.seq < fault.seq < second.seq and f"{slot}_delivered_at" in str(fault.get("statement"))
        for fault in context.events("fault:storage_error", agent)
    ):
        return True
    return any(
        first.seq < failed.seq < second.seq and failed.get("kind") == slot
        for failed in context.events("agent_tool:detached:delivery_failed", agent, runId=run_id)
    )


def _delivered_by_life(context: CheckContext, lives: Lives) -> dict[Key, list[TraceRecord]]:
    """The `hook:delivered` records by (parent, run id, slot, life), each in the life of the
    handler calls it closes: the last `hook:on_agent_tool_finish` or `hook:on_finish` of that
    run and slot before it. A slow handler of a run cleared meanwhile ends after the run id's
    next run began, and its mark is the old run's (A20); a mark with no handler call before it
    falls in its life as `_by_run_slot` places it."""
    calls: dict[tuple[str, str, str], list[tuple[int, int]]] = defaultdict(list)
    for event in HOOK_EVENTS:
        for (agent, run_id, slot, life), records in _by_run_slot(context, event, lives).items():
            calls[(agent, run_id, slot)] += [(r.seq, life) for r in records]
    for seqs in calls.values():
        seqs.sort()
    out: dict[Key, list[TraceRecord]] = defaultdict(list)
    for (agent, run_id, slot, life), records in _by_run_slot(
        context, "hook:delivered", lives
    ).items():
        for record in records:
            before = [lf for seq, lf in calls.get((agent, run_id, slot), ()) if seq < record.seq]
            out[(agent, run_id, slot, before[-1] if before else life)].append(record)
    for records in out.values():
        records.sort(key=lambda r: r.seq)
    return out


@invariant("exactly_once_finish")
def exactly_once_finish(context: CheckContext) -> list[Violation]:
    """S8 — finish delivery is exactly once normally and at least once across a crash.

    For every (parent, run, slot) (a run cleared, its child deleted, whose id is used again is
    a new run):
    1. at most one `hook:delivered`; a second one is allowed only when the incarnation that
       recorded the first crashed in the same instant (its turn, holding the delivered mark,
       rolled back);
    2. two calls of one handler (`hook:on_agent_tool_finish` or `hook:on_finish`) are allowed only
       with an `incarnation:end` of the parent, an `agent_tool:detached:delivery_failed` for
       that slot, or a storage fault that failed the write of the slot's delivered mark, between
       them; and no handler is called for a slot after its `hook:delivered`
       (unless that one was rolled back as in 1);
    3. liveness (only when a liveness phase ran): every detached run whose parent row is hard
       terminal at the end, or whose child's own run row is, has `finish_delivered_at` set —
       once the run went quiet, or `LIVENESS_GRACE_MS` after the fact (the silent close of S7
       counts as delivered); and so does every awaited run whose row is hard terminal and whose
       finish slot was claimed (`finish_claimed_at`), once the run went quiet or
       `LIVENESS_GRACE_MS` after the claim (a claim whose delivery died is taken again, once
       the parent's startup ran again after that death).
    """
    out: list[Violation] = []
    lives = _run_lives(context)
    delivered = _delivered_by_life(context, lives)
    for key, records in sorted(delivered.items()):
        agent, run_id, slot, _ = key
        for first, second in zip(records, records[1:], strict=False):
            if context.may_have_rolled_back(first):
                continue
            out.append(
                Violation(
                    "exactly_once_finish",
                    agent,
                    run_id,
                    f"run {run_id} of {agent} delivered its {_slot_words(slot)} twice (at "
                    f"{_at(first)} and {_at(second)}) with no crash between",
                    (first.seq, second.seq),
                )
            )
    for event in HOOK_EVENTS:
        hook = event.removeprefix("hook:")
        for key, calls in sorted(_by_run_slot(context, event, lives).items()):
            agent, run_id, slot, _ = key
            for first, second in zip(calls, calls[1:], strict=False):
                if not _crash_between(context, key, first, second):
                    out.append(
                        Violation(
                            "exactly_once_finish",
                            agent,
                            run_id,
                            f"run {run_id} of {agent} called {hook} for its {_slot_words(slot)} "
                            f"twice (at {_at(first)} and {_at(second)}) with no crash between",
                            (first.seq, second.seq),
                        )
                    )
            marks = [d for d in delivered.get(key, ()) if not context.may_have_rolled_back(d)]
            if marks:
                late = [c for c in calls if c.seq > marks[0].seq]
                if late:
                    out.append(
                        Violation(
                            "exactly_once_finish",
                            agent,
                            run_id,
                            f"run {run_id} of {agent} called {hook} for its {_slot_words(slot)} "
                            f"again at {_at(late[0])}, after the slot was delivered at "
                            f"{_at(marks[0])}",
                            (marks[0].seq, late[0].seq),
                        )
                    )
    if context.liveness_ran:
        out += _undelivered_finishes(context)
    return out


def _undelivered_finishes(context: CheckContext) -> list[Violation]:
    out = []
    for agent in context.paths():
        for row in context.table(agent, "cf_agent_tool_runs"):
            if row.get("finish_delivered_at") is not None:
                continue
            run_id = str(row.get("run_id"))
            if not row.get("detached"):
                out += _undelivered_awaited(context, agent, row)
                continue
            facts = []
            if row.get("status") in HARD_TERMINAL:
                facts.append((row.get("finish_claimed_at"), f"its row ended {row.get('status')}"))
            child = context.child_run(agent, row)
            if child is not None and child[1].get("status") in HARD_TERMINAL:
                at = child[1].get("completed_at")
                when = "" if at is None else f" at {format_sim_time(int(at))}"
                facts.append((at, f"its child {child[0]} reached {child[1]['status']}{when}"))
            if not facts:
                continue
            since = min((t for t, _ in facts if t is not None), default=None)
            if not context.had_time_since(since):
                continue
            calls = context.events("hook:on_agent_tool_finish", agent, runId=run_id, slot="finish")
            out.append(
                Violation(
                    "exactly_once_finish",
                    agent,
                    run_id,
                    f"detached run {run_id} of {agent}: {' and '.join(w for _, w in facts)}, "
                    f"but its finish slot was never delivered by {context.end_words()}",
                    tuple(c.seq for c in calls),
                )
            )
    return out


def _lasting_restart(context: CheckContext, agent: str, after_seq: int) -> TraceRecord | None:
    """The first `startup:done` of `agent` after `after_seq` whose incarnation could run its
    agent-tool recovery: it was still alive at the end, it recorded the recovery's end
    (`agent_tool:recovery:complete|failed`), or it lived `LIVENESS_GRACE_MS` before dying. A
    restart whose incarnation died in the middle of that recovery (a crash in the child it was
    reaching) recovered nothing; only a later restart can."""
    ends = context.incarnation_ends(agent)
    for restart in context.events("startup:done", agent):
        if restart.seq <= after_seq:
            continue
        death = next((e for e in ends if e.seq > restart.seq and e.inc == restart.inc), None)
        if death is None or death.t_ms - restart.t_ms >= LIVENESS_GRACE_MS:
            return restart
        if any(
            restart.seq < r.seq < death.seq
            for event in ("agent_tool:recovery:complete", "agent_tool:recovery:failed")
            for r in context.events(event, agent)
        ):
            return restart
    return None


def _undelivered_awaited(
    context: CheckContext, agent: str, row: Mapping[str, Any]
) -> list[Violation]:
    """An awaited run whose finish slot was claimed for a hard terminal is delivered (a row
    inserted terminal, by a concurrency-cap rejection, is never claimed and owes nothing); when
    the parent died after the claim, only once its startup ran again (nothing durable wakes a
    parent for an awaited run)."""
    claimed = row.get("finish_claimed_at")
    if row.get("status") not in HARD_TERMINAL or claimed is None:
        return []
    if not context.had_time_since(int(claimed)):
        return []
    death = next((e for e in context.incarnation_ends(agent) if e.t_ms >= int(claimed)), None)
    if death is not None and _lasting_restart(context, agent, death.seq) is None:
        return []  # as for reattach_terminal: only a restarted parent can deliver it again
    run_id = str(row.get("run_id"))
    calls = context.events("hook:on_agent_tool_finish", agent, runId=run_id, slot="finish")
    return [
        Violation(
            "exactly_once_finish",
            agent,
            run_id,
            f"awaited run {run_id} of {agent}: its row ended {row.get('status')} and its finish "
            f"slot was claimed at {format_sim_time(int(claimed))}, but it was never delivered "
            f"by {context.end_words()}",
            tuple(c.seq for c in calls),
        )
    ]


def _hard_since(context: CheckContext, agent: str, row: Mapping[str, Any]) -> int | None:
    """When the run became hard terminal, as far as the parent row or the child row tell."""
    times = []
    for call in context.events("hook:on_agent_tool_finish", agent, runId=row.get("run_id")):
        if call.get("status") in HARD_TERMINAL:
            times.append(call.t_ms)
            break
    if row.get("status") in HARD_TERMINAL and row.get("finish_claimed_at") is not None:
        times.append(int(row["finish_claimed_at"]))
    child = context.child_run(agent, row)
    if child is not None and child[1].get("status") in HARD_TERMINAL:
        at = child[1].get("completed_at")
        if at is not None:
            times.append(int(at))
    return min(times) if times else None


@invariant("budget_interrupts")
def budget_interrupts(context: CheckContext) -> list[Violation]:
    """S7 — a detached budget give-up is delivered as `interrupted` and never hides a later
    completion.

    For every detached run with a `detached_max_budget_at` B in its final parent row:
    1. every `give_up` delivery (handler call or `hook:delivered`) has status `interrupted`;
    2. if the run was still not hard terminal `LIVENESS_GRACE_MS` after B, or at a quiet end
       after B (neither the parent row nor the child's own run row), a `hook:delivered` for its
       `give_up` slot with status `interrupted` exists (an earlier no-progress give-up counts);
    3. if a give-up was delivered and the row ends `completed`/`error`/`aborted`, an
       `on_agent_tool_finish` call for the `finish` slot with that status follows the give-up
       (checked once the run went quiet or `LIVENESS_GRACE_MS` after the finish claim);
    4. the `aborted` that the give-up's own teardown caused (row `aborted` with one of the
       give-up's cancel reasons as its error) is never delivered after a give-up.
    """
    out: list[Violation] = []
    for agent in context.paths():
        for row in context.table(agent, "cf_agent_tool_runs"):
            if not row.get("detached"):
                continue
            run_id = str(row.get("run_id"))
            calls = context.events("hook:on_agent_tool_finish", agent, runId=run_id)
            give_up_calls = [c for c in calls if c.get("slot") == "give_up"]
            give_ups = context.events("hook:delivered", agent, runId=run_id, slot="give_up")
            for record in give_up_calls + give_ups:
                if record.get("status") != "interrupted":
                    out.append(
                        Violation(
                            "budget_interrupts",
                            agent,
                            run_id,
                            f"detached run {run_id} of {agent} gave up with status "
                            f"{record.get('status')!r} at {_at(record)}; a give-up is "
                            "always 'interrupted'",
                            (record.seq,),
                        )
                    )
            out += _budget_give_up_owed(context, agent, row, give_ups)
            if give_up_calls:
                out += _give_up_hid_completion(context, agent, row, give_up_calls[0], calls)
    return out


def _budget_give_up_owed(
    context: CheckContext, agent: str, row: Mapping[str, Any], give_ups: list[TraceRecord]
) -> list[Violation]:
    budget_at = row.get("detached_max_budget_at")
    if budget_at is None or any(g.get("status") == "interrupted" for g in give_ups):
        return []
    done = _hard_since(context, agent, row)
    horizon = context.end if done is None else min(done, context.end)
    # A quiet end past the budget with the run still open will never see its give-up.
    stuck = done is None and bool(context.quiet) and context.end >= int(budget_at)
    if horizon - int(budget_at) < LIVENESS_GRACE_MS and not stuck:
        return []
    run_id = str(row.get("run_id"))
    until = (
        f"still not finished at {context.end_words()}"
        if done is None
        else f"not finished until {format_sim_time(done)}"
    )
    return [
        Violation(
            "budget_interrupts",
            agent,
            run_id,
            f"detached run {run_id} of {agent} passed its budget at "
            f"{format_sim_time(int(budget_at))} and was {until}, but no give-up "
            "(interrupted) was delivered",
        )
    ]


def _give_up_hid_completion(
    context: CheckContext,
    agent: str,
    row: Mapping[str, Any],
    give_up: TraceRecord,
    calls: list[TraceRecord],
) -> list[Violation]:
    status = row.get("status")
    if status not in HARD_TERMINAL:
        return []
    run_id = str(row.get("run_id"))
    later = [
        c
        for c in calls
        if c.seq > give_up.seq and c.get("slot") == "finish" and c.get("status") == status
    ]
    if status == "aborted" and row.get("error_message") in OWN_TEARDOWN_REASONS:
        return [
            Violation(
                "budget_interrupts",
                agent,
                run_id,
                f"detached run {run_id} of {agent} gave up at {_at(give_up)}, then the abort "
                f"its own teardown caused ({row.get('error_message')!r}) was delivered as a "
                "second terminal; the teardown the parent itself caused delivers nothing more",
                (give_up.seq, *(c.seq for c in later[:1])),
            )
        ]
    # The completion may also have been delivered before the give-up (its delivery was under
    # way when the budget ran out): then nothing was hidden.
    before = [
        c
        for c in calls
        if c.seq < give_up.seq and c.get("slot") == "finish" and c.get("status") == status
    ]
    if later or before or not context.had_time_since(row.get("finish_claimed_at")):
        return []
    return [
        Violation(
            "budget_interrupts",
            agent,
            run_id,
            f"detached run {run_id} of {agent} gave up at {_at(give_up)} and its row then "
            f"ended {status}, but no on_agent_tool_finish with status {status} followed: the "
            "give-up hid the real completion",
            (give_up.seq,),
        )
    ]


def _open_at(context: CheckContext, agent: str, row: Mapping[str, Any], end: TraceRecord) -> bool:
    """The run was starting/running when the parent's incarnation ended at `end`."""
    started = row.get("started_at")
    if started is None or int(started) > end.t_ms:
        return False
    if int(started) == end.t_ms:
        restarted = context.first_after(context.events("incarnation:start", agent), end.seq)
        if restarted is not None and restarted.t_ms == end.t_ms:
            return False  # the row may be the new incarnation's, written at the same instant
    settled = context.events("hook:on_agent_tool_finish", agent, runId=row.get("run_id"))
    return not any(s.seq < end.seq for s in settled)


@invariant("reattach_terminal")
def reattach_terminal(context: CheckContext) -> list[Violation]:
    """§7 / S8 — an awaited run interrupted by its parent's death is settled after the restart.

    Only when a liveness phase ran. For every awaited (`detached = 0`) row of a parent, find the
    first `incarnation:end` of that parent at which the run was open: started by then and no
    `on_agent_tool_finish` called for it before. Rows that are terminal with neither slot ever
    claimed were inserted terminal (a concurrency-cap rejection) and were never open. An open
    run is owed its recovery only once the parent has restarted: a later `startup:done` of the
    parent (an awaited run has no alarm of its own, and a plain RPC on a stale stub starts an
    incarnation without startup, so without one nothing recovers it, as in the SDK) in an
    incarnation that could run the recovery (see `_lasting_restart`: not one that died in the
    middle of it). Then, once
    the run went quiet or `LIVENESS_GRACE_MS` after that startup: the row is terminal (not
    `starting`/`running`), and the slot of its final status is delivered —
    `give_up_delivered_at` for `interrupted`, `finish_delivered_at` for a hard terminal.
    """
    if not context.liveness_ran:
        return []
    out: list[Violation] = []
    for agent in context.paths():
        ends = context.incarnation_ends(agent)
        for row in context.table(agent, "cf_agent_tool_runs"):
            if row.get("detached"):
                continue
            status = row.get("status")
            never_claimed = row.get("finish_claimed_at") is None and (
                row.get("give_up_claimed_at") is None
            )
            if status not in ("starting", "running") and never_claimed:
                continue
            end = next((e for e in ends if _open_at(context, agent, row, e)), None)
            if end is None:
                continue
            restart = _lasting_restart(context, agent, end.seq)
            if restart is None or not context.had_time_since(restart.t_ms):
                continue
            run_id = str(row.get("run_id"))
            died = (
                f"was open when incarnation {end.inc} of its parent ended "
                f"({end.get('reason')}) at {_at(end)}"
            )
            if status in ("starting", "running"):
                message = (
                    f"awaited run {run_id} of {agent} {died}, and was still {status} at "
                    f"{context.end_words()}, though the parent started again at {_at(restart)}"
                )
            else:
                slot = "give_up" if status == "interrupted" else "finish"
                if row.get(f"{slot}_delivered_at") is not None:
                    continue
                message = (
                    f"awaited run {run_id} of {agent} {died} and ended {status}, but its "
                    f"{_slot_words(slot)} was never delivered by {context.end_words()}"
                )
            calls = context.events("hook:on_agent_tool_finish", agent, runId=run_id)
            out.append(
                Violation(
                    "reattach_terminal",
                    agent,
                    run_id,
                    message,
                    (end.seq, *(c.seq for c in calls)),
                )
            )
    return out
