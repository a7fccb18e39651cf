"""The simulated implementation of the `Host` port, one per incarnation of an agent.

Every call is fenced by the incarnation: once it is dead, nothing it does reaches storage, the
alarm slot, clients or the trace. Inside the step that killed it (a crash between two statements)
a call raises `IncarnationKilled`; anywhere else (a coroutine closed long after, by the garbage
collector) the call is silently dropped, because there is nobody left to raise to.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sim.kernel import Gone, IncarnationKilled, SimDeferred, SimTask, Wait
from sim.stubs import SimAgentStub

if TYPE_CHECKING:
    from sim.incarnation import AgentRecord, Incarnation, PlatformCore

__all__ = ["SimHost"]


class _Fenced:
    __slots__ = ("_host",)

    def __init__(self, host: SimHost) -> None:
        self._host = host

    def _dead(self) -> bool:
        return self._host._dead()


class _Clock(_Fenced):
    def now_ms(self) -> int:
        return self._host._platform.kernel.now_ms

    def sleep(self, ms: int) -> Awaitable[None]:
        host = self._host
        # The liveness check inline first: this and the statements below run on every step.
        if not host._incarnation.alive and host._dead():
            return Gone()
        return Wait(host._platform.kernel.sleep(ms))


class _Sql(_Fenced):
    def execute(self, query: str, params: Sequence[Any] = ()) -> int:
        host = self._host
        if not host._incarnation.alive and host._dead():
            return 0
        return host._record.storage.execute(query, params)

    def query(self, query: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        host = self._host
        if not host._incarnation.alive and host._dead():
            return []
        return host._record.storage.query(query, params)


class _Alarm(_Fenced):
    def set_alarm(self, at_ms: int) -> None:
        if self._host._record.parent is not None:
            raise RuntimeError(
                f"{self._host._record.path} is a sub-agent: it has no alarm slot of its own "
                f"(its timers go through the root agent)"
            )
        if not self._dead():
            self._host._platform.alarms.set(self._host._record, at_ms)

    def get_alarm(self) -> int | None:
        if self._dead():
            return None
        return self._host._record.alarm_at_ms

    def delete_alarm(self) -> None:
        if not self._dead():
            self._host._platform.alarms.delete(self._host._record)


class _Kv(_Fenced):
    def get(self, key: str) -> Any | None:
        return None if self._dead() else self._host._record.storage.kv_get(key)

    def put(self, key: str, value: Any) -> None:
        if not self._dead():
            self._host._record.storage.kv_put(key, value)

    def delete(self, key: str) -> bool:
        return False if self._dead() else self._host._record.storage.kv_delete(key)

    def list(self, prefix: str = "") -> dict[str, Any]:
        return {} if self._dead() else self._host._record.storage.kv_list(prefix)


class _Tasks(_Fenced):
    def wait_until(self, coro: Coroutine[Any, Any, Any]) -> SimTask:
        host = self._host
        kernel = host._platform.kernel
        try:
            dead = self._dead()
        except IncarnationKilled:
            coro.close()  # made by the dying turn, never to start: close it, quietly
            raise
        if dead:
            coro.close()
            return SimTask(kernel, None, None, "refused")
        task = kernel.spawn(coro, host._incarnation, "wait_until")
        task.finished.callbacks.append(lambda event: host._background_done(event))
        return task

    def gather(self, *awaitables: Awaitable[Any]) -> SimDeferred:
        host = self._host
        return host._platform.kernel.gather(awaitables, host._incarnation)

    def race(self, *awaitables: Awaitable[Any]) -> SimDeferred:
        host = self._host
        return host._platform.kernel.race(awaitables, host._incarnation)

    def deferred(self) -> SimDeferred:
        return SimDeferred(self._host._platform.kernel)


class _Entropy(_Fenced):
    def random(self) -> float:
        return self._host._platform.seeds.stream("runtime").random()

    def nanoid(self, size: int = 21) -> str:
        return self._host._platform.seeds.stream("ids").nanoid(size)


class _Clients(_Fenced):
    def connections(self) -> list[Any]:
        if self._dead():
            return []
        return [c for c in self._host._incarnation.connections.values() if c.open]


class _Outbound(_Fenced):
    def open_stream(self, service: str, request: Mapping[str, Any]) -> AsyncIterator[Any]:
        host = self._host
        return host._platform.upstream.open_stream(host, service, request)


class _Facets(_Fenced):
    @property
    def path(self) -> tuple[tuple[str, str], ...]:
        return self._host._record.steps

    async def resolve(self, cls: type, name: str) -> SimAgentStub:
        host = self._host
        if self._dead():
            await Gone()
        record = host._platform.facet_record(host._record, cls, name)
        return await self._reach(record, "facet")

    async def resolve_named(self, class_name: str, name: str) -> SimAgentStub:
        return await self.resolve(self._child(class_name, name).cls, name)

    async def look_up_named(self, class_name: str, name: str) -> SimAgentStub:
        if self._dead():
            await Gone()
        return await self._reach(self._child(class_name, name), "lookup")

    def _child(self, class_name: str, name: str) -> AgentRecord:
        host = self._host
        record = host._record.children.get(f"{host._record.path}/{class_name}/{name}")
        if record is None:
            raise LookupError(f"no sub-agent {class_name}/{name} under {host._record.path}")
        return record

    async def _reach(self, record: AgentRecord, trigger: str) -> SimAgentStub:
        """The child's live incarnation (a new one if it died), by a delivery with no handler:
        `facet` runs its startup, `lookup` does not."""
        platform = self._host._platform
        caller = SimDeferred(platform.kernel)
        platform.deliver(record, trigger, None, label=trigger, caller=caller)
        await caller
        return SimAgentStub(platform, record, self._host)

    def delete(self, cls: type, name: str) -> None:
        host = self._host
        if self._dead():
            return
        path = f"{host._record.path}/{cls.__name__}/{name}"
        record = host._record.children.get(path)
        if record is not None:
            host._platform.delete_facet(record)

    def root(self) -> SimAgentStub:
        return SimAgentStub(self._host._platform, self._host._record.root, self._host)

    def parent(self) -> SimAgentStub | None:
        parent = self._host._record.parent
        return None if parent is None else SimAgentStub(self._host._platform, parent, self._host)


class _Lifecycle(_Fenced):
    def delete_all_storage(self) -> None:
        if not self._dead():
            self._host._platform.wipe(self._host._record)

    def abort(self, reason: str, *, retry_alarm: bool = True) -> None:
        """End the incarnation after the current turn. The port's one abort that lets the
        platform retry a running alarm is destroy's, which has wiped the storage and the alarm
        first: it ends `destroyed`. `retry_alarm=False` ends it `reset` (`sim.alarms`: no retry
        of an alarm handler it cuts short; the slot is kept), with the reason as its message."""
        host = self._host
        if self._dead():
            return
        incarnation = host._incarnation
        platform = host._platform
        if retry_alarm:
            end, message = "destroyed", None
        else:
            end, message = "reset", reason
            incarnation.resetting = True
        # After the current turn: the code that asked to abort ends its step first.
        platform.kernel.call_soon(
            lambda: platform._end(incarnation, end, message) if incarnation.alive else None
        )


class _Trace(_Fenced):
    def emit(self, event: str, **fields: Any) -> None:
        if not self._dead():
            self._host._platform.record(
                self._host._record.path, self._host._incarnation.number, event, fields
            )

    def probe(self, name: str) -> None:
        if not self._dead():
            self._host._platform.probes.hit(name)


class SimHost:
    """`agents_core.host.Host` for one incarnation of one agent."""

    def __init__(
        self, platform: PlatformCore, record: AgentRecord, incarnation: Incarnation
    ) -> None:
        self._platform = platform
        self._record = record
        self._incarnation = incarnation
        self.clock = _Clock(self)
        self.sql = _Sql(self)
        self.alarm = _Alarm(self)
        self.kv = _Kv(self)
        self.tasks = _Tasks(self)
        self.entropy = _Entropy(self)
        self.clients = _Clients(self)
        self.outbound = _Outbound(self)
        self.trace = _Trace(self)
        self.facets = _Facets(self)
        self.lifecycle = _Lifecycle(self)

    @property
    def agent_path(self) -> str:
        return self._record.path

    @property
    def release(self) -> str:
        return self._incarnation.release

    @property
    def incarnation_number(self) -> int:
        return self._incarnation.number

    def _dead(self) -> bool:
        incarnation = self._incarnation
        if incarnation.alive:
            return False
        if self._platform.kernel.in_step_of(incarnation):
            raise IncarnationKilled(f"{self._record.path} incarnation {incarnation.number} is dead")
        return True

    def _background_done(self, event: Any) -> None:
        if not event.ok and self._incarnation.alive:
            self._platform.record(
                self._record.path, self._incarnation.number, "task:error", {"error": event.value}
            )
