"""The at-least-once half of finish delivery for a throwing handler: `failed_finish_redelivered`
(seed decision S8: a detached run whose `on_finish` threw is delivered again).

The ledger (`agents_core.agent_tools.ledger`) claims a slot, calls the handlers and marks the slot
delivered only after they returned; a handler that throws records
`agent_tool:detached:delivery_failed {runId, kind, callback}` (kind = the slot) and leaves the
slot claimed and undelivered, so the backbone delivers it again once the claim's 60 s lease has
run out. `exactly_once_finish` bounds the calls from above (never twice without such a failure
or a crash between); this checker bounds them from below: a failure is always followed by
another call.
"""

from __future__ import annotations

from collections.abc import Sequence

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.checkers.storage import timed_row_changes
from sim.trace import TraceRecord, format_sim_time

__all__ = ["failed_finish_redelivered"]

RUNS = "cf_agent_tool_runs"


@invariant("failed_finish_redelivered")
def failed_finish_redelivered(context: CheckContext) -> list[Violation]:
    """S8 — a finish whose handler threw is delivered again (at least once): the slot is marked
    delivered only once its handlers returned.

    Only when a liveness phase ran. For every `agent_tool:detached:delivery_failed {runId, kind}`
    of a parent at t (not written in a turn that may have rolled back), whose run's row still
    exists at the end: once the run went quiet, or `LIVENESS_GRACE_MS` after t, the parent has a
    later `hook:on_finish` for that run — of the same slot, or, for a failed `give_up`, of either
    slot (a real result that lands meanwhile supersedes the give-up, S7). A failed `give_up`
    is also discharged by a delivery of the run's `finish` slot that ended after the give-up's
    call began, even one that began before the give-up threw: the backbone only ticks runs
    whose finish is undelivered (agent-tools §4.5), so the real result is the run's last word.
    A run whose row was deleted (a clear, agent-tools §8.1: no ledger delivery after it) from
    the failed call's start on owes nothing more, even when a run of the same id was started
    again after the clear.
    """
    if not context.liveness_ran:
        return []
    out: list[Violation] = []
    deletions: dict[str, dict[str, list[int]]] = {}
    for failure in context.events("agent_tool:detached:delivery_failed"):
        parent, run_id, slot = failure.agent, str(failure.get("runId")), failure.get("kind")
        if context.may_have_rolled_back(failure) or not context.had_time_since(failure.t_ms):
            continue
        if not any(str(row.get("run_id")) == run_id for row in context.table(parent, RUNS)):
            continue
        if parent not in deletions:
            deletions[parent] = _deletions(context, parent)
        if _row_deleted_since(context, failure, deletions[parent].get(run_id, ())):
            continue  # cleared while its handler ran: a run of that id now is another one
        later = [
            call
            for call in context.events("hook:on_finish", parent, runId=run_id)
            if call.seq > failure.seq and (call.get("slot") == slot or slot == "give_up")
        ]
        if later or (slot == "give_up" and _finish_delivered_since(context, failure)):
            continue
        out.append(
            Violation(
                "failed_finish_redelivered",
                parent,
                run_id,
                f"run {run_id} of {parent}: its {slot} handler {failure.get('callback')} threw at "
                f"{format_sim_time(failure.t_ms)}, and it was never called again by "
                f"{context.end_words()}; a slot whose handler threw stays undelivered and is "
                "delivered again",
                (failure.seq,),
            )
        )
    return out


def _deletions(context: CheckContext, parent: str) -> dict[str, list[int]]:
    """Run id -> the instants its row was deleted at (read once from the parent's journal)."""
    out: dict[str, list[int]] = {}
    for when, change in timed_row_changes(context, parent, RUNS, "run_id"):
        if change.after is None:
            out.setdefault(str(change.key), []).append(when)
    return out


def _row_deleted_since(context: CheckContext, failure: TraceRecord, deleted: Sequence[int]) -> bool:
    """The run's row was deleted (at one of the instants `deleted`) at or after the instant its
    failed call began."""
    parent, run_id, slot = failure.agent, str(failure.get("runId")), failure.get("kind")
    calls = [
        call
        for call in context.events("hook:on_finish", parent, runId=run_id, slot=slot)
        if call.seq < failure.seq
    ]
    began = calls[-1].t_ms if calls else failure.t_ms
    return any(when >= began for when in deleted)


def _finish_delivered_since(context: CheckContext, failure: TraceRecord) -> bool:
    """The run's `finish` slot was delivered after the failed give-up's call began."""
    parent, run_id = failure.agent, failure.get("runId")
    calls = [
        call
        for call in context.events("hook:on_finish", parent, runId=run_id, slot="give_up")
        if call.seq < failure.seq
    ]
    began = calls[-1].seq if calls else failure.seq
    return any(
        done.seq > began
        for done in context.events("hook:delivered", parent, runId=run_id, slot="finish")
    )
