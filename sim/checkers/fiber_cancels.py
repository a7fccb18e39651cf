"""`cancel_settles_fiber`: a managed fiber that `cancelFiber` answered `true` for is `aborted`
from then on (fibers §5.8, the ledger's state table: `pending`/`running` -> `aborted` on
`cancelFiber(id, reason)`), whether its execution was running or had never begun.

The cancel is read from the fibers workload's record `workload:cancel {name, fiberId,
cancelled}` (`scenarios/workloads/fibers.py`: the workload knows its execution's id from
`start_fiber`'s answer, so a fiber whose execution never began, its row left `pending`, is
cancelled too). The ledger is read from the final storage (`cf_agents_fibers` of the agent) and
from the recovery records (`fiber:recovery:attempt {fiberId}`, the hook called): an aborted
fiber is terminal, so no recovery pass hands it to the hook (a pass may still find the run
row a dead execution left, and only clear it).
"""

from __future__ import annotations

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.checkers.storage import row_changes
from sim.trace import TraceRecord, format_sim_time

__all__ = ["cancel_settles_fiber"]

LEDGER = "cf_agents_fibers"


@invariant("cancel_settles_fiber")
def cancel_settles_fiber(context: CheckContext) -> list[Violation]:
    """Fibers §5.8 — `cancelFiber` on a `pending` or `running` managed fiber makes it `aborted`.

    For every `workload:cancel` with `cancelled: true` and a `fiberId` X (one whose turn may have
    rolled back, a crash in its instant, does not count): no `fiber:recovery:attempt` of X
    comes after it on the same agent, and X's row in the agent's final ledger, if it is still
    there, is `aborted` — unless the agent's storage was wiped or deleted after the cancel. A
    recovery after a `deleteFibers` took X's row is not the cancel's to answer for: the run row
    is left, and with no ledger row it is recovered as an unmanaged fiber's.
    """
    out: list[Violation] = []
    for cancel in context.events("workload:cancel"):
        fiber_id = cancel.get("fiberId")
        if cancel.get("cancelled") is not True or not fiber_id:
            continue
        if context.may_have_rolled_back(cancel) or _reset_after(context, cancel):
            continue
        recovered = next(
            (
                r
                for r in context.events("fiber:recovery:attempt", cancel.agent)
                if r.seq > cancel.seq and r.get("fiberId") == fiber_id
            ),
            None,
        )
        if recovered is not None and not _row_deleted(context, cancel, recovered):
            out.append(
                _violation(cancel, f"recovery handed it to the hook at {_at(recovered)}", recovered)
            )
            continue
        rows = [r for r in context.table(cancel.agent, LEDGER) if r.get("fiber_id") == fiber_id]
        if rows and rows[0].get("status") != "aborted":
            out.append(_violation(cancel, f"its row ends {rows[0].get('status')!r}", None))
    return out


def _row_deleted(context: CheckContext, cancel: TraceRecord, recovered: TraceRecord) -> bool:
    """The fiber's ledger row was deleted (`deleteFibers` takes an aborted row, and never the
    run row, fibers §5.8) by a turn committed from the cancel's instant to the recovery's:
    recovery then finds a run with no ledger row, as an unmanaged fiber's, and hands it to the
    hook. Read from the agent's journal of committed turns."""
    instants = context.journal_ms.get(cancel.agent, ())
    for change in row_changes(context.journals.get(cancel.agent, ()), LEDGER, "fiber_id"):
        if (
            change.key == cancel.get("fiberId")
            and change.before is not None
            and change.after is None
            and change.turn - 1 < len(instants)
            and cancel.t_ms <= instants[change.turn - 1] <= recovered.t_ms
        ):
            return True
    return False


def _reset_after(context: CheckContext, cancel: TraceRecord) -> bool:
    return any(seq > cancel.seq for seq in context.record_resets(cancel.agent))


def _at(record: TraceRecord) -> str:
    return format_sim_time(record.t_ms)


def _violation(cancel: TraceRecord, what: str, other: TraceRecord | None) -> Violation:
    return Violation(
        "cancel_settles_fiber",
        cancel.agent,
        str(cancel.get("fiberId")),
        f"cancelFiber answered true for managed fiber {cancel.get('name')} "
        f"({cancel.get('fiberId')}) of {cancel.agent} at {_at(cancel)}, so it is aborted, but "
        f"{what}",
        (cancel.seq, *((other.seq,) if other is not None else ())),
    )
