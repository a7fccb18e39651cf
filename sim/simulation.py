"""`Simulation`: the one object tests and scenarios drive.

It owns a `Platform` (kernel, seeds, agents, trace) and offers what a test needs: get an agent,
call it, send it a request, connect a client, let virtual time run, evict, deploy, arm a fault,
quiesce, and read the trace. Time only moves inside `run_*`, `wait` and the blocking helpers
(`call`, `fetch`, `connect`); everything else schedules and returns. Every event those loops
step is counted against the run's `RunBudget` (`sim.budget`), which stops a runaway run with
`BudgetExceeded`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from agents_core.agent import Agent, Request, Response
from agents_core.releases.registry import DEFAULT_RELEASE, release_named
from sim import budget as budget_module
from sim import collector
from sim.budget import BudgetMeter, RunBudget
from sim.clients import Client
from sim.faults import FaultProfile
from sim.incarnation import AgentRecord
from sim.interleave import Interleave, Reordering
from sim.kernel import Kernel, SimDeferred
from sim.model import ScriptedModel
from sim.pending import event_is_live
from sim.platform import Platform
from sim.sandbox import Policy
from sim.sandbox import install as install_sandbox
from sim.sqlite import StorageFault
from sim.stubs import invoke_method
from sim.trace import Trace
from sim.upstream import Service
from sim.watchdog import Guard, watch

__all__ = ["AgentRef", "Simulation", "SimulationStuck"]

DEFAULT_WAIT_LIMIT_MS = 86_400_000


class SimulationStuck(AssertionError):
    """A wait that can never end: nothing left to run, or the time bound passed."""


@dataclass(frozen=True)
class AgentRef:
    """A stub for one agent, by class and name (`Class/name` is its path); a sub-agent's ref
    carries its parent's (`Parent/p/Child/c` is its path)."""

    cls: type[Agent]
    name: str
    parent: AgentRef | None = None

    @property
    def path(self) -> str:
        own = f"{self.cls.__name__}/{self.name}"
        return own if self.parent is None else f"{self.parent.path}/{own}"


