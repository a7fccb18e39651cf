"""Hypothesis for your own agents: fault schedules, a driver that writes down what it did, and a
rule-based state machine that interleaves your agents' RPCs with faults.

- `fault_schedules(agents, clients=..., sites=...)` draws what `agentsim fuzz` draws
  (`sim.fault_draws`: evictions, deploys, storage faults aimed at statements a run really
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

Layering: the drawing is `sim.fault_draws`, below the scenario language. Writing a YAML file
needs the scenario language (its emitter and runner, in `scenarios`), so `write_reproducer`
imports `scenarios.hunt.script_reproducer` when it is called: importing this module, or `sim`,
never imports `scenarios`. This module imports Hypothesis (the test extra).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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

from sim.checkers import CHECKERS, InvariantViolation, check, context_from
from sim.clients import Client
from sim.explanations import hide_agentsim
from sim.fault_draws import (
    FAULT_KINDS,
    MIN_HORIZON_MS,
    SCRIPTED_EVICTION_REASONS,
    Fault,
    Schedule,
    StatementSite,
    fault_options,
    schedules,
    site_groups,
    sites_of,
    times,
)
from sim.simulation import AgentRef, Simulation

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

DRIVER_FAULT_KINDS = tuple(kind for kind in FAULT_KINDS if kind != "repeat")
"""The fault kinds a Python test can draw (`repeat` re-sends a scenario file's own steps; in
Python, call again)."""


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


@dataclass
class Script:
    """What a driver did, as scenario steps (plain data): enough to write a scenario file."""

    seed: int
    agents: dict[str, str]
    """alias -> `module:QualifiedName` of its class."""
    steps: list[dict[str, Any]] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    """The invariants a check found broken (what a reproducer's `expect` names)."""
    expect: list[dict[str, Any]] = field(default_factory=list)
    """Expectations the test stated through the driver (`FaultDriver.expect_query`), as a
    scenario's `expect` items."""
    failed_expect: list[int] = field(default_factory=list)
    """The indexes in `expect` of those that did not hold."""
    raised: list[tuple[int, BaseException]] = field(default_factory=list, repr=False)
    """(step index, error) of each call that raised: a test that fails with one of them fails
    because of that call, so its reproducer must not expect that error."""

    def step(self, action: str, value: Any) -> dict[str, Any]:
        item = {action: value}
        self.steps.append(item)
        return item


class UnstatedFailure(ValueError):
    """A failure a scenario file cannot check (a test's own `assert`): no reproducer is written,
    since a file that passes would claim the bug is gone."""


class ExpectationFailed(AssertionError):
    """An expectation stated through `FaultDriver.expect_query` did not hold."""


def class_path(cls: type) -> str:
    """`module:QualifiedName`, what a scenario's `class:` says; a class defined inside a
    function cannot be named so."""
    if "<locals>" in cls.__qualname__:
        raise ValueError(
            f"{cls.__qualname__} is defined inside a function; a scenario file names a class "
            f"by import path, so define it at module level"
        )
    return f"{cls.__module__}:{cls.__qualname__}"


class FaultDriver:
    """Drives the agents of one `Simulation` as scenario steps do, and writes each step down."""

    def __init__(
        self,
        sim: Simulation,
        agents: Mapping[str, type],
        *,
        record_statements: bool = True,
    ) -> None:
        self.sim = sim
        self.agents = dict(agents)
        self.script = Script(sim.seed, {alias: class_path(cls) for alias, cls in agents.items()})
        self._stubs: dict[str, AgentRef] = {}
        self._clients: dict[str, Client] = {}
        self._timed: list[Fault] = []
        self._statements: list[_Executed] = []
        self._choices: tuple[tuple[Any, ...], dict[str, st.SearchStrategy[Fault]]] | None = None
        if record_statements:
            kernel = sim.platform.kernel
            statements = self._statements

            def observe(agent: str, statement: str) -> None:
                statements.append(_Executed(kernel.now_ms, agent, statement, kernel.turns, 0))

            sim.platform.statement_observer = observe

    # -- agents -----------------------------------------------------------------------------
    def ref(self, alias: str) -> AgentRef:
        """The agent without waking it."""
        if alias not in self.agents:
            raise KeyError(f"unknown agent alias {alias!r}; the driver knows {sorted(self.agents)}")
        return AgentRef(self.agents[alias], alias)

    def stub(self, alias: str) -> AgentRef:
        """The agent's stub: the first one gets it by name, which wakes it and runs startup."""
        stub = self._stubs.get(alias)
        if stub is None:
            stub = self._stubs[alias] = self.sim.agent(self.ref(alias).cls, alias)
        return stub

    def call(self, alias: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """An RPC, run until it settles: its value, or its error raised here (the script then
        says the call is expected to fail with that error)."""
        self._due()
        value: dict[str, Any] = {"agent": alias, "method": method}
        if args:
            value["args"] = list(args)
        if kwargs:
            value["kwargs"] = dict(kwargs)
        self.script.step("call", value)
        try:
            return self.sim.call(self.stub(alias), method, *args, **kwargs)
        except Exception as exc:
            value["expect_error"] = type(exc).__name__
            self.script.raised.append((len(self.script.steps) - 1, exc))
            raise

    def expect_query(
        self, alias: str, sql: str, rows: Sequence[Mapping[str, Any]], *params: Any
    ) -> None:
        """Assert that `sql` (a read) on the agent's committed storage returns `rows`, and write
        that down as a `query` expectation, so that a reproducer checks it too (after its
        liveness phase, as a scenario's expectations are). Raises `ExpectationFailed`."""
        query: dict[str, Any] = {"agent": alias, "sql": sql, "rows": [dict(row) for row in rows]}
        if params:
            query["params"] = list(params)
        self.script.expect.append({"query": query})
        got = self.sim.read(self.ref(alias), sql, *params)
        if _as_json(got) != _as_json(query["rows"]):
            self.script.failed_expect.append(len(self.script.expect) - 1)
            raise ExpectationFailed(
                f"the query {sql!r} on {alias} returned {got}, expected {query['rows']}"
            )

    def assert_invariants(self, names: str | Sequence[str] = "all") -> None:
        """Check the named invariants now (`sim.checkers.assert_invariants`), writing down the
        broken ones so that a reproducer expects them."""
        context = context_from(self.sim, "FaultDriver")
        violations = check(context, _names(names))
        if violations:
            self.script.broken = list(dict.fromkeys(v.invariant for v in violations))
            raise InvariantViolation.from_context(
                context, violations, replay="(see the reproducer, if one was written)"
            )

    def connect(self, client: str, alias: str) -> Client:
        self._due()
        self.script.step("connect", {"client": client, "agent": alias})
        self._clients[client] = self.sim.connect(self.ref(alias), client)
        return self._clients[client]

    def client(self, name: str) -> Client:
        return self._clients[name]

    @property
    def client_names(self) -> list[str]:
        return list(self._clients)

    # -- time -------------------------------------------------------------------------------
    def run_for(self, ms: int) -> None:
        self.run_until(self.sim.now_ms + ms)

    def run_until(self, t_ms: int) -> None:
        """Let time pass until `t_ms`, applying each armed timed fault at its time on the way."""
        self._due()
        while self._timed and self._timed[0].at_ms <= t_ms:
            fault = self._timed.pop(0)
            if fault.at_ms > self.sim.now_ms:
                self.script.step("run_until", fault.at_ms)
                self.sim.run_until(fault.at_ms)
            self.apply(fault)
        if t_ms > self.sim.now_ms:
            self.script.step("run_until", t_ms)
            self.sim.run_until(t_ms)

    # -- faults -----------------------------------------------------------------------------
    def arm(self, schedule: Schedule) -> None:
        """Apply `schedule`: storage faults now, timed faults when time passes theirs."""
        for fault in schedule.faults:
            if fault.action == "arm_storage_fault":
                self.apply(fault)
            else:
                self._timed.append(fault)
        self._timed.sort(key=lambda fault: fault.at_ms)

    def _due(self) -> None:
        while self._timed and self._timed[0].at_ms <= self.sim.now_ms:
            self.apply(self._timed.pop(0))

    def apply(self, fault: Fault) -> None:
        """Do `fault` now, and write it down."""
        args = dict(fault.args)
        if fault.action == "evict":
            self.script.step("evict", {"agent": args["agent"], "reason": args["reason"]})
            self.sim.evict(self.ref(args["agent"]), args["reason"])
        elif fault.action == "deploy":
            self.script.step("deploy", {})
            self.sim.deploy()
        elif fault.action == "arm_storage_fault":
            value = {k: args[k] for k in ("agent", "kind", "match", "skip")}
            self.script.step("arm_storage_fault", value)
            self.sim.arm_storage_fault(
                self.ref(args["agent"]), args["kind"], match=args["match"], skip=args["skip"]
            )
        elif fault.action == "reconnect":
            client = self._clients.get(args["client"])
            if client is None:
                raise KeyError(
                    f"client {args['client']!r} is not connected through this driver; connect "
                    f"it first with driver.connect(name, alias) (connected: {self.client_names})"
                )
            self.script.step("reconnect", {"client": args["client"]})
            self.sim.reconnect(client)
        else:
            raise ValueError(
                f"a driver applies evict, deploy, arm_storage_fault and reconnect faults, "
                f"not {fault.action!r}"
            )

    def sites(self) -> list[StatementSite]:
        """The statements agent code ran so far, as the sites storage faults can aim at (the
        `skip` of each counts from the driver's start: arm a schedule before the workload)."""
        aliases = {f"{cls.__name__}/{alias}": alias for alias, cls in self.agents.items()}
        return sites_of(self._statements, aliases.get)

    def live(self) -> list[str]:
        """The aliases whose agent has a live incarnation now (what an eviction can kill)."""
        records = self.sim.platform.records
        alive = []
        for alias in self.agents:
            record = records.get(self.ref(alias).path)
            incarnation = record.incarnation if record is not None else None
            if incarnation is not None and incarnation.alive:
                alive.append(alias)
        return alive

    def fault_now(
        self, kinds: Sequence[str] = DRIVER_FAULT_KINDS, *, agents: Sequence[str] | None = None
    ) -> st.SearchStrategy[Fault]:
        """One fault to apply now, over `agents` (default: all the driver knows; an empty list
        leaves evictions and deploys out), the connected clients and the statement shapes run
        so far (a storage fault hits the next statement of its shape)."""
        options = self.fault_choices(kinds, agents=agents)
        if not options:
            raise ValueError(f"nothing to draw for the fault kinds {list(kinds)}")
        return st.one_of([options[name] for name in sorted(options)])

    def fault_choices(
        self, kinds: Sequence[str] = DRIVER_FAULT_KINDS, *, agents: Sequence[str] | None = None
    ) -> dict[str, st.SearchStrategy[Fault]]:
        """What `fault_now` draws from, one strategy per feature (empty: nothing to draw)."""
        targets = list(self.agents) if agents is None else list(agents)
        if not targets:  # nothing alive: an eviction or a deploy would do nothing
            kinds = [kind for kind in kinds if kind not in ("evict", "deploy")]
        # A state machine asks at every step: the shapes change only with new statements.
        key = (len(self._statements), self.sim.now_ms, *kinds, "|", *targets, "|", *self._clients)
        if self._choices is None or self._choices[0] != key:
            seen: dict[tuple[str, str], StatementSite] = {}
            for site in self.sites():
                seen.setdefault((site.target, site.pattern), site)
            fresh = [_first_from_now(site) for site in seen.values()]
            options = fault_options(
                st,
                kinds=kinds,
                at=st.just(self.sim.now_ms),
                agents=targets,
                clients=self.client_names,
                groups=site_groups(fresh),
                reasons=SCRIPTED_EVICTION_REASONS,
            )
            self._choices = (key, options)
        return dict(self._choices[1])

    def can_fault(self, kinds: Sequence[str] = DRIVER_FAULT_KINDS) -> bool:
        """Whether a fault of `kinds` would change the run now: an eviction or a deploy needs a
        live incarnation, a storage fault a statement run so far, a reconnect a client."""
        return bool(
            (("evict" in kinds or "deploy" in kinds) and self.live())
            or ("storage" in kinds and self._statements)
            or ("reconnect" in kinds and self._clients)
        )


def _as_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


@dataclass(frozen=True)
class _Executed:
    t_ms: int
    agent: str
    statement: str
    turn: int
    step: int


def _first_from_now(site: StatementSite) -> StatementSite:
    return dataclasses.replace(site, skip=0)


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
        names = _names(self.checked_invariants)
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


def _names(given: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(given, str):
        words = [word.strip() for word in given.split(",") if word.strip()]
    else:
        words = list(given)
    if words == ["all"]:
        return tuple(CHECKERS)
    if words in ([], ["none"]):
        return ()
    unknown = [word for word in words if word not in CHECKERS]
    if unknown:
        raise ValueError(f"unknown invariant(s) {unknown}; known: {sorted(CHECKERS)}")
    return tuple(words)


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
    from scenarios.hunt.script_reproducer import write_script  # the language lives above sim

    return write_script(script, path, failure=failure, found_by=found_by)
