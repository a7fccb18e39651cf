"""`Runtime`: the components one agent instance is built from, as a release builds them, and
`AgentPorts`, what those components may use of the agent itself.

A release's `build` returns a `Runtime`; `Agent` keeps each component under its own name and
gives every public method of the SDK its one-line delegation to one of them. The agent is passed
to the components as `AgentPorts`: the union of the narrow ports each component's module names
(the hooks a user may override, and the steps a framework host replaces).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from agents_core.agent_tools.hooks import AgentToolHooks
from agents_core.fibers import FiberParts
from agents_core.lifecycle import LifecycleParts
from agents_core.queue import QueueHooks
from agents_core.recovery import RecoveryHooks
from agents_core.schedule_dispatch import DispatchHooks

if TYPE_CHECKING:
    from agents_core.agent_tools.components import AgentTools
    from agents_core.context import AgentContext
    from agents_core.facets import Facets
    from agents_core.fiber_ledger import FiberLedger
    from agents_core.fibers import FiberRunner
    from agents_core.host import Host
    from agents_core.keep_alive import KeepAlive
    from agents_core.lifecycle import Lifecycle
    from agents_core.mcp import Mcp
    from agents_core.queue import QueueApi
    from agents_core.recovery import Recovery
    from agents_core.schedule_dispatch import ScheduleDispatch
    from agents_core.schedules import Scheduler
    from agents_core.state_store import StateStore

__all__ = ["AgentPorts", "AgentSchema", "Build", "Runtime"]


class AgentPorts(
    LifecycleParts, FiberParts, RecoveryHooks, DispatchHooks, QueueHooks, AgentToolHooks, Protocol
):
    """The agent as its components see it: every port of theirs at once."""

    def _broadcast_protocol(self, frame: object) -> None: ...


class AgentSchema(Protocol):
    """The agent's own tables, created or migrated when it is constructed (the SDK's
    `_ensureSchema`); `extra_ddl` are the tables of components outside the core (agent-tool
    runs, MCP servers)."""

    def ensure(self, host: Host, extra_ddl: tuple[str, ...] = ()) -> None: ...


@dataclass(frozen=True, slots=True)
class Runtime:
    """One agent's components (one per agent instance, so per incarnation)."""

    mcp: Mcp
    lifecycle: Lifecycle
    keep_alive: KeepAlive
    fiber_ledger: FiberLedger
    fibers: FiberRunner
    recovery: Recovery
    scheduler: Scheduler
    schedule_dispatch: ScheduleDispatch
    queue: QueueApi
    facets: Facets
    tools: AgentTools
    state: StateStore
    schema: AgentSchema


Build = Callable[["AgentContext", AgentPorts, list[dict[str, str]], str], "Runtime"]
"""`build(context, agent, self_path, owner_key)`: a release's components for one agent."""
