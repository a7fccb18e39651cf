"""`scenarios(st, areas)`: the Hypothesis strategy of a whole generated scenario.

Swarm testing over the areas asked for: each example first draws which of them it has (at
least one), then one or two agents of each, then the platform's faults over them
(`scenarios.generate.faults`) and a `faults:` profile. Everything shrinks towards less: fewer
areas, agents, schedules, fibers, runs and calls, simpler options (the first choice of each
draw is the plain one), fewer faults, earlier and rounder times.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from agents_core.releases.registry import DEFAULT_RELEASE
from scenarios.generate.chat import chat_part
from scenarios.generate.document import Generated
from scenarios.generate.durations import aligned
from scenarios.generate.facets import facets_part, facets_problem
from scenarios.generate.faults import FAULT_NOTE, fault_steps, migration_fault, profiles
from scenarios.generate.fibers import fibers_part
from scenarios.generate.models import model_busy_ms, timed_model, working_model
from scenarios.generate.parts import Part, TimedStep, Use
from scenarios.generate.schedules import schedules_part
from scenarios.generate.surface import FULL, Surface
from scenarios.generate.tools import tools_part
from scenarios.hunt.fault_draws import times

__all__ = ["AREAS", "LIVENESS_MARGIN_MS", "scenarios"]

AREAS: dict[str, tuple[str, Callable[[Any, str, Surface], Any]]] = {
    "schedules": ("sched", cache(schedules_part)),
    "fibers": ("worker", cache(fibers_part)),
    "tools": ("parent", cache(tools_part)),
    "chat": ("assistant", cache(chat_part)),
    "facets": ("hub", cache(facets_part)),
}
"""Area name -> (the alias of its first agent, the strategy of its part). Each part's strategy
is built once per alias: building one (Hypothesis reads a composite's source) costs more than
drawing from it, and a scenario draws its parts anew in every example and shrink step."""
LIVENESS_MARGIN_MS = 3_600_000
OLDER_START_ODDS = 3
"""One scenario in this many starts on an older release and upgrades mid-run, when there is one."""
MAX_HORIZON_MS = 200 * 86_400_000


def _aliases(alias: str, count: int) -> list[str]:
    return [alias if index == 0 else f"{alias}{index + 1}" for index in range(count)]


def scenarios(
    st: Any,
    areas: Sequence[str],
    *,
    invariants: Sequence[str] = ("all",),
    name: str = "generated",
    sdk: str | None = None,
    upgrades: Sequence[str] = (),
    older: Sequence[str] = (),
    surface: Surface = FULL,
) -> Any:
    """A strategy of `Generated` over `areas` (names of `AREAS`). `sdk`: the release each
    scenario starts on, written as its `sdk:` key (None: none, the default). `upgrades`: the
    newer releases a drawn deploy may bring (none: no upgrade is drawn). `older`: releases
    before `sdk` (or the default) that a scenario may start on instead, one in
    `OLDER_START_ODDS`, upgraded to it by a deploy drawn over the run (so its migration of an
    older release's state runs too). `surface`: the choices the draws may make (`FULL`: all of
    them)."""
    unknown = [area for area in areas if area not in AREAS]
    if unknown or not areas:
        raise ValueError(f"unknown area(s) {unknown or list(areas)}; known: {list(AREAS)}")
    ordered = [area for area in AREAS if area in areas]
    problem = facets_problem(surface)
    if "facets" in ordered and problem is not None:
        # A surface that opens no sub-agents (the real side's) leaves the area nothing.
        ordered.remove("facets")
        if not ordered:
            raise ValueError(f"the facets area cannot be drawn: {problem}")

    @st.composite
    def scenario(draw: Any) -> Generated:
        chosen = draw(
            st.lists(st.sampled_from(ordered), min_size=1, max_size=len(ordered), unique=True)
        )
        chosen = [area for area in ordered if area in chosen]
        parts: list[Part] = []
        for area in chosen:
            alias, part = AREAS[area]
            for each in _aliases(alias, draw(st.integers(1, 2))):
                parts.append(draw(part(st, each, surface)))
        agents = {alias: agent for part in parts for alias, agent in part.agents.items()}
        clients = {name: alias for part in parts for name, alias in part.clients.items()}
        workload = sorted((s for part in parts for s in part.steps), key=lambda s: s.at_ms)
        uses = [use for part in parts for use in part.uses]
        model = draw(_model(st, surface, agents))
        uses += _model_uses(model, agents)
        busy = model_busy_ms(model) if {"tools", "chat"} & set(chosen) else 0
        horizon = min(MAX_HORIZON_MS, max([60_000, *(part.horizon_ms + busy for part in parts)]))
        children = [
            f"{alias}/{run['run_id']}"
            for alias, agent in agents.items()
            if agent.get("workload") == "tools"
            for run in agent["runs"]
        ]
        # A schedules agent's sub-agents by their paths (a class-prefixed name has none).
        children += [
            f"{alias}/{name}"
            for alias, agent in agents.items()
            for name in agent.get("sub_agents", ())
            if ":" not in name
        ]
        periods = sorted({s.at_ms for s in workload if s.at_ms > 0})
        seed = draw(st.integers(0, 2**16))
        seed, faults = draw(
            fault_steps(
                st,
                agents=list(agents),
                children=children,
                clients=list(clients),
                calls=[s for s in workload if s.action == "call"],
                horizon_ms=horizon,
                periods=periods,
                seed=seed,
                upgrades=upgrades,
                areas=chosen,
                aimed=surface.aimed_storage,
            )
        )
        own = [TimedStep(s.at_ms, s.action, s.args, FAULT_NOTE) for p in parts for s in p.faults]
        faults = [*faults, *own]
        steps, numbers = _merged(workload, faults)
        profile = draw(profiles(st, surface))
        start = sdk
        if older and draw(st.integers(1, OLDER_START_ODDS)) == OLDER_START_ODDS:
            # Drawn after the rest: shrunk away, it leaves the rest of the scenario as it was.
            start = draw(st.sampled_from(list(older)))
            upgrade_at = draw(st.one_of(aligned(st, periods, 0, horizon), times(st, horizon)))
            target = DEFAULT_RELEASE if sdk is None else sdk
            faults = [*faults, TimedStep(upgrade_at, "deploy", {"sdk": target}, FAULT_NOTE)]
            if surface.aimed_storage and draw(st.booleans()):
                # The upgrade's migration cut by a storage fault, on a drawn agent or child.
                faults.append(draw(migration_fault(st, upgrade_at, [*agents, *children])))
            steps, numbers = _merged(workload, faults)
        return Generated(
            name=name,
            seed=seed,
            faults=profile,
            agents=agents,
            steps=tuple(steps),
            fault_numbers=frozenset(numbers),
            clients=clients,
            uses=tuple(uses),
            invariants=tuple(invariants),
            liveness_ms=min(
                366 * 86_400_000,
                max([2 * horizon, *(part.settles_ms for part in parts)]) + LIVENESS_MARGIN_MS,
            ),
            areas=tuple(chosen),
            sdk=start,
            model=model,
        )

    return scenario()


def _model(st: Any, surface: Surface, agents: dict[str, Any]) -> Any:
    """The scenario's `model:` (None: the built-in one): on a surface that asks for timed
    replies, always a timed one; else, when a chat host or a chat tool child would answer from
    it, none, a timed one or a working one, each about as often."""
    if surface.timed_models:
        return timed_model(st)
    hosts, workers = _answered_by_the_model(agents)
    if not hosts and not workers:
        return st.none()
    return st.one_of(st.none(), timed_model(st), working_model(st))


def _answered_by_the_model(agents: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The chat hosts without a model of their own, and the tools parents with a chat child."""
    hosts = [
        alias
        for alias, agent in agents.items()
        if agent.get("workload") == "chat" and "model" not in agent
    ]
    workers = [
        alias
        for alias, agent in agents.items()
        if agent.get("workload") == "tools"
        and any(run.get("child", "scripted") != "scripted" for run in agent["runs"])
    ]
    return hosts, workers


def _model_uses(model: dict[str, Any] | None, agents: dict[str, Any]) -> list[Use]:
    """The pairs a drawn model adds: a chat host answering from it in chunks, a chat tool
    child calling its work tool."""
    if model is None:
        return []
    hosts, workers = _answered_by_the_model(agents)
    uses = [
        Use("model", "the scenario's, in chunks", alias, "workload:answered") for alias in hosts
    ]
    if "rules" in model:
        uses += [
            Use("child", "calls its work tool", alias, "workload:reported") for alias in workers
        ]
    return uses


def _merged(
    workload: list[TimedStep], faults: list[TimedStep]
) -> tuple[list[TimedStep], list[int]]:
    """The workload's steps and the faults in time order (a fault after the workload's steps of
    its instant, but an armed storage fault before them: it counts the statements they make),
    and the 1-based numbers of the faults."""
    tagged = [(s.at_ms, 1, i, s) for i, s in enumerate(workload)]
    tagged += [
        (s.at_ms, 0 if s.action == "arm_storage_fault" else 2, i, s) for i, s in enumerate(faults)
    ]
    tagged.sort(key=lambda t: (t[0], t[1], t[2]))
    numbers = [n for n, t in enumerate(tagged, start=1) if t[1] != 1]
    return [t[3] for t in tagged], numbers
