"""The records the platform's parts share, and what each part may ask of the platform.

An `AgentRecord` is what the platform keeps for one agent across its whole life: its SQLite, its
alarm slot and its incarnation count. An `Incarnation` is one isolate running it: the agent
instance, its tasks, its connections and whether startup ran. `PlatformCore` is the platform as
its parts (alarms, lifecycle, host, stubs) see it. This module sits below all of them and below
`sim.platform`, so every import points one way: the platform imports its parts, the parts import
these records, and nothing here imports a part.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agents_core.host import Host
from sim.clients import ServerConnection
from sim.faults import FaultProfile
from sim.kernel import Kernel, SimDeferred, SimTask
from sim.prng import Seeds
from sim.probes import Probes
from sim.sqlite import FaultyStorage

__all__ = ["AgentRecord", "Incarnation", "PlatformCore"]


@dataclass(eq=False)
class Incarnation:
    """One isolate running an agent; memory only, gone at eviction."""

    number: int
    record: AgentRecord
    trigger: str
    release: str
    """The SDK release of the code this isolate runs (a facet's is its root's)."""
    alive: bool = True
    agent: Any = None
    host: Host | None = None
    started: bool = False
    gate: SimDeferred | None = None
    inflight: int = 0
    idle_deadline: int | None = None
    """When the incarnation is evicted if nothing happens before (None: not idle, or no
    idle eviction)."""
    idle_slot: int = 0
    """The place among same-instant events its idle eviction takes (`Kernel.reserve_slot`)."""
    idle_timer: object | None = None
    """The token of the one idle timer that acts; None when none is pending."""
    idle_timer_at: int | None = None
    tasks: dict[SimTask, None] = field(default_factory=dict)
    connections: dict[str, ServerConnection[Incarnation]] = field(default_factory=dict)
    callers: dict[SimDeferred, None] = field(default_factory=dict)
    end_reason: str | None = None
    resetting: bool = False
    """An abort without alarm retry (a reset) was asked and ends it after the turn: an alarm
    that comes due meanwhile waits to fire in the next incarnation."""
    root: Incarnation | None = None
    """For a facet: the root incarnation whose isolate it lives in (None for a root)."""
    facets: dict[str, Incarnation] = field(default_factory=dict)

    @property
    def isolate(self) -> Incarnation:
        """The root incarnation: what idles, dies and counts activity for the whole isolate."""
        return self.root if self.root is not None else self


@dataclass(eq=False)
class AgentRecord:
    """What the platform keeps for one top-level agent for its whole life."""

    path: str
    cls: type
    name: str
    storage: FaultyStorage
    incarnation: Incarnation | None = None
    incarnations: int = 0
    alarm_at_ms: int | None = None
    alarm_generation: int = 0
    alarm_run: Any = None
    alarm_held_attempt: int | None = None
    """An alarm that came due while a handler ran, held until it ends: the attempt it runs as
    (0 for a fresh due; a held retry keeps its number). None when nothing is held."""
    alarm_held_due_ms: int | None = None
    """The slot's time a held fresh due came due at (what a write of the slot replaces)."""
    parent: AgentRecord | None = None
    children: dict[str, AgentRecord] = field(default_factory=dict)
    forgotten: bool = False
    """A deleted sub-agent: stubs to it fail; resolving its name again makes a fresh record."""
    steps: tuple[tuple[str, str], ...] = ()
    """Identity path, root first: (class name, name) per hop."""

    @property
    def root(self) -> AgentRecord:
        record = self
        while record.parent is not None:
            record = record.parent
        return record


class AlarmSlots(Protocol):
    """The platform's alarm slots, as the host sets and clears them."""

    def set(self, record: AgentRecord, at_ms: int) -> None: ...

    def delete(self, record: AgentRecord) -> None: ...


class IdleTimers(Protocol):
    """The platform's idle timers, as activity restarts them."""

    def touch(self, incarnation: Incarnation) -> None: ...


class Streams(Protocol):
    """The upstream services agents stream from."""

    def open_stream(
        self, host: Any, service: str, request: Mapping[str, Any]
    ) -> AsyncIterator[Any]: ...


class PlatformCore(Protocol):
    """What the platform's parts use of it (`sim.platform.Platform` is the one implementation)."""

    kernel: Kernel
    seeds: Seeds
    faults: FaultProfile
    faults_active: bool
    records: dict[str, AgentRecord]
    probes: Probes

    # Read-only here, so the platform's own classes may stand for these narrower views.
    @property
    def alarms(self) -> AlarmSlots: ...

    @property
    def lifecycle(self) -> IdleTimers: ...

    @property
    def upstream(self) -> Streams: ...

    def record(self, agent: str, inc: int, event: str, fields: dict[str, Any]) -> None: ...

    def platform_event(self, record: AgentRecord | None, event: str, **fields: Any) -> None: ...

    def live_incarnation(self, record: AgentRecord, trigger: str) -> Incarnation: ...

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
    ) -> Incarnation: ...

    def facet_record(self, parent: AgentRecord, cls: type, name: str) -> AgentRecord: ...

    def kill(self, record: AgentRecord, reason: str) -> bool: ...

    def _end(self, incarnation: Incarnation, reason: str, message: str | None = None) -> None: ...

    def delete_facet(self, record: AgentRecord) -> None: ...

    def wipe(self, record: AgentRecord) -> None: ...

    def deploy(self, cause: str = "scripted", sdk: str | None = None) -> list[str]: ...
