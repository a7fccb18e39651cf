"""A sub-agent's entry in its parent's registry (`cf_agents_sub_agents`, class and name), read
from the parent's journal of committed turns, never from the runtime: what
`sub_agents_registered`, `fibers_settled` and `keep_alive_heartbeat` read. No invariant lives
here, so importing it registers nothing (the checkers run in the order `sim.checkers` imports
their modules)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from sim.checkers.core import CheckContext
from sim.checkers.storage import row_changes

__all__ = ["REGISTRY", "registry_entry", "registry_history"]

REGISTRY = "cf_agents_sub_agents"


def registry_entry(path: str) -> tuple[str, str, str] | None:
    """(parent path, class, name) of sub-agent `path`: its entry in its parent's registry; None
    for a top-level agent."""
    parts = path.split("/")
    if len(parts) < 4:
        return None
    return "/".join(parts[:-2]), parts[-2], parts[-1]


def registry_history(
    context: CheckContext, parent: str
) -> dict[tuple[Any, Any], list[tuple[int, bool]]]:
    """(class, name) -> [(instant, present after it)] of the parent's registry, in commit
    order (the last change of each instant), over every life of the parent: those a delete
    ended (`departed`), then the current one."""
    lives = [*context.departed.get(parent, ())]
    if parent in context.journals:
        lives.append((context.journals[parent], context.journal_ms.get(parent, ())))
    out: dict[tuple[Any, Any], list[tuple[int, bool]]] = defaultdict(list)
    for journal, instants in lives:
        if len(instants) != len(journal):
            continue
        for change in row_changes(journal, REGISTRY, ("class", "name")):
            when = instants[change.turn - 1]
            changes = out[change.key]
            if changes and changes[-1][0] == when:
                changes.pop()
            changes.append((when, _present(change.after)))
    return out


def _present(row: Mapping[str, Any] | None) -> bool:
    return row is not None
