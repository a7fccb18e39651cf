"""The platform's faults beside a generated workload, drawn as `agentsim fuzz` draws them.

The drawing is `scenarios.hunt.fault_draws` (what fuzz and `sim.strategies` use): swarm testing
over the fault kinds, then one to `MAX_FAULTS` evictions (of a root, or of a tools parent's
child by its run id), deploys, client reconnects and repeats of the workload's own calls, at
times drawn over the run's horizon. Their times are drawn by `aligned` as well, so a deploy can
land on a fiber's step end or a schedule's instant exactly. A generated scenario has no base run
to aim storage faults at statements it executed, so storage faults come from the `faults:`
profile instead (`flaky-storage`, `hostile` or explicit rates): a statement anywhere may fail or
crash. With `agentsim generate --upgrade`, a drawn deploy may also bring a newer SDK release
than the run's (`deploy: {sdk: ...}`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scenarios.generate.durations import aligned
from scenarios.generate.parts import TimedStep
from scenarios.generate.surface import FULL, Surface
from scenarios.hunt.fault_draws import UPGRADE, Fault, fault_options, schedules, times

__all__ = ["FAULT_NOTE", "MAX_FAULTS", "PROFILES", "fault_steps", "profiles"]

MAX_FAULTS = 3
FAULT_NOTE = "a platform fault drawn beside the workload"
PROFILES = ("none", "platform", "flaky-storage", "hostile")


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
) -> Any:
    """A strategy of (seed, [TimedStep]): the run's seed and the drawn fault steps. `upgrades`:
    the newer releases a drawn deploy may bring (`generate --upgrade`; none: no upgrade is
    drawn, and a seed draws what it drew before upgrades existed)."""
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
