"""Run one scenario: safety phase (the steps), liveness phase (quiesce), then expectations.

The run is a pure function of the scenario, the seed and the invariants asked for: the same
triple gives the same trace, digest and verdict in any process. The result carries the failures
(`scenarios.run.failure.Failure`: values that read as sentences) and the one command that
replays the run; nothing in it depends on the wall clock
but `wall_s`, how long it took (for JUnit).
Named invariants (`sim.checkers`) given here are checked after the scenario's own expectations,
over the trace and the final storage, as the fuzzer and `agentsim run --invariants` ask.

Every run has a budget (`sim.budget`): the defaults, then the file's `limits:`, then the command
line's (`budget_overrides`, which `agentsim run/fuzz/explore` set for every run they make). A run
that uses one up is stopped there and fails with one sentence naming the budget, the busiest
agent and the records that filled it; its expectations are not checked (they would only
describe a run cut short).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import time
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import sim
from scenarios.hunt.fault_draws import CodeSite
from scenarios.language.schema import Scenario
from scenarios.run.expect import check_expectations
from scenarios.run.failure import BUDGET, INVARIANT, LIVENESS, Failure, RaisedError
from scenarios.run.steps import StepRunner
from sim import Simulation, Trace
from sim.budget import BUDGET_NAMES, DEFAULT_BUDGET, BudgetExceeded, RunBudget
from sim.checkers import CHECKERS, LIVENESS_GRACE_MS, check, context_from
from sim.interleave import Interleave, Reordering, draw_points
from sim.liveness import DEADLINE_EXTENSION_MAX_MS, busy_report, durable_deadline, format_gap
from sim.trace import format_sim_time

__all__ = [
    "ExecutedStatement",
    "budget_for",
    "budget_overrides",
    "ScenarioResult",
    "StepTiming",
    "invariant_names",
    "run_scenario",
]


@dataclass(frozen=True)
class ExecutedStatement:
    """One statement agent code ran (what a base run tells the hunt about where faults can
    land): when, on which agent's storage, in which turn, during which step (its 0-based index;
    the number of steps for the liveness phase)."""

    t_ms: int
    agent: str
    statement: str
    turn: int
    step: int
    site: CodeSite = field(default=(), compare=False)
    """Where agent code issued it: the innermost frames outside the platform (`sim`), as
    (file, line), innermost first. Two statements of one shape issued from different code (a
    recovery's DELETE and a cleanup's) are different places for a fault."""


def code_site(depth: int = 3) -> CodeSite:
    """The `depth` innermost frames of the running code outside the platform and this module
    (see `ExecutedStatement.site`)."""
    frame: types.FrameType | None = sys._getframe(1)
    out: list[tuple[str, int]] = []
    while frame is not None and len(out) < depth:
        name = frame.f_code.co_filename
        if not name.startswith(_PLUMBING) and name != __file__:
            out.append((name, frame.f_lineno))
        frame = frame.f_back
    return tuple(out)


_PLUMBING = (str(Path(sim.__file__).parent) + os.sep,)


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
    failures: tuple[Failure, ...]
    """What went wrong, in order: each a `Failure`, which is its sentence as a `str`."""
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
    probes: dict[str, int] = field(default_factory=dict, compare=False)
    """How often each probe was hit (`sim.probes`), by name."""
    statements: tuple[ExecutedStatement, ...] = field(default=(), compare=False, repr=False)
    """Every statement agent code ran, when asked for (`record_statements=True`)."""
    interleave: Interleave | None = None
    """The interleaving the run had (`interleave:` resolved to its points), None for FIFO."""
    group_sizes: tuple[int, ...] = ()
    """The size of each same-instant group of timers the run reached, in order (counted only
    with an interleaving)."""
    reorderings: tuple[Reordering, ...] = field(default=(), compare=False, repr=False)
    """The groups that ran out of FIFO order, with what each of their events resumed."""
    description: str = field(default="", compare=False, repr=False)
    """The scenario's description (what reports show under its name)."""
    wall_s: float = field(default=0.0, compare=False)
    """Wall-clock seconds the run took: the one thing here that depends on the machine, kept
    for the JUnit `time` only (never part of a verdict, a digest or a failure file)."""

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


