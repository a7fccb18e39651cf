"""Invariants of the runtime's durable ledgers, read from the journal of committed turns and the
final storage: `delivered_marks_earned` (S8: a slot or milestone is marked delivered only by a
delivery that completed), `claims_wait_for_lease` (S8: a delivery claim is taken over only once
its 60 s lease ran out) and `managed_status_final` (S1: a managed fiber's terminal status never
changes, except that an `interrupted` one is resolved).

The journal says what committed, not when (`sim.checkers.storage`); these rules take their
times from the values the writes carry (a claim's `<slot>_claimed_at`, a mark's
`<slot>_delivered_at`, a ledger row's `completed_at`). Writes of a turn a crash rolled back are not
in the journal, so these rules forgive exactly them. The trace records they pair the marks with
are `hook:delivered {runId, slot}` (the ledger wrote a finish or give_up slot's mark after its
handlers returned, in that turn) and `hook:milestone_delivered {runId, name}` (the same for a
milestone, after the chat host's hook returned).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sim.checkers.core import HARD_TERMINAL, CheckContext, Violation
from sim.checkers.core import time_words as _at
from sim.checkers.models.spec_constants import (
    DETACHED_DELIVERY_LEASE_MS,
    MILESTONE_DEDUPE_PREFIX,
)
from sim.checkers.models.spec_constants import FINISH_SLOTS as SLOTS
from sim.checkers.registry import invariant
from sim.checkers.storage import RowChange, row_changes
from sim.sqlite import KV_TABLE

__all__ = ["claims_wait_for_lease", "delivered_marks_earned", "managed_status_final"]

RUNS = "cf_agent_tool_runs"
FIBERS = "cf_agents_fibers"
FIBER_TERMINAL = frozenset({"completed", "error", "aborted", "interrupted"})
"""Managed-fiber ledger statuses that settle a fiber (fibers §5.7)."""


def _slot_words(slot: str) -> str:
    return "finish slot" if slot == "finish" else "give_up slot"


def _marking_change(
    context: CheckContext, agent: str, run_id: str, slot: str, mark: Any
) -> RowChange | None:
    """The committed write that set the run's `<slot>_delivered_at` to its final value `mark`."""
    column = f"{slot}_delivered_at"
    found = None
    for change in row_changes(context.journals.get(agent, ()), RUNS, "run_id"):
        if (
            change.key == run_id
            and change.value(column) == mark
            and change.value(column, "before") != mark
        ):
            found = change
    return found


def _closed_without_delivery(slot: str, row: Mapping[str, Any], change: RowChange | None) -> bool:
    """The ledger's two closings that deliver nothing, by design: the finish slot closed
    silently after a delivered give-up (S7; its write sets the claim and the mark together), and
    the give_up slot of an awaited run superseded by its real result (closed by the redelivery,
    the row already hard terminal; its finish slot delivers)."""
    if slot == "finish":
        return (
            change is not None
            and change.value("finish_claimed_at") != change.value("finish_claimed_at", "before")
            and change.value("finish_claimed_at") == change.value("finish_delivered_at")
            and change.value("give_up_delivered_at") is not None
        )
    before = change.before if change is not None else row
    return (
        before is not None and not before.get("detached") and before.get("status") in HARD_TERMINAL
    )


@invariant("delivered_marks_earned")
def delivered_marks_earned(context: CheckContext) -> list[Violation]:
    """S8 — a slot is marked delivered only by a delivery that completed: its handlers ran to
    their end before the mark was written. A mark written earlier (across an await) leaves a
    delivery that a crash cut short looking delivered, and it is never delivered again.

    1. For every row of every agent's `cf_agent_tool_runs` whose `<slot>_delivered_at` is D (slot
       `finish` or `give_up`), a `hook:delivered {runId, slot}` of that agent at D exists (the
       ledger writes the mark and that record in one turn, after the handlers returned) —
       unless the mark is one of the ledger's closings that deliver nothing: the finish slot
       closed silently after a delivered give-up (S7: the committed write that set the mark set
       `finish_claimed_at` to the same time, with `give_up_delivered_at` set), or the give_up
       slot of an awaited run that was already hard terminal when the mark was written (a
       give-up superseded by the real result; its finish slot delivers).
    2. For every milestone dedupe entry in an agent's KV whose final value is
       `{state: delivered, at: D}`, a `hook:milestone_delivered {runId, name}` of that agent at
       D exists.
    """
    out: list[Violation] = []
    for agent in context.paths():
        for row in context.table(agent, RUNS):
            run_id = str(row.get("run_id"))
            for slot in SLOTS:
                mark = row.get(f"{slot}_delivered_at")
                if mark is None:
                    continue
                records = context.events("hook:delivered", agent, runId=run_id, slot=slot)
                if any(r.t_ms == mark for r in records):
                    continue
                change = _marking_change(context, agent, run_id, slot, mark)
                if _closed_without_delivery(slot, row, change):
                    continue
                calls = context.events("hook:on_agent_tool_finish", agent, runId=run_id, slot=slot)
                completed = (
                    f"its deliveries completed at {', '.join(_at(r.t_ms) for r in records)}"
                    if records
                    else "no delivery of it ever completed"
                )
                out.append(
                    Violation(
                        "delivered_marks_earned",
                        agent,
                        run_id,
                        f"run {run_id} of {agent} has its {_slot_words(slot)} marked delivered at "
                        f"{_at(mark)}, but {completed}; a slot is marked delivered only once its "
                        "handlers returned",
                        tuple(r.seq for r in (*calls, *records)),
                    )
                )
        out += _unearned_milestones(context, agent)
    return out


