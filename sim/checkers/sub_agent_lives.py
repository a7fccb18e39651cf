"""`sub_agents_registered`: a sub-agent lives only while its parent's registry lists it (the
seed's sub-agent section, fibers §6.9: every walk to a sub-agent checks the registry at each
hop, and a missing entry ends the walk; `deleteSubAgent` removes the entry first).

A sub-agent's path is `<parent path>/<Class>/<name>`; its parent's registry is the parent's
`cf_agents_sub_agents` rows, keyed by (class, name), read from the parent's journal of committed
turns (`sim.checkers.storage.row_changes`), never from the runtime. A row deleted in an earlier
instant and not written again by the instant of a sub-agent's `incarnation:start` means nothing
should have reached it: the walk that woke it took a registry entry of another class, or of no
one, for its own.
"""

from __future__ import annotations

from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.registry import invariant
from sim.checkers.sub_agent_registry import registry_entry, registry_history
from sim.trace import format_sim_time

__all__ = ["sub_agents_registered"]


@invariant("sub_agents_registered")
def sub_agents_registered(context: CheckContext) -> list[Violation]:
    """The seed, fibers §6.9 — no incarnation of a sub-agent starts in an instant after one in
    which its registry entry on its parent (`cf_agents_sub_agents`, class and name) was deleted,
    unless the entry was written again by that instant (the sub-agent created anew). A parent
    whose record was reset (deleted, wiped) since is a new parent: its registry is judged
    afresh."""
    out: list[Violation] = []
    histories: dict[str, dict[tuple[Any, Any], list[tuple[int, bool]]]] = {}
    for start in context.events("incarnation:start"):
        entry = registry_entry(start.agent)
        if entry is None:
            continue  # a top-level agent has no registry above it
        parent, cls, name = entry
        if parent not in histories:
            histories[parent] = registry_history(context, parent)
        entries = histories[parent].get((cls, name))
        if not entries:
            continue
        last = None
        for when, present in entries:
            if when > start.t_ms:
                break
            last = (when, present)
        if last is None or last[1] or last[0] >= start.t_ms:
            continue
        if any(seq < start.seq for seq in context.record_resets(parent)):
            continue
        out.append(
            Violation(
                "sub_agents_registered",
                start.agent,
                f"{cls}/{name}",
                f"sub-agent {start.agent} started an incarnation at "
                f"{format_sim_time(start.t_ms)}, but its parent's registry had no entry for "
                f"({cls}, {name}) since {format_sim_time(last[0])}: nothing should reach a "
                "sub-agent its parent deleted",
                (start.seq,),
            )
        )
    return out
