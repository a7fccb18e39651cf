"""The `facets` area: an agent whose sub-agents are the point.

A `schedules` or `fibers` agent that always keeps sub-agents (`FACET_NAMES`): two or three of
one parent, whose names are a prefix of one another (`w1`, `w10`; `a`, `a-b`), of two classes
under one name (`w1`, `twin:w1`), or nested (`w1/x`, `w1/w1`); each keeps the parent's
schedules or runs its fibers, and a fibers agent's sub-agents take keepAlive by hand too. Half
the parents are hubs that do no work of their own (their schedules set up, their fibers
started, only by calls never made), so nothing of theirs hides what the sub-agents hold. The
sub-agents are closed at any time (before they were opened, or twice) and opened again, and
evicted alone while their parent lives (`Part.faults`: the area's own evictions, counted as
faults). The other areas draw sub-agents now and then; here every scenario has them, so their
combinations (a schedule's dispatch to a sub-agent that is gone, leases of sub-agents whose
paths share a prefix, one name in two classes) come often.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from scenarios.generate.durations import aligned
from scenarios.generate.fibers import fibers_part
from scenarios.generate.parts import Part, TimedStep, Use
from scenarios.generate.schedules import schedules_part
from scenarios.generate.surface import FULL, Surface
from scenarios.workloads.sub_agents import TWIN

__all__ = ["FACET_NAMES", "facets_part", "facets_problem"]

FACET_NAMES: tuple[tuple[str, ...], ...] = (
    ("w1", "w10"),
    ("w1", "w2", "w10"),
    ("a", "a-b"),
    ("w1", "w1/x", "w10"),
    ("w1", "twin:w1"),
    ("w1", "twin:w1", "w10"),
    ("w1", "w1/w1", "twin:w1"),
)
"""The sub-agents a `facets` agent keeps: always two or three."""
TWIN_CLASSES = {"schedules": "ScheduleTwin", "fibers": "FiberTwin"}
"""The class of a `twin:` sub-agent, by the parent's workload."""
WORKLOADS = ("schedules", "fibers")
SETS_TO_WORK = {"schedules": ("setup", "call"), "fibers": ("start", "call")}
"""The field that leaves a parent's own work to a call, by workload."""
OWN_WORK = {
    "schedules": ("setup", "recreate"),
    "fibers": ("start", "start_again", "start_waiting", "start_as", "hold"),
}
"""The parent's calls that give it work of its own (schedules, fibers, leases), by workload."""
OWN_PAIRS = frozenset(
    {
        "setup by a call",
        "schedule re-created",
        "start again (duplicate)",
        "start_fiber same key again",
        "start_fiber wait_for_completion",
        "start_fiber explicit fiber_id",
        "keep_alive by hand",
    }
)
"""The pairs only those calls use."""
REASONS = ("explicit", "idle")


def facets_problem(surface: Surface) -> str | None:
    """Why `surface` leaves the area nothing to draw (None: it can draw)."""
    if any(surface.opens(workload, "open") for workload in WORKLOADS):
        return None
    return "the surface opens no sub-agents (`open` of a schedules or fibers workload)"


@cache
def _parents(st: Any, alias: str, surface: Surface) -> Any:
    parts = {"schedules": schedules_part, "fibers": fibers_part}
    return st.one_of(
        [
            parts[workload](st, alias, surface, facets=FACET_NAMES)
            for workload in WORKLOADS
            if surface.opens(workload, "open")
        ]
    )


def _evict_target(alias: str, workload: str, name: str) -> dict[str, Any]:
    """The `evict` step's target for the sub-agent `name` (`w1/x`: the path; `twin:w1`: the
    name with its class, beside the other class's `w1`)."""
    if name.startswith(TWIN):
        return {"agent": alias, "run_id": name.removeprefix(TWIN), "child": TWIN_CLASSES[workload]}
    return {"agent": f"{alias}/{name}"}


def facets_part(st: Any, alias: str, surface: Surface = FULL) -> Any:
    """A strategy of `Part`: one agent named `alias` with sub-agents (see the module)."""
    problem = facets_problem(surface)
    if problem is not None:
        raise ValueError(f"the facets area cannot be drawn: {problem}")

    @st.composite
    def part(draw: Any) -> Part:
        base: Part = draw(_parents(st, alias, surface))
        agent = dict(base.agents[alias])
        workload, names = agent["workload"], tuple(agent["sub_agents"])
        times = sorted({step.at_ms for step in base.steps if step.at_ms > 0}) or [1000]
        steps, uses = base.steps, list(base.uses)
        if draw(st.booleans()):
            # A hub: the parent does no work of its own, so what its sub-agents hold (their
            # leases, their rows on it) is all there is, and nothing of its own hides a loss.
            field, value = SETS_TO_WORK[workload]
            agent[field] = value
            steps = tuple(
                step
                for step in steps
                if not (
                    step.action == "call"
                    and step.args["agent"] == alias
                    and step.args["method"] in OWN_WORK[workload]
                )
            )
            uses = [use for use in uses if use.pair not in OWN_PAIRS]
            uses.append(
                Use("sub_agent", "the parent's only work", alias, "workload:sub_agent_opened")
            )
        faults = []
        for _ in range(draw(st.integers(0, 2))):
            at = draw(aligned(st, times, 0, max(base.horizon_ms, 1000)))
            name = draw(st.sampled_from(names))
            target = _evict_target(alias, workload, name)
            reason = draw(st.sampled_from(REASONS))
            # The sub-agent may not be opened yet, or closed, at the drawn time: then nothing.
            faults.append(TimedStep(at, "evict", {**target, "reason": reason, "if_present": True}))
            uses.append(Use("evict", "a sub-agent alone", alias, "incarnation:end"))
        return Part(
            {alias: agent},
            steps,
            base.clients,
            tuple(uses),
            base.horizon_ms,
            base.settles_ms,
            faults=tuple(faults),
        )

    return part()
