"""The simulated Durable Object platform: agents, incarnations, deliveries and death.

The platform keeps an `AgentRecord` per agent and an `Incarnation` per isolate running one (both
in `sim.incarnation`, below every part of the platform). Every event for an agent
(request, RPC, connection, message, alarm) is a *delivery*: a task of the live incarnation that
waits at the input gate, runs startup first when the event is one that triggers it, and counts
as activity for the idle timer.

`kill` is the instant of death: the incarnation stops being alive, its tasks are buried, its
open turn rolls back, its callers and clients are told, and nothing it runs afterwards can reach
the world (see `sim.host`).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from agents_core.releases.registry import DEFAULT_RELEASE
from sim.alarms import Alarms
from sim.clients import Client, ServerConnection
from sim.errors import AgentEvicted, note_construction
from sim.faults import FaultProfile
from sim.host import SimHost
from sim.incarnation import AgentRecord, Incarnation
from sim.kernel import Kernel, SimDeferred
from sim.lifecycle import Lifecycle
from sim.prng import Seeds
from sim.probes import Probes
from sim.sandbox import guard_agent_modules
from sim.sqlite import FaultyStorage, StorageFault
from sim.trace import Trace
from sim.upgrades import UpgradeRefused, upgrade_refusal
from sim.upstream import Upstream

__all__ = ["AgentEvicted", "AgentRecord", "Incarnation", "Platform", "STARTUP_TRIGGERS"]

STARTUP_TRIGGERS = frozenset({"get", "request", "connect", "message", "close", "alarm", "facet"})
"""Deliveries that run startup first. A plain RPC on a stub is not one (spec fibers §1.4)."""

EVICTION_REASONS = (
    "idle",
    "deploy",
    "alarm-limit",
    "explicit",
    "crash",
    "destroyed",
    "deleted",
    "reset",
)
"""Why an incarnation ends (`incarnation:end {reason}`). Three are the agents' own doing:
`destroyed` (destroy's `host.lifecycle.abort`, after it wiped its storage and alarm), `deleted`
(a parent's `host.facets.delete` of its sub-agent) and `reset` (`host.lifecycle.abort(reason,
retry_alarm=False)`, the platform's `ctx.abort(reason, {retryAlarm: false})`: 0.32.0's isolate
reset after a memory-limit strike; no retry of a running alarm, storage and the slot kept)."""


def _rpc_starts(agent: Any, method: str | None) -> bool:
    """Whether an RPC to `method` runs startup first: the agent's release says
    (`_cf_rpc_starts`; 0.21.0 never, 0.32.0 for a user's async method, spec sdk-0.32 §1.3)."""
    if method is None:
        return False
    starts = getattr(agent, "_cf_rpc_starts", None)
    return bool(starts(method)) if starts is not None else False


async def _alarm_handles(agent: Any, error: BaseException) -> bool:
    """Whether the agent's alarm handles a failure of the startup its delivery ran (the agent's
    `_cf_alarm_startup_failed`; an agent without it does not)."""
    handles = getattr(agent, "_cf_alarm_startup_failed", None)
    return bool(await handles(error)) if handles is not None else False


class Platform:
    """All agents of one simulation, and the rules of their lives."""

    def __init__(self, seed: int, faults: FaultProfile, kernel: Kernel | None = None) -> None:
        self.kernel = kernel if kernel is not None else Kernel()
        self.seeds = Seeds(seed)
        self.trace = Trace()
        self.faults = faults
        self.faults_active = True
        self.release = DEFAULT_RELEASE
        """The SDK release deployed now: what every isolate started from here on runs."""
        self.records: dict[str, AgentRecord] = {}
        self.classes: dict[str, type] = {}
        self.departed: dict[str, list[tuple[tuple[Any, ...], tuple[int, ...]]]] = {}
        """Path of a deleted sub-agent -> the journal and commit instants of each of its lives,
        oldest first (what checkers read of storage that is gone: a registry it kept)."""
        """Every agent path ever used -> its class: a deleted sub-agent's stays (its options
        judge what its trace shows)."""
        self.alarms = Alarms(self)
        self.lifecycle = Lifecycle(self)
        self.upstream = Upstream(self.seeds.stream("latency"))
        self.probes = Probes()
        self._faults_on_creation: list[
            tuple[AgentRecord, tuple[str, ...], str | None, StorageFault]
        ] = []
        self._statement_observer: Callable[[str, str], None] | None = None

    @property
    def statement_observer(self) -> Callable[[str, str], None] | None:
        """Called with (agent path, statement) for every statement agent code runs (the hunt
        sets it on a base run to learn where faults can land)."""
        return self._statement_observer

    @statement_observer.setter
    def statement_observer(self, observer: Callable[[str, str], None] | None) -> None:
        self._statement_observer = observer
        for record in self.records.values():
            self._observe(record.storage, record.path)

    # -- trace ------------------------------------------------------------------------------
    def record(self, agent: str, inc: int, event: str, fields: dict[str, Any]) -> None:
        self.trace.add(self.kernel.now_ms, agent, inc, event, fields)

    def platform_event(self, record: AgentRecord | None, event: str, **fields: Any) -> None:
        if record is None:
            self.record("", 0, event, fields)
            return
        inc = record.incarnation.number if record.incarnation is not None else 0
        self.record(record.path, inc, event, fields)

    # -- agents -----------------------------------------------------------------------------
    def agent_record(self, cls: type, name: str) -> AgentRecord:
        if not isinstance(name, str) or not name:
            raise ValueError(f"agent name must be a non-empty string, got {name!r}")
        path = f"{cls.__name__}/{name}"
        record = self.records.get(path)
        if record is None:
            record = AgentRecord(
                path=path,
                cls=cls,
                name=name,
                storage=self._new_storage(path),
                steps=((cls.__name__, name),),
            )
            self._bind_storage(record)
            self.records[path] = record
            self.classes[path] = cls
        elif record.cls is not cls:
            raise ValueError(
                f"agent path {path} is already used by {record.cls.__module__}."
                f"{record.cls.__qualname__}; class names must be unique in one simulation"
            )
        return record

    def facet_record(self, parent: AgentRecord, cls: type, name: str) -> AgentRecord:
        """The record of a sub-agent of `parent` (created on first use, with empty storage)."""
        if not isinstance(name, str) or not name or "\0" in name:
            raise ValueError(f"sub-agent name must be a non-empty string without NUL, got {name!r}")
        path = f"{parent.path}/{cls.__name__}/{name}"
        record = parent.children.get(path)
        taken = self.records.get(path) if record is None else None
        if taken is not None:
            # Paths are one flat namespace: a name with '/' can spell another agent's path, and
            # sharing a record would silently share its storage.
            raise ValueError(
                f"sub-agent {cls.__name__} {name!r} of {parent.path} would have the path {path}, "
                f"which is already the path of {taken.cls.__qualname__} {taken.name!r} "
                f"(steps {list(taken.steps)}); the simulator cannot hold both: rename one"
            )
        if record is None:
            record = AgentRecord(
                path=path,
                cls=cls,
                name=name,
                storage=self._new_storage(path),
                parent=parent,
                steps=(*parent.steps, (cls.__name__, name)),
            )
            self._bind_storage(record)
            parent.children[path] = record
            self.records[path] = record
            self.classes[path] = cls
            self._arm_awaited_faults(record)
        elif record.cls is not cls:
            raise ValueError(f"sub-agent path {path} is already used by {record.cls.__qualname__}")
        return record

    def arm_on_creation(
        self,
        under: AgentRecord,
        names: tuple[str, ...],
        class_name: str | None,
        fault: StorageFault,
    ) -> None:
        """Arm `fault` on the sub-agent `names` below `under` when its record is created."""
        self._faults_on_creation.append((under, names, class_name, fault))

    def _arm_awaited_faults(self, record: AgentRecord) -> None:
        for entry in list(self._faults_on_creation):
            under, names, class_name, fault = entry
            depth = len(under.steps)
            if (
                record.steps[:depth] == under.steps
                and tuple(name for _, name in record.steps[depth:]) == names
                and class_name in (None, record.cls.__name__)
            ):
                self._faults_on_creation.remove(entry)
                record.storage.arm(fault)

    def _new_storage(self, path: str) -> FaultyStorage:
        faults = self.faults
        storage = FaultyStorage(
            self.kernel,
            on_fault=lambda kind, stmt: self._storage_fault(path, kind, stmt),
            # A profile that never fails a statement draws nothing for one (`chance(0)` draws
            # nothing either), so leaving the check out changes no stream.
            random_fault=(
                self._random_storage_fault
                if faults.crash_rate > 0 or faults.storage_error_rate > 0
                else None
            ),
        )
        self._observe(storage, path)
        return storage

    def _observe(self, storage: FaultyStorage, path: str) -> None:
        observer = self._statement_observer
        storage.on_statement = (
            None if observer is None else (lambda statement: observer(path, statement))
        )

    def _bind_storage(self, record: AgentRecord) -> None:
        # A crash anywhere in the isolate kills the whole isolate: root and every facet.
        record.storage.bind_crash(lambda: self._crash(record.root))

    def live_incarnation(self, record: AgentRecord, trigger: str) -> Incarnation:
        incarnation = record.incarnation
        if incarnation is not None and incarnation.alive:
            return incarnation
        root = None
        if record.parent is not None:
            parent_incarnation = self.live_incarnation(record.parent, trigger)
            root = parent_incarnation.isolate
        record.incarnations += 1
        incarnation = Incarnation(
            number=record.incarnations,
            record=record,
            trigger=trigger,
            release=self.release if root is None else root.release,
            root=root,
        )
        record.incarnation = incarnation
        if record.parent is not None:
            # The parent's incarnation is the live one `live_incarnation` gave just above.
            record.parent.incarnation.facets[record.path] = incarnation  # type: ignore[union-attr]
        self.platform_event(record, "incarnation:start", trigger=trigger)
        if trigger == "alarm":
            self.probes.hit("platform.alarm_started_incarnation")
        self.lifecycle.touch(incarnation)
        return incarnation

    def _agent_of(self, incarnation: Incarnation) -> Any:
        """The agent instance, constructed inside the first delivery's step (its turn)."""
        if incarnation.agent is None:
            record = incarnation.record
            incarnation.host = SimHost(self, record, incarnation)
            guard_agent_modules(record.cls)
            try:
                incarnation.agent = record.cls(incarnation.host, record.name)
            except Exception as error:
                note_construction(error, record.cls, record.name)
                raise
        return incarnation.agent

    # -- deliveries -------------------------------------------------------------------------
    def deliver(
        self,
        record: AgentRecord,
        trigger: str,
        handler: Callable[[Any], Coroutine[Any, Any, Any]] | None,
        *,
        label: str,
        announce: dict[str, Any] | None = None,
        caller: SimDeferred | None = None,
        on_done: Callable[[bool, Any], None] | None = None,
        on_suspend: Callable[[], None] | None = None,
        method: str | None = None,
    ) -> Incarnation:
        """Deliver one event to the agent's live incarnation (creating one if needed).

        With `announce`, a trace record named `label` (those fields) marks the delivery, and one
        named `label:error` marks its failure. `on_suspend` is called the first time the
        delivery's task waits (never, if it ends in its first step). `method`: the method an
        RPC calls (a release may run startup for some: the agent's `_cf_rpc_starts`)."""
        incarnation = self.live_incarnation(record, trigger)
        if announce is not None:
            self.platform_event(record, label, **announce)
        if caller is not None:
            incarnation.callers[caller] = None
        task = self.kernel.spawn_soon(
            lambda: self._delivery(incarnation, trigger, handler, method), incarnation, label
        )
        task.on_suspend = on_suspend

        def settle(event: Any) -> None:
            if announce is not None and not event.ok and incarnation.alive:
                self.platform_event(record, f"{label}:error", **announce, error=event.value)
            if caller is not None:
                incarnation.callers.pop(caller, None)
                if event.ok:
                    caller.resolve(event.value)
                else:
                    caller.reject(event.value)
            if on_done is not None:
                on_done(event.ok, event.value)

        task.finished.callbacks.append(settle)
        return incarnation

    async def _delivery(
        self,
        incarnation: Incarnation,
        trigger: str,
        handler: Callable[[Any], Coroutine[Any, Any, Any]] | None,
        method: str | None = None,
    ) -> Any:
        isolate = incarnation.isolate
        isolate.inflight += 1
        self.lifecycle.touch(isolate)
        try:
            agent = self._agent_of(incarnation)
            if trigger == "alarm":
                # Before startup: a release may arm a wake that a failing startup keeps.
                arriving = getattr(agent, "_cf_alarm_arriving", None)
                if arriving is not None:
                    arriving()
            if trigger in STARTUP_TRIGGERS or _rpc_starts(agent, method):
                try:
                    await self._ensure_started(incarnation, trigger)
                except Exception as exc:
                    # A release that starts inside its alarm handler may handle the failure
                    # there (0.32.0's breaker takes a memory-limit reset): the alarm then ends.
                    if trigger != "alarm" or not await _alarm_handles(agent, exc):
                        raise
                    return None
            else:
                if incarnation.gate is not None:
                    self.probes.hit("platform.delivery_waited_at_gate")
                while incarnation.gate is not None:
                    await incarnation.gate
            if handler is None:
                return None
            self.platform_event(incarnation.record, "delivery:begin", trigger=trigger)
            return await handler(agent)
        finally:
            # Never runs for a dead incarnation: its tasks are buried, not unwound.
            isolate.inflight -= 1
            self.lifecycle.touch(isolate)

    async def _ensure_started(self, incarnation: Incarnation, trigger: str) -> None:
        while not incarnation.started:
            if incarnation.gate is not None:
                await incarnation.gate
                continue
            gate = incarnation.gate = SimDeferred(self.kernel)
            # The trigger is the delivery that ran startup (checkers hold it to the spec's list).
            self.platform_event(incarnation.record, "startup:begin", trigger=trigger)
            try:
                await incarnation.agent._cf_start()
            except Exception as exc:
                self.platform_event(incarnation.record, "startup:failed", error=exc)
                raise
            else:
                incarnation.started = True
                self.platform_event(incarnation.record, "startup:done")
            finally:
                incarnation.gate = None
                gate.resolve()
        while incarnation.gate is not None:
            await incarnation.gate

    # -- clients ----------------------------------------------------------------------------
    def client_connect(self, client: Client) -> SimDeferred:
        """Open a connection; the deferred settles when the agent has handled it."""
        record = self.records[client.agent_path]
        connection_id = self.seeds.stream("ids").nanoid()

        async def on_connect(agent: Any) -> None:
            incarnation = record.incarnation
            assert incarnation is not None
            connection = ServerConnection(
                connection_id, client, incarnation, self._send_frame, self._server_close
            )
            incarnation.connections[connection_id] = connection
            client.connection = connection
            client._saw("open", self.kernel.now_ms, connection_id)
            self.platform_event(
                record, "connection:open", connection=connection_id, client=client.name
            )
            self.lifecycle.touch(incarnation)
            await agent._cf_connect(connection)

        caller = SimDeferred(self.kernel)
        self.deliver(record, "connect", on_connect, label="connect", caller=caller)
        return caller

    def client_message(self, client: Client, message: Any) -> None:
        connection = client.connection
        assert connection is not None
        record = self.records[client.agent_path]

        async def on_message(agent: Any) -> None:
            if connection.open:
                await agent._cf_message(connection, message)

        self.deliver(
            record,
            "message",
            on_message,
            label="connection:message",
            announce={"connection": connection.id, "message": message},
        )

    def client_close(self, client: Client, code: int, reason: str) -> None:
        connection = client.connection
        if connection is None or not connection.open:
            return
        record = self.records[client.agent_path]
        self._close_connection(connection, code, reason, by="client")

        async def on_close(agent: Any) -> None:
            await agent._cf_close(connection, code, reason)

        if connection.incarnation.alive:
            self.deliver(record, "close", on_close, label="close")

    def _send_frame(self, connection: ServerConnection[Incarnation], frame: Any) -> None:
        record = connection.incarnation.record
        self.platform_event(record, "connection:frame", connection=connection.id, frame=frame)
        connection.client._saw("frame", self.kernel.now_ms, frame)

    def _server_close(
        self, connection: ServerConnection[Incarnation], code: int, reason: str
    ) -> None:
        self._close_connection(connection, code, reason, by="agent")

    def _close_connection(
        self, connection: ServerConnection[Incarnation], code: int, reason: str, by: str
    ) -> None:
        connection.open = False
        incarnation = connection.incarnation
        incarnation.connections.pop(connection.id, None)
        # The incarnation's own number, even when it is being killed (the record has moved on).
        self.record(
            incarnation.record.path,
            incarnation.number,
            "connection:close",
            {"connection": connection.id, "code": code, "reason": reason, "by": by},
        )
        connection.client._saw("close", self.kernel.now_ms, {"code": code, "reason": reason})
        if connection.client.connection is connection:
            connection.client.connection = None
        if incarnation.alive:
            self.lifecycle.touch(incarnation)

    # -- death ------------------------------------------------------------------------------
    def kill(self, record: AgentRecord, reason: str) -> bool:
        """The instant of death of the record's live incarnation; False if none was alive."""
        if reason not in EVICTION_REASONS:
            raise ValueError(
                f"unknown eviction reason {reason!r}; allowed: {list(EVICTION_REASONS)}"
            )
        incarnation = record.incarnation
        if incarnation is None or not incarnation.alive:
            return False
        self._end(incarnation, reason)
        return True

    def _end(self, incarnation: Incarnation, reason: str, message: str | None = None) -> None:
        """Death of one incarnation and, first, of every facet living in it. `message`: the
        text an abort gave, recorded with the reason (a reset's)."""
        for facet in list(incarnation.facets.values()):
            if facet.alive:
                self._end(facet, reason, message)
        record = incarnation.record
        if message is None:
            self.platform_event(record, "incarnation:end", reason=reason)
        else:
            self.platform_event(record, "incarnation:end", reason=reason, message=message)
        incarnation.alive = False
        incarnation.end_reason = reason
        record.incarnation = None
        if incarnation.root is not None and record.parent is not None:
            parent_incarnation = record.parent.incarnation
            if parent_incarnation is not None:
                parent_incarnation.facets.pop(record.path, None)
        record.storage.rollback_turn()
        record.storage.park()
        self.kernel.bury_all(incarnation)
        for connection in list(incarnation.connections.values()):
            self._close_connection(connection, 1006, f"evicted: {reason}", by="platform")
        for caller in list(incarnation.callers):
            caller.reject(AgentEvicted(record.path, reason))
        incarnation.callers.clear()
        if record.parent is None:
            self.alarms.incarnation_died(record, incarnation, reason)

    def delete_facet(self, record: AgentRecord) -> None:
        """Abort a sub-agent and its children and forget their storage."""
        if record.parent is None:
            raise ValueError(f"{record.path} is not a sub-agent")
        if record.incarnation is not None and record.incarnation.alive:
            self._end(record.incarnation, "deleted")
        self.platform_event(record, "facet:deleted")
        self._forget(record)

    def _forget(self, record: AgentRecord) -> None:
        record.forgotten = True
        lives = self.departed.setdefault(record.path, [])
        lives.append((tuple(record.storage.journal), tuple(record.storage.journal_ms)))
        for child in list(record.children.values()):
            self._forget(child)
        if record.parent is not None:
            record.parent.children.pop(record.path, None)
        self.records.pop(record.path, None)

    def wipe(self, record: AgentRecord) -> None:
        """Delete everything the agent stored, its sub-agents and its alarm (destroy)."""
        for child in list(record.children.values()):
            if child.incarnation is not None and child.incarnation.alive:
                self._end(child.incarnation, "deleted")
            self._forget(child)
        wiped, record.storage = record.storage, self._new_storage(record.path)
        record.storage.inherit_history(wiped)
        self._bind_storage(record)
        if record.parent is None:
            self.alarms.delete(record)
        self.platform_event(record, "storage:wiped")

    def _crash(self, record: AgentRecord) -> None:
        self.kill(record, "crash")

    def deploy(self, cause: str = "scripted", sdk: str | None = None) -> list[str]:
        """A code update: every live incarnation restarts at this instant. `sdk`: the SDK
        release it brings (`sim.upgrades`; None, or the release deployed now: the same code),
        which every incarnation started from here on runs."""
        if sdk is None or sdk == self.release:
            self.platform_event(None, "platform:deploy", cause=cause)
        else:
            refusal = upgrade_refusal(self.release, sdk)
            if refusal is not None:
                raise UpgradeRefused(refusal)
            self.release = sdk
            self.platform_event(None, "platform:deploy", cause=cause, sdk=sdk)
        killed = []
        for record in list(self.records.values()):
            if self.kill(record, "deploy"):
                killed.append(record.path)
        return killed

    # -- faults -----------------------------------------------------------------------------
    def _storage_fault(self, path: str, kind: str, statement: str) -> None:
        record = self.records[path]
        if kind == "crash_after_commit":
            self.probes.hit("platform.crash_after_commit")
        elif kind == "crash" and record.storage.in_turn_with_writes:
            self.probes.hit("platform.crash_rolled_back_writes")
        self.platform_event(record, f"fault:{kind}", statement=" ".join(statement.split())[:200])

    def _random_storage_fault(self, statement: str) -> str | None:
        if not self.faults_active:
            return None
        stream = self.seeds.stream("faults")
        if stream.chance(self.faults.crash_rate):
            return "crash"
        if stream.chance(self.faults.storage_error_rate):
            return "error"
        return None
