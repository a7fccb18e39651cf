"""Promises of the agent-tools seed about the parent's registry of runs: `drill_in_gated`
(`onBeforeSubAgent` on `hasAgentToolRun` admits exactly the runs the registry holds, and a
refused request spawns no child) and `agent_tools_under_instance_cap` (a cap set on the
instance holds, as `agent_tools_under_cap` holds a static one).

The registry over time is the parent's journal of `cf_agent_tool_runs`, each turn at the
instant it committed (`CheckContext.journal_ms`). The drill-in gate's answers are the library's
`StoryParent` notes: its `on_before_sub_agent` asks `has_agent_tool_run(className, name)` and
notes `story:drill-in {child, run, allowed}` before it refuses (404) or lets the request
through.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from sim.checkers.core import CheckContext, Violation
from sim.checkers.core import time_words as _at
from sim.checkers.registry import invariant
from sim.checkers.storage import row_changes
from sim.checkers.tool_children import timed_changes

__all__ = ["agent_tools_under_instance_cap", "drill_in_gated"]

RUNS = "cf_agent_tool_runs"
LIVE = ("starting", "running")
REJECTED = re.compile(r"^maxConcurrentAgentTools \((\d+)\) exceeded$")
"""agent-tools §2.6: the error a run rejected for the cap is born with."""


# -- drill_in_gated -----------------------------------------------------------------------------
@invariant("drill_in_gated")
def drill_in_gated(context: CheckContext) -> list[Violation]:
    """agent-tools §8.2, §8.3 and the seed — `onBeforeSubAgent` gates access to a run's facet:
    a gate on `hasAgentToolRun` admits exactly the runs the registry holds (cap-rejected ones
    too, cleared ones not), and a refused request never spawns a child.

    For every `story:drill-in {child, run, allowed}` of a parent whose journal the context holds
    (not one that may have rolled back):
    1. `allowed` is true exactly when the parent's registry held a row with run_id `run` and
       agent_type `child` at that instant, by its journal (not judged when a change of that row
       committed in the same instant);
    2. a refusal of a run the registry never held (no committed row of that run and class, ever)
       leaves no record of the facet `<parent>/<child>/<run>` in the whole trace.
    """
    out = []
    for parent in sorted({r.agent for r in context.events("story:drill-in")}):
        if parent not in context.journals:
            continue  # a hand-built context: the registry over time is unknown
        history: dict[Any, list[tuple[int | None, Mapping[str, Any] | None]]] = defaultdict(list)
        for instant, change in timed_changes(context, parent, RUNS, "run_id"):
            history[change.key].append((instant, change.after))
        for note in context.events("story:drill-in", parent):
            if context.may_have_rolled_back(note):
                continue
            child, run, allowed = note.get("child"), note.get("run"), note.get("allowed")
            changes = history.get(run, [])
            ever = any(row is not None and row.get("agent_type") == child for _, row in changes)
            path = f"{parent}/{child}/{run}"
            if not allowed and not ever and context.records_of(path):
                out.append(
                    Violation(
                        "drill_in_gated",
                        parent,
                        str(run),
                        f"{parent} refused a drill-in to {path} at {_at(note.t_ms)} (it never "
                        "had that run), yet that facet has records: a refused request must "
                        "not spawn a child",
                        (note.seq, context.records_of(path)[0].seq),
                    )
                )
            if any(t is None or t == note.t_ms for t, _ in changes):
                continue
            before = [row for t, row in changes if t is not None and t < note.t_ms]
            holds = (
                bool(before) and before[-1] is not None and before[-1].get("agent_type") == child
            )
            if bool(allowed) == holds:
                continue
            out.append(
                Violation(
                    "drill_in_gated",
                    parent,
                    str(run),
                    f"{parent} {'admitted' if allowed else 'refused'} a drill-in to {path} at "
                    f"{_at(note.t_ms)}, while its registry {'held' if holds else 'had no'} run "
                    f"{run} of {child}",
                    (note.seq,),
                )
            )
    return out


# -- agent_tools_under_instance_cap -------------------------------------------------------------
@invariant("agent_tools_under_instance_cap")
def agent_tools_under_instance_cap(context: CheckContext) -> list[Violation]:
    """agent-tools §2.6 — `maxConcurrentAgentTools` is an instance field, one cap per agent and
    nesting level: a cap set on the instance (not as a static option) holds as a static one
    does, and a run is rejected only while the cap is full.

    For each agent whose static `max_concurrent_agent_tools` is not a number (those are
    `agent_tools_under_cap`'s), replaying its journal of `cf_agent_tool_runs`: a row inserted
    as `error` with "maxConcurrentAgentTools (N) exceeded" shows the instance's cap N, and is
    inserted while at least N rows are `starting`/`running`; from that rejection on, no
    committed turn ends with more than N (the latest rejection's) rows `starting`/`running`.
    The context cannot see when the field was set, so nothing before the first rejection is
    judged, and the field is taken not to change after it.
    """
    out = []
    for path in context.paths():
        if isinstance(context.option(path, "max_concurrent_agent_tools"), int):
            continue
        live: set[str] = set()
        cap: int | None = None
        turn, flagged = 0, False
        for change in row_changes(context.journals.get(path, []), RUNS, "run_id"):
            if change.turn != turn:
                if cap is not None and len(live) > cap and not flagged:
                    out.append(_over_cap(path, cap, live, turn))
                    flagged = True
                turn = change.turn
            rejected = REJECTED.match(str(change.value("error_message") or ""))
            if change.before is None and change.after is not None and rejected:
                cap = int(rejected.group(1))
                if len(live) < cap:
                    out.append(
                        Violation(
                            "agent_tools_under_instance_cap",
                            path,
                            str(change.key),
                            f"run {change.key} of {path} was rejected for its cap of {cap} "
                            f"while only {len(live)} run(s) were starting or running",
                        )
                    )
            if change.value("status") in LIVE:
                live.add(str(change.key))
            else:
                live.discard(str(change.key))
        if cap is not None and len(live) > cap and not flagged:
            out.append(_over_cap(path, cap, live, turn))
    return out


def _over_cap(path: str, cap: int, live: set[str], turn: int) -> Violation:
    return Violation(
        "agent_tools_under_instance_cap",
        path,
        "",
        f"{path} kept {len(live)} agent-tool runs starting or running ({', '.join(sorted(live))}) "
        f"after its committed turn {turn}, over the cap of {cap} its instance had shown",
    )
