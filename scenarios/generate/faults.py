"""The platform's faults beside a generated workload, drawn as `agentsim fuzz` draws them.

The drawing is `scenarios.hunt.fault_draws` (what fuzz and `sim.strategies` use): swarm testing
over the fault kinds, then one to `MAX_FAULTS` evictions (of a root, or of a tools parent's
child by its run id), deploys, client reconnects and repeats of the workload's own calls, at
times drawn over the run's horizon. Their times are drawn by `aligned` as well, so a deploy can
land on a fiber's step end or a schedule's instant exactly. With `agentsim generate --upgrade`,
a drawn deploy may also bring a newer SDK release than the run's (`deploy: {sdk: ...}`).

Storage faults come two ways. The `faults:` profile (`flaky-storage`, `hostile` or explicit
rates) fails or crashes a statement anywhere, at random. And a drawn `arm_storage_fault` aims
at one kind of statement: a generated scenario has no base run whose statements a fault could be
aimed at (as fuzz aims them), so it names a verb and one of the SDK's tables the scenario's
areas use (`TABLES`), the (skip+1)-th such statement from a drawn time on, on a drawn agent or
child, failing it, crashing before it, or (a write) crashing after its turn commits. That is
how a write that fails after an accept, a read that fails while the alarm is re-armed, or a
delete that fails half-way through a clean-up is reached at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scenarios.generate.durations import aligned
from scenarios.generate.parts import TimedStep
from scenarios.generate.surface import FULL, Surface
from scenarios.hunt.fault_draws import (
    STORAGE_FAULTS,
    UPGRADE,
    Fault,
    fault_options,
    schedules,
    times,
)

__all__ = [
    "FAULT_NOTE",
    "MAX_FAULTS",
    "MIGRATION_STATEMENTS",
    "PROFILES",
    "TABLES",
    "fault_steps",
    "profiles",
    "statement_patterns",
]

MAX_FAULTS = 3
FAULT_NOTE = "a platform fault drawn beside the workload"
PROFILES = ("none", "platform", "flaky-storage", "hostile")


TABLES: dict[str, tuple[str, ...]] = {
    "all": ("cf_agents_state", "cf_agents_schedules", "cf_agents_jobs"),
    "schedules": (
        "cf_agents_sub_agents",
        "cf_agents_fibers",
        "cf_agents_runs",
        "workload_schedules",
    ),
    "fibers": ("cf_agents_fibers", "cf_agents_runs", "cf_agents_mcp_servers"),
    "tools": (
        "cf_agent_tool_runs",
        "cf_agent_tool_child_runs",
        "cf_agent_tool_milestones",
        "cf_agents_sub_agents",
        "cf_agents_facet_runs",
        "cf_ai_chat_stream_chunks",
        "cf_think_submissions",
    ),
    "facets": (
        "cf_agents_sub_agents",
        "cf_agents_facet_runs",
        "cf_agents_fibers",
        "cf_agents_runs",
    ),
    "chat": (
        "cf_ai_chat_agent_messages",
        "cf_ai_chat_stream_chunks",
        "cf_ai_chat_stream_metadata",
        "cf_think_submissions",
        "cf_agents_runs",
    ),
}
"""The SDK's tables an area's agents read and write (both releases': `cf_agents_jobs` is
0.32.0's, `cf_agents_schedules` 0.21.0's), and those every agent has ("all"): the state, and
the rows its alarm is armed from. A schedules agent's own record of the schedules it set up
(`workload_schedules`) too: a write of it that fails after `schedule()` stored the row leaves
the setup to be done again, and the second `schedule()` of the same callback and payload
meets the row the first stored (the idempotent dedupe). A `facets` parent and its sub-agents:
the registry, the root's index of their fiber runs, and the fibers they run."""
VERBS = ("SELECT", "INSERT", "UPDATE", "DELETE")

MIGRATION_STATEMENTS = (
    "^SELECT \\* FROM cf_agents_schedules$",
    "^INSERT (OR [A-Z]+ )?INTO cf_agents_jobs\\b",
    "^DROP TABLE cf_agents_schedules\\b",
)
"""Statements 0.32.0's first startup runs on an older release's storage, and no older release
runs (sdk-0.32 §6.3: the legacy schedules read whole, each pushed as a job, the table dropped):
the `match:` of a storage fault drawn at an upgrade, so that the migration itself is cut."""


def statement_patterns(areas: Sequence[str]) -> list[tuple[str, bool]]:
    """(pattern, is a write) for each verb on each table of `areas` (and the common ones): the
    `match:` of an aimed storage fault, anchored at the statement's start as the hunts' shapes
    are (`^UPDATE cf_agents_fibers\\b`, `^SELECT .* FROM cf_agents_jobs\\b`)."""
    tables = list(dict.fromkeys(t for area in ("all", *areas) for t in TABLES.get(area, ())))
    heads = {
        "SELECT": "^SELECT .*FROM {}\\b",
        "INSERT": "^INSERT (OR [A-Z]+ )?INTO {}\\b",
        "UPDATE": "^UPDATE {}\\b",
        "DELETE": "^DELETE FROM {}\\b",
    }
    return [(heads[verb].format(table), verb != "SELECT") for table in tables for verb in VERBS]