_OVERRIDES: contextvars.ContextVar[tuple[tuple[str, int | float], ...]] = contextvars.ContextVar(
    "budget_overrides", default=()
)


@contextlib.contextmanager
def budget_overrides(**limits: int | float | None) -> Iterator[None]:
    """Within the block every run takes these limits (`RunBudget` field names; None leaves a
    limit as the file and the defaults say): what the command line's `--max-*` flags set."""
    given = {key: value for key, value in limits.items() if value is not None}
    unknown = sorted(set(given) - set(BUDGET_NAMES))
    if unknown:
        raise ValueError(f"unknown budget(s) {unknown}; known: {list(BUDGET_NAMES)}")
    token = _OVERRIDES.set(tuple(sorted({**dict(_OVERRIDES.get()), **given}.items())))
    try:
        yield
    finally:
        _OVERRIDES.reset(token)


def budget_for(scenario: Scenario) -> RunBudget:
    """The budget a run of `scenario` gets: defaults, the file's `limits:`, the overrides."""
    return DEFAULT_BUDGET.merged(**scenario.limits).merged(**dict(_OVERRIDES.get()))


def replay_command(scenario: Scenario, seed: int, invariants: Sequence[str] = ()) -> str:
    """`agentsim run PATH --seed N`, with `--invariants a,b` when the run checked some and the
    command line's budget flags when it set any."""
    command = scenario.replay_command(seed)
    if invariants:
        names = "all" if set(invariants) == set(CHECKERS) else ",".join(invariants)
        command += f" --invariants {names}"
    for key, value in _OVERRIDES.get():
        flag = BUDGET_NAMES[key][2]
        shown = {"wall_s": f"{value:g}s", "turn_s": f"{round(value * 1000)}ms"}.get(key, value)
        command += f" {flag} {shown}"
    return command


def run_scenario(
    scenario: Scenario,
    seed: int | None = None,
    *,
    invariants: Sequence[str] = (),
    record_statements: bool = False,
    interleave: Interleave | None = None,
) -> ScenarioResult:
    """Run `scenario` with its own seed, or with `seed` when given (the CLI's `--seed`); then
    check its expectations and the named `invariants`. `record_statements`: keep every
    statement agent code ran (the hunt's map of where faults can land). `interleave`: this
    interleaving instead of the file's `interleave:` (`Interleave(seed, ())` counts the groups
    and keeps FIFO order)."""
    seed = scenario.seed if seed is None else seed
    invariants = invariant_names(",".join(invariants))
    if interleave is None:
        interleave = _interleaving(scenario, seed)
    return _run(scenario, seed, invariants, record_statements, interleave)


def _interleaving(scenario: Scenario, seed: int) -> Interleave | None:
    """The file's `interleave:` as points; `depth` draws them among the groups of the FIFO run
    (run once more, first, to count them)."""
    setting = scenario.interleave
    if setting is None:
        return None
    if setting.points is not None:
        return Interleave(setting.seed, setting.points)
    counted = _run(scenario, seed, (), False, Interleave(setting.seed, ()))
    groups = len(counted.group_sizes)
    return Interleave(setting.seed, draw_points(setting.seed, setting.depth or 0, groups))