class Simulation:
    """A deterministic run: same seed and same script give the same trace, byte for byte."""

    def __init__(
        self,
        seed: int = 0,
        faults: FaultProfile | None = None,
        interleave: Interleave | None = None,
        budget: RunBudget | None = None,
        *,
        sandbox: bool = True,
        sandbox_allow: tuple[str, ...] = (),
        sdk: str | None = None,
    ) -> None:
        """`interleave`: let a seed order the timers due at one instant at the groups it names
        (`sim.interleave`); None keeps FIFO order at every instant. `budget`: stop the run with
        `sim.budget.BudgetExceeded` when it uses one up (None: no limit but the turn limit,
        `sim.budget.DEFAULT_TURN_S` of real time for one stretch of agent code between two
        awaits; `RunBudget.unlimited()` has none at all; events are counted either way, in
        `events`). `sandbox`: fail nondeterministic calls in agent code (`sim.sandbox`);
        `sandbox_allow`: modules whose calls are let through. `sdk`: the SDK release the agents
        run (`agents_core.releases`; None: the default), refused when it is not modelled."""
        release = release_named(sdk if sdk is not None else DEFAULT_RELEASE)
        self.seed = seed
        self.platform = Platform(seed, faults or FaultProfile(name="none"), Kernel(interleave))
        self.platform.release = release.name
        kernel = self.platform.kernel
        self._meter = meter = BudgetMeter(
            budget or RunBudget.unlimited(turn_s=budget_module.DEFAULT_TURN_S),
            self.platform.trace.records,
            lambda: kernel.now_ms,
        )
        limits = meter.budget
        if limits.turn_s is not None or limits.wall_s is not None or limits.memory_mb is not None:
            watch(
                kernel,
                Guard(
                    turn_s=limits.turn_s,
                    wall_deadline_s=None
                    if limits.wall_s is None
                    else meter.started_s + limits.wall_s,
                    wall_s=limits.wall_s,
                    memory_mb=limits.memory_mb,
                    rss0=meter.rss0,
                    phase=lambda: meter.phase,
                    started_s=meter.started_s,
                ),
            )
        kernel.sandbox = Policy(sandbox, sandbox_allow)
        install_sandbox()
        self.platform.platform_event(None, "simulation:start", seed=seed)
        self.platform.lifecycle.start_deploys()
        self._clients = 0

    def close(self) -> None:
        """End every coroutine of the run quietly (also done when the simulation is collected).
        Nothing can run in this simulation afterwards."""
        self.platform.kernel.close()

    def __enter__(self) -> Simulation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ----------------------------------------------------------------------------
    @property
    def now_ms(self) -> int:
        return self.platform.kernel.now_ms

    @property
    def events(self) -> int:
        """How many simulated events the run has stepped so far (what the events budget
        counts)."""
        return self._meter.events

    @property
    def trace(self) -> Trace:
        return self.platform.trace

    def digest(self) -> str:
        return self.platform.trace.digest()

    @property
    def group_sizes(self) -> tuple[int, ...]:
        """The size of each same-instant group of timers reached so far, in order (counted
        only with an interleave setting)."""
        return self.platform.kernel.group_sizes

    @property
    def reorderings(self) -> list[Reordering]:
        """The same-instant groups run out of FIFO order so far, with what each event resumed."""
        return self.platform.kernel.reorderings

    @property
    def probes(self) -> dict[str, int]:
        """How often each probe (`sim.probes`, `agents_core.probes`, and any of the agents'
        own) was hit so far, by name."""
        return self.platform.probes.counts()

    def query(self, agent: AgentRef, statement: str, *params: Any) -> list[dict[str, Any]]:
        """Read the agent's committed storage from outside (no fault, no turn)."""
        return self._record(agent).storage.query(statement, params)

    def read(self, agent: AgentRef, statement: str, *params: Any) -> list[dict[str, Any]]:
        """`query`, read-only: a statement that would write, attach a database or change a
        setting raises `sim.sqlite.ReadOnlyViolation` and changes nothing (what a scenario's
        expectations read with, so that no expectation can change what a later one sees)."""
        return self._record(agent).storage.read(statement, params)

    def snapshot(self, agent: AgentRef) -> dict[str, list[dict[str, Any]]]:
        return self._record(agent).storage.snapshot()

    def alarm_of(self, agent: AgentRef) -> int | None:
        return self._record(agent).alarm_at_ms

    def incarnation_of(self, agent: AgentRef) -> int:
        """The live incarnation's number, 0 when none is alive."""
        incarnation = self._record(agent).incarnation
        return incarnation.number if incarnation is not None and incarnation.alive else 0

    def instance_of(self, agent: AgentRef) -> Any:
        """The live agent instance, or None (for assertions; do not drive it directly)."""
        incarnation = self._record(agent).incarnation
        return incarnation.agent if incarnation is not None and incarnation.alive else None

    # -- agents -----------------------------------------------------------------------------
    def agent(self, cls: type, name: str) -> AgentRef:
        """Get an agent by name (like `getAgentByName`): wakes it and runs startup, now."""
        ref = AgentRef(cls, name)
        record = self.platform.agent_record(cls, name)
        self.platform.deliver(record, "get", None, label="get")
        return ref

    def facet(self, parent: AgentRef, cls: type, name: str) -> AgentRef:
        """The ref of a sub-agent its parent created (for calls, queries and assertions)."""
        return AgentRef(cls, name, parent)

    def start_call(self, agent: AgentRef, method: str, *args: Any, **kwargs: Any) -> SimDeferred:
        """A plain RPC on the stub: runs on the live incarnation, or on a new one *without*
        startup (a stale stub does not trigger `on_start`)."""
        record = self._record(agent)
        if method.startswith("_") or not callable(getattr(record.cls, method, None)):
            raise AttributeError(f"{record.cls.__qualname__} has no public method {method!r}")
        caller = SimDeferred(self.platform.kernel)

        async def invoke(instance: Any) -> Any:
            return await invoke_method(instance, method, args, kwargs)

        self.platform.deliver(
            record,
            "rpc",
            invoke,
            label="rpc",
            announce={"method": method},
            caller=caller,
            method=method,
        )
        return caller

    def start_run_in(self, agent: AgentRef, fn: Callable[[Any], Any]) -> SimDeferred:
        """`run_in`, started: the deferred settles with `fn`'s result (or its error)."""
        record = self._record(agent)
        caller = SimDeferred(self.platform.kernel)

        async def run(instance: Any) -> Any:
            result = fn(instance)
            if inspect.isawaitable(result):
                result = await result
            return result

        name = getattr(fn, "__qualname__", type(fn).__qualname__)
        # Delivered as a plain RPC is (the test pool's runInDurableObject goes to the stub, not
        # through the agent's fetch): on the live incarnation after any startup under way, or
        # on a new one without startup.
        self.platform.deliver(
            record, "rpc", run, label="run_in", announce={"function": name}, caller=caller
        )
        return caller

    def run_in(self, agent: AgentRef, fn: Callable[[Any], Any]) -> Any:
        """Run `fn(instance)` against the agent's live instance, as the real test pool's
        `runInDurableObject(stub, fn)` does, and return its result (awaited if it is a
        coroutine). It is a delivery: it waits at the input gate, wakes an evicted agent (a
        new incarnation without startup, as any call on a stub), and the storage writes it
        makes between two awaits commit together as a turn; an error it raises is raised
        here. Time runs until it settles."""
        return self.wait(self.start_run_in(agent, fn))

    def call(self, agent: AgentRef, method: str, *args: Any, **kwargs: Any) -> Any:
        """`start_call`, then run until it settles; its value, or its error raised here."""
        return self.wait(self.start_call(agent, method, *args, **kwargs))

    def start_fetch(self, agent: AgentRef, request: Request | None = None) -> SimDeferred:
        record = self._record(agent)
        request = request or Request()
        caller = SimDeferred(self.platform.kernel)

        async def handle(instance: Any) -> Response:
            return await instance._cf_fetch(request)

        self.platform.deliver(
            record,
            "request",
            handle,
            label="request",
            announce={"method": request.method, "path": request.path},
            caller=caller,
        )
        return caller

    def fetch(self, agent: AgentRef, request: Request | None = None) -> Response:
        return self.wait(self.start_fetch(agent, request))

    def connect(self, agent: AgentRef, name: str | None = None) -> Client:
        """Open a client connection and run until the agent has handled it."""
        record = self._record(agent)
        self._clients += 1
        client = Client(record.path, name or f"client-{self._clients}", _platform=self.platform)
        return self.reconnect(client)

    def reconnect(self, client: Client) -> Client:
        """Close the client's connection if open, open a new one, run until it is handled."""
        client.disconnect(1000, "reconnect")
        self.wait(self.platform.client_connect(client))
        return client

    # -- time -------------------------------------------------------------------------------
    def run_for(self, ms: int) -> None:
        """Let `ms` of virtual time pass (events at the end instant run too)."""
        self.run_until(self.now_ms + ms)

    def run_until(self, t_ms: int) -> None:
        if not isinstance(t_ms, int) or isinstance(t_ms, bool):
            raise TypeError(f"time is integer milliseconds, got {t_ms!r}")
        if t_ms < self.now_ms:
            raise ValueError(f"cannot run back in time: now is {self.now_ms} ms, asked {t_ms} ms")
        env = self.platform.kernel.env
        with collector.running():
            while env.peek() <= t_ms:
                self._step()
            if self.now_ms < t_ms:
                env.timeout(t_ms - self.now_ms)
                self._step()

    def _step(self) -> None:
        """Process one event and count it against the budget (checked every so many)."""
        self.platform.kernel.env.step()
        meter = self._meter
        meter.events += 1
        if meter.events >= meter.next_check:
            meter.check()
            collector.checkpoint()

    def run_while(
        self, condition: Callable[[], bool], limit_ms: int = DEFAULT_WAIT_LIMIT_MS
    ) -> None:
        """Process events while `condition()` holds; `SimulationStuck` if it cannot end."""
        env = self.platform.kernel.env
        deadline = self.now_ms + limit_ms
        with collector.running():
            while condition():
                if env.peek() == float("inf"):
                    raise SimulationStuck(f"nothing left to run at t={self.now_ms} ms")
                if env.peek() > deadline:
                    raise SimulationStuck(f"still waiting after {limit_ms} ms of virtual time")
                self._step()

    def wait(self, pending: SimDeferred, limit_ms: int = DEFAULT_WAIT_LIMIT_MS) -> Any:
        """Run until `pending` settles; return its value or raise its error."""
        self.run_while(lambda: not pending.done(), limit_ms)
        event = pending.event
        if not event.ok:
            raise cast(BaseException, event.value)  # a failed event holds its error
        return event.value

    def run_to_next_alarm(self) -> int | None:
        """Advance to the earliest armed alarm and let it fire; its time, or None if none."""
        due = self.platform.alarms.next_due_ms()
        if due is not None:
            self.run_until(max(due, self.now_ms))
        return due

    def quiesce(self, limit_ms: int = DEFAULT_WAIT_LIMIT_MS) -> bool:
        """The liveness phase: profile faults stop, time runs until nothing is left to happen or
        `limit_ms` passes. True if the platform went quiet."""
        self.platform.faults_active = False
        self._meter.phase = "liveness"
        try:
            return self._quiesce(limit_ms)
        finally:
            self._meter.phase = "steps"

    def _quiesce(self, limit_ms: int) -> bool:
        self.platform.platform_event(None, "quiesce:begin", limit_ms=limit_ms)
        kernel = self.platform.kernel
        env = kernel.env
        deadline = self.now_ms + limit_ms
        with collector.running():
            while env.peek() <= deadline:
                # Quiet once nothing pending would do anything: timers left behind by a
                # replaced alarm or a dead incarnation do not keep a run busy (`sim.pending`).
                if not event_is_live(env._queue[0][3]) and not kernel.any_live():
                    break
                self._step()
        quiet = not kernel.any_live()
        if not quiet:
            self.run_until(deadline)
        self.platform.platform_event(None, "quiesce:end", quiet=quiet)
        return quiet

    # -- the world --------------------------------------------------------------------------
    def evict(self, agent: AgentRef, reason: str = "explicit") -> bool:
        """Kill the agent's live incarnation now; False if it had none."""
        return self.platform.kill(self._record(agent), reason)

    def deploy(self, sdk: str | None = None) -> list[str]:
        """Restart every live incarnation (a code update); the paths that were alive. `sdk`:
        the SDK release the update brings (an upgrade, `sim.upgrades`: every incarnation that
        starts after it runs that release on the stored state as it is); None keeps the
        release. A downgrade or an unknown release is refused (`UpgradeRefused`)."""
        return self.platform.deploy(sdk=sdk)

    @property
    def release(self) -> str:
        """The SDK release deployed now: the run's, or the last upgrade's."""
        return self.platform.release

    def arm_storage_fault(
        self,
        agent: AgentRef,
        kind: str,
        *,
        match: str | None = None,
        skip: int = 0,
        count: int = 1,
    ) -> StorageFault:
        """The next statement of agent code matching `match` (after `skip` of them) fails:
        `error` raises a storage error, `crash` kills the process between two statements."""
        # `kind` is any text here: StorageFault refuses one outside FAULT_KINDS at run time.
        fault = StorageFault(kind=kind, match=match, skip=skip, count=count)  # type: ignore[arg-type]
        record = self._record(agent)
        record.storage.arm(fault)
        self.platform.platform_event(
            record, "fault:armed", kind=kind, match=match, skip=skip, count=count
        )
        return fault

    def arm_storage_fault_on_creation(
        self,
        parent: AgentRef,
        names: tuple[str, ...],
        class_name: str | None,
        kind: str,
        *,
        match: str | None = None,
        skip: int = 0,
        count: int = 1,
    ) -> StorageFault:
        """`arm_storage_fault` for a sub-agent that does not exist yet: the sub-agent named
        `names` below `parent` (of class `class_name`, or any) gets the fault when it is
        created."""
        # `kind` is any text here: StorageFault refuses one outside FAULT_KINDS at run time.
        fault = StorageFault(kind=kind, match=match, skip=skip, count=count)  # type: ignore[arg-type]
        record = self._record(parent)
        path = "/".join((record.path, *names))
        self.platform.arm_on_creation(record, tuple(names), class_name, fault)
        self.platform.platform_event(
            record,
            "fault:armed",
            kind=kind,
            match=match,
            skip=skip,
            count=count,
            when_created=path if class_name is None else f"{path} ({class_name})",
        )
        return fault

    def register_model(self, model: ScriptedModel, name: str = "model") -> ScriptedModel:
        """Make `model`, a scripted model provider (`sim.model`), the upstream service `name`
        that chat agents stream from; `model` by default, the service chat agents open."""
        if not isinstance(model, ScriptedModel):
            raise TypeError(f"register_model takes a ScriptedModel, got {model!r}")
        self.register_service(name, model)
        return model

    def register_service(self, name: str, service: Service) -> None:
        """An upstream service agents can stream from (see `sim.upstream`)."""
        self.platform.upstream.register(name, service)

    def _record(self, agent: AgentRef) -> AgentRecord:
        if not isinstance(agent, AgentRef):
            raise TypeError(f"expected an AgentRef from Simulation.agent(...), got {agent!r}")
        record = self.platform.records.get(agent.path)
        if record is None:
            if agent.parent is not None:
                raise LookupError(
                    f"sub-agent {agent.path} does not exist: its parent has not created it "
                    f"(or has deleted it)"
                )
            return self.platform.agent_record(agent.cls, agent.name)
        return record