def _aimed(
    st: Any,
    at: Any,
    targets: Sequence[str],
    areas: Sequence[str],
    how: str,
    calls: Sequence[TimedStep] = (),
) -> Any:
    """An `arm_storage_fault` on a drawn target: the (skip+1)-th statement of a drawn verb and
    table fails or crashes (`how`; after its commit only for a write), counted from a drawn
    time, often the instant of one of the workload's calls (so that the call's own
    statements are the ones counted: an armed fault goes before the workload's steps of its
    instant) and often the first such statement."""
    patterns = [p for p, write in statement_patterns(areas) if write or how != "crash-after-commit"]
    before_calls = sorted({step.at_ms for step in calls})
    when = st.one_of(at, st.sampled_from(before_calls)) if before_calls else at
    return st.builds(
        lambda at_ms, target, pattern, skip: Fault(
            at_ms,
            "arm_storage_fault",
            (("agent", target), ("kind", how), ("match", pattern), ("skip", skip)),
        ),
        when,
        st.sampled_from(list(targets)),
        st.sampled_from(patterns),
        st.one_of(st.just(0), st.integers(0, 5)),
    )


def migration_fault(st: Any, at_ms: int, targets: Sequence[str]) -> Any:
    """A storage fault armed at the instant of an upgrade, aimed at one of the migration's
    statements (`MIGRATION_STATEMENTS`), the (skip+1)-th from then on, on a drawn agent or
    child: failing it (the startup throws with what it moved so far written) or crashing
    before it (the startup's turn rolls back)."""
    return st.builds(
        lambda target, how, pattern, skip: TimedStep(
            at_ms,
            "arm_storage_fault",
            {"agent": target, "kind": how, "match": pattern, "skip": skip},
            FAULT_NOTE,
        ),
        st.sampled_from(list(targets)),
        st.sampled_from(("error", "crash")),
        st.sampled_from(MIGRATION_STATEMENTS),
        st.integers(0, 3),
    )


def _repeat(at_ms: int, step: TimedStep) -> Fault:
    """One of the workload's own calls sent again at `at_ms` (a retry, a duplicate delivery)."""
    args = dict(step.args)
    args["wait"] = False
    return Fault(at_ms, step.action, tuple(args.items()))


def fault_steps(
    st: Any,
    *,
    agents: Sequence[str],
    children: Sequence[str],
    clients: Sequence[str],
    calls: Sequence[TimedStep],
    horizon_ms: int,
    periods: Sequence[int],
    seed: int,
    upgrades: Sequence[str] = (),
    areas: Sequence[str] = (),
    aimed: bool = True,
) -> Any:
    """A strategy of (seed, [TimedStep]): the run's seed and the drawn fault steps. `upgrades`:
    the newer releases a drawn deploy may bring (`generate --upgrade`; none: no upgrade is
    drawn, and a seed draws what it drew before upgrades existed). `areas`: the scenario's,
    whose tables an aimed storage fault may name; `aimed`: whether one may be drawn at all
    (the real side plays no storage fault)."""
    at = st.one_of(times(st, horizon_ms), aligned(st, periods, 0, horizon_ms))
    kinds = ("evict", "deploy", "reconnect", "repeat", *((UPGRADE,) if upgrades else ()))
    options = fault_options(
        st,
        kinds=kinds,
        at=at,
        agents=[*agents, *children],
        clients=list(clients),
        groups=(),
        repeatable=list(calls),
        repeat=_repeat,
        upgrades=upgrades,
    )
    if aimed:
        for how in STORAGE_FAULTS:
            targets = [*agents, *children]
            options[f"storage:{how}"] = _aimed(st, at, targets, areas, how, calls)
    drawn = schedules(st, options, max_steps=MAX_FAULTS, base_seed=seed)
    return st.one_of(st.just((seed, [])), drawn.map(_as_steps))


def _as_steps(schedule: Any) -> tuple[int, list[TimedStep]]:
    steps = [TimedStep(f.at_ms, f.action, dict(f.args), FAULT_NOTE) for f in schedule.faults]
    return schedule.seed, steps


def profiles(st: Any, surface: Surface = FULL) -> Any:
    """The `faults:` profile: none most often, else one of the named profiles, or rates (those
    `surface` keeps open)."""
    choices = [st.just("none"), st.just("none")]
    named = tuple(name for name in PROFILES[1:] if name in surface.profiles)
    if named:
        choices.append(st.sampled_from(named))
    if surface.storage_rates:
        rates = st.builds(
            lambda error, crash: {"storage_error_rate": error, "crash_rate": crash},
            st.sampled_from((0.0, 0.001, 0.01)),
            st.sampled_from((0.0, 0.001, 0.005)),
        )
        choices.append(rates)
    return st.one_of(*choices)
