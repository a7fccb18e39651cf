"""Run one scenario: safety phase (the steps), liveness phase (quiesce), then expectations.

The run is a pure function of the scenario and the seed: the same pair gives the same trace,
digest and verdict in any process. The result carries the failures as sentences and the one
command that replays the run; nothing in it depends on the wall clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scenarios.expect import check_expectations
from scenarios.schema import Scenario
from scenarios.steps import StepRunner
from sim import Simulation, Trace

__all__ = ["ScenarioResult", "run_scenario"]


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

    @property
    def headline(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return (
            f"{verdict} {self.name} seed={self.seed} events={self.events} digest={self.digest[:8]}"
        )

    def report(self) -> str:
        """The headline, then for a failure each sentence and the replay command, last."""
        if self.passed:
            return self.headline
        lines = [self.headline, *(f"  - {failure}" for failure in self.failures)]
        lines.append(f"  replay: {self.replay}")
        return "\n".join(lines)


def run_scenario(scenario: Scenario, seed: int | None = None) -> ScenarioResult:
    """Run `scenario` with its own seed, or with `seed` when given (the CLI's `--seed`)."""
    seed = scenario.seed if seed is None else seed
    sim = Simulation(seed=seed, faults=scenario.faults)
    steps = StepRunner(sim, scenario)
    for step in scenario.steps:
        steps.run(step)
    quiet = False
    try:
        quiet = sim.quiesce(scenario.liveness_limit_ms)
    except Exception as exc:  # reported with the replay command rather than as a traceback
        steps.failures.append(
            f"{scenario.path}: the liveness phase raised {type(exc).__name__}: {exc}"
        )
    failures = [*steps.finish(), *check_expectations(sim, scenario)]
    return ScenarioResult(
        name=scenario.name,
        path=scenario.path,
        seed=seed,
        passed=not failures,
        failures=tuple(failures),
        digest=sim.digest(),
        events=len(sim.trace),
        quiet=quiet,
        replay=scenario.replay_command(seed),
        trace=sim.trace,
    )
