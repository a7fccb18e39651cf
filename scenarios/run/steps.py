"""Each step kind, executed on a `Simulation`; what goes wrong becomes a sentence, not a crash.

Timing first: a step with `at:` runs the simulation until that sim time, one with `after:` lets
that much time pass. A blocking step (a call with `wait: true`, a request, a connect) then runs
until it settles, so the next step's `at:` may already be in the past; that is reported as a
failure (the timing depends on the seed) and the step runs at once.

Stubs: the first `call` to an agent gets its stub by name, which wakes the agent and runs
startup (the SDK's `getAgentByName`). Later calls reuse that stub, so a call after an eviction
starts a new incarnation *without* startup, exactly as a stale stub does on the platform.
Requests and connections are startup triggers of their own and need no stub.

An error of agent code (or an eviction under a call) is a failure of the scenario unless the
step says `expect_error`, and a call with `returns:` must return that value (compared as
JSON); a call started with `wait: false` is judged after the liveness phase. Each failure is a
`scenarios.run.failure.Failure` of its step, of the kind that says what went wrong (a step
that raised, ran late, or named a client no longer connected is a kind of its own).
A `quiesce` step is the simulation's: it switches the fault profile off for the rest of the run.

The scenario's model services are built and registered when the runner is made, before the
first step (a fresh `ScenarioModel` per run); `stall_model` / `fail_model` re-script one from
then on. An `evict` of a sub-agent (`parent/r1`) finds it by name among the sub-agents its
parent has created so far, so a scripted eviction of a child that does not exist yet is a
failure sentence naming the ones that do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents_core import Request
from scenarios.language.fields import show
from scenarios.language.schema import (
    AdvanceToNextAlarmStep,
    ArmStorageFaultStep,
    CallStep,
    ConnectStep,
    DeployAllStep,
    DeployStep,
    DisconnectStep,
    EvictStep,
    FailModelStep,
    QuiesceStep,
    ReconnectStep,
    RequestStep,
    RunForStep,
    RunInStep,
    RunToNextAlarmStep,
    RunUntilStep,
    Scenario,
    SendStep,
    StallModelStep,
    Step,
)
from scenarios.run.failure import LATE_STEP, NO_CONNECTION, STEP, STEP_ERROR, Failure
from scenarios.run.models import ScenarioModel, register_models
from scenarios.run.records import json_equal
from sim import AgentRef, Client, Simulation, SimulationStuck, format_sim_time
from sim.errors import construction_of
from sim.kernel import SimDeferred

__all__ = ["StepRunner", "describe_call", "find_sub_agent"]


def describe_call(step: CallStep) -> str:
    """`counter.work(5, fast=True)`: how failures name a call."""
    parts = [show(arg) for arg in step.args]
    parts += [f"{key}={show(value)}" for key, value in step.kwargs.items()]
    return f"{step.agent}.{step.method}({', '.join(parts)})"


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _failed(what: str, error: BaseException) -> tuple[str, str]:
    """`a.ping() failed with RuntimeError: x`, or, when the agent's constructor raised it (the
    caller sees the constructor's own error, as on the platform), a sentence that says so; with
    the failure's kind (`STEP_ERROR` for the constructor's)."""
    construction = construction_of(error)
    if construction is None:
        return f"{what} failed with {_error_text(error)}", STEP
    where = "" if construction.place is None else f", at {construction.place}"
    return (
        f"{what} failed: constructing agent {construction.name!r} ({construction.cls}) "
        f"raised {_error_text(error)}{where}"
    ), STEP_ERROR


def _is_expected(expect_error: bool | str, error: BaseException) -> bool:
    if expect_error is True:
        return True
    return any(klass.__name__ == expect_error for klass in type(error).__mro__)


def find_sub_agent(
    sim: Simulation, ref: AgentRef, names: tuple[str, ...], child_class: str | None
) -> tuple[AgentRef | None, str]:
    """The ref of the sub-agent `names` below `ref` (outermost first; the last of class
    `child_class` when given), or None and why it cannot be found."""
    for hop, name in enumerate(names, start=1):
        record = sim.platform.records.get(ref.path)
        children = [] if record is None else list(record.children.values())
        wanted = child_class if hop == len(names) else None
        found = [
            child
            for child in children
            if child.name == name and wanted in (None, child.cls.__name__)
        ]
        if not found:
            what = f"{wanted} {name!r}" if wanted else f"named {name!r}"
            known = sorted(f"{child.cls.__name__}/{child.name}" for child in children)
            return None, (
                f"{ref.path} has no sub-agent {what} at {format_sim_time(sim.now_ms)} "
                f"(its sub-agents: {known})"
            )
        ref = AgentRef(found[0].cls, name, ref)
    return ref, ""


class StepRunner:
    """Runs the steps of one scenario on one simulation and collects its failures."""

    def __init__(self, sim: Simulation, scenario: Scenario) -> None:
        self.sim = sim
        self.scenario = scenario
        self.failures: list[Failure] = []
        self._stubs: dict[str, AgentRef] = {}
        self._clients: dict[str, Client] = {}
        self._client_agents = {spec.name: spec.agent for spec in scenario.clients}
        self._unawaited: list[tuple[CallStep, SimDeferred]] = []
        self.calls: list[tuple[CallStep, bool]] = []
        """Each call step run so far and whether it returned (False: it failed, or never
        finished): what a `per_accepted_call` count is relative to."""
        self.models: dict[str, ScenarioModel] = register_models(sim, scenario.models)
        """The run's model services by name (what `stall_model` / `fail_model` re-script)."""
        self._handlers: dict[type[Step], Callable[[Any], object]] = {
            CallStep: self._call,
            RunInStep: self._run_in,
            RequestStep: self._request,
            ConnectStep: self._connect,
            DisconnectStep: self._disconnect,
            ReconnectStep: self._reconnect,
            SendStep: self._send,
            RunForStep: lambda step: self.sim.run_for(step.duration_ms),
            RunUntilStep: self._run_until,
            EvictStep: self._evict,
            DeployStep: lambda step: self.sim.deploy(sdk=step.sdk),
            DeployAllStep: lambda step: self.sim.deploy(sdk=step.sdk),
            ArmStorageFaultStep: self._arm_storage_fault,
            RunToNextAlarmStep: lambda step: self.sim.run_to_next_alarm(),
            AdvanceToNextAlarmStep: lambda step: self.sim.run_to_next_alarm(),
            StallModelStep: self._rescript_model,
            FailModelStep: self._rescript_model,
            QuiesceStep: lambda step: self.sim.quiesce(step.limit_ms),
        }

    # -- bookkeeping ------------------------------------------------------------------------
    def fail(
        self,
        step: Step,
        sentence: str,
        kind: str = STEP,
        error: BaseException | None = None,
        expected_error: str = "",
    ) -> None:
        self.failures.append(
            Failure.of_step(self.scenario.path, step, sentence, kind, error, expected_error)
        )

    def _ref(self, alias: str) -> AgentRef:
        """The agent without waking it (evict, faults, requests and connections)."""
        return AgentRef(self.scenario.agent(alias).cls, alias)

    def _stub(self, alias: str) -> AgentRef:
        stub = self._stubs.get(alias)
        if stub is None:
            stub = self._stubs[alias] = self.sim.agent(self.scenario.agent(alias).cls, alias)
        return stub

    # -- running ----------------------------------------------------------------------------
    def run(self, step: Step) -> None:
        """Wait for the step's time, then execute it; never raises for a failing step."""
        try:
            self._wait_for(step)
            self._handlers[type(step)](step)
        except SimulationStuck as exc:
            self.fail(step, f"could not finish: {exc}")
        except Exception as exc:  # a finding to report with its replay command, not a crash
            self.fail(step, f"raised {_error_text(exc)}", STEP_ERROR, exc)

    def _wait_for(self, step: Step) -> None:
        if step.after_ms is not None:
            self.sim.run_for(step.after_ms)
        if step.at_ms is None:
            return
        if step.at_ms < self.sim.now_ms:
            self.fail(
                step,
                f"at: {format_sim_time(step.at_ms)} had already passed; an earlier step ran "
                f"until {format_sim_time(self.sim.now_ms)}, so this step ran then",
                LATE_STEP,
            )
            return
        self.sim.run_until(step.at_ms)

    def finish(self) -> list[Failure]:
        """Judge the calls started with `wait: false`, after the liveness phase."""
        for step, pending in self._unawaited:
            if not pending.done():
                self.calls.append((step, False))
                self.fail(
                    step,
                    f"{describe_call(step)} never finished (still running at "
                    f"{format_sim_time(self.sim.now_ms)}, after the liveness phase)",
                )
            elif pending.event.ok:
                self._judge(step, describe_call(step), None, pending.event.value)
            else:
                self._judge(step, describe_call(step), pending.event.value, None)
        self._unawaited.clear()
        return self.failures

    def _judge(
        self,
        step: CallStep | RunInStep | RequestStep | ConnectStep,
        what: str,
        error: BaseException | None,
        value: Any,
    ) -> bool:
        if isinstance(step, CallStep):
            self.calls.append((step, error is None))
        expect_error = getattr(step, "expect_error", False)
        if error is None and expect_error is not False:
            expected = "" if expect_error is True else f" with {expect_error}"
            self.fail(step, f"{what} returned {show(value)}, but was expected to fail{expected}")
            return False
        excused = getattr(step, "may_fail_with", None)
        if error is not None and excused is not None and _is_expected(excused, error):
            return False  # refused by a fault the hunt inserted: the platform's truth
        if error is not None and expect_error is False:
            self.fail(step, *_failed(what, error), error)
            return False
        if error is not None and not _is_expected(expect_error, error):
            sentence, kind = _failed(what, error)
            self.fail(
                step,
                f"{sentence}, but was expected to fail with {expect_error}",
                kind,
                error,
                str(expect_error),
            )
            return False
        if error is None and getattr(step, "checks_return", False):
            # Only call steps have checks_return, and they have returns beside it.
            wanted = step.returns  # type: ignore[union-attr]
            if not json_equal(value, wanted):
                self.fail(step, f"{what} returned {show(value)}, expected {show(wanted)}")
                return False
        return True

    # -- step kinds -------------------------------------------------------------------------
    def _call(self, step: CallStep) -> None:
        stub = self._stub(step.agent)
        pending = self.sim.start_call(stub, step.method, *step.args, **step.kwargs)
        if not step.wait:
            self._unawaited.append((step, pending))
            return
        try:
            value = self.sim.wait(pending)
        except SimulationStuck:
            raise
        except Exception as exc:
            self._judge(step, describe_call(step), exc, None)
        else:
            self._judge(step, describe_call(step), None, value)

    def _run_in(self, step: RunInStep) -> None:
        what = f"run_in {step.function} on {step.agent}"
        try:
            value = self.sim.run_in(self._ref(step.agent), step.fn)
        except SimulationStuck:
            raise
        except Exception as exc:
            self._judge(step, what, exc, None)
        else:
            self._judge(step, what, None, value)

    def _request(self, step: RequestStep) -> None:
        request = Request(step.method, step.path, step.body, step.headers)
        what = f"{step.method} {step.path} to {step.agent}"
        try:
            response = self.sim.fetch(self._ref(step.agent), request)
        except SimulationStuck:
            raise
        except Exception as exc:
            self._judge(step, what, exc, None)
            return
        judged_ok = self._judge(step, what, None, response)
        if judged_ok and step.status is not None and response.status != step.status:
            self.fail(
                step,
                f"{what} answered {response.status} {show(response.body)}, "
                f"expected status {step.status}",
            )

    def _connect(self, step: ConnectStep) -> None:
        what = f"client {step.client!r} connecting to {step.agent}"
        client = self._clients.get(step.client)
        self._client_agents[step.client] = step.agent
        try:
            if client is None:
                self._clients[step.client] = self.sim.connect(self._ref(step.agent), step.client)
            else:
                self.sim.reconnect(client)
        except SimulationStuck:
            raise
        except Exception as exc:
            self._judge(step, what, exc, None)

    def _reconnect(self, step: ReconnectStep) -> None:
        agent = self._client_agents.get(step.client)
        if agent is None:
            self.fail(step, f"client {step.client!r} was never connected", NO_CONNECTION)
            return
        self._connect(
            ConnectStep(
                index=step.index,
                line=step.line,
                client=step.client,
                agent=agent,
                may_fail_with=step.may_fail_with,
            )
        )

    def _disconnect(self, step: DisconnectStep) -> None:
        client = self._clients.get(step.client)
        if client is None:
            self.fail(step, f"client {step.client!r} was never connected", NO_CONNECTION)
            return
        # A client whose connection the platform already closed (an eviction) has nothing
        # to close; that is a normal race, not a failure.
        client.disconnect(step.code, step.reason)

    def _send(self, step: SendStep) -> None:
        client = self._clients.get(step.client)
        if client is None or not client.connected:
            state = "was never connected" if client is None else "is not connected"
            self.fail(
                step,
                f"client {step.client!r} {state}; the message {show(step.message)} was not sent",
                NO_CONNECTION,
            )
            return
        client.send(step.message)

    def _run_until(self, step: RunUntilStep) -> None:
        if step.until_ms < self.sim.now_ms:
            self.fail(
                step,
                f"run_until: {format_sim_time(step.until_ms)} had already passed "
                f"(now {format_sim_time(self.sim.now_ms)})",
                LATE_STEP,
            )
            return
        self.sim.run_until(step.until_ms)

    def _arm_storage_fault(self, step: ArmStorageFaultStep) -> None:
        root = self._ref(step.agent)
        ref, _ = self._sub_agent(root, step.child, step.child_class)
        if ref is None:
            # Not created yet: armed on the sub-agent's storage the moment it is.
            self.sim.arm_storage_fault_on_creation(
                root,
                step.child,
                step.child_class,
                step.fault,
                match=step.match,
                skip=step.skip,
                count=step.count,
            )
            return
        self.sim.arm_storage_fault(
            ref, step.fault, match=step.match, skip=step.skip, count=step.count
        )

    def _sub_agent(
        self, ref: AgentRef, names: tuple[str, ...], child_class: str | None
    ) -> tuple[AgentRef | None, str]:
        return find_sub_agent(self.sim, ref, names, child_class)

    def _evict(self, step: EvictStep) -> None:
        ref, why = self._sub_agent(self._ref(step.agent), step.child, step.child_class)
        if ref is None:
            if not step.if_present:
                self.fail(step, f"cannot evict {step.target}: {why}")
            return
        self.sim.evict(ref, step.reason)

    def _rescript_model(self, step: StallModelStep | FailModelStep) -> None:
        self.models[step.service].rescript(step.reply, step.times)
