"""Run one scenario: safety phase (the steps), liveness phase (quiesce), then expectations.

The run is a pure function of the scenario, the seed and the invariants asked for: the same
triple gives the same trace, digest and verdict in any process. The result carries the failures
as sentences and the one command that replays the run; nothing in it depends on the wall clock.
Named invariants (`sim.checkers`) given here are checked after the scenario's own expectations,
over the trace and the final storage, as the fuzzer and `agentsim run --invariants` ask.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scenarios.expect import check_expectations
from scenarios.schema import Scenario
from scenarios.steps import StepRunner
from sim import Simulation, Trace
from sim.checkers import CHECKERS, check, context_from

__all__ = ["ScenarioResult", "StepTiming", "invariant_names", "run_scenario"]


@dataclass(frozen=True)
class StepTiming:
    """When one step of the safety phase began (before waiting for its `at:` / `after:`) and
    ended, in sim ms: what the fuzzer needs to place extra steps between them."""

    begin_ms: int
    end_ms: int


@dataclass(frozen=True)
class ScenarioResult:
    """The verdict of one run of one scenario with one seed."""

    name: str
    path: str
    seed: int
    passed: bool
    failures: tuple[str, ...]
    digest: str
    """sha256 of the trace: the identity of the run."""
    events: int
    """How many trace records the run produced."""
    quiet: bool
    """Whether the liveness phase ended with nothing left to happen (not a verdict by itself:
    an agent with a heartbeat alarm never goes quiet)."""
    replay: str
    trace: Trace = field(compare=False, repr=False)
    invariants: tuple[str, ...] = ()
    """The named invariants checked after the expectations (beyond those the file names)."""
    timings: tuple[StepTiming, ...] = field(default=(), compare=False, repr=False)
    """One per step of the scenario, in order."""

    @property
    def headline(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return (
            f"{verdict} {self.name} seed={self.seed} events={self.events} digest={self.digest[:8]}"
        )

    def report(self, notes: Sequence[str] = ()) -> str:
        """The headline, then for a failure each sentence, any `notes` (the failure file), and
        the replay command, last."""
        if self.passed:
            return self.headline
        lines = [self.headline, *(f"  - {failure}" for failure in self.failures)]
        lines += [f"  {note}" for note in notes]
        lines.append(f"  replay: {self.replay}")
        return "\n".join(lines)


def invariant_names(text: str) -> tuple[str, ...]:
    """`a,b` -> ('a', 'b'); `all` -> every registered invariant; `none` or '' -> (). A name
    that is not registered is a ValueError listing the known ones."""
    words = [word.strip() for word in text.split(",") if word.strip()]
    if words == ["all"]:
        return tuple(CHECKERS)
    if words == ["none"]:
        return ()
    unknown = [word for word in words if word not in CHECKERS]
    if unknown:
        raise ValueError(
            f"unknown invariant(s) {unknown}; known invariants: {sorted(CHECKERS)}, "
            f"or 'all' or 'none'"
        )
    return tuple(dict.fromkeys(words))


def replay_command(scenario: Scenario, seed: int, invariants: Sequence[str] = ()) -> str:
    """`agentsim run PATH --seed N`, with `--invariants a,b` when the run checked some."""
    command = scenario.replay_command(seed)
    if invariants:
        names = "all" if set(invariants) == set(CHECKERS) else ",".join(invariants)
        command += f" --invariants {names}"
    return command


def run_scenario(
    scenario: Scenario, seed: int | None = None, *, invariants: Sequence[str] = ()
) -> ScenarioResult:
    """Run `scenario` with its own seed, or with `seed` when given (the CLI's `--seed`); then
    check its expectations and the named `invariants`."""
    seed = scenario.seed if seed is None else seed
    invariants = invariant_names(",".join(invariants))
    sim = Simulation(seed=seed, faults=scenario.faults)
    try:
        steps = StepRunner(sim, scenario)
        timings = []
        for step in scenario.steps:
            begin_ms = sim.now_ms
            steps.run(step)
            timings.append(StepTiming(begin_ms, sim.now_ms))
        quiet = False
        try:
            quiet = sim.quiesce(scenario.liveness_limit_ms)
        except Exception as exc:  # reported with the replay command rather than as a traceback
            steps.failures.append(
                f"{scenario.path}: the liveness phase raised {type(exc).__name__}: {exc}"
            )
        failures = [*steps.finish(), *check_expectations(sim, scenario)]
        if invariants:
            context = context_from(sim, scenario.path)
            failures += [f"{scenario.path}: invariant {v}" for v in check(context, invariants)]
        digest, events = sim.digest(), len(sim.trace)
    finally:
        sim.close()
    return ScenarioResult(
        name=scenario.name,
        path=scenario.path,
        seed=seed,
        passed=not failures,
        failures=tuple(failures),
        digest=digest,
        events=events,
        quiet=quiet,
        replay=replay_command(scenario, seed, invariants),
        trace=sim.trace,
        invariants=invariants,
        timings=tuple(timings),
    )
