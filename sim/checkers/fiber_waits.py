"""`waited_status_settled`: `startFiber(..., {waitForCompletion: true})` returns once the managed
fiber has settled, with the status the ledger holds then (fibers §5.5 step 8, §5.6).

The fibers workload's `start_waiting` call writes its answer as `workload:waited {name, fiberId,
accepted, status}`. For every such record that cannot have rolled back:
1. `status` is terminal: `completed`, `error`, `aborted` or `interrupted` (a wait never returns
   `pending` or `running`, and the answer is a status, never the callback's value);
2. the ledger row of `fiberId` held that status: replaying the agent's journal with the instant
   each turn committed, the row's status at the record's instant (after the last turn committed
   by then) or one a turn of that very instant wrote. A row deleted by then (`deleteFibers`) or
   a storage wiped since is not judged.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.checkers.storage import row_changes
from sim.trace import format_sim_time

__all__ = ["waited_status_settled"]

NAME = "waited_status_settled"
LEDGER = "cf_agents_fibers"
SETTLED = ("completed", "error", "aborted", "interrupted")


@invariant(NAME)
def waited_status_settled(context: CheckContext) -> list[Violation]:
    """Fibers §5.5-§5.6 — a waiting `start_fiber` answers a settled status, the one the ledger
    holds when it returns (see the module docstring)."""
    found: list[Violation] = []
    histories: dict[str, dict[Any, list[tuple[int, str | None]]]] = {}
    for record in context.events("workload:waited"):
        if context.may_have_rolled_back(record):
            continue
        agent, fiber_id, status = record.agent, record.get("fiberId"), record.get("status")
        at = format_sim_time(record.t_ms)
        if status not in SETTLED:
            found.append(
                Violation(
                    NAME,
                    agent,
                    str(fiber_id),
                    f"a waiting start_fiber of {record.get('name')} on {agent} returned status "
                    f"{status!r} at {at}: a wait for completion returns only once the fiber has "
                    f"settled ({', '.join(SETTLED)})",
                    (record.seq,),
                )
            )
            continue
        if agent not in histories:
            histories[agent] = _statuses(context, agent)
        history = histories[agent].get(fiber_id)
        if not history:
            continue
        before = [s for t, s in history if t < record.t_ms]
        same_instant = [s for t, s in history if t == record.t_ms]
        held = {*([before[-1]] if before else []), *same_instant}
        if None in held or not held:
            continue  # deleted by then, or not yet written as far as the journal shows
        if status not in held:
            found.append(
                Violation(
                    NAME,
                    agent,
                    str(fiber_id),
                    f"a waiting start_fiber of {record.get('name')} on {agent} returned "
                    f"{status!r} at {at}, but the ledger row of fiber {fiber_id} held "
                    f"{' or '.join(sorted(repr(s) for s in held))} then",
                    (record.seq,),
                )
            )
    return found


def _statuses(context: CheckContext, agent: str) -> dict[Any, list[tuple[int, str | None]]]:
    """fiber id -> (commit instant, status after the change; None: deleted), in commit order."""
    instants = context.journal_ms.get(agent, ())
    out: dict[Any, list[tuple[int, str | None]]] = defaultdict(list)
    for change in row_changes(context.journals.get(agent, ()), LEDGER, "fiber_id"):
        if change.turn > len(instants):
            continue
        status = change.value("status")
        if change.after is not None and status == change.value("status", "before"):
            continue
        out[change.key].append((instants[change.turn - 1], status))
    return out
