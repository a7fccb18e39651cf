"""Hypothesis for your own agents: fault schedules, a driver that writes down what it did, and a
rule-based state machine that interleaves your agents' RPCs with faults.

- `fault_schedules(agents, clients=..., sites=...)` draws what `agentsim fuzz` draws
  (`fault_draws`: evictions, deploys, storage faults aimed at statements a run really
  executed, client reconnects, with swarm testing) as a `Schedule`: a seed and timed `Fault`s.
- `FaultDriver(sim, agents)` drives agents as a scenario's steps do (a first call gets the
  stub by name and runs startup; an eviction never wakes the agent) and writes every step
  down in its `script`. `driver.arm(schedule)` applies a schedule: storage faults at once,
  timed faults when the driver's clock passes their time, between two steps, never inside a
  blocking call (one that falls inside a call happens when the call returns), so that what
  ran is exactly what the script says.
- `AgentMachine` is a `RuleBasedStateMachine` base class: subclass it, name your agents
  (`agents = {"counter": Counter}`), write rules that call them through `self.rpc(...)`; it
  adds a rule that injects a drawn fault now, one that lets time pass, and checks the named
  invariants (`sim.checkers`, all by default) as a Hypothesis invariant after every step.
- `write_reproducer(script, path)` writes a driver's script as a runnable scenario file (the
  invariants it broke added to its `expect`) and checks by running it that it fails the same
  way; `run_machine(Machine, reproducer=path)` runs a machine as a test and, when it fails,
  writes the shrunk example that way (Hypothesis runs the shrunk example last).

The driver is `fault_driver`, the drawing `fault_draws`, the file writing `script_reproducer`;
this module is their public face. Users import it as `sim.strategies`, which re-exports it
(the one import of `sim` that reaches above it, listed in `tests/test_import_graph.py`), so
that importing `sim` itself never imports `scenarios` or Hypothesis (the test extra).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from scenarios.hunt.explanations import hide_agentsim
from scenarios.hunt.fault_draws import (
    MIN_HORIZON_MS,
    Fault,
    Schedule,
    StatementSite,
    fault_options,
    schedules,
    site_groups,
    times,
)
from scenarios.hunt.fault_driver import (
    DRIVER_FAULT_KINDS,
    ExpectationFailed,
    FaultDriver,
    Script,
    invariants_named,
)
from scenarios.hunt.script_reproducer import UnstatedFailure, write_script
from sim.checkers import InvariantViolation, check, context_from
from sim.simulation import Simulation

__all__ = [
    "DRIVER_FAULT_KINDS",
    "PAUSES_MS",
    "AgentMachine",
    "ExpectationFailed",
    "Fault",
    "FaultDriver",
    "Schedule",
    "Script",
    "UnstatedFailure",
    "fault_schedules",
    "run_machine",
    "without_explain",
    "write_reproducer",
]

hide_agentsim()  # Hypothesis's explanations name the user's lines, not agentsim's


def fault_schedules(
    agents: Sequence[str],
    *,
    clients: Sequence[str] = (),
    sites: Sequence[StatementSite] = (),
    horizon_ms: int = MIN_HORIZON_MS,
    kinds: Sequence[str] = DRIVER_FAULT_KINDS,
    max_steps: int = 4,
    seed: int = 0,
) -> st.SearchStrategy[Schedule]:
    """Schedules of faults over the agents named `agents` (the aliases a `FaultDriver` knows)
    and the clients named `clients`, at sim times up to `horizon_ms`; storage faults aim at
    `sites` (`FaultDriver.sites()` of a run without faults) and are left out without them.
    A schedule's seed is `seed` or any other."""
    unknown = [kind for kind in kinds if kind not in DRIVER_FAULT_KINDS]
    if unknown or not kinds:
        raise ValueError(
            f"unknown fault kind(s) {unknown or list(kinds)}; allowed: {list(DRIVER_FAULT_KINDS)}"
        )
    if not agents:
        raise ValueError("fault_schedules needs at least one agent alias, e.g. ['counter']")
    options = fault_options(
        st,
        kinds=kinds,
        at=times(st, horizon_ms),
        agents=list(agents),
        clients=list(clients),
        groups=site_groups(sites),
    )
    if not options:
        raise ValueError(f"nothing to draw for the fault kinds {list(kinds)} over {list(agents)}")
    return schedules(st, options, max_steps=max_steps, base_seed=seed)


# -- the state machine --------------------------------------------------------------------------
_LAST: dict[type, AgentMachine] = {}

PAUSES_MS = (1_000, 10_000, 60_000, 600_000)
"""The lengths of time one `let_time_pass` step may let pass: few, so that a step is one
choice, and in rising order, so that Hypothesis shrinks a pause towards the shortest."""


def _pauses(machine: AgentMachine) -> st.SearchStrategy[int]:
    return st.sampled_from(tuple(machine.pauses_ms))


def _faults(machine: AgentMachine) -> st.SearchStrategy[Fault]:
    return machine.driver.fault_now(machine.fault_kinds, agents=machine.driver.live())


