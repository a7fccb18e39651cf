"""The idempotency-key invariant of managed fibers: `fiber_keys_unique` (seed: `startFiber` with
an `idempotencyKey` accepts the work once; fibers §2.3, §5.5).

A managed fiber's key is scoped to the agent that accepted it: each agent's own
`cf_agents_fibers` table holds its keys (a sibling facet's equal key is another fiber), and a key
is free again once its row is deleted (`deleteFibers`). So while a row holding key K lives in an
agent's ledger, no other row of that agent's ledger holds K. The checker reads this from each
agent's journal of committed turns (`row_changes`), so a duplicate that a later delete removed
is still seen.
"""

from __future__ import annotations

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.checkers.storage import row_changes

__all__ = ["fiber_keys_unique"]

TABLE = "cf_agents_fibers"


@invariant("fiber_keys_unique")
def fiber_keys_unique(context: CheckContext) -> list[Violation]:
    """Fibers §5.5, seed — a managed fiber's idempotency key names one fiber of its agent: a
    second `startFiber` with the key is a duplicate of the first, never a second fiber.

    Replaying each agent's journal (`row_changes` of `cf_agents_fibers` by `fiber_id`): no
    committed write leaves two live rows of one agent with the same non-null `idempotency_key`.
    A deleted row frees its key; rows of different agents never clash.
    """
    out: list[Violation] = []
    for path in sorted(context.journals):
        holder: dict[object, object] = {}
        for change in row_changes(context.journals[path], TABLE, "fiber_id"):
            if change.before is not None:
                key = change.before.get("idempotency_key")
                if holder.get(key) == change.key:
                    del holder[key]
            if change.after is None:
                continue
            key = change.after.get("idempotency_key")
            if key is None:
                continue
            other = holder.get(key)
            if other is not None and other != change.key:
                out.append(
                    Violation(
                        "fiber_keys_unique",
                        path,
                        str(change.key),
                        f"managed fiber {change.key} of {path} was written with idempotency key "
                        f"{key!r}, which fiber {other} of the same agent still held (committed "
                        f"turn {change.turn}): a duplicate start became a second fiber",
                    )
                )
                break
            holder[key] = change.key
    return out