def _unearned_milestones(context: CheckContext, agent: str) -> list[Violation]:
    out = []
    for row in context.table(agent, KV_TABLE):
        key = str(row.get("key"))
        if not key.startswith(MILESTONE_DEDUPE_PREFIX):
            continue
        try:
            value = json.loads(row.get("value") or "null")
        except (TypeError, ValueError):
            continue
        if not isinstance(value, Mapping) or value.get("state") != "delivered":
            continue
        run_id, _, name = key.removeprefix(MILESTONE_DEDUPE_PREFIX).partition(":")
        records = context.events("hook:milestone_delivered", agent, runId=run_id, name=name)
        if any(r.t_ms == value.get("at") for r in records):
            continue
        out.append(
            Violation(
                "delivered_marks_earned",
                agent,
                run_id,
                f"milestone {name} of run {run_id} on {agent} is marked delivered at "
                f"{_at(value.get('at'))}, but its hook returned "
                f"{'at ' + ', '.join(_at(r.t_ms) for r in records) if records else 'never'}; a "
                "milestone is marked delivered only once the chat host's hook returned",
                tuple(r.seq for r in records),
            )
        )
    return out


@invariant("claims_wait_for_lease")
def claims_wait_for_lease(context: CheckContext) -> list[Violation]:
    """S8 / agent-tools §4.4 — a delivery claim is taken over only once its 60 s lease ran out:
    the lease is how a later delivery tells a claimer that died from one still delivering, so a
    claim taken earlier calls the handlers a second time while the first call may still run.

    Following the committed writes of every agent's `cf_agent_tool_runs` (the journal replayed),
    for every run and slot (`finish`, `give_up`): whenever `<slot>_claimed_at` changes from a
    claim c to another claim c' (not to NULL: the ledger gives back at once a claim whose
    delivery failed before any handler ran; a claim whose handler threw keeps its lease),
    c' >= c + `DETACHED_DELIVERY_LEASE_MS`; and the claim never changes once the slot's
    `<slot>_delivered_at` is set.
    """
    out: list[Violation] = []
    for agent in sorted(context.journals):
        reported: set[tuple[Any, str]] = set()
        for change in row_changes(context.journals[agent], RUNS, "run_id"):
            if change.before is None or change.after is None:
                continue
            for slot in SLOTS:
                if (change.key, slot) in reported:
                    continue
                column = f"{slot}_claimed_at"
                old, new = change.value(column, "before"), change.value(column)
                if old is None or new is None or old == new:
                    continue
                delivered = change.value(f"{slot}_delivered_at", "before")
                if delivered is not None:
                    why = f"after the slot was delivered at {_at(delivered)}"
                elif int(new) < int(old) + DETACHED_DELIVERY_LEASE_MS:
                    why = (
                        f"before that claim's 60 s lease ran out at "
                        f"{_at(int(old) + DETACHED_DELIVERY_LEASE_MS)}"
                    )
                else:
                    continue
                reported.add((change.key, slot))
                run_id = str(change.key)
                calls = [
                    r
                    for r in context.events(
                        "hook:on_agent_tool_finish", agent, runId=run_id, slot=slot
                    )
                    if r.t_ms in (old, new)
                ]
                out.append(
                    Violation(
                        "claims_wait_for_lease",
                        agent,
                        run_id,
                        f"run {run_id} of {agent}: its {_slot_words(slot)}, claimed at "
                        f"{_at(old)}, was claimed again at {_at(new)}, {why}",
                        tuple(r.seq for r in calls),
                    )
                )
    return out


@invariant("managed_status_final")
def managed_status_final(context: CheckContext) -> list[Violation]:
    """S1 / fibers §5 — a managed fiber's settled status is final: once its ledger row is
    `completed`, `error`, `aborted` or `interrupted`, no write changes the status again, except
    that an `interrupted` fiber is settled later by `resolve_fiber` or by its recovery hook's
    result (every status update of the ledger is guarded by the status it expects).

    Following the committed writes of every agent's `cf_agents_fibers` (the journal replayed),
    for every row: a write that changes the status of a row whose status was terminal changes it
    from `interrupted` to `completed`, `error` or `aborted`, and nothing else. A row deleted and
    written again is a new fiber.
    """
    out: list[Violation] = []
    for agent in sorted(context.journals):
        reported: set[Any] = set()
        for change in row_changes(context.journals[agent], FIBERS, "fiber_id"):
            if change.before is None or change.after is None or change.key in reported:
                continue
            old, new = change.value("status", "before"), change.value("status")
            if old == new or old not in FIBER_TERMINAL:
                continue
            if old == "interrupted" and new in FIBER_TERMINAL:
                continue
            reported.add(change.key)
            fiber = str(change.key)
            settled, changed = change.value("completed_at", "before"), change.value("completed_at")
            when = f" at {_at(changed)}" if changed is not None and changed != settled else ""
            seqs = tuple(
                r.seq
                for event in ("fiber:run:completed", "fiber:run:failed")
                for r in context.events(event, agent, fiberId=fiber)
            )
            out.append(
                Violation(
                    "managed_status_final",
                    agent,
                    fiber,
                    f"managed fiber {fiber} ({change.value('name')}) of {agent} was settled "
                    f"{old} at {_at(settled)}, and a later write turned it {new}{when}; a "
                    "settled fiber's status never changes (only an interrupted one is resolved)",
                    seqs,
                )
            )
    return out