def _run(
    scenario: Scenario,
    seed: int,
    invariants: tuple[str, ...],
    record_statements: bool,
    interleave: Interleave | None,
) -> ScenarioResult:
    started_s = time.perf_counter()
    sim = Simulation(
        seed=seed,
        faults=scenario.faults,
        interleave=interleave,
        budget=budget_for(scenario),
        sdk=scenario.sdk,
    )
    statements: list[ExecutedStatement] = []
    current = [0]
    if record_statements:
        kernel = sim.platform.kernel

        def observe(agent: str, statement: str) -> None:
            statements.append(
                ExecutedStatement(
                    kernel.now_ms, agent, statement, kernel.turns, current[0], code_site()
                )
            )

        sim.platform.statement_observer = observe
    timings: list[StepTiming] = []
    quiet = False
    try:
        steps = StepRunner(sim, scenario)
        liveness: list[Failure] = []
        try:
            for index, step in enumerate(scenario.steps):
                current[0] = index
                begin_ms = sim.now_ms
                steps.run(step)
                timings.append(StepTiming(begin_ms, sim.now_ms))
            current[0] = len(scenario.steps)
            quiesce_ms = sim.now_ms
            try:
                quiet = sim.quiesce(scenario.liveness_limit_ms)
            except Exception as exc:  # reported with the replay command, not as a traceback
                steps.failures.append(
                    Failure(
                        LIVENESS,
                        scenario.path,
                        f"the liveness phase raised {type(exc).__name__}: {exc}",
                        error=RaisedError.of(exc),
                    )
                )
            else:
                if not quiet and scenario.liveness_settles:
                    quiet = _extend_to_deadline(sim, quiesce_ms)
                if not quiet and scenario.liveness_settles:
                    liveness.append(_unsettled(sim, scenario, quiesce_ms))
        except BudgetExceeded as exc:
            # The run was cut short: what its expectations and invariants would say of it now
            # is noise. The steps it never reached keep the time it stopped at.
            timings += [StepTiming(sim.now_ms, sim.now_ms)] * (len(scenario.steps) - len(timings))
            failures = [*steps.failures, Failure(BUDGET, scenario.path, exc.sentence())]
        else:
            failures = [*steps.finish(), *liveness, *check_expectations(sim, scenario, steps.calls)]
            if invariants:
                context = context_from(sim, scenario.path)
                failures += [
                    Failure(INVARIANT, scenario.path, str(v), invariant=v.invariant)
                    for v in check(context, invariants)
                ]
        digest, events = sim.digest(), len(sim.trace)
        probes = sim.probes
        group_sizes, reorderings = sim.group_sizes, tuple(sim.reorderings)
    finally:
        sim.platform.statement_observer = None
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
        probes=probes,
        statements=tuple(statements),
        interleave=interleave,
        group_sizes=group_sizes,
        reorderings=reorderings,
        description=scenario.description,
        wall_s=time.perf_counter() - started_s,
    )


def _extend_to_deadline(sim: Simulation, quiesce_ms: int) -> bool:
    """A liveness phase still busy with a durable promise the runtime keeps watching (a
    detached run within its budget, a failing fiber within its maximum age) runs on until that
    deadline and the grace after it, within `DEADLINE_EXTENSION_MAX_MS`: busy until then is
    what the runtime promised, not a failure (so is the wind-down of one it kept just before the
    phase ended). Whether it went quiet then."""
    deadline = durable_deadline(sim, recent_ms=LIVENESS_GRACE_MS)
    if deadline is None or deadline - quiesce_ms > DEADLINE_EXTENSION_MAX_MS:
        return False
    return sim.quiesce(deadline - sim.now_ms + LIVENESS_GRACE_MS)


def _unsettled(sim: Simulation, scenario: Scenario, quiesce_ms: int) -> Failure:
    """The failure of a liveness phase that did not go quiet: what kept the run busy."""
    env = sim.platform.kernel.env
    pending = env.peek()
    next_due = None if pending == float("inf") else int(pending)
    limit = format_gap(scenario.liveness_limit_ms)
    report = busy_report(sim.trace.records, quiesce_ms, sim.now_ms, next_due)
    return Failure(
        LIVENESS,
        scenario.path,
        f"liveness: the run did not settle within its limit ({limit} after "
        f"{format_sim_time(quiesce_ms)}): {report}. If a busy end is intended (a cron job, a "
        f"heartbeat that never stops), say so with `liveness: {{settles: false}}`",
    )
