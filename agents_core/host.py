"""The Host port: everything the runtime needs from the world, as Protocols only.

`agents_core` never imports a simulator, an event loop, a clock or a random source. It reaches
time, storage, the single alarm slot, background work, outbound streams, client connections and
the trace through an object that satisfies `Host`. The simulator in `sim` is one such object; a
real asyncio host could be another, without a change to the runtime.

Awaitables handed out by a host are the only things runtime code may await (plus coroutines of
its own); a host is free to reject anything else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Coroutine, Generator, Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = [
    "AgentStub",
    "AlarmSlot",
    "Clock",
    "Connection",
    "Connections",
    "Deferred",
    "Entropy",
    "Facets",
    "Host",
    "Lifecycle",
    "KeyValue",
    "Outbound",
    "SqlStorage",
    "Task",
    "Tasks",
    "TraceSink",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

Row = dict[str, Any]
"""One SQL result row: column name to value."""


class Clock(Protocol):
    """Time in integer milliseconds since the Unix epoch; the only clock the runtime may read."""

    def now_ms(self) -> int: ...

    def sleep(self, ms: int) -> Awaitable[None]: ...


class SqlStorage(Protocol):
    """The agent's own SQLite database.

    Turn-commit rule: the writes made between two awaits commit together when the coroutine next
    yields (the output gate). A write that returned before the next await is durable.
    """

    def execute(self, query: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; return the number of rows it changed."""
        ...

    def query(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement; return its rows as dicts."""
        ...


class AlarmSlot(Protocol):
    """The one alarm slot of a top-level agent. Setting replaces; there is no queue."""

    def set_alarm(self, at_ms: int) -> None: ...

    def get_alarm(self) -> int | None: ...

    def delete_alarm(self) -> None: ...


class KeyValue(Protocol):
    """The small durable key-value store beside SQL (JSON values); writes follow the turn rule."""

    def get(self, key: str) -> Any | None: ...

    def put(self, key: str, value: Any) -> None: ...

    def delete(self, key: str) -> bool: ...

    def list(self, prefix: str = "") -> dict[str, Any]: ...


@runtime_checkable
class Task(Protocol[T_co]):
    """A running coroutine; awaiting it gives its result or raises its error."""

    def done(self) -> bool: ...

    def __await__(self) -> Generator[Any, Any, T_co]: ...


class Deferred(Protocol[T]):
    """A promise settled by code (`resolve` / `reject`); awaitable any number of times."""

    def resolve(self, value: T | None = None) -> None: ...

    def reject(self, error: BaseException) -> None: ...

    def done(self) -> bool: ...

    def __await__(self) -> Generator[Any, Any, T]: ...


class Tasks(Protocol):
    """Background work and combinators, in the shape of the JavaScript promise API."""

    def wait_until(self, coro: Coroutine[Any, Any, Any]) -> Task[Any]:
        """Run `coro` in the background of this incarnation. It starts at once, up to its first
        await (as a JavaScript async call does). It does not keep the agent alive."""
        ...

    def gather(self, *awaitables: Awaitable[Any]) -> Awaitable[list[Any]]:
        """All results in order; fails with the first error (`Promise.all`)."""
        ...

    def race(self, *awaitables: Awaitable[Any]) -> Awaitable[Any]:
        """The first to settle, value or error (`Promise.race`)."""
        ...

    def deferred(self) -> Deferred[Any]: ...


class Entropy(Protocol):
    """The only randomness the runtime may use: seeded by the host."""

    def random(self) -> float:
        """A float in [0, 1)."""
        ...

    def nanoid(self, size: int = 21) -> str: ...


class Connection(Protocol):
    """One client connection (a WebSocket) of this agent."""

    @property
    def id(self) -> str: ...

    def send(self, frame: Any) -> None: ...

    def close(self, code: int = 1000, reason: str = "") -> None: ...


class Connections(Protocol):
    """The agent's open client connections, in the order they were opened."""

    def connections(self) -> list[Connection]: ...


class Outbound(Protocol):
    """Streams to services outside the agent (the model provider); they die with the incarnation."""

    def open_stream(self, service: str, request: Mapping[str, Any]) -> AsyncIterator[Any]: ...


class AgentStub(Protocol):
    """A handle to another agent in the same isolate (a sub-agent, the root): calls are RPCs,
    delivered as separate events, that fail if the callee dies first."""

    @property
    def path(self) -> str: ...

    def call(self, method: str, *args: Any, **kwargs: Any) -> Awaitable[Any]: ...


class Facets(Protocol):
    """Sub-agents (facets): children in the root's isolate, each with its own SQLite and no
    alarm of its own. `path` is this agent's identity, root first, as (class name, name) steps."""

    @property
    def path(self) -> tuple[tuple[str, str], ...]: ...

    def resolve(self, cls: type, name: str) -> Awaitable[AgentStub]:
        """The child's stub; resolving it the first time in an isolate runs its startup."""
        ...

    def resolve_named(self, class_name: str, name: str) -> Awaitable[AgentStub]:
        """The same, by class name (as the registry stores it); LookupError if never created."""
        ...

    def look_up_named(self, class_name: str, name: str) -> Awaitable[AgentStub]:
        """The child's stub, by class name, without its startup: a live child is only looked
        up, a dead one is constructed again but not started. LookupError if never created."""
        ...

    def delete(self, cls: type, name: str) -> None:
        """Abort the child (and its children) and wipe their storage."""
        ...

    def root(self) -> AgentStub: ...

    def parent(self) -> AgentStub | None: ...


class Lifecycle(Protocol):
    """The agent's own end: wipe its storage and alarm, and abort its isolate."""

    def delete_all_storage(self) -> None: ...

    def abort(self, reason: str, *, retry_alarm: bool = True) -> None:
        """End this isolate after the current turn (the platform's `ctx.abort(reason)`).
        `retry_alarm=False` is `ctx.abort(reason, {retryAlarm: false})`: an alarm handler the
        abort cuts short is not retried by the platform; storage and the alarm slot stay."""
        ...


class TraceSink(Protocol):
    """Runtime events for the trace and for observers (names exactly as the SDK spells them)."""

    def emit(self, event: str, **fields: Any) -> None: ...

    def probe(self, name: str) -> None:
        """Count that this run reached the rare path `name` (`agents_core.probes`); never a
        trace record."""
        ...


class Host(Protocol):
    """Everything one agent instance may use, bound to the incarnation that runs it."""

    @property
    def agent_path(self) -> str: ...

    @property
    def release(self) -> str:
        """The SDK release the deployed code runs (`0.21.0`, ...): the platform's to say, since a
        deploy decides it; the agent builds that release's components."""
        ...

    @property
    def incarnation_number(self) -> int:
        """The ordinal of the incarnation this host is bound to (1 for the first); agent code
        may record it, the runtime never reads it."""
        ...

    # The services, read-only: a host may stand for each with a class of its own.
    @property
    def clock(self) -> Clock: ...

    @property
    def sql(self) -> SqlStorage: ...

    @property
    def alarm(self) -> AlarmSlot: ...

    @property
    def kv(self) -> KeyValue: ...

    @property
    def tasks(self) -> Tasks: ...

    @property
    def entropy(self) -> Entropy: ...

    @property
    def clients(self) -> Connections: ...

    @property
    def outbound(self) -> Outbound: ...

    @property
    def trace(self) -> TraceSink: ...

    @property
    def facets(self) -> Facets: ...

    @property
    def lifecycle(self) -> Lifecycle: ...