class AgentMachine(RuleBasedStateMachine):
    """A state machine over your agents on one `Simulation`: subclass it, set `agents`, and
    write `@rule`s that call them with `self.rpc(alias, method, ...)`. Two rules of its own
    interleave the world with yours: `inject_fault` (a fault drawn as `agentsim fuzz` draws
    them, only when it can do something: an eviction or a deploy needs a live incarnation) and
    `let_time_pass` (one of `pauses_ms`). The named invariants are checked after every step.

    The rules are few and coarse on purpose: each step is one or two choices that shrink
    towards "nothing" (the shortest pause, the first fault kind), and no rule of the machine's
    can be repeated without changing the run, so a shrunk example is a few steps long."""

    agents: ClassVar[Mapping[str, type]] = {}
    """alias -> agent class; the alias is the agent's name on the platform."""
    seed: ClassVar[int] = 0
    checked_invariants: ClassVar[str | Sequence[str]] = "all"
    """The invariants (`sim.checkers`) checked after every step: names, `all` or `none`."""
    fault_kinds: ClassVar[Sequence[str]] = DRIVER_FAULT_KINDS
    pauses_ms: ClassVar[Sequence[int]] = PAUSES_MS
    """What one `let_time_pass` step may let pass (shrinks towards the first)."""

    def __init__(self) -> None:
        super().__init__()
        if not self.agents:
            raise TypeError(
                f"{type(self).__qualname__} names no agents; set agents = {{'alias': AgentClass}}"
            )
        if not self.pauses_ms or any(ms <= 0 for ms in self.pauses_ms):
            raise ValueError(
                f"{type(self).__qualname__}.pauses_ms must be durations > 0 in ms, got "
                f"{list(self.pauses_ms)}"
            )
        self.sim = Simulation(seed=self.seed)
        self.driver = FaultDriver(self.sim, self.agents)
        _LAST[type(self)] = self

    def rpc(self, alias: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call the agent (see `FaultDriver.call`)."""
        return self.driver.call(alias, method, *args, **kwargs)

    def _can_fault(self) -> bool:
        """A fault would change the run: an eviction or a deploy needs a live incarnation, a
        storage fault a statement shape run so far, a reconnect a connected client."""
        return self.driver.can_fault(self.fault_kinds)

    @precondition(lambda self: self._can_fault())
    @rule(fault=st.runner().flatmap(_faults))
    def inject_fault(self, fault: Fault) -> None:
        self.driver.apply(fault)

    @rule(ms=st.runner().flatmap(_pauses))
    def let_time_pass(self, ms: int) -> None:
        self.driver.run_for(ms)

    @invariant()
    def named_invariants_hold(self) -> None:
        names = invariants_named(self.checked_invariants)
        if not names:
            return
        context = context_from(self.sim, type(self).__qualname__)
        violations = check(context, names)
        if violations:
            self.driver.script.broken = list(dict.fromkeys(v.invariant for v in violations))
            raise InvariantViolation.from_context(
                context, violations, replay="(see the reproducer, if one was written)"
            )

    def teardown(self) -> None:
        self.sim.close()


def run_machine(
    machine: type[AgentMachine],
    *,
    reproducer: str | Path | None = None,
    settings: Any = None,
) -> None:
    """Run `machine` as a test (`run_state_machine_as_test`); when it fails and `reproducer`
    is given, write the shrunk example there as a scenario file and say so in the error.

    `settings` defaults to the active Hypothesis profile without its explain phase (which
    costs a run of every failing example under a tracer, and over a state machine rarely names
    more than the rule that failed); settings given are used as they are.
    """
    try:
        run_state_machine_as_test(
            machine, settings=without_explain() if settings is None else settings
        )
    except Exception as exc:
        last = _LAST.get(machine)
        if reproducer is not None and last is not None:
            try:
                path = write_reproducer(
                    last.driver.script,
                    reproducer,
                    failure=exc,
                    found_by=f"run_machine({machine.__qualname__})",
                )
            except Exception as problem:  # the test's own failure stays the error raised
                exc.add_note(f"agentsim: the reproducer was not written: {problem}")
            else:
                exc.add_note(f"agentsim reproducer: {path}\nrun it: agentsim run {path}")
        raise


def without_explain(settings: Any = None) -> Any:
    """`settings` (default: the active profile) without Hypothesis's explain phase."""
    from hypothesis import Phase
    from hypothesis import settings as Settings

    base = Settings() if settings is None else settings
    return Settings(base, phases=[phase for phase in base.phases if phase != Phase.explain])


def write_reproducer(
    script: Script,
    path: str | Path,
    *,
    failure: str | BaseException = "",
    found_by: str = "a Hypothesis property over sim.strategies",
) -> Path:
    """Write `script` as a scenario file at `path` that fails as the test did, and return it.

    What failed goes into the file: the invariants broken (`script.broken`, and those of an
    `InvariantViolation` in `failure`, for example from `sim.checkers.assert_invariants`), the
    expectations stated through `FaultDriver.expect_query` that did not hold, and a call whose
    error `failure` is (that call is then not expected to fail). The file is run before it is
    written: a run that does not fail the same way raises `FlakyFinding`, and a failure the file
    cannot state (a test's own `assert`) raises `UnstatedFailure`; neither writes a file."""
    return write_script(script, path, failure=failure, found_by=found_by)
