"""The one narrow view a runtime component has of the agent it serves.

A component (the Lifecycle, KeepAlive, MCP, ...) owns its state and its tables, and reaches the
rest of the agent only through an `AgentContext`: the host, the agent's name and resolved
options, its SQL (the agent's `sql`, which keeps the durable memo right), the memo itself, the
observability emit and the console log, and whether the agent is a sub-agent. It never sees the
`Agent` class, so no component imports the module that assembles them. What a component needs of
another component it is handed as that component (and calls its public methods); what it needs
of the user's overridable hooks it is handed as a narrow port of its own module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agents_core.durable_memo import DurableMemo
    from agents_core.host import Host
    from agents_core.options import AgentOptions

__all__ = ["AgentContext"]


class AgentContext:
    """What every component may use of its agent (one per agent instance, so per incarnation)."""

    __slots__ = ("host", "name", "options", "memo", "is_facet", "sql", "emit", "log")

    def __init__(
        self,
        host: Host,
        name: str,
        options: AgentOptions,
        memo: DurableMemo,
        *,
        is_facet: bool,
        sql: Callable[..., list[dict[str, Any]]],
        emit: Callable[..., None],
        log: Callable[[str, str], None],
    ) -> None:
        self.host = host
        self.name = name
        self.options = options
        self.memo = memo
        self.is_facet = is_facet
        """A sub-agent: its alarm-backed work (keepAlive, schedules, fiber leases) is its root's."""
        self.sql = sql
        """`Agent.sql`: one statement, rows as dicts (writes to the runtime's tables reach the
        memo)."""
        self.emit = emit
        """`emit(event_type, **payload)`: an SDK observability event, recorded in the trace."""
        self.log = log
        """`log(level, message)`: the SDK's console output, as a `console:<level>` record."""
