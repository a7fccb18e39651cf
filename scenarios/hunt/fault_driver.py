"""Driving agents as a scenario's steps do, and writing down what was done: `FaultDriver`.

A `FaultDriver(sim, agents)` gets each agent's stub by name at its first call (which wakes it and
runs startup; an eviction never wakes an agent) and writes every step down in its `script`, a
`Script` of plain scenario steps. `driver.arm(schedule)` applies a drawn `Schedule`
(`fault_draws`): storage faults at once, timed faults when the driver's clock passes their
time, between two steps, never inside a blocking call (one that falls inside a call happens
when the call returns), so that what ran is exactly what the script says. Checks a reproducer
can repeat go through the driver (`assert_invariants`, `expect_query`); `fault_now` draws one
fault over what the run has so far (what `AgentMachine` injects). `script_reproducer` writes a
script as a scenario file; `strategies` is the public face of both.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from scenarios.hunt.fault_draws import (
    FAULT_KINDS,
    SCRIPTED_EVICTION_REASONS,
    Fault,
    Schedule,
    StatementSite,
    fault_options,
    site_groups,
    sites_of,
)
from sim.checkers import CHECKERS, InvariantViolation, check, context_from
from sim.clients import Client
from sim.simulation import AgentRef, Simulation

__all__ = [
    "DRIVER_FAULT_KINDS",
    "ExpectationFailed",
    "FaultDriver",
    "Script",
    "class_path",
    "invariants_named",
]

DRIVER_FAULT_KINDS = tuple(kind for kind in FAULT_KINDS if kind != "repeat")
"""The fault kinds a Python test can draw (`repeat` re-sends a scenario file's own steps; in
Python, call again)."""


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
        violations = check(context, invariants_named(names))
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
            sdk = args.get("sdk")  # an upgrade: the release the deploy brings
            self.script.step("deploy", {} if sdk is None else {"sdk": sdk})
            self.sim.deploy(sdk=sdk)
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


def invariants_named(given: str | Sequence[str]) -> tuple[str, ...]:
    """The invariants `given` names (names, a comma-separated string, `all` or `none`), checked
    against the registry: an unknown name is a ValueError listing the known ones."""
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
